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
"""The scheduler's snapshot follows the change journal (lease_changes).

Every kind of change made through nova_lease.db.api is seen by the next
request, without a full reload (the TTL is an hour here), and the
patched snapshot equals one read from scratch; on SQLite,
MariaDB/MySQL and PostgreSQL.
"""

import contextlib
import datetime
import threading
import time

from oslo_utils import timeutils
import sqlalchemy as sa

from nova_lease import calendar
from nova_lease.db import api
from nova_lease.db import changes
from nova_lease.db import models
from nova_lease.scheduler import snapshot_cache
from nova_lease.scheduler import snapshot_reads
from tests.functional.db import base

NOW = datetime.datetime(2030, 1, 1)
HOUR = datetime.timedelta(hours=1)
TTL = 3600


class _JournalTests(object):

    def setUp(self):
        super().setUp()
        timeutils.set_time_override(NOW)
        self.addCleanup(timeutils.clear_time_override)
        self.cache = snapshot_cache.SnapshotCache()

    def _lease(self, start=NOW + HOUR, end=NOW + 3 * HOUR, host='host1',
               status='PENDING', resource_id=None, name='l', events=()):
        return api.lease_create(self.db, {
            'name': name, 'project_id': 'p', 'start_date': start,
            'end_date': end, 'status': status},
            reservations=[{
                'resource_type': 'virtual:instance', 'status': 'pending',
                'resource_id': resource_id,
                'properties': {'vcpus': 2, 'memory_mb': 512, 'disk_gb': 1},
                'allocations': [{
                    'host': host, 'start_date': start, 'end_date': end,
                    'vcpus': 2, 'memory_mb': 512, 'disk_gb': 1}]}],
            events=events)

    def _same_as_full_load(self, snap):
        full = snapshot_reads.load(self.db, NOW)
        self.assertEqual(sorted(full.items), sorted(snap.items))
        self.assertEqual(dict(full.reservations), dict(snap.reservations))
        self.assertEqual(full.servers, snap.servers)
        self.assertEqual(full.server_rows, snap.server_rows)
        self.assertEqual({k: sorted(v) for k, v in full.allocations.items()},
                         {k: sorted(v) for k, v in snap.allocations.items()})
        self.assertEqual({k: sorted(v) for k, v in full.host_items.items()},
                         {k: sorted(v) for k, v in snap.host_items.items()})
        self.assertEqual({k: sorted(v) for k, v in full.by_lease.items()},
                         {k: sorted(v) for k, v in snap.by_lease.items()})
        hosts = ['host1', 'host2', 'host3']
        cals = [s.calendar or calendar.Calendar({}) for s in (full, snap)]
        for start, end in ((NOW, NOW + HOUR), (NOW, None),
                           (NOW + 2 * HOUR, NOW + 5 * HOUR)):
            demand = calendar.Demand(1)
            self.assertEqual(*[
                [c.peak(h, start, end) for h in hosts] for c in cals])
            self.assertEqual(*[c.next_demand_starts(start, hosts)
                               for c in cals])
            self.assertEqual(*[c.slack_seconds(demand, start, end, hosts)
                               for c in cals])

    def _first(self, ttl=TTL):
        """The first snapshot (its full read runs in the background)."""
        return self.cache.get(self.db, NOW, ttl, wait=60)

    def _next(self, first):
        """The snapshot the next request sees: patched, not reloaded."""
        snap = self.cache.get(self.db, NOW, TTL)
        self.assertEqual(first.loaded_at, snap.loaded_at)
        self._same_as_full_load(snap)
        return snap

    def test_every_change_is_seen_by_the_next_request(self):
        kept = self._lease(name='kept', host='host2')
        first = self._first()
        self.assertIs(first, self.cache.get(self.db, NOW, TTL))

        # A lease admitted.
        lease = self._lease()
        rid = lease['reservations'][0]['id']
        snap = self._next(first)
        self.assertIn(rid, snap.reservations)
        self.assertEqual(['host1'],
                         [i.host for i in snap.allocations[rid]])
        self.assertIs(snap, self.cache.get(self.db, NOW, TTL))

        # Its end moved (the lease and its allocation).
        api.lease_update(self.db, lease['id'], {'end_date': NOW + 5 * HOUR})
        snap = self._next(first)
        self.assertEqual(NOW + 5 * HOUR, snap.reservations[rid].end)
        alloc = api.allocation_list(self.db, reservation_id=rid)[0]
        api.allocation_update(self.db, alloc['id'],
                              {'end_date': NOW + 5 * HOUR})
        snap = self._next(first)
        self.assertEqual(NOW + 5 * HOUR, snap.allocations[rid][0].end)

        # A server linked to it.
        api.reservation_update(self.db, rid, {'resource_id': 'srv'})
        snap = self._next(first)
        self.assertEqual(rid, snap.servers['srv'].id)
        self.assertEqual(2, snap.server_rows['srv'][2])

        # Statuses: the lease starts, the reservation follows.
        api.lease_update(self.db, lease['id'], {'status': 'ACTIVE'})
        snap = self._next(first)
        self.assertEqual('ACTIVE', snap.servers['srv'].lease_status)
        api.reservation_update(self.db, rid, {'status': 'active'})
        self._next(first)

        # A second reservation on the same lease, then its allocation
        # deleted, then the reservation.
        res2 = api.reservation_create(self.db, {
            'lease_id': lease['id'], 'resource_type': 'virtual:instance',
            'properties': {}, 'allocations': [{
                'host': 'host3', 'start_date': NOW + HOUR,
                'end_date': NOW + 2 * HOUR, 'vcpus': 1}]})
        snap = self._next(first)
        self.assertEqual(['host3'],
                         [i.host for i in snap.allocations[res2['id']]])
        api.allocation_create(self.db, {
            'reservation_id': res2['id'], 'host': 'host1',
            'start_date': NOW, 'end_date': NOW + HOUR, 'vcpus': 1})
        snap = self._next(first)
        self.assertEqual(2, len(snap.allocations[res2['id']]))
        a3 = api.allocation_list(self.db, reservation_id=res2['id'])[0]
        api.allocation_destroy(self.db, a3['id'])
        snap = self._next(first)
        self.assertEqual(1, len(snap.allocations[res2['id']]))
        api.allocation_destroy_by_reservation(self.db, res2['id'])
        snap = self._next(first)
        self.assertNotIn(res2['id'], snap.allocations)
        api.reservation_destroy(self.db, res2['id'])
        snap = self._next(first)
        self.assertNotIn(res2['id'], snap.reservations)

        # A reservation deleted by status, a lease terminated, a lease
        # deleted.
        other = self._lease(name='other', host='host3')
        orid = other['reservations'][0]['id']
        snap = self._next(first)
        self.assertIn(orid, snap.reservations)
        api.reservation_update(self.db, orid, {'status': 'deleted'})
        snap = self._next(first)
        self.assertNotIn(orid, snap.reservations)
        self.assertNotIn('host3', snap.host_items)
        api.lease_update(self.db, lease['id'], {'status': 'TERMINATED'})
        snap = self._next(first)
        self.assertNotIn(rid, snap.reservations)
        self.assertNotIn('srv', snap.servers)
        api.lease_destroy(self.db, kept['id'])
        snap = self._next(first)
        self.assertEqual({}, dict(snap.reservations))
        self.assertEqual((), snap.items)

    def test_engine_status_changes_are_seen(self):
        lease = self._lease(events=[
            {'event_type': 'start_lease', 'time': NOW + HOUR},
            {'event_type': 'end_lease', 'time': NOW + 3 * HOUR}])
        rid = lease['reservations'][0]['id']
        first = self._first()
        self.assertEqual('PENDING', first.reservations[rid].lease_status)
        events = api.engine_claim_events(
            self.db, 'engine-1', NOW + HOUR, 10,
            on_claim=lambda event, lease: 'STARTING')
        self.assertEqual(1, len(events))
        snap = self._next(first)
        self.assertEqual('STARTING', snap.reservations[rid].lease_status)
        api.engine_complete_events(self.db, 'engine-1', [{
            'event_id': events[0]['id'], 'lease_id': lease['id'],
            'status': 'DONE', 'lease_status': 'ACTIVE',
            'lease_expected': ['STARTING'], 'reservation_status': 'active',
            'reservation_expected': ['pending']}], now=NOW + HOUR)
        snap = self._next(first)
        self.assertEqual('ACTIVE', snap.reservations[rid].lease_status)
        events = api.engine_claim_events(self.db, 'engine-1',
                                         NOW + 3 * HOUR, 10)
        api.engine_complete_events(self.db, 'engine-1', [{
            'event_id': events[0]['id'], 'lease_id': lease['id'],
            'status': 'DONE', 'lease_status': 'TERMINATED',
            'lease_expected': ['ACTIVE'], 'reservation_status': 'deleted',
            'reservation_expected': ['active']}], now=NOW + 3 * HOUR)
        snap = self._next(first)
        self.assertNotIn(rid, snap.reservations)
        self.assertEqual((), snap.items)

    def test_unrelated_updates_are_not_journaled(self):
        lease = self._lease()
        first = self._first()
        api.lease_update(self.db, lease['id'], {'status_reason': 'why'})
        api.reservation_update(self.db, lease['reservations'][0]['id'],
                               {'aggregate_id': 3})
        self.assertIs(first, self.cache.get(self.db, NOW, TTL))

    def test_pruning(self):
        timeutils.set_time_override(NOW - HOUR)
        old = self._lease(name='old')
        timeutils.set_time_override(NOW)
        new = self._lease(name='new')
        first = self._first()
        self.assertEqual(0, api.change_prune(self.db, NOW - HOUR))
        self.assertEqual(1, api.change_prune(self.db, NOW))
        # The probe moved (a row left the window): nothing to read again.
        snap = self._next(first)
        for lease in (old, new):
            self.assertIn(lease['reservations'][0]['id'], snap.reservations)
        self.assertIs(snap, self.cache.get(self.db, NOW, TTL))
        # Every row pruned: the journal's top went back, read in full (in
        # the background: no snapshot meanwhile).
        self.assertEqual(1, api.change_prune(self.db, NOW + HOUR))
        self.assertIsNone(self.cache.get(self.db, NOW, TTL))
        again = self.cache.get(self.db, NOW, TTL, wait=60)
        self.assertNotEqual(first.loaded_at, again.loaded_at)
        self._same_as_full_load(again)

    def test_writers_prune_old_rows(self):
        old = NOW - api.CHANGE_RETENTION - HOUR
        timeutils.set_time_override(old)
        self._lease(name='old')
        timeutils.set_time_override(NOW)
        self.patch(changes, 'CHANGE_PRUNE_EVERY', 1)
        self._lease(name='new')
        with self.db.reader() as session:
            times = list(session.execute(
                sa.select(models.LEASE_CHANGES.c.created_at)).scalars())
        self.assertEqual([NOW], times)

    def test_full_read_equals_the_two_query_read(self):
        # The full read (one query, values shared) holds what the
        # windowed read of admission control reads with two.
        self._lease(name='pending', host='host1')
        self._lease(name='running', host='host2', status='ACTIVE',
                    start=NOW - HOUR, resource_id='server-1')
        self._lease(name='ended', start=NOW - 3 * HOUR, end=NOW - HOUR)
        dead = self._lease(name='dead', host='host3')
        api.reservation_update(self.db, dead['reservations'][0]['id'],
                               {'status': 'deleted'})
        api.lease_create(self.db, {
            'name': 'hosts', 'project_id': 'q', 'start_date': NOW - HOUR,
            'end_date': NOW + 5 * HOUR, 'status': 'ACTIVE'},
            reservations=[{
                'resource_type': 'physical:host', 'status': 'active',
                'allocations': [{
                    'host': host, 'start_date': NOW - HOUR,
                    'end_date': NOW + 5 * HOUR, 'whole_host': True}
                    for host in ('host4', 'host5')]}, {
                'resource_type': 'virtual:instance', 'status': 'active',
                'resource_id': 'server-2',
                'properties': {'vcpus': 1, 'memory_mb': 256,
                               'disk_gb': 2}}])
        # An allocation that ended, in a live lease.
        api.lease_create(self.db, {
            'name': 'moved', 'project_id': 'p', 'start_date': NOW - HOUR,
            'end_date': NOW + HOUR, 'status': 'ACTIVE'},
            reservations=[{
                'resource_type': 'virtual:instance', 'status': 'active',
                'resource_id': 'server-3',
                'allocations': [{
                    'host': 'host1', 'start_date': NOW - HOUR,
                    'end_date': NOW, 'vcpus': 3}]}])
        full = snapshot_reads.load(self.db, NOW)
        with self.db.reader() as session:
            two = snapshot_reads.read(session, NOW, start=NOW)
        self.assertEqual(sorted(two.items), sorted(full.items))
        self.assertEqual(dict(two.reservations), dict(full.reservations))
        self.assertEqual(two.servers, full.servers)
        self.assertEqual(two.server_rows, full.server_rows)
        self.assertEqual({k: sorted(v) for k, v in two.allocations.items()},
                         {k: sorted(v) for k, v in full.allocations.items()})
        self.assertEqual({k: sorted(v) for k, v in two.host_items.items()},
                         {k: sorted(v) for k, v in full.host_items.items()})
        self.assertEqual({k: sorted(v) for k, v in two.by_lease.items()},
                         {k: sorted(v) for k, v in full.by_lease.items()})
        self.assertEqual({'server-1', 'server-2', 'server-3'},
                         set(full.servers))
        self.assertEqual(['host1', 'host2', 'host4', 'host5'],
                         sorted(full.host_items))
        self.assertEqual(calendar.Demand(1, 256, 2),
                         full.servers['server-2'].size)

    def _wait_for_another(self, old, ttl):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            snap = self.cache.get(self.db, NOW, ttl)
            if snap is not None and snap is not old and \
                    snap.loaded_at != old.loaded_at:
                return snap
            time.sleep(0.01)
        self.fail('no new full read')

    def test_old_snapshot_is_reloaded(self):
        # Older than half the journal's retention: read in full, whatever
        # the TTL (in the background: the old one, still brought up to
        # date by the journal, is used meanwhile).
        retention = api.CHANGE_RETENTION.total_seconds()
        first = self._first(ttl=10 ** 9)
        release = threading.Event()
        real = snapshot_reads.load

        def slow_load(*args):
            release.wait(60)
            return real(*args)

        self.patch(snapshot_reads, 'load', slow_load)
        self.addCleanup(release.set)
        first.loaded_at -= retention * 0.6
        self._lease(name='meanwhile')
        snap = self.cache.get(self.db, NOW, 10 ** 9)
        self.assertEqual(first.loaded_at, snap.loaded_at)
        self.assertEqual(1, len(snap.reservations))
        release.set()
        new = self._wait_for_another(first, 10 ** 9)
        self._same_as_full_load(new)

    def test_replaced_snapshot_is_taken_apart_once_unused(self):
        # Freed a bit at a time by the background thread, once no request
        # uses it (or a version of it) any more.
        self._lease(name='a')
        self._lease(name='b', host='host2')
        self.patch(snapshot_cache, 'RETIRE_POLL', 0.01)
        first = self._first()
        parts = first.parts()
        in_use = self.cache.get(self.db, NOW, TTL)
        self.assertIs(first, in_use)
        first.loaded_at -= TTL
        new = self._wait_for_another(first, TTL)
        self.assertEqual(2, len(new.reservations))
        time.sleep(0.2)
        self.assertTrue(all(parts[1::2][:3]))   # the shared bases
        self.assertEqual(2, len(in_use.reservations))
        del first, in_use
        deadline = time.monotonic() + 30
        while any(parts) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertFalse(any(parts))
        self._same_as_full_load(self.cache.get(self.db, NOW, TTL))

    def test_failed_full_reads_back_off(self):
        calls = []
        real = snapshot_reads.load

        def failing(*args):
            calls.append(time.monotonic())
            if len(calls) < 3:
                raise RuntimeError('full read failed (test)')
            return real(*args)

        self.patch(snapshot_reads, 'load', failing)
        self.patch(snapshot_cache, 'RETRY_FIRST', 0.2)
        self.assertIsNone(self.cache.get(self.db, NOW, TTL, wait=60))
        # Not tried again before the back-off: 0.2 s, then 0.4 s.
        self.assertIsNone(self.cache.get(self.db, NOW, TTL, wait=60))
        self.assertEqual(1, len(calls))
        deadline = time.monotonic() + 30
        snap = None
        while snap is None and time.monotonic() < deadline:
            snap = self.cache.get(self.db, NOW, TTL, wait=60)
            time.sleep(0.01)
        self.assertIsNotNone(snap)
        self.assertEqual(3, len(calls))
        self.assertGreaterEqual(calls[1] - calls[0], 0.2)
        self.assertGreaterEqual(calls[2] - calls[1], 0.4)

    def test_expired_snapshot_is_not_used(self):
        # Older than 3/4 of the retention, the journal rows it would need
        # may be pruned: no snapshot until the new full read is there.
        retention = api.CHANGE_RETENTION.total_seconds()
        first = self._first(ttl=10 ** 9)
        first.loaded_at -= retention * 0.8
        self.assertIsNone(self.cache.get(self.db, NOW, 10 ** 9))
        self._wait_for_another(first, 10 ** 9)

    def test_ttl_starts_a_full_read_beside_the_snapshot(self):
        first = self._first(ttl=TTL)
        first.loaded_at -= TTL
        self.assertIs(first, self.cache.get(self.db, NOW, TTL))
        self._same_as_full_load(self._wait_for_another(first, TTL))


