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
"""One home per validation rule (no Nova running).

The same bad lease parameters are refused alike by the lease API
(``POST /leases``: the route's schema, then validation.parse_lease_body,
as the router and the handler do) and by the boot hint
(``--hint lease_params='{...}'``): same field, same rule, same words
(but for Blazar's own words, which come first on the API). And every
schema node that constrains a property carries the message of its
refusal.
"""

import datetime
import importlib
import json
import pkgutil

import testtools

from nova_lease.api_ext import boot_hints
from nova_lease.api_ext.lease_api import router
from nova_lease.api_ext.lease_api import schemas
from nova_lease.api_ext.lease_api.schemas import lease_params as lp_schemas
from nova_lease.api_ext.lease_api.schemas import leases as lease_schemas
from nova_lease.api_ext.lease_api import validation
from nova_lease import params
from tests import unit

NOW = datetime.datetime(2026, 6, 1, 12, 0)

#: The hint's names -> the lease body's.
BODY_NAMES = {'name': 'name', 'start': 'start_date', 'end': 'end_date',
              'before_end': 'before_end_date', 'on_end': 'on_end',
              'retries': 'retries', 'type': 'lease_type', 'foo': 'foo'}

#: (changes to a valid lease in the hint's names, the rule refused, and
#: whether the words are the same on both paths).
CASES = [
    ({'name': 5}, 'type', True),
    ({'name': ['a']}, 'type', True),
    ({'name': '   '}, 'range', True),
    ({'name': 'x' * 256}, 'range', True),
    ({'name': 'a\x00b'}, 'format', True),
    ({'name': 'a\nb'}, 'format', True),
    ({'start': 123}, 'type', True),
    ({'start': True}, 'type', True),
    ({'start': 'soon'}, 'format', True),
    ({'start': '2026-05-01 00:00'}, 'past', True),
    ({'start': '1969-12-31 00:00'}, 'range', True),
    ({'end': 1893456000}, 'type', True),
    ({'end': {}}, 'type', True),
    ({'end': 'next week'}, 'format', True),
    ({'end': '2026-02-30 10:00'}, 'format', True),
    ({'end': '2026-06-01 11:00'}, 'order', True),
    ({'start': '2026-06-03 10:00', 'end': '2026-06-02 10:00'}, 'order',
     True),
    # The hint also takes minutes before the end, and says so.
    ({'before_end': True}, 'type', False),
    ({'before_end': 'soon'}, 'format', False),
    ({'before_end': '2026-06-02 12:00'}, 'range', True),
    ({'before_end': '2026-06-01 11:00'}, 'range', True),
    ({'on_end': True}, 'type', True),
    ({'on_end': 'destroy'}, 'choice', True),
    ({'retries': True}, 'type', True),
    ({'retries': '3'}, 'type', True),
    ({'retries': 1.0}, 'type', True),
    ({'retries': 101}, 'range', True),
    ({'retries': -1}, 'range', True),
    ({'type': 5}, 'type', True),
    ({'type': True}, 'type', True),
    ({'type': 'forever'}, 'choice', True),
    ({'type': 'immediate', 'start': '2026-06-01 13:00'}, 'unsupported',
     True),
    ({'type': 'immediate', 'retries': 2}, 'unsupported', True),
    ({'foo': 1}, 'unknown_key', False),
]


def _in_body_names(text):
    for hint_name, body_name in BODY_NAMES.items():
        text = text.replace("'%s'" % hint_name, "'%s'" % body_name)
    return text


class SamePathsTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = unit.lease_conf_opts()

    def _hint(self, values):
        hints = {'reserved': 'True', 'lease_params': json.dumps(values)}
        return self.assertRaises(
            params.LeaseParamError, boot_hints.lease_request, self.conf,
            hints, 'p1', 'vm1', NOW)

    def _api(self, values):
        body = {'lease': {BODY_NAMES[k]: v for k, v in values.items()}}
        body['lease']['reservations'] = []
        schema = validation.Schema(router.ROUTES['/leases']['POST'].body)

        def create():
            # As handlers.leases.create_lease.
            validation.parse_lease_body(schema.validate(body), NOW)

        return self.assertRaises(params.LeaseParamError, create)

    def test_same_refusal_on_both_paths(self):
        for changes, rule, same_words in CASES:
            values = {'name': 'a', 'start': 'now', 'end': '2026-06-02 12:00'}
            values.update(changes)
            hint_err = self._hint(values)
            api_err = self._api(values)
            self.assertEqual((rule, rule), (hint_err.rule, api_err.rule),
                             (changes, str(hint_err), str(api_err)))
            self.assertIn(hint_err.field, changes)
            self.assertEqual(BODY_NAMES[hint_err.field], api_err.field,
                             changes)
            self.assertTrue(str(hint_err).startswith('lease_params: '),
                            str(hint_err))
            if same_words:
                # (The API may put Blazar's words first.)
                self.assertIn(_in_body_names(hint_err.reason),
                              str(api_err), changes)

    def test_blazar_words_first_on_the_api(self):
        for changes, words in (
                ({'start': '2026-05-01 00:00'},
                 "Start date must be later than current date ('start_date'"
                 " (2026-05-01 00:00) is in the past"),
                ({'end': '2026-06-01 11:00'},
                 "End date must be later than start date. ('end_date' "
                 "(2026-06-01 11:00) must be after 'start_date'"),
                ({'end': 'next week'},
                 "next week is an invalid date. Required format: "
                 "%Y-%m-%d %H:%M ('end_date' must be a date as"),
                ({'before_end': '2026-02-30 10:00'},
                 "2026-02-30 10:00 is an invalid date. Required format: "
                 "%Y-%m-%d %H:%M ('before_end_date' (2026-02-30 10:00) is "
                 "not a valid date"),
                ({'end': None},
                 "Missing parameter end_date ('end_date' is required)"),
                ({'name': None},
                 "Missing parameter name ('name' is required)")):
            values = {'name': 'a', 'start': 'now', 'end': '2026-06-02 12:00'}
            values.update(changes)
            err = self._api(values)
            self.assertTrue(str(err).startswith(words), (words, str(err)))
        err = self._api({'name': 'a', 'start': 'now'})
        self.assertEqual(
            "Missing parameter end_date ('end_date' is required)", str(err))

    def test_hint_only_keys(self):
        # duration is the hint's alone; the lease body refuses it.
        for value, rule in ((True, 'type'), ('1.5h', 'format'),
                            (0, 'range')):
            err = self._hint({'name': 'a', 'duration': value})
            self.assertEqual(('duration', rule), (err.field, err.rule))


