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
"""The engine's claiming functions of nova_lease.db.api, on every backend."""

import datetime

import sqlalchemy as sa

from nova_lease.db import api
from nova_lease import lease_events
from tests.functional.db import base
from tests import threads

T0 = datetime.datetime(2030, 1, 1, 12, 0, 0)


def _s(n):
    return datetime.timedelta(seconds=n)


class _EngineDbTests(object):

    def _lease(self, start, end, before_end=None, name='l', status='PENDING',
               reservations=1):
        return api.lease_create(
            self.db, {'name': name, 'project_id': 'p', 'start_date': start,
                      'end_date': end, 'status': status},
            reservations=[{'resource_type': 'noop',
                           'resource_id': '%s-%d' % (name, i)}
                          for i in range(reservations)],
            events=lease_events.lease_events(start, end, before_end))

    def _events(self, lease):
        return {e['event_type']: e
                for e in api.event_list(self.db, lease_id=lease['id'])}

    def _claim(self, now, limit=100, engine='e1', on_claim=None):
        return api.engine_claim_events(self.db, engine, now, limit,
                                       on_claim=on_claim)

    def test_claim_due_only_in_order_with_lease(self):
        a = self._lease(T0, T0 + _s(60), name='a')
        b = self._lease(T0 - _s(10), T0, name='b')
        self._lease(T0 + _s(1), T0 + _s(60), name='future')
        seen = []

        def on_claim(event, lease):
            seen.append((event['event_type'], lease['status']))
            return 'STARTING' if event['event_type'] == 'start_lease' \
                else None

        claimed = self._claim(T0, on_claim=on_claim)
        # b's start (T0-10), then a's start (T0); b's end (T0) waits for
        # b's start to finish.
        self.assertEqual([(b['id'], 'start_lease'), (a['id'], 'start_lease')],
                         [(e['lease_id'], e['event_type']) for e in claimed])
        self.assertEqual([('start_lease', 'PENDING')] * 2, seen)
        for event in claimed:
            self.assertEqual(('IN_PROGRESS', 'e1', T0, 1),
                             (event['status'], event['claimed_by'],
                              event['claimed_at'], event['attempts']))
            self.assertEqual('STARTING', event['lease']['status'])
            self.assertEqual(1, len(event['lease']['reservations']))
            self.assertEqual('noop',
                             event['lease']['reservations'][0]
                             ['resource_type'])
        self.assertEqual('STARTING', api.lease_get(self.db, a['id'])['status'])
        self.assertEqual([], self._claim(T0))

    def test_equal_times_order_across_leases(self):
        # At equal times: before_end, end, start.
        ending = self._lease(T0 - _s(60), T0, before_end=T0, name='ending')
        starting = self._lease(T0, T0 + _s(60), name='starting')
        for event in self._events(ending).values():
            if event['event_type'] == 'start_lease':
                api.event_update(self.db, event['id'], {'status': 'DONE'})
        claimed = self._claim(T0)
        self.assertEqual(
            [(ending['id'], 'before_end_lease'),
             (starting['id'], 'start_lease')],
            [(e['lease_id'], e['event_type']) for e in claimed])
        api.engine_complete_events(self.db, 'e1', [
            {'event_id': claimed[0]['id'], 'lease_id': ending['id'],
             'status': 'DONE'}], now=T0)
        claimed = self._claim(T0)
        self.assertEqual([(ending['id'], 'end_lease')],
                         [(e['lease_id'], e['event_type']) for e in claimed])

    def test_start_waits_for_an_end_on_its_hosts(self):
        # 'ending' holds host h1 until T0, 'next' takes it at T0; 'other'
        # starts at T0 on h2 and does not wait.
        leases = {}
        for name, start, end, host in (('ending', T0 - _s(60), T0, 'h1'),
                                       ('next', T0, T0 + _s(60), 'h1'),
                                       ('other', T0, T0 + _s(60), 'h2')):
            leases[name] = api.lease_create(
                self.db, {'name': name, 'project_id': 'p',
                          'start_date': start, 'end_date': end,
                          'status': 'PENDING'},
                reservations=[{'resource_type': 'noop', 'allocations': [{
                    'host': host, 'start_date': start, 'end_date': end,
                    'whole_host': True}]}],
                events=lease_events.lease_events(start, end))
        for event in self._events(leases['ending']).values():
            if event['event_type'] == 'start_lease':
                api.event_update(self.db, event['id'], {'status': 'DONE'})
        claimed = self._claim(T0)
        self.assertEqual(
            [(leases['ending']['id'], 'end_lease'),
             (leases['other']['id'], 'start_lease')],
            [(e['lease_id'], e['event_type']) for e in claimed])
        # Still running: the start waits; done: it runs.
        self.assertEqual([], self._claim(T0 + _s(1)))
        api.engine_complete_events(self.db, 'e1', [
            {'event_id': claimed[0]['id'], 'lease_id': leases['ending']['id'],
             'status': 'DONE'}], now=T0 + _s(1))
        self.assertEqual([(leases['next']['id'], 'start_lease')],
                         [(e['lease_id'], e['event_type'])
                          for e in self._claim(T0 + _s(1))])

    def test_end_waits_for_start_even_when_retried(self):
        lease = self._lease(T0, T0 + _s(10), name='x')
        start, = self._claim(T0)
        # The start fails, retry in 60 s, after the end time.
        api.engine_complete_events(self.db, 'e1', [
            {'event_id': start['id'], 'lease_id': lease['id'],
             'status': 'UNDONE', 'last_error': 'boom',
             'next_attempt_at': T0 + _s(60)}], now=T0)
        self.assertEqual([], self._claim(T0 + _s(30)))
        self.assertEqual(T0 + _s(60), api.engine_next_event_time(self.db))
        start, = self._claim(T0 + _s(60))
        self.assertEqual(('start_lease', 2),
                         (start['event_type'], start['attempts']))
        api.engine_complete_events(self.db, 'e1', [
            {'event_id': start['id'], 'lease_id': lease['id'],
             'status': 'ERROR', 'last_error': 'boom'}], now=T0 + _s(60))
        # A start in ERROR no longer holds the end back.
        end, = self._claim(T0 + _s(60))
        self.assertEqual('end_lease', end['event_type'])

    def test_next_event_time(self):
        self.assertIsNone(api.engine_next_event_time(self.db))
        lease = self._lease(T0, T0 + _s(10))
        self.assertEqual(T0, api.engine_next_event_time(self.db))
        self._claim(T0)
        # The end is blocked by the claimed start: not counted.
        self.assertIsNone(api.engine_next_event_time(self.db))
        self._lease(T0 + _s(5), T0 + _s(100), name='other')
        self.assertEqual(T0 + _s(5), api.engine_next_event_time(self.db))
        self.assertIsNotNone(lease)

    def test_concurrent_claims_never_overlap(self):
        with self.db.writer() as session:
            for i in range(60):
                api.lease_create(
                    session, {'name': 'c%d' % i, 'project_id': 'p',
                              'start_date': T0 - _s(i % 7),
                              'end_date': T0 + _s(3600), 'status': 'PENDING'},
                    events=lease_events.lease_events(
                        T0 - _s(i % 7), T0 + _s(3600)))

        def claimer(i):
            got = []
            while True:
                batch = api.engine_claim_events(self.db, 'e%d' % i, T0, 4)
                if not batch:
                    return got
                got.extend(e['id'] for e in batch)

        results = threads.race(6, claimer)
        self.assertEqual([], threads.errors(results))
        all_ids = [i for got in results for i in got]
        self.assertEqual(60, len(all_ids))
        self.assertEqual(60, len(set(all_ids)))
        events = api.event_list(self.db, statuses='IN_PROGRESS')
        self.assertEqual(60, len(events))
        for event in events:
            self.assertIn(event['id'],
                          results[int(event['claimed_by'][1:])])

    def test_complete_events(self):
        lease = self._lease(T0, T0 + _s(10), reservations=2)
        start, = self._claim(
            T0, on_claim=lambda event, lease: 'STARTING')
        done = api.engine_complete_events(self.db, 'e1', [
            {'event_id': start['id'], 'lease_id': lease['id'],
             'status': 'DONE', 'lease_status': 'ACTIVE',
             'lease_expected': ['STARTING'], 'status_reason': None,
             'reservation_status': 'active',
             'reservation_expected': ['pending']}], now=T0 + _s(1))
        self.assertEqual([start['id']], done)
        got = api.lease_get(self.db, lease['id'])
        self.assertEqual('ACTIVE', got['status'])
        self.assertEqual(['active', 'active'],
                         [r['status'] for r in got['reservations']])
        event = self._events(lease)['start_lease']
        self.assertEqual(('DONE', 'e1', None),
                         (event['status'], event['claimed_by'],
                          event['last_error']))
        # Not expected status: the lease does not move.
        end, = self._claim(T0 + _s(10))
        api.engine_complete_events(self.db, 'e1', [
            {'event_id': end['id'], 'lease_id': lease['id'],
             'status': 'ERROR', 'last_error': 'bad',
             'lease_status': 'TERMINATED',
             'lease_expected': ['TERMINATING'],
             'status_reason': 'end failed: bad'}])
        got = api.lease_get(self.db, lease['id'])
        self.assertEqual(('ACTIVE', 'end failed: bad'),
                         (got['status'], got['status_reason']))
        self.assertEqual(('ERROR', 'bad'),
                         (self._events(lease)['end_lease']['status'],
                          self._events(lease)['end_lease']['last_error']))

    def test_complete_skips_lost_claims(self):
        lease = self._lease(T0, T0 + _s(10))
        start, = self._claim(T0, engine='dead')
        api.engine_recover_events(self.db, T0 + _s(301), 300)
        again, = self._claim(T0 + _s(301), engine='alive')
        self.assertEqual((start['id'], 2), (again['id'], again['attempts']))
        result = {'event_id': start['id'], 'lease_id': lease['id'],
                  'status': 'DONE', 'lease_status': 'ACTIVE',
                  'lease_expected': ['PENDING', 'STARTING']}
        self.assertEqual([], api.engine_complete_events(
            self.db, 'dead', [result]))
        self.assertEqual('PENDING', api.lease_get(self.db,
                                                  lease['id'])['status'])
        self.assertEqual([start['id']], api.engine_complete_events(
            self.db, 'alive', [result]))
        self.assertEqual('ACTIVE', api.lease_get(self.db,
                                                 lease['id'])['status'])

    def test_retry_releases_claim(self):
        lease = self._lease(T0, T0 + _s(100))
        start, = self._claim(T0)
        api.engine_complete_events(self.db, 'e1', [
            {'event_id': start['id'], 'lease_id': lease['id'],
             'status': 'UNDONE', 'last_error': 'HTTP 500',
             'next_attempt_at': T0 + _s(30),
             'status_reason': 'retrying'}], now=T0)
        event = self._events(lease)['start_lease']
        self.assertEqual(('UNDONE', None, None, 1, T0 + _s(30), 'HTTP 500'),
                         (event['status'], event['claimed_by'],
                          event['claimed_at'], event['attempts'],
                          event['next_attempt_at'], event['last_error']))
        self.assertEqual('retrying',
                         api.lease_get(self.db, lease['id'])['status_reason'])
        self.assertEqual([], self._claim(T0 + _s(29)))
        self.assertEqual(1, len(self._claim(T0 + _s(30))))

    def test_recover_only_stale_claims(self):
        old = self._lease(T0, T0 + _s(1000), name='old')
        self._claim(T0, engine='dead')
        new = self._lease(T0 + _s(200), T0 + _s(1000), name='new')
        self._claim(T0 + _s(200), engine='alive')
        stale = api.engine_recover_events(self.db, T0 + _s(301), 300)
        self.assertEqual([(old['id'], 'dead')],
                         [(e['lease_id'], e['claimed_by']) for e in stale])
        event = self._events(old)['start_lease']
        self.assertEqual(('UNDONE', None, 1), (event['status'],
                                               event['claimed_by'],
                                               event['attempts']))
        self.assertIn('claim by dead', event['last_error'])
        self.assertEqual('IN_PROGRESS',
                         self._events(new)['start_lease']['status'])

    def test_refresh_and_release(self):
        lease = self._lease(T0, T0 + _s(1000))
        start, = self._claim(T0, engine='e1')
        self.assertEqual(0, api.engine_refresh_claims(
            self.db, 'other', [start['id']], T0 + _s(100)))
        self.assertEqual(1, api.engine_refresh_claims(
            self.db, 'e1', [start['id']], T0 + _s(100)))
        self.assertEqual([], api.engine_recover_events(
            self.db, T0 + _s(301), 300))
        self.assertEqual([], api.engine_release_events(
            self.db, 'other', [start['id']], 'no'))
        self.assertEqual([start['id']], api.engine_release_events(
            self.db, 'e1', [start['id']], 'engine e1 stopped'))
        event = self._events(lease)['start_lease']
        self.assertEqual(('UNDONE', None, 0, 'engine e1 stopped'),
                         (event['status'], event['claimed_by'],
                          event['attempts'], event['last_error']))

    def _round_trips(self, leases):
        """Statements and transactions of claiming the due starts of
        ``leases`` new leases, checking their claims and recording them.
        """
        for i in range(leases):
            self._lease(T0 - _s(i), T0 + _s(60), name='n%d-%d' % (leases, i))
        statements, transactions = [], []
        engine = self.db.engine
        listeners = (
            ('before_cursor_execute',
             lambda conn, cursor, statement, *a: statements.append(
                 statement)),
            ('commit', lambda conn: transactions.append('commit')),
            ('rollback', lambda conn: transactions.append('rollback')))
        for name, listener in listeners:
            sa.event.listen(engine, name, listener)
        try:
            claimed = self._claim(
                T0, limit=1000,
                on_claim=lambda event, lease: 'STARTING')
            held = api.engine_claims_held(
                self.db, 'e1', [(e['id'], e['attempts']) for e in claimed])
            done = api.engine_complete_events(self.db, 'e1', [
                {'event_id': e['id'], 'lease_id': e['lease_id'],
                 'status': 'DONE', 'lease_status': 'ACTIVE',
                 'lease_expected': ['STARTING'],
                 'reservation_status': 'active',
                 'reservation_expected': ['pending']} for e in claimed],
                now=T0)
        finally:
            for name, listener in listeners:
                sa.event.remove(engine, name, listener)
        self.assertEqual(leases, len(claimed))
        self.assertEqual(leases, len(held))
        self.assertEqual(leases, len(done))
        for lease in api.lease_list(self.db):
            if lease['name'].startswith('n%d-' % leases):
                self.assertEqual('ACTIVE', lease['status'])
        return len(statements), len(transactions)

    def test_a_batch_of_events_costs_the_round_trips_of_one(self):
        # Claiming, checking and recording events costs the same
        # statements and transactions for 3 events as for 60: batches.
        few = self._round_trips(3)
        many = self._round_trips(60)
        self.assertEqual(few, many)
        statements, transactions = many
        # One transaction each; SQLite's also count their BEGIN.
        self.assertLessEqual(statements,
                             21 if self.BACKEND == 'sqlite' else 15)
        self.assertEqual(3, transactions)


class EngineDbSQLiteTest(_EngineDbTests, base.SQLiteTestCase):
    pass


class EngineDbMySQLTest(_EngineDbTests, base.MySQLTestCase):
    pass


class EngineDbPostgreSQLTest(_EngineDbTests, base.PostgreSQLTestCase):
    pass
