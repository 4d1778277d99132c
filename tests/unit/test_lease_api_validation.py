# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.
"""The lease API's schemas and route table (no Nova running).

Each schema takes what the API takes and refuses wrong types, unknown
keys and missing keys with a 400 in the parsers' words, naming the field
as the user wrote it; every route that reads a body has a schema for it.
"""

import copy
import datetime
import inspect

import testtools

from nova_lease.api_ext.lease_api import router
from nova_lease.api_ext.lease_api.schemas import hosts as host_schemas
from nova_lease.api_ext.lease_api.schemas import leases as lease_schemas
from nova_lease.api_ext.lease_api import validation
from nova_lease import exception
from nova_lease import params
from nova_lease.plugins.host import request as host_request

NOW = datetime.datetime(2030, 1, 1, 12, 0)


def _lease(**changes):
    body = {'name': 'l1', 'start_date': 'now', 'end_date': '2030-01-01 14:00',
            'before_end_date': None, 'events': [],
            'reservations': [{'resource_type': 'physical:host', 'min': 1,
                              'max': 1}]}
    body.update(changes)
    return body


def _host_res(**changes):
    res = {'resource_type': 'physical:host', 'min': 1, 'max': 1}
    res.update(changes)
    return res


class _SchemaTest(testtools.TestCase):

    def assertAccepts(self, schema, data):
        return validation.Schema(schema).validate(copy.deepcopy(data))

    def assertRefuses(self, schema, data, message, name='LeaseParamError',
                      field=None):
        err = self.assertRaises(exception.Invalid,
                                validation.Schema(schema).validate, data)
        self.assertEqual(400, err.code)
        self.assertEqual(name, type(err).__name__, str(err))
        self.assertEqual(message, str(err))
        if field is not None:
            self.assertEqual(field, err.field)
        return err


