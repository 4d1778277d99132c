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
import random

from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_utils import timeutils

from nova_lease import calendar
from nova_lease.capacity import admission
from nova_lease.capacity import inventory
from nova_lease import conf as lease_conf
from nova_lease.db import api
from nova_lease.db import models
from nova_lease import resource_types as types
from nova_lease.scheduler import request as lease_request
from nova_lease.scheduler import snapshot_cache
from nova_lease.scheduler import snapshot_reads
from tests.functional.db import base
from tests import threads

NOW = datetime.datetime(2030, 1, 1)
HOUR = datetime.timedelta(hours=1)
FLAVOR = {'vcpus': 4, 'memory_mb': 512, 'disk_gb': 1}


class StaticInventory(inventory.Inventory):
    """Hosts of 4 vcpus, nothing running (placement agrees)."""

    CAPACITY = calendar.HostCapacity(4, 8192, 100)

    def __init__(self, hosts):
        self.hosts = hosts

    def compute_hosts(self, fresh=False):
        return [inventory.ComputeHost(h, h, 'uuid-' + h, self.CAPACITY,
                                      (0, 0, 0)) for h in self.hosts], False

    def leased_servers(self, uuids):
        return {}

    def placement_usage(self, hosts):
        return {h.name: (0, 0, 0) for h in hosts}

    def freepool_members(self, service_hosts):
        return set()


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

    def test_promises_that_hold_nothing_do_not_block(self):
        a = self._admit(NOW + 2 * HOUR, NOW + 4 * HOUR, name='a')
        self._admit(NOW + 2 * HOUR, NOW + 4 * HOUR, name='b')
        self.assertRaises(admission.NoCapacity, self._admit,
                          NOW + 3 * HOUR, NOW + 5 * HOUR)
        # Lease a ends early (its allocation stays, it holds nothing): its
        # host takes the next one.
        [lease] = [x for x in api.lease_list(self.db) if x['name'] == 'a']
        api.lease_update(self.db, lease['id'], {'status': 'TERMINATED'})
        c = self._admit(NOW + 3 * HOUR, NOW + 5 * HOUR, name='c')
        self.assertEqual(a[0]['host'], c[0]['host'])

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
                except db_exc.DBDeadlock:
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
        cache = snapshot_cache.SnapshotCache()
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
                models.LEASE_CHANGES.select().where(
                    models.LEASE_CHANGES.c.reservation_id ==
                    late['reservation_id'])).mappings().one()
            session.execute(models.LEASE_CHANGES.delete().where(
                models.LEASE_CHANGES.c.id == journal['id']))
            session.execute(models.ALLOCATIONS.delete().where(
                models.ALLOCATIONS.c.id == late['id']))
        cache = snapshot_cache.SnapshotCache()
        before = cache.get(self.db, NOW, ttl=3600, wait=60)
        self.assertEqual(2, len(before.items))
        with self.db.writer() as session:
            session.execute(models.ALLOCATIONS.insert().values(**late))
            session.execute(models.LEASE_CHANGES.insert().values(**journal))
        after = cache.get(self.db, NOW, ttl=3600)
        self.assertEqual(3, len(after.items))

    def test_incremental_update_equals_full_load(self):
        for hours in (1, 2, 3):
            self._admit(NOW + hours * 10 * HOUR,
                        NOW + (hours * 10 + 1) * HOUR)
        cache = snapshot_cache.SnapshotCache()
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
        full = snapshot_reads.load(self.db, NOW)
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
        self.conf.set_override('connection', self.url,
                               group='nova_lease_database')
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
        res, hosts = lease_request.lookup_reservation(
            self.conf, host_res['id'], NOW)
        self.assertEqual(({'host7'}, 'ACTIVE', 'p'),
                         (hosts, res.lease_status, res.project_id))
        self.assertEqual((None, ()),
                         lease_request.lookup_reservation(
                             self.conf, 'nope', NOW))
        res, hosts = lease_request.lookup_server(self.conf, 'srv', NOW)
        self.assertEqual((vm_res['id'], set(), 4),
                         (res.id, hosts, res.size.vcpus))
        self.assertEqual((None, ()),
                         lease_request.lookup_server(
                             self.conf, 'srv', NOW + HOUR))


