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
"""Boot requests of servers created at their lease's start, and the
removal of such a reservation (``DELETE`` of its alias), on every backend.
"""

import datetime

from nova_lease.db import api
from nova_lease.plugins.instance import leases
from tests.functional.db import base

T0 = datetime.datetime(2030, 1, 1, 12, 0, 0)
HOUR = datetime.timedelta(hours=1)


class _BootRequestTests(object):

    def _lease(self, count=1, status='PENDING'):
        reservations = [{'resource_type': 'virtual:instance',
                         'properties': {'vcpus': 1, 'index': i,
                                        leases.CREATE_AT_START: True},
                         'allocations': [{'host': 'host1',
                                          'start_date': T0,
                                          'end_date': T0 + HOUR,
                                          'vcpus': 1}]}
                        for i in range(count)]
        with self.db.writer() as session:
            lease = api.lease_create(session, {
                'name': 'l', 'project_id': 'p1', 'user_id': 'u1',
                'start_date': T0, 'end_date': T0 + HOUR,
                'status': status}, reservations=reservations)
            api.boot_requests_create(session, {
                r['id']: {'body': {'server': {'name': 'vm-%d' % i,
                                              'user_data': 'x' * 100000}}}
                for i, r in enumerate(lease['reservations'])})
        return lease

    def test_stored_with_the_lease_and_gone_with_it(self):
        lease = self._lease(2)
        first, second = [r['id'] for r in lease['reservations']]
        stored = api.boot_request_get(self.db, first)
        # More than MySQL's TEXT holds.
        self.assertEqual(100000, len(stored['body']['server']['user_data']))
        self.assertTrue(leases.created_at_start(lease['reservations'][0]))
        api.reservation_destroy(self.db, first)
        self.assertRaises(api.BootRequestNotFound, api.boot_request_get,
                          self.db, first)
        api.lease_destroy(self.db, lease['id'])
        self.assertRaises(api.BootRequestNotFound, api.boot_request_get,
                          self.db, second)

    def test_unknown_reservation(self):
        self.assertRaises(api.ReservationNotFound, api.boot_requests_create,
                          self.db, {'nope': {}})

    def test_remove_deferred(self):
        lease = self._lease(2)
        first, second = [r['id'] for r in lease['reservations']]
        # One of two: the lease stays with the other.
        self.assertIsNone(leases.remove_deferred(self.db, first))
        self.assertEqual([second], [r['id'] for r in api.lease_get(
            self.db, lease['id'])['reservations']])
        # The last one: the lease goes too (events, allocations, request).
        self.assertEqual(lease['id'],
                         leases.remove_deferred(self.db, second))
        self.assertRaises(api.LeaseNotFound, api.lease_get, self.db,
                          lease['id'])
        self.assertEqual([], api.allocation_list(self.db))
        self.assertRaises(api.ReservationNotFound, leases.remove_deferred,
                          self.db, second)

    def test_remove_deferred_refused(self):
        # Starting: the engine is creating the server.
        lease = self._lease(status='STARTING')
        reservation = lease['reservations'][0]['id']
        error = self.assertRaises(api.StatusConflict, leases.remove_deferred,
                                  self.db, reservation)
        self.assertEqual('STARTING', error.actual)
        # Its server exists: the caller deletes that one instead.
        api.lease_update(self.db, lease['id'], {'status': 'PENDING'})
        api.reservations_link(self.db, [(reservation, 'server-1')])
        error = self.assertRaises(leases.ServerAlreadyCreated,
                                  leases.remove_deferred, self.db,
                                  reservation)
        self.assertEqual('server-1', error.server_id)
        self.assertEqual(1, len(api.lease_get(self.db, lease['id'])[
            'reservations']))


class BootRequestSQLiteTest(_BootRequestTests, base.SQLiteTestCase):
    pass


class BootRequestMySQLTest(_BootRequestTests, base.MySQLTestCase):
    pass


class BootRequestPostgreSQLTest(_BootRequestTests, base.PostgreSQLTestCase):
    pass
