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
"""Admission control and the scheduler's snapshot on every database.

What Nova runs is a fixed inventory here (the real one is exercised by
test_scheduling on the in-process Nova); what is tested is the side
database: concurrent admissions in parallel transactions, on SQLite,
MariaDB/MySQL and PostgreSQL, never promise a host twice.
"""

import datetime

from oslo_config import cfg
from oslo_utils import timeutils

from nova_lease import calendar
from nova_lease import conf as lease_conf
from nova_lease.db import api
from nova_lease.scheduler import admission
from nova_lease.scheduler import fit
from nova_lease.scheduler import snapshot
from nova_lease.scheduler import view
from tests.functional.db import base
from tests import threads

NOW = datetime.datetime(2030, 1, 1)
HOUR = datetime.timedelta(hours=1)
FLAVOR = {'vcpus': 4, 'memory_mb': 512, 'disk_gb': 1}


class StaticInventory(object):
    """Hosts of 4 vcpus, nothing running."""

    def __init__(self, hosts):
        self.hosts = hosts

    def host_loads(self, snap, now):
        return [fit.HostLoad(h, calendar.HostCapacity(4, 8192, 100),
                             (0, 0, 0), ()) for h in self.hosts]


class _AdmissionTests(object):

    def setUp(self):
        super().setUp()
        self.conf = cfg.ConfigOpts()
        lease_conf.register_opts(self.conf)
        self.conf([])
        timeutils.set_time_override(NOW)
        self.addCleanup(timeutils.clear_time_override)

    def _admit(self, start, end, hosts=('host1', 'host2'), name='l'):
        with self.db.writer() as session:
            allocations = admission.allocate_instances(
                session, self.conf, FLAVOR, 1, start, end,
                inventory=StaticInventory(hosts))
            api.lease_create(session, {
                'name': name, 'project_id': 'p', 'start_date': start,
                'end_date': end, 'status': 'PENDING'},
                reservations=[{'resource_type': 'virtual:instance',
                               'properties': dict(FLAVOR),
                               'allocations': allocations}])
        return allocations

    def test_fill_then_conflict(self):
        a = self._admit(NOW + 2 * HOUR, NOW + 4 * HOUR)
        b = self._admit(NOW + 2 * HOUR, NOW + 4 * HOUR)
        self.assertEqual({'host1', 'host2'}, {a[0]['host'], b[0]['host']})
        self.assertRaises(admission.NoCapacity, self._admit,
                          NOW + 3 * HOUR, NOW + 5 * HOUR)
        self.assertEqual(2, len(api.lease_list(self.db)))
        # Tightest fit in time: a lease ending right before host1's next
        # promise goes to host1 rather than to an empty host3.
        c = self._admit(NOW + HOUR, NOW + 2 * HOUR,
                        hosts=('host3', 'host1'))
        self.assertIn(c[0]['host'], ('host1', 'host2'))

    def test_ten_parallel_requests_for_the_last_slot(self):
        self._admit(NOW + 2 * HOUR, NOW + 4 * HOUR)

        def attempt(n):
            for _try in range(20):
                try:
                    self._admit(NOW + 3 * HOUR, NOW + 5 * HOUR,
                                name='p%d' % n)
                    return 'admitted'
                except admission.NoCapacity:
                    return 'conflict'
                except api.db_exc.DBDeadlock:
                    continue  # what the caller's retry decorator does
            return 'deadlocked 20 times'

        results = threads.race(10, attempt)
        self.assertEqual(['admitted'] + ['conflict'] * 9,
                         sorted(map(str, results)))
        allocations = api.allocation_list(self.db, start=NOW + 3 * HOUR,
                                          end=NOW + 4 * HOUR)
        self.assertEqual({'host1', 'host2'},
                         {a['host'] for a in allocations})
        self.assertEqual(2, len(allocations))

    def test_snapshot_cache_reloads_on_new_allocation(self):
        cache = snapshot.SnapshotCache()
        first = cache.get(self.db, NOW, ttl=3600, wait=60)
        self.assertIsNone(first.calendar)
        self.assertIs(first, cache.get(self.db, NOW, ttl=3600))
        self._admit(NOW + 2 * HOUR, NOW + 4 * HOUR)
        second = cache.get(self.db, NOW, ttl=3600)
        self.assertIsNot(first, second)
        self.assertEqual(1, len(second.items))
        self.assertIs(second, cache.get(self.db, NOW, ttl=3600))
        # A server linked to its reservation is seen at once (the change
        # journal), with its size.
        res = api.reservation_list(self.db)[0]
        api.reservation_update(self.db, res['id'], {'resource_id': 'srv'})
        self.assertIn('srv', cache.get(self.db, NOW, ttl=3600).servers)
        self.assertEqual(FLAVOR['vcpus'],
                         cache.get(self.db, NOW, ttl=3600).servers['srv']
                         .size.vcpus)

    def test_snapshot_cache_sees_out_of_order_commits(self):
        # Journal ids 1..3 taken; the transaction holding id 2 commits
        # last: the highest id does not change, the probe still sees it.
        for hours in (1, 2, 3):
            self._admit(NOW + hours * 10 * HOUR,
                        NOW + (hours * 10 + 1) * HOUR)
        rows = api.allocation_list(self.db)
        late = [r for r in rows if r['id'] != max(r['id'] for r in rows)][-1]
        with self.db.writer() as session:
            journal = session.execute(
                api.LEASE_CHANGES.select().where(
                    api.LEASE_CHANGES.c.reservation_id ==
                    late['reservation_id'])).mappings().one()
            session.execute(api.LEASE_CHANGES.delete().where(
                api.LEASE_CHANGES.c.id == journal['id']))
            session.execute(api.ALLOCATIONS.delete().where(
                api.ALLOCATIONS.c.id == late['id']))
        cache = snapshot.SnapshotCache()
        before = cache.get(self.db, NOW, ttl=3600, wait=60)
        self.assertEqual(2, len(before.items))
        with self.db.writer() as session:
            session.execute(api.ALLOCATIONS.insert().values(**late))
            session.execute(api.LEASE_CHANGES.insert().values(**journal))
        after = cache.get(self.db, NOW, ttl=3600)
        self.assertEqual(3, len(after.items))

    def test_incremental_update_equals_full_load(self):
        for hours in (1, 2, 3):
            self._admit(NOW + hours * 10 * HOUR,
                        NOW + (hours * 10 + 1) * HOUR)
        cache = snapshot.SnapshotCache()
        loaded = cache.get(self.db, NOW, ttl=3600, wait=60)
        first, second = api.allocation_list(self.db)[:2]
        api.reservation_destroy(self.db, first['reservation_id'])
        self._admit(NOW + 50 * HOUR, NOW + 51 * HOUR)
        # Linked after the load: seen too (the change journal).
        res = {'id': second['reservation_id']}
        self.assertIn(res['id'], loaded.reservations)
        api.reservation_update(self.db, res['id'], {'resource_id': 'srv'})
        self._admit(NOW + 60 * HOUR, NOW + 61 * HOUR)
        updated = cache.get(self.db, NOW, ttl=3600)
        full = snapshot.load(self.db, NOW)
        self.assertEqual(sorted(full.items), sorted(updated.items))
        self.assertEqual(dict(full.reservations), dict(updated.reservations))
        self.assertEqual(full.servers, updated.servers)
        self.assertEqual(full.server_rows, updated.server_rows)
        self.assertIn('srv', updated.servers)
        self.assertEqual(
            {k: sorted(v) for k, v in full.allocations.items() if v},
            {k: sorted(v) for k, v in updated.allocations.items() if v})
        self.assertEqual(
            {k: sorted(v) for k, v in full.host_items.items() if v},
            {k: sorted(v) for k, v in updated.host_items.items() if v})

    def test_lookups(self):
        self.conf.set_override('connection', self.url, group='nova_lease')
        lease = api.lease_create(self.db, {
            'name': 'h', 'project_id': 'p', 'start_date': NOW - HOUR,
            'end_date': NOW + HOUR, 'status': 'ACTIVE'}, reservations=[{
                'resource_type': 'physical:host', 'status': 'active',
                'allocations': [{'host': 'host7', 'start_date': NOW - HOUR,
                                 'end_date': NOW + HOUR,
                                 'whole_host': True}]}, {
                'resource_type': 'virtual:instance', 'status': 'active',
                'resource_id': 'srv', 'properties': dict(FLAVOR)}])
        host_res, vm_res = sorted(lease['reservations'],
                                  key=lambda r: r['resource_type'])
        res, hosts = view.lookup_reservation(self.conf, host_res['id'], NOW)
        self.assertEqual(({'host7'}, 'ACTIVE', 'p'),
                         (hosts, res.lease_status, res.project_id))
        self.assertEqual((None, ()),
                         view.lookup_reservation(self.conf, 'nope', NOW))
        res, hosts = view.lookup_server(self.conf, 'srv', NOW)
        self.assertEqual((vm_res['id'], set(), 4),
                         (res.id, hosts, res.size.vcpus))
        self.assertEqual((None, ()),
                         view.lookup_server(self.conf, 'srv', NOW + HOUR))


class AdmissionSQLiteTest(_AdmissionTests, base.SQLiteTestCase):
    pass


class AdmissionMySQLTest(_AdmissionTests, base.MySQLTestCase):
    pass


class AdmissionPostgreSQLTest(_AdmissionTests, base.PostgreSQLTestCase):
    pass