class _WindowReadTests(object):
    """The windowed reads admission makes, against brute force."""

    def _lease(self, start, end, allocations=(), status='PENDING',
               resource_id=None, res_status='pending'):
        return api.lease_create(self.db, {
            'name': 'w', 'project_id': 'p', 'start_date': start,
            'end_date': end, 'status': status}, reservations=[{
                'resource_type': 'virtual:instance', 'status': res_status,
                'resource_id': resource_id, 'properties': dict(FLAVOR),
                'allocations': [dict(a, vcpus=1, memory_mb=1, disk_gb=1)
                                for a in allocations]}])

    def test_window_allocations_match_brute_force(self):
        rng = random.Random(7)
        second = datetime.timedelta(seconds=1)
        lengths = [datetime.timedelta(minutes=m) for m in (1, 59, 60, 61)]
        for k in range(0, 18):
            hours = datetime.timedelta(hours=2 ** k)
            lengths += [hours - second, hours, hours + second]
        lengths.append(datetime.timedelta(days=365 * 40))
        for n, length in enumerate(lengths):
            start = NOW + datetime.timedelta(
                seconds=rng.randrange(0, 3600 * 24 * 30))
            self._lease(NOW, start + length + HOUR, [
                {'host': 'host%d' % (n % 3), 'start_date': start,
                 'end_date': start + length}])
        # One whose lease is over, one of a dead lease: never counted.
        self._lease(NOW - 2 * HOUR, NOW - HOUR, [
            {'host': 'host0', 'start_date': NOW + HOUR,
             'end_date': NOW + 2 * HOUR}])
        self._lease(NOW, NOW + 1000 * HOUR, [
            {'host': 'host0', 'start_date': NOW + HOUR,
             'end_date': NOW + 2 * HOUR}], status='ERROR')
        every = {a['id']: a for a in api.allocation_list(self.db)}
        live = {i: a for i, a in every.items()
                if a['end_date'] - a['start_date'] in lengths}
        for _n in range(60):
            s = NOW + datetime.timedelta(
                seconds=rng.randrange(0, 3600 * 24 * 40))
            e = s + datetime.timedelta(seconds=rng.randrange(1, 3600 * 72))
            hosts = rng.choice([None, ['host1'], ['host0', 'host2']])
            expected = sorted(
                i for i, a in live.items()
                if a['start_date'] < e and a['end_date'] > s and
                (hosts is None or a['host'] in hosts))
            with self.db.reader() as session:
                rows = api.window_allocation_rows(
                    session, NOW, admission.DEAD_RESERVATIONS,
                    admission.DEAD_LEASES, s, e, hosts=hosts)
            self.assertEqual(expected, sorted(r[0] for r in rows),
                             (s, e, hosts))
            self.assertEqual(
                sorted((i, live[i]['host'], live[i]['start_date'],
                        live[i]['end_date']) for i in expected),
                sorted((r[0], r[2], r[3], r[4]) for r in rows))
            # Without the liveness join: every allocation of the window.
            with self.db.reader() as session:
                rows = api.window_allocation_rows(
                    session, NOW, admission.DEAD_RESERVATIONS,
                    admission.DEAD_LEASES, s, e, hosts=hosts, live=False)
            self.assertEqual(sorted(
                i for i, a in every.items()
                if a['start_date'] < e and a['end_date'] > s and
                (hosts is None or a['host'] in hosts)),
                sorted(r[0] for r in rows), (s, e, hosts))

    def test_dates_to_the_microsecond(self):
        # The window reads give dates as integer microseconds (computed by
        # the database): exact, fraction or not, before or after the
        # epoch's 2**31 seconds.
        dates = [(NOW + datetime.timedelta(microseconds=123457),
                  NOW + HOUR + datetime.timedelta(microseconds=999999)),
                 (NOW + 2 * HOUR, NOW + 3 * HOUR),
                 (datetime.datetime(2039, 1, 19, 3, 14, 8, 1),
                  datetime.datetime(2039, 1, 19, 5, 0, 0, 500000))]
        for n, (start, end) in enumerate(dates):
            self._lease(NOW, end + HOUR, [
                {'host': 'host%d' % n, 'start_date': start,
                 'end_date': end}])
        with self.db.reader() as session:
            rows = api.window_allocation_rows(
                session, NOW, admission.DEAD_RESERVATIONS,
                admission.DEAD_LEASES, NOW, dates[-1][1])
            items = api.window_allocation_items(
                session, NOW, admission.DEAD_RESERVATIONS,
                admission.DEAD_LEASES, NOW, dates[-1][1], live=False)
        self.assertEqual(sorted(dates), sorted((r[3], r[4]) for r in rows))
        self.assertEqual(
            sorted((calendar.to_us(s), calendar.to_us(e)) for s, e in dates),
            sorted((i[1], i[2]) for i in items))
        self.assertEqual({int}, {type(i[1]) for i in items})

    def test_span_class_follows_date_changes(self):
        lease = self._lease(NOW, NOW + 10000 * HOUR, [
            {'host': 'host1', 'start_date': NOW + HOUR,
             'end_date': NOW + 2 * HOUR}])
        [alloc] = api.allocation_list(self.db, lease_id=lease['id'])
        self.assertNotIn('span_class', alloc)
        window = (NOW + 5000 * HOUR, NOW + 5001 * HOUR)

        def found():
            with self.db.reader() as session:
                return [r[0] for r in api.window_allocation_rows(
                    session, NOW, admission.DEAD_RESERVATIONS,
                    admission.DEAD_LEASES, *window)]

        self.assertEqual([], found())
        # Stretched to cover the window: found (its class moved with it).
        api.allocation_update(self.db, alloc['id'],
                              {'end_date': NOW + 6000 * HOUR})
        self.assertEqual([alloc['id']], found())
        self.assertRaises(api.InvalidField, api.allocation_update, self.db,
                          alloc['id'], {'span_class': 0})

    def test_linked_instances_and_registered_hosts(self):
        self._lease(NOW - HOUR, NOW + HOUR, [
            {'host': 'host1', 'start_date': NOW - HOUR,
             'end_date': NOW + HOUR}], status='ACTIVE', resource_id='srv1',
            res_status='active')
        self._lease(NOW - HOUR, NOW + 2 * HOUR, resource_id='srv2')
        self._lease(NOW + HOUR, NOW + 2 * HOUR)         # not linked yet
        self._lease(NOW - HOUR, NOW + HOUR, resource_id='gone',
                    res_status='deleted')
        self._lease(NOW - 2 * HOUR, NOW - HOUR, resource_id='over')
        with self.db.reader() as session:
            rows = api.linked_instance_rows(
                session, NOW, admission.LIVE_RESERVATIONS,
                admission.DEAD_LEASES, types.SERVER_TYPES)
        self.assertEqual([('srv1', 'host1'), ('srv2', None)],
                         sorted((r[1], r[7]) for r in rows))
        self.assertEqual({}, api.registered_hostnames(self.db))
        api.host_create(self.db, {
            'hypervisor_hostname': 'node1', 'service_host': 'host1',
            'vcpus': 8, 'memory_mb': 16384, 'local_gb': 100,
            'hypervisor_type': 'fake'})
        self.assertEqual({'node1': 'host1'},
                         api.registered_hostnames(self.db))
        self.assertEqual({}, api.registered_hostnames(self.db, ['node2']))


class WindowReadSQLiteTest(_WindowReadTests, base.SQLiteTestCase):
    pass


class WindowReadMySQLTest(_WindowReadTests, base.MySQLTestCase):
    pass


class WindowReadPostgreSQLTest(_WindowReadTests, base.PostgreSQLTestCase):
    pass


class AdmissionSQLiteTest(_AdmissionTests, base.SQLiteTestCase):
    pass


class AdmissionMySQLTest(_AdmissionTests, base.MySQLTestCase):
    pass


class AdmissionPostgreSQLTest(_AdmissionTests, base.PostgreSQLTestCase):
    pass
