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
"""The lease API's microversions on the in-process real Nova.

An old client (no ``OpenStack-API-Version: reservation`` header, or 1.0:
python-blazarclient, blazar-dashboard) sees Blazar's v1 only: no field
and no route of a later version, and may not send a key of one; a new
client sees them; above the maximum is a 406 that gives the range; the
version document lists the range.
"""

import copy
import datetime

from nova_lease.api_ext.lease_api import microversion
from tests.functional import base
from tests.functional import test_lease_api

PREFIX = test_lease_api.PREFIX
MAX = microversion.MAX_VERSION

#: What Blazar v1 shows of a lease, an event and a host reservation.
BLAZAR_LEASE = {'id', 'name', 'project_id', 'user_id', 'start_date',
                'end_date', 'status', 'degraded', 'trust_id',
                'reservations', 'events', 'created_at', 'updated_at'}
BLAZAR_EVENT = {'id', 'lease_id', 'event_type', 'time', 'status',
                'created_at', 'updated_at'}
BLAZAR_HOST_RESERVATION = {'id', 'lease_id', 'resource_id',
                           'resource_type', 'status', 'aggregate_id',
                           'created_at', 'updated_at', 'min', 'max',
                           'hypervisor_properties', 'resource_properties',
                           'before_end'}
#: What a later version adds to them.
LATER_LEASE = {'status_reason', 'before_end_date', 'on_end', 'lease_type',
               'retries'}
LATER_EVENT = {'attempts', 'last_error', 'next_attempt_at'}
LATER_HOST_RESERVATION = {'availability_zone', 'region', 'extra_specs',
                          'vcpus', 'memory_mb', 'disk_gb'}


