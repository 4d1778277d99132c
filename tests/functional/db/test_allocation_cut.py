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
"""db.api.allocation_cut and reservation_lease_ids, on every backend."""

import datetime

from nova_lease.db import api
from tests.functional.db import base

T0 = datetime.datetime(2030, 1, 1, 12, 0)


def _at(hours):
    return T0 + datetime.timedelta(hours=hours)


class _CutTests(object):

    def _lease(self, windows):
        return api.lease_create(self.db, {
            'name': 'l', 'project_id': 'p', 'start_date': _at(0),
            'end_date': _at(10), 'status': 'PENDING'}, reservations=[{
                'resource_type': 'virtual:instance', 'status': 'pending',
                'allocations': [{'host': 'h%d' % i, 'start_date': _at(s),
                                 'end_date': _at(e)}
                                for i, (s, e) in enumerate(windows)]}])

    def test_cut(self):
        lease = self._lease([(0, 2), (1, 5), (4, 6), (3, 4)])
        other = self._lease([(1, 5)])
        rid = lease['reservations'][0]['id']
        self.assertEqual(3, api.allocation_cut(self.db, [rid], _at(3)))
        self.assertEqual(
            [('h0', _at(0), _at(2)), ('h1', _at(1), _at(3))],
            [(a['host'], a['start_date'], a['end_date'])
             for a in api.allocation_list(self.db, lease_id=lease['id'])])
        # Other reservations are untouched; nothing to cut is 0.
        self.assertEqual(
            [(_at(1), _at(5))],
            [(a['start_date'], a['end_date']) for a in api.allocation_list(
                self.db, lease_id=other['id'])])
        self.assertEqual(0, api.allocation_cut(self.db, [rid], _at(3)))
        self.assertEqual(0, api.allocation_cut(self.db, [], _at(3)))
        # The change journal names the reservation (the scheduler's
        # snapshot reads it again).
        before = max(r[0] for r in api.change_rows(self.db, 0))
        api.allocation_cut(self.db, [rid], _at(1))
        self.assertIn(rid, [r[2] for r in api.change_rows(self.db, before)])

    def test_reservation_lease_ids(self):
        leases = [self._lease([(0, 1)]) for _ in range(3)]
        wanted = {lease['reservations'][0]['id']: lease['id']
                  for lease in leases[:2]}
        self.assertEqual(wanted, api.reservation_lease_ids(
            self.db, list(wanted) + ['missing']))
        self.assertEqual({}, api.reservation_lease_ids(self.db, []))


class CutSQLiteTest(_CutTests, base.SQLiteTestCase):
    pass


class CutMySQLTest(_CutTests, base.MySQLTestCase):
    pass


class CutPostgreSQLTest(_CutTests, base.PostgreSQLTestCase):
    pass
