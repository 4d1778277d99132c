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
"""The lease API's microversions (no Nova running): the header's parsing
and negotiation, the routes and fields of each version, the version
document.
"""

import datetime
import os
from unittest import mock

import testtools
import webob

from nova_lease.api_ext.lease_api.handlers import leases as lease_handlers
from nova_lease.api_ext.lease_api import microversion
from nova_lease.api_ext.lease_api import router
from nova_lease.api_ext.lease_api import views
from nova_lease import exception
from nova_lease import resource_types as types

T = datetime.datetime(2030, 1, 1, 12, 0)
DOC = os.path.join(os.path.dirname(__file__), '..', '..', 'doc', 'source',
                   'user', 'api.rst')


def _req(path='/', header=None):
    headers = {} if header is None else {'OpenStack-API-Version': header}
    return webob.Request.blank(path, headers=headers)


def _lease():
    return {
        'id': 'l1', 'name': 'n', 'project_id': 'p', 'user_id': 'u',
        'start_date': T, 'end_date': T, 'before_end_date': T,
        'status': 'PENDING', 'status_reason': None, 'on_end': 'delete',
        'lease_type': 'scheduled', 'retries': 0,
        'reservations': [
            {'id': 'r1', 'lease_id': 'l1', 'resource_id': None,
             'resource_type': 'physical:host', 'status': 'pending',
             'properties': {'min': 1, 'max': 1, 'availability_zone': 'nova',
                            'region': None, 'extra_specs': {}, 'vcpus': 0,
                            'memory_mb': 0, 'disk_gb': 0,
                            'hypervisor_properties': '',
                            'resource_properties': '',
                            'before_end': None}},
            {'id': 'r2', 'lease_id': 'l1', 'resource_id': None,
             'resource_type': 'virtual:instance', 'status': 'pending',
             'properties': {'amount': 1, 'vcpus': 1, 'memory_mb': 512,
                            'disk_gb': 1, 'affinity': None,
                            'resource_properties': ''}}],
        'events': [{'id': 'e1', 'lease_id': 'l1',
                    'event_type': 'start_lease', 'time': T,
                    'status': 'UNDONE', 'attempts': 0}],
    }


class NegotiationTest(testtools.TestCase):

    def _version(self, header):
        return str(microversion.negotiate(_req(header=header)))

    def test_no_header_is_the_minimum(self):
        self.assertEqual('1.0', microversion.MIN_VERSION)
        self.assertEqual('1.0', self._version(None))
        # Another service's entry only: as no header.
        self.assertEqual('1.0', self._version('compute 2.96'))

    def test_a_version_in_range(self):
        for version in microversion.VERSIONS:
            self.assertEqual(version,
                             self._version('reservation %s' % version))
        self.assertEqual('1.1', self._version(
            'compute 2.96, reservation 1.1'))
        self.assertEqual('1.1', self._version('Reservation  1.1 '))

    def test_latest_is_the_maximum(self):
        self.assertEqual(microversion.MAX_VERSION,
                         self._version('reservation latest'))

    def test_out_of_range_is_406_with_the_range(self):
        for header in ('reservation 1.99', 'reservation 2.0',
                       'reservation 0.9'):
            e = self.assertRaises(microversion.NotAcceptable, self._version,
                                  header)
            self.assertEqual(406, e.code)
            self.assertIn('from 1.0 to %s' % microversion.MAX_VERSION,
                          str(e))

    def test_malformed_is_400(self):
        for header in ('reservation 1', 'reservation one.two',
                       'reservation 1.x'):
            e = self.assertRaises(microversion.BadVersion, self._version,
                                  header)
            self.assertEqual(400, e.code)
            self.assertIsInstance(e, exception.Invalid)

    def test_types_name_versions_that_exist(self):
        for name in types.FACTS:
            for version in types.get(name).api_versions:
                self.assertIn(version, microversion.VERSIONS, name)

    def test_at_least(self):
        req = _req(header='reservation 1.2')
        microversion.negotiate(req)
        self.assertTrue(microversion.at_least(req, '1.1'))
        self.assertTrue(microversion.at_least(req, '1.2'))
        self.assertFalse(microversion.at_least(req, '1.3'))
        # Before negotiation: the minimum.
        self.assertFalse(microversion.at_least(_req(), '1.1'))

    def test_versions_are_ordered_and_documented(self):
        parsed = [microversion.parse(v) for v in microversion.VERSIONS]
        self.assertEqual(sorted(parsed), parsed)
        self.assertEqual(len(set(parsed)), len(parsed))
        with open(DOC) as f:
            doc = f.read()
        # (A count, not assertIn: a mismatch would print the whole page.)
        self.assertEqual(1, min(1, doc.count(
            'OpenStack-API-Version: reservation')))
        for version in microversion.VERSIONS:
            self.assertEqual(1, doc.count('\n``%s``\n' % version), version)