class LeaseSchemasTest(_SchemaTest):

    def test_accepts_what_the_api_takes(self):
        full = _lease(on_end='delete', retries=3,
                      before_end_date='2030-01-01 13:30',
                      reservations=[_host_res(
                          min='1', max='2', vcpus=4, memory_mb='1024',
                          disk_gb=None, availability_zone='nova',
                          region='RegionOne', before_end='default',
                          extra_specs={'ssd': 'true', 'n': 4, 'b': True},
                          hypervisor_properties='[">=", "$vcpus", "4"]',
                          resource_properties=['==', '$gpu', 'true']),
                          _host_res(extra_specs='{"ssd": "true"}'),
                          {'resource_type': 'virtual:instance',
                           'amount': 1}])
        for body in (_lease(), full, _lease(start_date=None, events=None)):
            self.assertEqual(body, self.assertAccepts(
                lease_schemas.CREATE, body))
            # Blazar's wrapper: the handler gets the lease.
            self.assertEqual(body, self.assertAccepts(
                lease_schemas.CREATE, {'lease': body}))
        for body in ({}, {'name': 'x'}, {'name': None, 'reservations': []},
                     {'start_date': 'NOW', 'end_date': '2030-01-01 14:00',
                      'before_end_date': None}):
            self.assertEqual(body, self.assertAccepts(
                lease_schemas.UPDATE, body))
            self.assertEqual(body, self.assertAccepts(
                lease_schemas.UPDATE, {'lease': body}))

    def test_wrong_types_name_the_field(self):
        date_help = params.DATE_FORMATS_HELP
        cases = [
            (_lease(name=5), "'name' must be a string, got a number"),
            (_lease(start_date=[]),
             "'start_date' must be \"now\" or a date string, got an array"),
            (_lease(end_date=True), "'end_date' must be a date string (%s), "
             "got a boolean" % date_help),
            (_lease(before_end_date=30), "'before_end_date' must be a date "
             "string (%s), got a number" % date_help),
            (_lease(events={}), "'events' must be an array, got an object"),
            (_lease(on_end=1), "'on_end' must be a string, got a number"),
            (_lease(retries='3'),
             "'retries' must be an integer, got a string"),
            (_lease(retries=3.0),
             "'retries' must be an integer, got a number"),
            (_lease(reservations={}), "'reservations' must be an array of "
             "objects, got an object"),
            (_lease(reservations=['x']),
             "'reservations[0]' must be an object, got a string"),
            (_lease(reservations=[_host_res(), {'resource_type': None}]),
             "'reservations[1].resource_type' must be a non-blank string "
             "such as 'virtual:instance', got null"),
            (_lease(reservations=[_host_res(min=1.5)]),
             "'reservations[0].min' must be an integer, got a number"),
            (_lease(reservations=[_host_res(max=True)]),
             "'reservations[0].max' must be an integer, got a boolean"),
            (_lease(reservations=[_host_res(vcpus=[])]),
             "'reservations[0].vcpus' must be an integer, got an array"),
            (_lease(reservations=[_host_res(extra_specs=['ssd'])]),
             "'reservations[0].extra_specs' must be an object of extra "
             "spec keys to values, got an array"),
        ]
        for body, message in cases:
            for data in (body, {'lease': body}):
                err = self.assertRefuses(lease_schemas.CREATE, data, message)
                self.assertEqual('type', err.rule)
        self.assertRefuses(lease_schemas.UPDATE, {'name': 5},
                           "'name' must be a string, got a number")
        self.assertRefuses(
            lease_schemas.UPDATE, {'lease': {'start_date': 5}},
            "'start_date' must be a date string (%s), got a number"
            % date_help, field='start_date')

    def _parser_message(self, body):
        try:
            _params, raws = validation.parse_lease_body(body, NOW)
            for i, raw in enumerate(raws):
                host_request.parse_host_request(raw, 'reservations[%d]' % i)
        except params.LeaseParamError as e:
            return str(e)
        return None

    def test_unknown_keys(self):
        allowed = ('before_end_date, duration, earliest_start, end_date, '
                   'events, latest_start, lease_type, name, on_end, '
                   'reservations, retries, start_date')
        self.assertRefuses(
            lease_schemas.CREATE, _lease(colour='blue'),
            "'colour': unknown key; the allowed keys are %s" % allowed,
            field='colour')
        self.assertRefuses(
            lease_schemas.CREATE, {'lease': _lease(z=1, colour='blue')},
            "'colour', 'z': unknown keys; the allowed keys are %s" % allowed,
            field='colour')
        # Not Blazar's wrapper: "lease" is a key like any other.
        self.assertRefuses(
            lease_schemas.CREATE, {'lease': 'l1'},
            "'lease': unknown key; the allowed keys are %s" % allowed)
        err = self.assertRefuses(
            lease_schemas.CREATE, {'lease': _lease(reservations=[
                _host_res(), _host_res(colour='red')])},
            "'reservations[1].colour': unknown key; the keys of a "
            "physical:host reservation are %s"
            % ', '.join(sorted(host_request.REQUEST_KEYS)))
        self.assertEqual(('reservations[1].colour', 'unknown_key'),
                         (err.field, err.rule))
        self.assertRefuses(
            lease_schemas.UPDATE, {'lease': {'colour': 'red', 'a': 1}},
            "'a': unknown key; a lease update may change before_end_date, "
            "end_date, name, reservations, start_date")

    def test_missing_keys(self):
        for key in ('name', 'end_date'):
            body = _lease()
            del body[key]
            # Blazar's words first (its tests match them).
            err = self.assertRefuses(lease_schemas.CREATE, body,
                                     "Missing parameter %s ('%s' is "
                                     "required)" % (key, key), field=key)
            self.assertEqual('required', err.rule)
            self.assertEqual(str(err), self._parser_message(body))

    def test_no_reservation_is_accepted(self):
        # As in Blazar: absent, null or empty.
        for value in (None, []):
            body = _lease(reservations=value)
            self.assertEqual(body, self.assertAccepts(lease_schemas.CREATE,
                                                      body))
        body = _lease()
        del body['reservations']
        self.assertEqual(body, self.assertAccepts(lease_schemas.CREATE, body))

    def test_free_text(self):
        err = self.assertRefuses(
            lease_schemas.CREATE, _lease(name='a\x00b'),
            "'name' must not contain control characters (U+0000 at "
            "position 1)")
        self.assertEqual('format', err.rule)
        self.assertRefuses(
            lease_schemas.UPDATE, {'name': 'line\nbreak'},
            "'name' must not contain control characters (U+000A at "
            "position 4)")

    def test_list_query(self):
        for query in ({}, {'all_projects': '1'}, {'all_tenants': 'False'},
                      {'all_projects': 'yes', 'all_tenants': 'maybe'},
                      {'limit': 'x'}):
            self.assertAccepts(lease_schemas.LIST_QUERY, query)
        for query in ({'all_projects': 'maybe'}, {'all_tenants': 'maybe'}):
            self.assertRefuses(
                lease_schemas.LIST_QUERY, query, "all_projects: must be a "
                "boolean such as 1 or true, got 'maybe'", name='BadRequest')
        self.assertRefuses(
            lease_schemas.LIST_QUERY, {'all_projects': ''}, "all_projects: "
            "must be a boolean such as 1 or true, got ''", name='BadRequest')