# Keywords that refuse a value, so need words when they do.
_CONSTRAINTS = ('type', 'enum', 'const', 'pattern', 'format', 'not',
                'minimum', 'maximum', 'exclusiveMinimum',
                'exclusiveMaximum', 'multipleOf', 'minLength',
                'maxLength', 'minItems', 'maxItems', 'uniqueItems',
                'minProperties', 'maxProperties')


def _unworded(schema, where, top=True, tops=()):
    """(where, keyword) of each constraint of ``schema`` without words.

    ``format: text`` speaks through params.check_text; ``type: object``
    at the top of a schema (a body, a query string, a lease inside its
    wrapper) is checked before the schema runs; ``if`` never refuses,
    nor what is inside a ``not`` (its node refuses, in its words).
    """
    found = []
    top = top or id(schema) in tops
    worded = 'description' in schema or 'x-reason' in schema
    for keyword in _CONSTRAINTS:
        if keyword not in schema or worded:
            continue
        if keyword == 'format' and schema['format'] == 'text':
            continue
        if keyword == 'type' and top and schema['type'] == 'object':
            continue
        found.append((where, keyword))
    for key, value in schema.items():
        if key == 'properties':
            for name, node in value.items():
                found += _unworded(node, '%s.%s' % (where, name), False,
                                   tops)
        elif key in ('items', 'additionalProperties',
                     'propertyNames') and isinstance(value, dict):
            found += _unworded(value, '%s[%s]' % (where, key), False,
                               tops)
        elif key in ('then', 'else') and isinstance(value, dict):
            found += _unworded(value, where, top, tops)
        elif key == 'allOf':
            for i, node in enumerate(value):
                found += _unworded(node, '%s[%d]' % (where, i), False,
                                   tops)
    return found


def _all_schemas():
    for info in pkgutil.iter_modules(schemas.__path__):
        module = importlib.import_module('%s.%s' % (schemas.__name__,
                                                    info.name))
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, dict) and (
                    'properties' in value or 'type' in value or
                    'then' in value):
                yield '%s.%s' % (info.name, name), value


class SchemaWordsTest(testtools.TestCase):

    def test_every_constraint_has_its_message(self):
        found = dict(_all_schemas())
        tops = {id(schema) for schema in found.values()}
        for name, schema in found.items():
            validation.Schema(schema)  # a valid draft 2020-12 schema
            self.assertEqual([], _unworded(schema, name, tops=tops))
        names = set(found)
        # (The walk saw the schemas.)
        self.assertIn('lease_params.LEASE_PARAMS', names)
        self.assertIn('leases.CREATE', names)
        self.assertIn('hosts.CREATE', names)

    def test_a_constraint_without_words_is_found(self):
        schema = {'type': 'object', 'properties': {
            'a': {'type': 'integer'},
            'b': {'type': 'string', 'description': 'must be a string'},
            'c': {'type': 'string', 'format': 'text', 'maxLength': 3,
                  'x-reason': 'c: at most 3'},
            'd': {'type': 'array', 'description': 'must be an array',
                  'items': {'enum': [1, 2]}}}}
        self.assertEqual([('S.a', 'type'), ('S.d[items]', 'enum')],
                         _unworded(schema, 'S'))

    def test_the_schemas_know_the_parsers_keys(self):
        self.assertEqual(set(params._HINT_NAMES),
                         set(lp_schemas.LEASE_PARAMS['properties']))
        self.assertEqual(set(params.BODY_KEYS) | params.FLEXIBLE_KEYS,
                         set(lease_schemas.LEASE['properties']))
        # The lease's own properties are the hint's nodes (a lease
        # body's dates with Blazar's words besides).
        for hint_name, body_name in BODY_NAMES.items():
            if hint_name in ('foo', 'before_end'):
                continue
            body_node = dict(lease_schemas.LEASE['properties'][body_name])
            body_node.pop('x-blazar-words', None)
            self.assertEqual(
                lp_schemas.LEASE_PARAMS['properties'][hint_name], body_node)

    def test_the_refusal_does_not_depend_on_property_order(self):
        reordered = dict(lp_schemas.LEASE_PARAMS, properties=dict(
            reversed(lp_schemas.LEASE_PARAMS['properties'].items())))
        for changes, rule, _same in CASES:
            if rule not in ('type', 'unknown_key'):
                continue
            values = {'name': 'a', 'end': '2026-06-02 12:00'}
            values.update(changes)
            errs = [self.assertRaises(params.LeaseParamError,
                                      validation.Schema(s).validate, values)
                    for s in (lp_schemas.LEASE_PARAMS, reordered)]
            self.assertEqual(*[(e.field, e.rule, str(e)) for e in errs])