class RouterTest(testtools.TestCase):
    """What router.handle answers at each version (no database: the
    routes that need one are reached through a mocked handler).
    """

    def _handle(self, path, header=None, method='GET', ctx=None):
        req = _req(path, header)
        req.method = method
        return router.handle(req, ctx, path, 'http://nova/os-reservation')

    def test_answers_name_their_version(self):
        for header, served in ((None, '1.0'), ('reservation 1.1', '1.1'),
                               ('reservation latest',
                                microversion.MAX_VERSION)):
            resp = self._handle('', header)
            self.assertEqual(200, resp.status_int)
            self.assertEqual('reservation %s' % served,
                             resp.headers['OpenStack-API-Version'])
            self.assertEqual('OpenStack-API-Version', resp.headers['Vary'])
        # Errors too.
        resp = self._handle('/nope', 'reservation 1.1')
        self.assertEqual(404, resp.status_int)
        self.assertEqual('reservation 1.1',
                         resp.headers['OpenStack-API-Version'])

    def test_406_above_the_maximum(self):
        resp = self._handle('/leases', 'reservation 9.9')
        self.assertEqual(406, resp.status_int)
        body = resp.json
        self.assertEqual('NotAcceptable', body['error_name'])
        self.assertIn('1.0 to %s' % microversion.MAX_VERSION,
                      body['error_message'])
        self.assertNotIn('OpenStack-API-Version', resp.headers)

    def test_400_for_a_malformed_version(self):
        resp = self._handle('/leases', 'reservation x')
        self.assertEqual(400, resp.status_int)
        self.assertIn('invalid version string', resp.json['error_message'])

    def test_version_document_lists_the_range(self):
        [doc] = self._handle('').json['versions']
        self.assertEqual(
            ('v1.0', '1.0', microversion.MAX_VERSION,
             microversion.MAX_VERSION),
            (doc['id'], doc['min_version'], doc['max_version'],
             doc['version']))

    def test_extension_routes_need_their_version(self):
        for path, version in (('/os-hosts/idle', microversion.IDLE_HOSTS),
                              ('/usage', microversion.USAGE),
                              ('/capacity', microversion.CAPACITY)):
            methods, _ = router._match(path, microversion.parse(version))
            self.assertIsNotNone(methods, path)
            earlier = microversion.VERSIONS[
                microversion.VERSIONS.index(version) - 1]
            methods, params = router._match(path,
                                            microversion.parse(earlier))
            if path == '/os-hosts/idle':
                # As in Blazar: a host named 'idle'.
                self.assertEqual({'host_id': 'idle'}, params)
            else:
                self.assertIsNone(methods, path)
                resp = self._handle(path, 'reservation %s' % earlier)
                self.assertEqual(404, resp.status_int)

    def test_blazar_routes_at_1_0(self):
        v10 = microversion.parse('1.0')
        for path in ('/leases', '/leases/x', '/os-hosts', '/os-hosts/x',
                     '/os-hosts/allocations', '/os-hosts/x/allocation',
                     '/os-hosts/properties'):
            methods, _ = router._match(path, v10)
            self.assertIsNotNone(methods, path)
        # Every route beyond 1.0 is one of the documented extensions.
        later = sorted(t for t, methods in router.ROUTES.items()
                       if any(r.min_version != '1.0'
                              for r in methods.values()))
        self.assertEqual(['/capacity', '/offers', '/os-hosts/idle',
                          '/usage'], later)