class LeaseAPIVersionsTest(test_lease_api.LeaseAPIMixin,
                           base.LeaseFunctionalBase):

    CLOCK_START = datetime.datetime(2030, 1, 1, 12, 0, 0)

    def _at_version(self, api, version):
        """A copy of Nova's test client ``api`` that asks the lease API
        for ``version`` (None: no header).
        """
        client = copy.copy(api)
        client.reservation_version = version
        return client

    def _blazar_body(self):
        # What python-blazarclient sends for a host reservation.
        return self._lease_body(
            self._at(hours=1), self._at(hours=2),
            reservations=[self._host_res(hypervisor_properties='',
                                         resource_properties='')])

    def assertServedAt(self, version, resp):
        self.assertEqual('reservation %s' % version,
                         resp.headers['OpenStack-API-Version'])
        self.assertIn('OpenStack-API-Version', resp.headers['Vary'])

    def test_an_old_client_sees_blazar_v1_only(self):
        self._register('host1')
        for version in (None, '1.0'):
            old = self._at_version(self.api, version)
            resp = old.api_post(PREFIX + '/leases', self._blazar_body(),
                                check_response_status=[201])
            self.assertServedAt('1.0', resp)
            created = resp.body['lease']
            shown = old.api_get(PREFIX + '/leases/%s' % created['id']).body[
                'lease']
            [listed] = [x for x in old.api_get(PREFIX + '/leases').body[
                'leases'] if x['id'] == created['id']]
            for lease in (created, shown, listed):
                self.assertEqual(BLAZAR_LEASE, set(lease))
                [res] = lease['reservations']
                self.assertEqual(BLAZAR_HOST_RESERVATION, set(res))
                self.assertEqual(3, len(lease['events']))
                for event in lease['events']:
                    self.assertEqual(BLAZAR_EVENT, set(event))
            # A new client sees the same lease with its extensions.
            new = self.api.api_get(PREFIX + '/leases/%s' % created['id'])
            self.assertServedAt(MAX, new)
            lease = new.body['lease']
            self.assertEqual(BLAZAR_LEASE | LATER_LEASE, set(lease))
            self.assertEqual('scheduled', lease['lease_type'])
            self.assertEqual(
                BLAZAR_HOST_RESERVATION | LATER_HOST_RESERVATION,
                set(lease['reservations'][0]))
            self.assertEqual(BLAZAR_EVENT | LATER_EVENT,
                             set(lease['events'][0]))
            old.api_delete(PREFIX + '/leases/%s' % created['id'])

    def test_each_version_adds_its_fields(self):
        self._register('host1')
        lease = self._create(self._blazar_body())
        url = PREFIX + '/leases/%s' % lease['id']
        at_1_1 = self._at_version(self.api, '1.1').api_get(url).body[
            'lease']
        self.assertEqual(BLAZAR_LEASE | LATER_LEASE, set(at_1_1))
        self.assertEqual(BLAZAR_EVENT | LATER_EVENT,
                         set(at_1_1['events'][0]))
        self.assertEqual(BLAZAR_HOST_RESERVATION,
                         set(at_1_1['reservations'][0]))
        at_1_2 = self._at_version(self.api, '1.2').api_get(url).body[
            'lease']
        self.assertEqual(BLAZAR_HOST_RESERVATION | LATER_HOST_RESERVATION,
                         set(at_1_2['reservations'][0]))

    def test_an_old_client_may_not_send_a_new_key(self):
        self._register('host1')
        old = self._at_version(self.api, None)
        body = self._blazar_body()
        body['lease_type'] = 'scheduled'
        resp = old.api_post(PREFIX + '/leases', body,
                            check_response_status=[400])
        self.assertServedAt('1.0', resp)
        self.assertIn("'lease_type' needs lease API version 1.1",
                      resp.body['error_message'])
        body = self._blazar_body()
        body['reservations'][0]['availability_zone'] = 'nova'
        resp = self._at_version(self.api, '1.1').api_post(
            PREFIX + '/leases', body, check_response_status=[400])
        self.assertIn("'reservations[0].availability_zone' needs lease API "
                      "version 1.2", resp.body['error_message'])
        self.assertEqual((0, 0, 0), self._counts())
        # At the versions that have them: taken.
        lease = self._at_version(self.api, '1.2').api_post(
            PREFIX + '/leases', body, check_response_status=[201]).body[
                'lease']
        self.assertEqual('nova', lease['reservations'][0][
            'availability_zone'])

    def test_an_old_client_does_not_find_a_new_route(self):
        self._register('host1')
        window = '?start=%s&end=%s' % (
            self._at(hours=1).replace(' ', '%20'),
            self._at(hours=3).replace(' ', '%20'))
        routes = (('/os-hosts/idle', '1.3'), ('/usage', '1.4'),
                  ('/capacity' + window + '&step=1h', '1.5'),
                  ('/offers?resource_type=physical:host&min=1&max=1'
                   '&duration=1h', '1.6'))
        for path, since in routes:
            before = microversion.VERSIONS[
                microversion.VERSIONS.index(since) - 1]
            for version in (None, '1.0', before):
                resp = self._at_version(self.admin_api, version).api_get(
                    PREFIX + path, check_response_status=[404])
                self.assertServedAt(version or '1.0', resp)
            resp = self._at_version(self.admin_api, since).api_get(
                PREFIX + path, check_response_status=[200])
            self.assertServedAt(since, resp)
        # Below 1.3, /os-hosts/idle is the host named 'idle' (Blazar's
        # route): its 404 says so.
        resp = self._at_version(self.admin_api, None).api_get(
            PREFIX + '/os-hosts/idle', check_response_status=[404])
        self.assertIn('idle', resp.body['error_message'])
        # Blazar's routes are there at 1.0.
        old = self._at_version(self.admin_api, None)
        for path in ('/leases', '/os-hosts', '/os-hosts/allocations',
                     '/os-hosts/properties'):
            old.api_get(PREFIX + path, check_response_status=[200])

    def test_above_the_maximum_is_406_and_latest_the_maximum(self):
        for version in ('9.9', '1.%d' % (len(microversion.VERSIONS) + 5)):
            for path in ('/leases', ''):
                resp = self._at_version(self.api, version).api_get(
                    PREFIX + path, check_response_status=[406])
                self.assertEqual('NotAcceptable', resp.body['error_name'])
                self.assertIn('from 1.0 to %s' % MAX,
                              resp.body['error_message'])
        resp = self._at_version(self.api, 'x').api_get(
            PREFIX + '/leases', check_response_status=[400])
        self.assertIn('invalid version string', resp.body['error_message'])
        resp = self._at_version(self.api, 'latest').api_get(
            PREFIX + '/leases')
        self.assertServedAt(MAX, resp)

    def test_version_document_lists_the_range(self):
        # Without a token (keystoneauth's discovery), through the
        # nova_lease_versions filter, and with one.
        sess = self.keystone.session('fake')
        resp = sess.get(self.keystone.reservation_url, authenticated=False)
        self.assertEqual(200, resp.status_code)
        self.assertEqual('reservation 1.0',
                         resp.headers['OpenStack-API-Version'])
        for body in (resp.json(), self.api.api_get(PREFIX).body):
            [version] = body['versions']
            self.assertEqual(
                ('v1.0', 'CURRENT', '1.0', MAX, MAX),
                (version['id'], version['status'], version['min_version'],
                 version['max_version'], version['version']))