class HostSchemasTest(_SchemaTest):

    def test_accepts_what_the_api_takes(self):
        for body in ({'name': 'host1'},
                     {'name': ' host1 ', 'gpu': 'true', 'cores': 4,
                      'ssd': False, 'rack.row:1-a_b': None}):
            self.assertEqual(body, self.assertAccepts(host_schemas.CREATE,
                                                      body))
        for body, values in (({}, {}), ({'gpu': 'true'}, {'gpu': 'true'}),
                             ({'values': {'gpu': None}}, {'gpu': None}),
                             ({'values': {}}, {})):
            self.assertEqual(values, self.assertAccepts(host_schemas.UPDATE,
                                                        body))

    def test_refusals_in_the_os_hosts_words(self):
        required = ('name: the hypervisor hostname of a compute node is '
                    'required')
        cases = [
            (host_schemas.CREATE, {}, required),
            (host_schemas.CREATE, {'name': 5}, required),
            (host_schemas.CREATE, {'name': '  '}, required),
            (host_schemas.CREATE, {'name': 'h', 'id': '7'},
             "body: 'id' is a host field, not an extra capability"),
            (host_schemas.CREATE, {'name': 'h', 'a b': '7'},
             "body: extra capability names are 1 to 64 letters, digits, "
             "'_', '-', '.' or ':', got 'a b'"),
            # Blazar's message first (blazar-tempest-plugin matches it).
            (host_schemas.CREATE, {'name': 'h', 'k' * 65: '7'},
             "Extra capability key too long (body: at most 64 characters, "
             "got '%s')" % ('k' * 65)),
            (host_schemas.CREATE, {'name': 'h', 'rack': [1]},
             'body.rack: an extra capability value is a string or number'),
            (host_schemas.UPDATE, {'values': 5},
             'values: must be an object of extra capabilities'),
            (host_schemas.UPDATE, {'values': {'gpu': {}}},
             'values.gpu: an extra capability value is a string or number'),
            (host_schemas.UPDATE, {'gpu': {}},
             'values.gpu: an extra capability value is a string or number'),
            (host_schemas.UPDATE, {'values': {'name': 'x'}},
             "values: 'name' is a host field, not an extra capability"),
            (host_schemas.UPDATE, {'values': {}, 'gpu': 'true'},
             "values: 'values' is a host field, not an extra capability"),
        ]
        for schema, body, message in cases:
            self.assertRefuses(schema, body, message, name='BadRequest')
        self.assertRefuses(
            host_schemas.CREATE, {'name': 'h\x07'}, "'name' must not "
            "contain control characters (U+0007 at position 1)")

    def test_queries(self):
        for query in ({}, {'lease_id': 'abc', 'reservation_id': ''},
                      {'other': '\x00'}):
            self.assertAccepts(host_schemas.ALLOCATIONS_QUERY, query)
        self.assertRefuses(
            host_schemas.ALLOCATIONS_QUERY, {'reservation_id': 'x\x85'},
            "'reservation_id' must not contain control characters "
            "(U+0085 at position 1)", field='reservation_id')
        for detail in ('1', 'no', 'anything'):
            self.assertAccepts(host_schemas.PROPERTIES_QUERY,
                               {'detail': detail})