class _SQLiteTests(_JournalTests):

    def test_recreated_database_is_read_in_full(self):
        # SQLite hands the ids of deleted rows out again: a journal whose
        # rows differ from those the snapshot saw is another database.
        self._lease(name='a')
        first = self._first()
        with self.db.writer() as session:
            session.execute(models.LEASE_CHANGES.delete())
            session.execute(models.LEASES.delete())
        others = [self._lease(name='b'), self._lease(name='c')]
        # Nothing it holds can be trusted: no snapshot until the full
        # read (in the background) is there.
        self.assertIsNone(self.cache.get(self.db, NOW, TTL))
        snap = self.cache.get(self.db, NOW, TTL, wait=60)
        self.assertNotEqual(first.loaded_at, snap.loaded_at)
        self.assertEqual(sorted(o['reservations'][0]['id'] for o in others),
                         sorted(snap.reservations))


class _ConcurrentTests(_JournalTests):
    """Transactions that commit in another order than they took ids."""

    @contextlib.contextmanager
    def _writer_in_flight(self, reservations=()):
        """While the body runs, a lease 'slow' (``self._slow_lease``) is
        written by another thread whose transaction stays open; it
        commits after the body.
        """
        inserted, release, errors = (threading.Event(), threading.Event(),
                                     [])

        def slow():
            try:
                with self.db.writer() as session:
                    self._slow_lease = api.lease_create(session, {
                        'name': 'slow', 'project_id': 'p',
                        'start_date': NOW + HOUR,
                        'end_date': NOW + 2 * HOUR},
                        reservations=reservations)
                    inserted.set()
                    release.wait(60)
            except Exception as e:  # reported below
                errors.append(e)
                inserted.set()

        thread = threading.Thread(target=slow)
        thread.start()
        try:
            self.assertTrue(inserted.wait(60))
            yield
        finally:
            release.set()
            thread.join(60)
        self.assertEqual([], errors)

    def test_pruning_writer_does_not_wait_for_one_in_flight(self):
        # A writer that prunes the journal while another writer's
        # transaction (with its new journal row) is still open: the prune
        # must not wait for it (on MariaDB a range delete did, up to the
        # lock wait timeout, and failed the lease).
        timeutils.set_time_override(NOW - api.CHANGE_RETENTION - HOUR)
        self._lease(name='old')
        timeutils.set_time_override(NOW)
        with self._writer_in_flight():
            self.patch(changes, 'CHANGE_PRUNE_EVERY', 1)
            began = time.monotonic()
            self._lease(name='pruning', host='host2')
            self.assertLess(time.monotonic() - began, 10)
        names = {lease['name'] for lease in api.lease_list(self.db)}
        self.assertEqual({'old', 'slow', 'pruning'}, names)
        with self.db.reader() as session:
            times = sorted(session.execute(
                sa.select(models.LEASE_CHANGES.c.created_at)).scalars())
        self.assertEqual([NOW, NOW], times)

    def test_out_of_order_commit_is_seen(self):
        first = self._first()
        with self._writer_in_flight(reservations=[{
                'resource_type': 'virtual:instance',
                'allocations': [{
                    'host': 'host1', 'start_date': NOW + HOUR,
                    'end_date': NOW + 2 * HOUR, 'vcpus': 1}]}]):
            fast = self._lease(name='fast', host='host2')
            snap = self._next(first)
            self.assertIn(fast['reservations'][0]['id'], snap.reservations)
            self.assertEqual(1, len(snap.reservations))
        with self.db.reader() as session:
            ids = dict(session.execute(sa.select(
                models.LEASE_CHANGES.c.lease_id,
                models.LEASE_CHANGES.c.id)).all())
        # The slow one took the lower id, and committed last.
        self.assertLess(ids[self._slow_lease['id']],
                        ids[fast['id']])
        snap = self._next(first)
        self.assertIn(self._slow_lease['reservations'][0]['id'],
                      snap.reservations)
        self.assertEqual(2, len(snap.reservations))


class JournalSQLiteTest(_SQLiteTests, base.SQLiteTestCase):
    pass


class JournalMySQLTest(_ConcurrentTests, base.MySQLTestCase):
    pass


class JournalPostgreSQLTest(_ConcurrentTests, base.PostgreSQLTestCase):
    pass