class ViewTest(testtools.TestCase):

    def _lease(self, version):
        return views.format_lease(
            _lease(), None if version is None else
            microversion.parse(version))

    def test_1_0_is_blazar_v1(self):
        lease = self._lease('1.0')
        self.assertEqual(
            sorted(['id', 'name', 'project_id', 'user_id', 'start_date',
                    'end_date', 'status', 'degraded', 'trust_id',
                    'reservations', 'events', 'created_at', 'updated_at']),
            sorted(lease))
        host, instance = lease['reservations']
        for key in ('availability_zone', 'region', 'extra_specs', 'vcpus',
                    'memory_mb', 'disk_gb'):
            self.assertNotIn(key, host)
        self.assertEqual(['min', 'max', 'hypervisor_properties',
                          'resource_properties', 'before_end'],
                         [k for k in host if k in (
                             'min', 'max', 'hypervisor_properties',
                             'resource_properties', 'before_end')])
        # An instance reservation's sizes are Blazar's.
        self.assertEqual((1, 512, 1), (instance['vcpus'],
                                       instance['memory_mb'],
                                       instance['disk_gb']))
        self.assertNotIn('attempts', lease['events'][0])

    def test_1_1_adds_the_lease_details(self):
        lease = self._lease('1.1')
        self.assertEqual(('scheduled', 0, 'delete'), (
            lease['lease_type'], lease['retries'], lease['on_end']))
        self.assertIn('status_reason', lease)
        self.assertIn('before_end_date', lease)
        self.assertEqual(0, lease['events'][0]['attempts'])
        self.assertNotIn('availability_zone', lease['reservations'][0])

    def test_1_2_adds_the_host_request(self):
        host = self._lease('1.2')['reservations'][0]
        self.assertEqual('nova', host['availability_zone'])
        self.assertIn('extra_specs', host)

    def test_no_version_shows_everything(self):
        self.assertEqual(self._lease(microversion.MAX_VERSION),
                         self._lease(None))


class RequestKeysTest(testtools.TestCase):

    def _check(self, header, body):
        req = _req(header=header)
        microversion.negotiate(req)
        lease_handlers.check_version_keys(req, body)

    def test_lease_keys_need_1_1(self):
        for key, value in (('lease_type', 'immediate'), ('retries', 2),
                           ('on_end', 'shelve')):
            e = self.assertRaises(exception.Invalid, self._check, None,
                                  {key: value})
            self.assertEqual(400, e.code)
            self.assertIn("'%s' needs lease API version 1.1" % key, str(e))
            self._check('reservation 1.1', {key: value})
        # null is absent.
        self._check(None, {'lease_type': None, 'on_end': None})

    def test_host_request_keys_need_1_2(self):
        body = {'reservations': [
            {'resource_type': 'virtual:instance', 'vcpus': 1},
            {'resource_type': 'physical:host', 'min': 1, 'max': 1,
             'availability_zone': 'nova'}]}
        e = self.assertRaises(exception.Invalid, self._check,
                              'reservation 1.1', body)
        self.assertIn("'reservations[1].availability_zone' needs lease API "
                      "version 1.2", str(e))
        self._check('reservation 1.2', body)

    @mock.patch.object(lease_handlers.policy, 'authorize',
                       side_effect=AssertionError('no policy check first'))
    def test_refused_before_the_policy(self, authorize):
        req = _req(header='reservation 1.0')
        microversion.negotiate(req)
        self.assertRaises(exception.Invalid, lease_handlers.create_lease,
                          req, None, {'name': 'x', 'lease_type': 'immediate'})