def _nodes(schema):
    """Every schema node below (and including) ``schema``."""
    yield schema
    for key, value in schema.items():
        if key in ('properties',):
            for node in value.values():
                yield from _nodes(node)
        elif key in ('items', 'additionalProperties', 'propertyNames',
                     'then', 'else', 'not') and isinstance(value, dict):
            yield from _nodes(value)
        elif key == 'allOf':
            for node in value:
                yield from _nodes(node)


class RouteTableTest(testtools.TestCase):

    #: Routes that read no body (the engine posts ``{}``).
    NO_BODY = {('/leases/{lease_id}/reservations/{reservation_id}/server',
                'POST')}

    def _routes(self):
        for template, methods in router.ROUTES.items():
            for method, route in methods.items():
                yield template, method, route

    def test_every_route_that_takes_a_body_has_a_schema(self):
        for template, method, route in self._routes():
            takes_body = 'body' in inspect.signature(
                route.handler).parameters
            self.assertEqual(takes_body, route.body is not None,
                             (template, method))
            if method in ('POST', 'PUT') and (
                    (template, method) not in self.NO_BODY):
                self.assertIsNotNone(route.body, (template, method))
            if route.body is not None:
                self.assertIn(method, ('POST', 'PUT'))

    def test_query_strings_of_get_routes(self):
        with_query = {(t, m) for t, m, r in self._routes()
                      if r.query is not None}
        self.assertEqual({('/capacity', 'GET'),
                          ('/leases', 'GET'), ('/offers', 'GET'),
                          ('/os-hosts/allocations', 'GET'),
                          ('/os-hosts/idle', 'GET'),
                          ('/os-hosts/{host_id}/allocation', 'GET'),
                          ('/os-hosts/properties', 'GET'),
                          ('/usage', 'GET')}, with_query)

    def test_handlers_take_the_url_parameters(self):
        for template, method, route in self._routes():
            names = [p.strip('{}') for p in template.split('/')
                     if p.startswith('{')]
            params_ = list(inspect.signature(route.handler).parameters)
            self.assertEqual(['req', 'ctx'] + names,
                             [p for p in params_ if p != 'body'],
                             (template, method))

    def test_schemas_are_valid_and_every_refusal_has_words(self):
        # (Objects at the top are the body or query string, always
        # objects; format text speaks through params.check_text.)
        def needs_words(node):
            return ('pattern' in node or 'not' in node or
                    node.get('format', 'text') != 'text' or
                    node.get('type', 'object') != 'object')

        for template, method, route in self._routes():
            for schema in (route.body, route.query):
                if schema is None:
                    continue
                validation.Schema(schema)  # checks it against draft 2020-12
                for node in _nodes(schema):
                    if needs_words(node):
                        self.assertTrue(
                            'description' in node or 'x-reason' in node,
                            (template, method, node))

    def test_schema_keys_are_the_parsers(self):
        self.assertEqual(
            set(params.BODY_KEYS) | params.FLEXIBLE_KEYS,
            set(lease_schemas.LEASE['properties']))
        self.assertEqual(
            set(host_request.REQUEST_KEYS),
            set(lease_schemas.HOST_RESERVATION['properties']))

    def test_literal_paths_come_before_templates(self):
        templates = list(router.ROUTES)
        for i, template in enumerate(templates):
            regex = router._regex(template)
            for later in templates[i + 1:]:
                if '{' not in later:
                    self.assertIsNone(regex.match(later), (template, later))

    def test_field_names(self):
        self.assertEqual('reservations[0].extra_specs.ssd',
                         validation.field_name(
                             ['reservations', 0, 'extra_specs', 'ssd']))
        self.assertEqual('name', validation.field_name(['name']))
        self.assertEqual('', validation.field_name([]))
