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
"""Climate's lease types on the in-process Nova: immediate, retries and
scheduled, through the lease API and boot hints (best_effort:
test_best_effort).
"""

import datetime

from oslo_serialization import jsonutils

from nova_lease.db import api as db_api
from tests.functional import fixtures as lease_fixtures
from tests.functional import test_host_reservation
from tests.functional import test_instance_lease

PREFIX = test_host_reservation.PREFIX
HOUR = datetime.timedelta(hours=1)


class HostLeaseTypesTest(test_host_reservation.HostLeaseMixin,
                         test_host_reservation.base.LeaseFunctionalBase):

    def test_types_are_recorded_and_checked(self):
        self._register('host1')
        lease = self._create(self._lease_body(
            'now', self._at(hours=1), lease_type='immediate'))
        self.assertEqual(('immediate', 0),
                         (lease['lease_type'], lease['retries']))
        # Provisioned now or not at all: the one host is taken.
        body = self._create(self._lease_body(
            'now', self._at(hours=1), name='second',
            lease_type='immediate'), status=409)
        self.assertIn('not enough free hosts', body['error_message'])
        # Retried up to the lease's retries, [nova_lease] max_retries by
        # default; scheduled: as every lease was.
        later = self._create(self._lease_body(
            self._at(hours=2), self._at(hours=3), name='r',
            lease_type='retries'))
        self.assertEqual(('retries', 3), (later['lease_type'],
                                          later['retries']))
        plain = self._create(self._lease_body(
            self._at(hours=4), self._at(hours=5), name='s'))
        self.assertEqual(('scheduled', None), (plain['lease_type'],
                                               plain['retries']))
        for extra, message in (
                ({'lease_type': 'best_effort'},
                 'a best_effort lease starts now'),
                ({'lease_type': 'soon'}, "'lease_type' must be one of "
                                         "immediate, retries, scheduled, "
                                         "best_effort"),
                ({'lease_type': 'retries', 'retries': 11},
                 'at most 10 times ([nova_lease_api] max_lease_retries)')):
            body = self._create(self._lease_body(
                self._at(hours=6), self._at(hours=7), name='x', **extra),
                status=400)
            self.assertIn(message, body['error_message'])
        body = self._create(self._lease_body(
            self._at(hours=6), self._at(hours=7), name='x',
            lease_type='immediate'), status=400)
        self.assertIn('an immediate lease starts now', body['error_message'])
        body = self._create(self._lease_body(
            'now', self._at(hours=7), name='x', lease_type='immediate',
            retries=2), status=400)
        self.assertIn('never retried', body['error_message'])
        self.assertEqual(3, len(db_api.lease_list(self.lease_db)))

    def test_default_type(self):
        self._register('host1')
        self.flags(default_lease_type='immediate', group='nova_lease_api')
        now = self._create(self._lease_body('now', self._at(hours=1)))
        self.assertEqual(('immediate', 0), (now['lease_type'],
                                            now['retries']))
        # An immediate default does not apply to a later start.
        later = self._create(self._lease_body(
            self._at(hours=2), self._at(hours=3), name='later'))
        self.assertEqual('scheduled', later['lease_type'])

    def _add_host_fails(self, times):
        """The engine's next ``times`` add_host requests get a 500."""
        faults = lease_fixtures.FaultInjector(self.keystone.nova_app)
        self.keystone.nova_app = faults
        faults.fail('add_host', 'POST', r'/os-aggregates/[^/]+/action$',
                    body='"add_host"', times=times)
        return faults

    def test_retries_shows_each_attempt(self):
        self._register('host1')
        lease = self._create(self._lease_body(
            self._at(minutes=10), self._at(hours=1), lease_type='retries',
            retries=2))
        faults = self._add_host_fails(times=1)
        self.clock.advance(minutes=10)
        self.engine.process_due()
        shown = self._lease(lease['id'])
        self.assertEqual('PENDING', shown['status'])
        [start] = [e for e in shown['events']
                   if e['event_type'] == 'start_lease']
        self.assertEqual(('UNDONE', 1), (start['status'], start['attempts']))
        self.assertIn('HTTP 500', start['last_error'])
        self.assertIsNotNone(start['next_attempt_at'])
        # retry_interval = 1 s: the second attempt succeeds.
        self.clock.advance(seconds=1)
        self.engine.process_due()
        shown = self._lease(lease['id'])
        [start] = [e for e in shown['events']
                   if e['event_type'] == 'start_lease']
        self.assertEqual(('DONE', 2), (start['status'], start['attempts']))
        self.assertEqual('ACTIVE', shown['status'])
        self.assertEqual(1, faults.faults['add_host'])

    def test_immediate_is_not_retried(self):
        self._register('host1')
        lease = self._create(self._lease_body(
            'now', self._at(hours=1), lease_type='immediate'))
        self._add_host_fails(times=1)
        self.engine.process_due()
        shown = self._lease(lease['id'])
        self.assertEqual('ERROR', shown['status'])
        self.assertIn('HTTP 500', shown['status_reason'])
        [start] = [e for e in shown['events']
                   if e['event_type'] == 'start_lease']
        self.assertEqual(('ERROR', 1), (start['status'], start['attempts']))
        # The host stayed in the free pool. It stays promised to the
        # lease (an operator may retry its start: doc/source/user/api.rst)
        # until its end time, when the lease releases what its start had
        # made.
        self.assertEqual(['host1'], self._aggregate('freepool')['hosts'])
        self.clock.advance(hours=1)
        self.engine.process_due()
        self.assertIsNone(self._aggregate(lease['reservations'][0]['id']))
        self.assertEqual('TERMINATED', self._lease(lease['id'])['status'])
        self._create(self._lease_body('now', self._at(hours=1), name='next'))


class InstanceLeaseTypesTest(test_instance_lease.InstanceLeaseTest):

    COMPUTES = {'host1': (2, 8192, 100)}
    LISTEN = False

    def _hinted(self, flavor='1', status=202, **params):
        server = self._build_server(name='vm', image_uuid=self.image_id,
                                    flavor_id=flavor, networks='none')
        body = {'server': server, 'os:scheduler_hints': {
            'reserved': 'True', 'lease_params': jsonutils.dumps(params)}}
        return self.api.api_post('/servers', body,
                                 check_response_status=[status]).body

    def test_immediate_is_admitted_at_once(self):
        end = self._date(self.clock.now + HOUR)
        # 7,680 MB for servers on the host: a 7,424 MB server fits once.
        self.admin_api.api_post('/flavors', {'flavor': {
            'name': 'big', 'id': 'big', 'ram': 7424, 'vcpus': 1,
            'disk': 1}})
        self._hinted(flavor='big', name='a', start='now', end=end,
                     type='immediate')
        [lease] = db_api.lease_list(self.db)
        self.assertEqual(('immediate', 0), (lease['lease_type'],
                                            lease['retries']))
        # Its capacity is promised from now on, on the host that takes it.
        [allocation] = db_api.allocation_list(self.db, lease_id=lease['id'])
        self.assertEqual('host1', allocation['host'])
        # A second one cannot be provided now: 409, nothing left behind.
        body = self._hinted(flavor='big', status=409, name='b',
                            start='now', end=end, type='immediate')
        self.assertIn('No host can hold', str(body))
        self.assertEqual(1, len(db_api.lease_list(self.db)))
        self.assertEqual(1, len(self.admin_api.get_servers(
            search_opts={'all_tenants': 1})))
