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
"""Every function of nova_lease.db.api, on every backend."""

import datetime
import threading
import time

from oslo_config import cfg
from oslo_config import fixture as config_fixture
from oslo_serialization import jsonutils
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa
from sqlalchemy import orm

from nova_lease import conf as lease_conf
from nova_lease.db import api
from nova_lease.db import changes
from nova_lease.db import models
from nova_lease.db import transaction
from tests.functional.db import base
from tests import threads

T0 = datetime.datetime(2030, 1, 1, 12, 0, 0, 123456)
HOUR = datetime.timedelta(hours=1)


def _lease(**kw):
    values = {'name': 'lease1', 'project_id': 'p1', 'user_id': 'u1',
              'start_date': T0, 'end_date': T0 + 2 * HOUR}
    values.update(kw)
    return values


def _instance_reservation(resource_id='server1', **kw):
    values = {'resource_type': 'virtual:instance', 'resource_id': resource_id,
              'properties': {'vcpus': 2, 'memory_mb': 512, 'disk_gb': 1,
                             'extra_specs': {'hw:cpu_policy': 'shared'}}}
    values.update(kw)
    return values


def _allocation(host='host1', start=T0, end=T0 + 2 * HOUR, **kw):
    values = {'host': host, 'start_date': start, 'end_date': end,
              'vcpus': 2, 'memory_mb': 512, 'disk_gb': 1}
    values.update(kw)
    return values


def _events(start=T0, end=T0 + 2 * HOUR):
    return [{'event_type': 'start_lease', 'time': start},
            {'event_type': 'before_end_lease', 'time': end - HOUR},
            {'event_type': 'end_lease', 'time': end}]


class _QueryCounter(object):
    def __init__(self, engine):
        self.statements = []
        self.engine = engine

    def __enter__(self):
        sa.event.listen(self.engine, 'before_cursor_execute', self._count)
        return self

    def __exit__(self, *exc):
        sa.event.remove(self.engine, 'before_cursor_execute', self._count)

    def _count(self, conn, cursor, statement, *args):
        if statement.lstrip().upper().startswith('SELECT'):
            self.statements.append(statement)


class _LeaseTests(object):

    def test_create_and_get(self):
        created = api.lease_create(
            self.db, _lease(before_end_date=T0 + HOUR, on_end='shelve',
                            retries=2),
            reservations=[_instance_reservation(
                allocations=[_allocation()])],
            events=_events())
        self.assertTrue(uuidutils.is_uuid_like(created['id']))
        lease = api.lease_get(self.db, created['id'])
        self.assertEqual(created, lease)
        self.assertEqual('lease1', lease['name'])
        self.assertEqual('p1', lease['project_id'])
        self.assertEqual('u1', lease['user_id'])
        # Microseconds survive on every backend (MySQL: DATETIME(6)).
        self.assertEqual(T0, lease['start_date'])
        self.assertIsNone(lease['start_date'].tzinfo)
        self.assertEqual(T0 + 2 * HOUR, lease['end_date'])
        self.assertEqual(T0 + HOUR, lease['before_end_date'])
        self.assertEqual('PENDING', lease['status'])
        self.assertIsNone(lease['status_reason'])
        self.assertEqual('shelve', lease['on_end'])
        self.assertEqual(2, lease['retries'])
        self.assertIsInstance(lease['created_at'], datetime.datetime)
        self.assertIsNone(lease['updated_at'])

        [reservation] = lease['reservations']
        self.assertEqual(created['id'], reservation['lease_id'])
        self.assertEqual('virtual:instance', reservation['resource_type'])
        self.assertEqual('server1', reservation['resource_id'])
        self.assertEqual('pending', reservation['status'])
        self.assertEqual({'vcpus': 2, 'memory_mb': 512, 'disk_gb': 1,
                          'extra_specs': {'hw:cpu_policy': 'shared'}},
                         reservation['properties'])
        self.assertIsNone(reservation['aggregate_id'])
        self.assertNotIn('allocations', reservation)

        self.assertEqual(['start_lease', 'before_end_lease', 'end_lease'],
                         [e['event_type'] for e in lease['events']])
        for event in lease['events']:
            self.assertEqual('UNDONE', event['status'])
            self.assertEqual(0, event['attempts'])
            self.assertEqual(created['id'], event['lease_id'])
            self.assertIsNone(event['claimed_by'])

        [allocation] = api.allocation_list(self.db, lease_id=created['id'])
        self.assertEqual(reservation['id'], allocation['reservation_id'])
        self.assertEqual(
            {'host': 'host1', 'start_date': T0, 'end_date': T0 + 2 * HOUR,
             'vcpus': 2, 'memory_mb': 512, 'disk_gb': 1,
             'whole_host': False},
            {k: allocation[k] for k in ('host', 'start_date', 'end_date',
                                        'vcpus', 'memory_mb', 'disk_gb',
                                        'whole_host')})
        # Plain, JSON-friendly dicts.
        jsonutils.dumps(lease)

    def test_create_with_given_ids_and_top_level_allocations(self):
        lease_id = uuidutils.generate_uuid()
        res_id = uuidutils.generate_uuid()
        lease = api.lease_create(
            self.db, _lease(id=lease_id),
            reservations=[{'id': res_id, 'resource_type': 'physical:host',
                           'properties': {'min': 1, 'max': 2}}],
            allocations=[_allocation('h1', reservation_id=res_id,
                                     whole_host=True),
                         _allocation('h2', reservation_id=res_id,
                                     whole_host=True)])
        self.assertEqual(lease_id, lease['id'])
        self.assertEqual(res_id, lease['reservations'][0]['id'])
        self.assertIsNone(lease['reservations'][0]['resource_id'])
        allocations = api.allocation_list(self.db, reservation_id=res_id)
        self.assertEqual(['h1', 'h2'], [a['host'] for a in allocations])
        self.assertTrue(all(a['whole_host'] for a in allocations))

    def test_create_allocation_of_another_reservation_is_invalid(self):
        self.assertRaises(
            api.InvalidField, api.lease_create, self.db, _lease(),
            reservations=[_instance_reservation()],
            allocations=[_allocation(
                reservation_id=uuidutils.generate_uuid())])
        self.assertEqual([], api.lease_list(self.db))

    def test_create_unknown_field(self):
        e = self.assertRaises(api.InvalidField, api.lease_create, self.db,
                              _lease(colour='red'))
        self.assertIn('colour', str(e))
        self.assertRaises(api.InvalidField, api.lease_create, self.db,
                          _lease(), events=[{'event_type': 'start_lease',
                                             'time': T0, 'when': T0}])

    def test_create_duplicate_id(self):
        lease = api.lease_create(self.db, _lease())
        self.assertRaises(api.LeaseExists, api.lease_create, self.db,
                          _lease(id=lease['id'], name='other'))

    def test_create_is_atomic(self):
        first = api.lease_create(self.db, _lease(),
                                 reservations=[_instance_reservation()])
        taken = first['reservations'][0]['id']
        self.assertRaises(
            api.ReservationExists, api.lease_create, self.db,
            _lease(name='second'),
            reservations=[_instance_reservation(id=taken)],
            events=_events())
        self.assertEqual([first['id']],
                         [lease['id'] for lease in api.lease_list(self.db)])
        self.assertEqual(0, len(api.event_list(self.db)))

    def test_create_normalises_aware_datetimes(self):
        tz = datetime.timezone(datetime.timedelta(hours=2))
        lease = api.lease_create(
            self.db, _lease(start_date=datetime.datetime(2030, 1, 1, 14,
                                                         tzinfo=tz)))
        self.assertEqual(datetime.datetime(2030, 1, 1, 12),
                         lease['start_date'])

    def test_timestamps_follow_the_clock_override(self):
        timeutils.set_time_override(datetime.datetime(2029, 5, 5, 5, 5))
        self.addCleanup(timeutils.clear_time_override)
        lease = api.lease_create(self.db, _lease())
        self.assertEqual(datetime.datetime(2029, 5, 5, 5, 5),
                         lease['created_at'])
        timeutils.advance_time_seconds(60)
        lease = api.lease_update(self.db, lease['id'], {'name': 'x'})
        self.assertEqual(datetime.datetime(2029, 5, 5, 5, 6),
                         lease['updated_at'])

    def test_get_not_found(self):
        self.assertRaises(api.LeaseNotFound, api.lease_get, self.db,
                          uuidutils.generate_uuid())

    def test_list_filters_and_groups_children(self):
        a = api.lease_create(
            self.db, _lease(name='a', start_date=T0 + HOUR,
                            end_date=T0 + 3 * HOUR),
            reservations=[_instance_reservation('s-a1'),
                          _instance_reservation('s-a2')],
            events=_events(T0 + HOUR, T0 + 3 * HOUR))
        b = api.lease_create(
            self.db, _lease(name='b', project_id='p2'),
            reservations=[_instance_reservation('s-b')], events=_events())
        c = api.lease_create(self.db, _lease(name='c'))
        api.lease_update(self.db, c['id'], {'status': 'ACTIVE'})

        leases = api.lease_list(self.db)
        # Ordered by start_date.
        self.assertEqual(['b', 'c', 'a'], [x['name'] for x in leases])
        by_name = {x['name']: x for x in leases}
        self.assertEqual(['s-a1', 's-a2'], sorted(
            r['resource_id'] for r in by_name['a']['reservations']))
        self.assertEqual(['s-b'], [
            r['resource_id'] for r in by_name['b']['reservations']])
        self.assertEqual([], by_name['c']['reservations'])
        self.assertEqual(3, len(by_name['a']['events']))
        self.assertEqual({a['id']},
                         {e['lease_id'] for e in by_name['a']['events']})
        self.assertEqual(a, by_name['a'])
        self.assertEqual(b, by_name['b'])

        self.assertEqual(['c', 'a'], [x['name'] for x in api.lease_list(
            self.db, project_id='p1')])
        self.assertEqual(['c'], [x['name'] for x in api.lease_list(
            self.db, statuses=['ACTIVE'])])
        self.assertEqual(['b', 'a'], [x['name'] for x in api.lease_list(
            self.db, statuses='PENDING')])
        self.assertEqual([], api.lease_list(self.db, project_id='p2',
                                            statuses=['ACTIVE']))
        # The leases whose dates overlap [start, end) (b and c end, a
        # starts, at the bounds).
        for start, end, names in ((T0 + 2 * HOUR, T0 + 4 * HOUR, ['a']),
                                  (T0, T0 + HOUR, ['b', 'c']),
                                  (T0 + HOUR, T0 + 2 * HOUR,
                                   ['b', 'c', 'a']),
                                  (None, T0 + HOUR, ['b', 'c']),
                                  (T0 + 2 * HOUR, None, ['a'])):
            self.assertEqual(names, [x['name'] for x in api.lease_list(
                self.db, start=start, end=end)], (start, end))
        self.assertEqual(['c', 'a'], [x['name'] for x in api.lease_list(
            self.db, project_id='p1', start=T0 + HOUR, end=T0 + 2 * HOUR)])

    def test_list_uses_three_queries(self):
        for i in range(5):
            api.lease_create(self.db, _lease(name='l%d' % i),
                             reservations=[_instance_reservation('s%d' % i)],
                             events=_events())
        with _QueryCounter(self.db.engine) as counter:
            leases = api.lease_list(self.db)
        self.assertEqual(5, len(leases))
        self.assertEqual(3, len(counter.statements), counter.statements)

    def test_update(self):
        lease = api.lease_create(self.db, _lease())
        updated = api.lease_update(
            self.db, lease['id'],
            {'status': 'ERROR', 'status_reason': 'boom',
             'end_date': T0 + 5 * HOUR})
        self.assertEqual('ERROR', updated['status'])
        self.assertEqual('boom', updated['status_reason'])
        self.assertEqual(T0 + 5 * HOUR, updated['end_date'])
        self.assertIsNotNone(updated['updated_at'])
        self.assertEqual(updated, api.lease_get(self.db, lease['id']))

    def test_update_compare_and_set(self):
        lease = api.lease_create(self.db, _lease())
        updated = api.lease_update(self.db, lease['id'],
                                   {'status': 'STARTING'},
                                   expected_status='PENDING')
        self.assertEqual('STARTING', updated['status'])
        e = self.assertRaises(api.StatusConflict, api.lease_update,
                              self.db, lease['id'], {'status': 'STARTING'},
                              expected_status='PENDING')
        self.assertEqual(409, e.code)
        self.assertEqual('STARTING', e.actual)
        self.assertEqual(['PENDING'], e.expected)
        self.assertEqual('lease', e.kind)
        self.assertEqual(lease['id'], e.id)
        self.assertIn('STARTING', str(e))
        # A list of acceptable statuses.
        updated = api.lease_update(self.db, lease['id'], {'status': 'ACTIVE'},
                                   expected_status=('PENDING', 'STARTING'))
        self.assertEqual('ACTIVE', updated['status'])
        # Conditions on other columns.
        self.assertRaises(api.StatusConflict, api.lease_update, self.db,
                          lease['id'], {'name': 'x'},
                          expected={'name': 'not-the-name'})
        self.assertEqual('lease1', api.lease_get(self.db, lease['id'])['name'])
        updated = api.lease_update(self.db, lease['id'], {'name': 'x'},
                                   expected_status='ACTIVE',
                                   expected={'name': 'lease1',
                                             'status_reason': None})
        self.assertEqual('x', updated['name'])

    def test_compare_and_set_without_a_change(self):
        # Setting the current values (same clock, so same updated_at) still
        # matches: MySQL counts matched rows, not changed ones.
        timeutils.set_time_override(T0)
        self.addCleanup(timeutils.clear_time_override)
        lease = api.lease_create(self.db, _lease())
        for _ in range(2):
            updated = api.lease_update(self.db, lease['id'],
                                       {'status': 'PENDING'},
                                       expected_status='PENDING')
            self.assertEqual('PENDING', updated['status'])
        self.assertEqual(T0, updated['updated_at'])

    def test_update_not_found_and_invalid(self):
        self.assertRaises(api.LeaseNotFound, api.lease_update, self.db,
                          uuidutils.generate_uuid(), {'status': 'ACTIVE'})
        self.assertRaises(api.LeaseNotFound, api.lease_update, self.db,
                          uuidutils.generate_uuid(), {'status': 'ACTIVE'},
                          expected_status='PENDING')
        lease = api.lease_create(self.db, _lease())
        self.assertRaises(api.InvalidField, api.lease_update, self.db,
                          lease['id'], {'id': 'x'})
        self.assertRaises(api.InvalidField, api.lease_update, self.db,
                          lease['id'], {'nope': 1})

    def test_concurrent_compare_and_set_has_one_winner(self):
        lease = api.lease_create(self.db, _lease())
        winners = []
        losers = []

        def _start(i):
            name = 't%d' % i
            try:
                api.lease_update(self.db, lease['id'],
                                 {'status': 'STARTING',
                                  'status_reason': name},
                                 expected_status='PENDING')
                winners.append(name)
            except api.StatusConflict:
                losers.append(name)

        self.assertEqual([], threads.errors(threads.race(4, _start)))
        self.assertEqual(1, len(winners))
        self.assertEqual(3, len(losers))
        self.assertEqual(winners[0],
                         api.lease_get(self.db, lease['id'])['status_reason'])

    def test_destroy_cascades(self):
        lease = api.lease_create(
            self.db, _lease(),
            reservations=[_instance_reservation(allocations=[_allocation()])],
            events=_events())
        other = api.lease_create(
            self.db, _lease(name='other'),
            reservations=[_instance_reservation(
                's2', allocations=[_allocation()])],
            events=_events())
        api.lease_destroy(self.db, lease['id'])
        self.assertRaises(api.LeaseNotFound, api.lease_get, self.db,
                          lease['id'])
        self.assertEqual([], api.reservation_list(self.db,
                                                  lease_id=lease['id']))
        self.assertEqual([], api.event_list(self.db, lease_id=lease['id']))
        self.assertEqual([other['reservations'][0]['id']],
                         [a['reservation_id']
                          for a in api.allocation_list(self.db)])
        self.assertEqual(3, len(api.event_list(self.db)))
        self.assertRaises(api.LeaseNotFound, api.lease_destroy, self.db,
                          lease['id'])


class _ReservationTests(object):

    def setUp(self):
        super().setUp()
        self.lease = api.lease_create(self.db, _lease())

    def test_create_get(self):
        reservation = api.reservation_create(
            self.db, dict(_instance_reservation(),
                          lease_id=self.lease['id'],
                          allocations=[_allocation('h1'),
                                       _allocation('h2')]))
        self.assertEqual(reservation,
                         api.reservation_get(self.db, reservation['id']))
        self.assertEqual(2, reservation['properties']['vcpus'])
        self.assertEqual(['h1', 'h2'], [
            a['host'] for a in api.allocation_list(
                self.db, reservation_id=reservation['id'])])
        self.assertEqual(
            [reservation],
            api.lease_get(self.db, self.lease['id'])['reservations'])

    def test_create_without_properties(self):
        reservation = api.reservation_create(
            self.db, {'lease_id': self.lease['id'],
                      'resource_type': 'physical:host'})
        self.assertEqual({}, reservation['properties'])

    def test_create_errors(self):
        self.assertRaises(api.LeaseNotFound, api.reservation_create,
                          self.db, dict(_instance_reservation(),
                                        lease_id=uuidutils.generate_uuid()))
        self.assertRaises(api.InvalidField, api.reservation_create,
                          self.db, _instance_reservation())
        self.assertRaises(api.InvalidField, api.reservation_create,
                          self.db, dict(_instance_reservation(),
                                        lease_id=self.lease['id'], x=1))
        r = api.reservation_create(
            self.db, dict(_instance_reservation(), lease_id=self.lease['id']))
        self.assertRaises(api.ReservationExists, api.reservation_create,
                          self.db, dict(_instance_reservation(), id=r['id'],
                                        lease_id=self.lease['id']))
        self.assertRaises(api.ReservationNotFound, api.reservation_get,
                          self.db, uuidutils.generate_uuid())

    def test_list_filters(self):
        other = api.lease_create(self.db, _lease(name='other'))
        r1 = api.reservation_create(self.db, dict(
            _instance_reservation('s1'), lease_id=self.lease['id']))
        r2 = api.reservation_create(self.db, dict(
            _instance_reservation('s2'), lease_id=other['id']))
        r3 = api.reservation_create(self.db, {
            'lease_id': other['id'], 'resource_type': 'physical:host',
            'status': 'active'})

        def ids(**kw):
            return sorted(r['id'] for r in api.reservation_list(self.db,
                                                                **kw))

        self.assertEqual(sorted([r1['id'], r2['id'], r3['id']]), ids())
        self.assertEqual([r1['id']], ids(lease_id=self.lease['id']))
        self.assertEqual([r2['id']], ids(resource_id='s2'))
        self.assertEqual([r3['id']], ids(resource_type='physical:host'))
        self.assertEqual(sorted([r1['id'], r2['id']]),
                         ids(statuses=['pending']))
        self.assertEqual([r2['id']], ids(lease_id=other['id'],
                                         resource_type='virtual:instance',
                                         statuses=('pending', 'error')))
        self.assertEqual([], ids(resource_id='s1', lease_id=other['id']))

    def test_update(self):
        r = api.reservation_create(self.db, dict(
            _instance_reservation(), lease_id=self.lease['id']))
        updated = api.reservation_update(
            self.db, r['id'], {'status': 'active', 'aggregate_id': 7,
                               'properties': {'min': 1}},
            expected_status='pending')
        self.assertEqual('active', updated['status'])
        self.assertEqual(7, updated['aggregate_id'])
        self.assertEqual({'min': 1}, updated['properties'])
        self.assertIsNotNone(updated['updated_at'])
        e = self.assertRaises(api.StatusConflict, api.reservation_update,
                              self.db, r['id'], {'status': 'deleted'},
                              expected_status='pending')
        self.assertEqual('active', e.actual)
        self.assertRaises(api.ReservationNotFound, api.reservation_update,
                          self.db, uuidutils.generate_uuid(),
                          {'status': 'deleted'})
        # resource_id can be linked later (the server id from Nova).
        updated = api.reservation_update(self.db, r['id'],
                                         {'resource_id': 'server9'})
        self.assertEqual([r['id']], [x['id'] for x in api.reservation_list(
            self.db, resource_id='server9')])

    def test_destroy(self):
        r = api.reservation_create(self.db, dict(
            _instance_reservation(), lease_id=self.lease['id'],
            allocations=[_allocation()]))
        api.reservation_destroy(self.db, r['id'])
        self.assertRaises(api.ReservationNotFound, api.reservation_get,
                          self.db, r['id'])
        self.assertEqual([], api.allocation_list(self.db))
        self.assertRaises(api.ReservationNotFound, api.reservation_destroy,
                          self.db, r['id'])


class _EventTests(object):

    def setUp(self):
        super().setUp()
        self.lease = api.lease_create(self.db, _lease(), events=_events())
        self.by_type = {e['event_type']: e for e in self.lease['events']}

    def test_order_at_the_same_time(self):
        # A lease ending at T frees resources before one starting at T.
        other = api.lease_create(self.db, _lease(name='next'), events=[
            {'event_type': 'start_lease', 'time': T0 + 2 * HOUR},
            {'event_type': 'custom', 'time': T0 + 2 * HOUR},
            {'event_type': 'before_end_lease', 'time': T0 + 2 * HOUR},
            {'event_type': 'end_lease', 'time': T0 + 3 * HOUR}])
        events = api.event_list(self.db)
        self.assertEqual(
            [(T0, 'start_lease'), (T0 + HOUR, 'before_end_lease'),
             (T0 + 2 * HOUR, 'before_end_lease'),
             (T0 + 2 * HOUR, 'end_lease'), (T0 + 2 * HOUR, 'start_lease'),
             (T0 + 2 * HOUR, 'custom'), (T0 + 3 * HOUR, 'end_lease')],
            [(e['time'], e['event_type']) for e in events])
        self.assertEqual(other['id'], events[2]['lease_id'])
        self.assertEqual(self.lease['id'], events[3]['lease_id'])

    def test_list_filters(self):
        other = api.lease_create(self.db, _lease(name='other'),
                                 events=_events(T0 + HOUR, T0 + 4 * HOUR))
        self.assertEqual(6, len(api.event_list(self.db)))
        self.assertEqual(3, len(api.event_list(self.db,
                                               lease_id=other['id'])))
        due = api.event_list(self.db, statuses=['UNDONE'], due_before=T0)
        self.assertEqual([self.by_type['start_lease']['id']],
                         [e['id'] for e in due])
        due = api.event_list(self.db, due_before=T0 + HOUR)
        self.assertEqual(3, len(due))
        self.assertEqual(2, len(api.event_list(self.db, due_before=T0 + HOUR,
                                               limit=2)))
        start = self.by_type['start_lease']
        api.event_update(self.db, start['id'], {'status': 'DONE'})
        self.assertEqual(
            [start['id']],
            [e['id'] for e in api.event_list(self.db, statuses='DONE')])
        self.assertNotIn(start['id'], [e['id'] for e in api.event_list(
            self.db, statuses=['UNDONE', 'IN_PROGRESS'])])

    def test_due_before_honours_next_attempt_at(self):
        start = self.by_type['start_lease']
        api.event_update(self.db, start['id'], {
            'attempts': 1, 'last_error': 'nova down',
            'next_attempt_at': T0 + datetime.timedelta(seconds=30)})
        self.assertEqual([], api.event_list(self.db, due_before=T0))
        self.assertEqual([start['id']], [e['id'] for e in api.event_list(
            self.db, due_before=T0 + datetime.timedelta(seconds=30))])
        self.assertEqual(T0 + datetime.timedelta(seconds=30),
                         api.event_next_time(self.db))

    def test_next_time(self):
        self.assertEqual(T0, api.event_next_time(self.db))
        api.event_update(self.db, self.by_type['start_lease']['id'],
                         {'status': 'DONE'})
        self.assertEqual(T0 + HOUR, api.event_next_time(self.db))
        self.assertEqual(T0, api.event_next_time(self.db, statuses='DONE'))
        self.assertEqual(T0, api.event_next_time(self.db, statuses=None))
        self.assertIsNone(api.event_next_time(self.db, statuses='ERROR'))

    def test_skip_locked_needs_a_writer_session(self):
        self.assertRaises(api.TransactionError, api.event_list, self.db,
                          skip_locked=True)
        with self.db.reader() as session:
            self.assertRaises(api.TransactionError, api.event_list,
                              session, skip_locked=True)
        with self.db.writer() as session:
            events = api.event_list(session, due_before=T0 + HOUR, limit=1,
                                    skip_locked=True)
            self.assertEqual([self.by_type['start_lease']['id']],
                             [e['id'] for e in events])
            claimed = api.event_update(
                session, events[0]['id'],
                {'status': 'IN_PROGRESS', 'claimed_by': 'me',
                 'claimed_at': T0}, expected_status='UNDONE')
        self.assertEqual('me', claimed['claimed_by'])

    def test_claim_and_reclaim(self):
        start = self.by_type['start_lease']
        claimed = api.event_update(
            self.db, start['id'],
            {'status': 'IN_PROGRESS', 'claimed_by': 'engine-a',
             'claimed_at': T0}, expected_status='UNDONE')
        self.assertEqual('IN_PROGRESS', claimed['status'])
        self.assertEqual('engine-a', claimed['claimed_by'])
        self.assertEqual(T0, claimed['claimed_at'])
        self.assertRaises(api.StatusConflict, api.event_update, self.db,
                          start['id'], {'claimed_by': 'engine-b'},
                          expected_status='UNDONE')
        self.assertEqual([start['id']], [e['id'] for e in api.event_list(
            self.db, statuses='IN_PROGRESS', claimed_before=T0)])
        self.assertEqual([], api.event_list(
            self.db, claimed_before=T0 - datetime.timedelta(seconds=1)))
        # Engine b reclaims an abandoned claim, engine c loses the race.
        stale = {'claimed_by': 'engine-a', 'claimed_at': T0}
        api.event_update(self.db, start['id'],
                         {'claimed_by': 'engine-b', 'claimed_at': T0 + HOUR},
                         expected_status='IN_PROGRESS', expected=stale)
        e = self.assertRaises(api.StatusConflict, api.event_update, self.db,
                              start['id'], {'claimed_by': 'engine-c'},
                              expected_status='IN_PROGRESS', expected=stale)
        self.assertEqual(stale, e.conditions)
        event = api.event_get(self.db, start['id'])
        self.assertEqual('engine-b', event['claimed_by'])

    def test_concurrent_claims_have_one_winner(self):
        start = self.by_type['start_lease']
        winners = []

        def _claim(i):
            name = 'engine%d' % i
            try:
                api.event_update(self.db, start['id'],
                                 {'status': 'IN_PROGRESS',
                                  'claimed_by': name, 'claimed_at': T0},
                                 expected_status='UNDONE')
                winners.append(name)
            except api.StatusConflict:
                pass

        self.assertEqual([], threads.errors(threads.race(4, _claim)))
        self.assertEqual(1, len(winners))
        self.assertEqual(winners[0],
                         api.event_get(self.db, start['id'])['claimed_by'])

    def test_create_get_update_destroy(self):
        event = api.event_create(self.db, {'lease_id': self.lease['id'],
                                           'event_type': 'start_lease',
                                           'time': T0 + HOUR})
        self.assertEqual(event, api.event_get(self.db, event['id']))
        self.assertEqual('UNDONE', event['status'])
        self.assertRaises(api.LeaseNotFound, api.event_create, self.db, {
            'lease_id': uuidutils.generate_uuid(),
            'event_type': 'start_lease', 'time': T0})
        self.assertRaises(api.InvalidField, api.event_create, self.db, {
            'event_type': 'start_lease', 'time': T0})
        self.assertRaises(api.EventExists, api.event_create, self.db, {
            'id': event['id'], 'lease_id': self.lease['id'],
            'event_type': 'start_lease', 'time': T0})
        updated = api.event_update(self.db, event['id'],
                                   {'status': 'ERROR', 'attempts': 3,
                                    'last_error': 'x' * 5000})
        self.assertEqual('x' * 5000, updated['last_error'])
        self.assertRaises(api.EventNotFound, api.event_update, self.db,
                          uuidutils.generate_uuid(), {'status': 'DONE'})
        api.event_destroy(self.db, event['id'])
        self.assertRaises(api.EventNotFound, api.event_get, self.db,
                          event['id'])
        self.assertRaises(api.EventNotFound, api.event_destroy, self.db,
                          event['id'])


class _AllocationTests(object):

    def setUp(self):
        super().setUp()
        lease = api.lease_create(
            self.db, _lease(),
            reservations=[_instance_reservation('s1'),
                          _instance_reservation('s2')])
        self.lease_id = lease['id']
        self.r1, self.r2 = [r['id'] for r in lease['reservations']]

    def _create(self, host, start, end, reservation_id=None):
        return api.allocation_create(self.db, _allocation(
            host, start, end, reservation_id=reservation_id or self.r1))

    def test_create(self):
        a = self._create('h1', T0, T0 + HOUR)
        self.assertIsInstance(a['id'], int)
        self.assertEqual([a], api.allocation_list(self.db))
        self.assertRaises(api.ReservationNotFound, api.allocation_create,
                          self.db, _allocation(
                              reservation_id=uuidutils.generate_uuid()))
        self.assertRaises(api.InvalidField, api.allocation_create,
                          self.db, _allocation())
        defaults = api.allocation_create(self.db, {
            'reservation_id': self.r1, 'host': 'h9', 'start_date': T0,
            'end_date': T0 + HOUR})
        self.assertEqual((0, 0, 0, False),
                         (defaults['vcpus'], defaults['memory_mb'],
                          defaults['disk_gb'], defaults['whole_host']))

    def test_overlap(self):
        early = self._create('h1', T0, T0 + HOUR)
        late = self._create('h1', T0 + HOUR, T0 + 2 * HOUR)
        other = self._create('h2', T0, T0 + 3 * HOUR, self.r2)

        def ids(**kw):
            return [a['id'] for a in api.allocation_list(self.db, **kw)]

        # Ordered by host, then start.
        self.assertEqual([early['id'], late['id'], other['id']], ids())
        # [start, end) intervals: touching is not overlapping.
        self.assertEqual([early['id'], other['id']],
                         ids(start=T0, end=T0 + HOUR))
        self.assertEqual([late['id'], other['id']],
                         ids(start=T0 + HOUR, end=T0 + HOUR * 1.5))
        self.assertEqual([early['id'], late['id']],
                         ids(start=T0 + HOUR * 0.5, end=T0 + HOUR * 1.5,
                             hosts=['h1']))
        self.assertEqual([], ids(start=T0 + 3 * HOUR, end=T0 + 4 * HOUR))
        self.assertEqual([], ids(start=T0 - HOUR, end=T0))
        # One-sided bounds.
        self.assertEqual([other['id']], ids(start=T0 + 2 * HOUR))
        self.assertEqual([early['id'], other['id']], ids(end=T0 + HOUR))
        self.assertEqual([other['id']], ids(hosts='h2'))
        self.assertEqual([other['id']], ids(reservation_id=self.r2))
        self.assertEqual([early['id'], late['id'], other['id']],
                         ids(lease_id=self.lease_id))
        self.assertEqual([], ids(lease_id=uuidutils.generate_uuid()))
        self.assertEqual([], ids(hosts=[]))

    def test_update_destroy(self):
        a = self._create('h1', T0, T0 + HOUR)
        b = self._create('h2', T0, T0 + HOUR)
        c = self._create('h3', T0, T0 + HOUR, self.r2)
        moved = api.allocation_update(self.db, a['id'], {'host': 'h4'})
        self.assertEqual('h4', moved['host'])
        self.assertRaises(api.AllocationNotFound, api.allocation_update,
                          self.db, 99999999, {'host': 'h4'})
        api.allocation_destroy(self.db, b['id'])
        self.assertRaises(api.AllocationNotFound, api.allocation_destroy,
                          self.db, b['id'])
        self.assertEqual(1, api.allocation_destroy_by_reservation(
            self.db, self.r1))
        self.assertEqual(0, api.allocation_destroy_by_reservation(
            self.db, self.r1))
        self.assertEqual([c['id']],
                         [x['id'] for x in api.allocation_list(self.db)])


class _HostTests(object):

    def _create(self, name='node1', **kw):
        values = {'hypervisor_hostname': name, 'service_host': 'compute1',
                  'availability_zone': 'az1', 'vcpus': 8,
                  'memory_mb': 16384, 'local_gb': 100,
                  'cpu_info': '{"arch": "x86_64"}',
                  'hypervisor_type': 'QEMU', 'hypervisor_version': 8002000}
        values.update(kw)
        return api.host_create(self.db, values)

    def test_create_get(self):
        host = self._create(capabilities={'gpu': 'true', 'ssd': True})
        self.assertIsInstance(host['id'], int)
        self.assertEqual('node1', host['hypervisor_hostname'])
        self.assertTrue(host['reservable'])
        self.assertEqual({'gpu': 'true', 'ssd': 'True'},
                         host['capabilities'])
        self.assertEqual(host, api.host_get(self.db, host['id']))
        self.assertEqual(host, api.host_get(self.db, str(host['id'])))
        self.assertEqual(host, api.host_get_by_hostname(self.db, 'node1'))
        self.assertRaises(api.HostExists, self._create)
        self.assertRaises(api.HostNotFound, api.host_get, self.db, 'abc')
        self.assertRaises(api.HostNotFound, api.host_get, self.db,
                          host['id'] + 1000)
        self.assertRaises(api.HostNotFound, api.host_get_by_hostname,
                          self.db, 'nope')
        self.assertRaises(api.InvalidField, self._create, name='n2',
                          colour='red')

    def test_list(self):
        self._create('b', capabilities={'x': '1'})
        self._create('a', reservable=False)
        self._create('c', capabilities={'y': '2', 'z': '3'})
        hosts = api.host_list(self.db)
        self.assertEqual(['a', 'b', 'c'],
                         [h['hypervisor_hostname'] for h in hosts])
        self.assertEqual([{}, {'x': '1'}, {'y': '2', 'z': '3'}],
                         [h['capabilities'] for h in hosts])
        self.assertEqual(['b', 'c'], [h['hypervisor_hostname'] for h in
                                      api.host_list(self.db,
                                                    reservable=True)])
        self.assertEqual(['a'], [h['hypervisor_hostname'] for h in
                                 api.host_list(self.db, reservable=False)])
        self.assertEqual(['a', 'c'], [h['hypervisor_hostname'] for h in
                                      api.host_list(self.db,
                                                    hostnames=['c', 'a'])])
        self.assertEqual([], api.host_list(self.db, hostnames=[]))

    def test_update_capabilities(self):
        host = self._create(capabilities={'gpu': 'true', 'ssd': 'true',
                                          'rack': '1'})
        updated = api.host_update(self.db, host['id'], {
            'vcpus': 16, 'capabilities': {'gpu': None, 'rack': '2',
                                          'fpga': 'yes'}})
        self.assertEqual(16, updated['vcpus'])
        self.assertEqual({'ssd': 'true', 'rack': '2', 'fpga': 'yes'},
                         updated['capabilities'])
        self.assertIsNotNone(updated['updated_at'])
        self.assertEqual(updated, api.host_get(self.db, host['id']))
        # Only capabilities.
        updated = api.host_update(self.db, host['id'], {
            'capabilities': {'ssd': None, 'unknown': None}})
        self.assertEqual({'rack': '2', 'fpga': 'yes'},
                         updated['capabilities'])
        self.assertEqual(16, updated['vcpus'])

    def test_update_errors(self):
        host = self._create()
        self._create('node2')
        self.assertRaises(api.HostExists, api.host_update, self.db,
                          host['id'], {'hypervisor_hostname': 'node2'})
        self.assertRaises(api.HostNotFound, api.host_update, self.db,
                          host['id'] + 1000, {'vcpus': 1})
        self.assertRaises(api.InvalidField, api.host_update, self.db,
                          host['id'], {'id': 5})

    def test_destroy(self):
        host = self._create(capabilities={'gpu': 'true'})
        api.host_destroy(self.db, host['id'])
        self.assertRaises(api.HostNotFound, api.host_get, self.db,
                          host['id'])
        self.assertRaises(api.HostNotFound, api.host_destroy, self.db,
                          host['id'])
        # The capabilities went with the host.
        again = self._create(capabilities={'ssd': 'true'})
        self.assertEqual({'ssd': 'true'}, again['capabilities'])
        with self.db.reader() as session:
            self.assertEqual(1, session.execute(sa.select(sa.func.count())
                             .select_from(models.HOST_CAPABILITIES)).scalar())


class _TransactionTests(object):

    def test_functions_join_the_callers_transaction(self):
        with self.db.writer() as session:
            api.lock_hosts(session, ['h1'])
            self.assertEqual([], api.allocation_list(session, hosts=['h1']))
            lease = api.lease_create(session, _lease(),
                                     reservations=[_instance_reservation(
                                         allocations=[_allocation('h1')])])
            self.assertEqual(lease, api.lease_get(session, lease['id']))
        self.assertEqual(lease, api.lease_get(self.db, lease['id']))

    def test_writer_rolls_back_on_error(self):
        class Boom(Exception):
            pass

        def _admit():
            with self.db.writer() as session:
                api.lease_create(session, _lease())
                raise Boom()

        self.assertRaises(Boom, _admit)
        self.assertEqual([], api.lease_list(self.db))

    def test_reader_session_refuses_writes(self):
        with self.db.reader() as session:
            self.assertRaises(api.TransactionError, api.lease_create,
                              session, _lease())
            self.assertRaises(api.TransactionError, api.lock_hosts,
                              session, ['h1'])
            self.assertEqual([], api.lease_list(session))

    def test_options_of_the_group_reach_the_pool(self):
        conf = cfg.ConfigOpts()
        lease_conf.register_opts(conf)
        conf([], project='nova', default_config_files=[])
        flags = self.useFixture(config_fixture.Config(conf))
        flags.config(group='nova_lease_database', connection=self.url,
                     max_pool_size=3, max_overflow=7, pool_timeout=9,
                     connection_recycle_time=120)
        db = api.get_database(conf)
        self.assertIs(db, api.get_database(conf))
        pool = db.engine.pool
        if self.BACKEND == 'sqlite':
            # oslo.db: SQLite files use no pool (a connection each time);
            # the Database keeps max_pool_size idle ones of its own
            # (test_sqlite).
            self.assertEqual('NullPool', type(pool).__name__)
        else:
            self.assertEqual(3, pool.size())
            self.assertEqual(9, pool.timeout())

    def test_a_writer_joins_no_other_transaction(self):
        # Each reader()/writer() is a transaction of its own (enginefacade's
        # independent), even inside another one of the same thread.
        with self.db.writer() as outer:
            api.lease_create(outer, _lease(name='outer'))
            if self.BACKEND != 'sqlite':    # (SQLite: one writer at once)
                with self.db.reader() as inner:
                    self.assertIsNot(outer, inner)
                    self.assertEqual([], api.lease_list(inner))
        self.assertEqual(['outer'],
                         [x['name'] for x in api.lease_list(self.db)])

    def test_core_transactions(self):
        # core=True: a Core Connection (no ORM Session) where it can be;
        # it commits, rolls back and refuses writes like a Session.
        with self.db.reader(core=True) as conn:
            self.assertIsInstance(conn, sa.engine.Connection)
            self.assertRaises(api.TransactionError, api.lease_create,
                              conn, _lease())
        with self.db.writer(core=True) as conn:
            if self.BACKEND == 'sqlite':
                # The write lock is taken as a Session's transaction
                # begins (BEGIN IMMEDIATE).
                self.assertIsInstance(conn, orm.Session)
            else:
                self.assertIsInstance(conn, sa.engine.Connection)
            changes.journal(conn, [('kept', None)])

        class Boom(Exception):
            pass

        def _fail():
            with self.db.writer(core=True) as conn:
                changes.journal(conn, [('rolled-back', None)])
                raise Boom()

        self.assertRaises(Boom, _fail)
        with self.db.reader(core=True) as conn:
            self.assertEqual(['kept'], conn.execute(
                sa.select(models.LEASE_CHANGES.c.lease_id)).scalars().all())
            # A reader's Connection does not stay marked a writer's.
            self.assertRaises(api.TransactionError,
                              transaction.require_writer, conn)

    def test_session_settings(self):
        with self.db.reader() as session:
            conn = session.connection()
            if self.BACKEND == 'mysql':
                self.assertEqual('READ-COMMITTED', conn.exec_driver_sql(
                    'SELECT @@SESSION.tx_isolation').scalar())
                self.assertIn('TRADITIONAL', conn.exec_driver_sql(
                    'SELECT @@SESSION.sql_mode').scalar())
                self.assertEqual('utf8mb4', conn.exec_driver_sql(
                    'SELECT @@character_set_client').scalar())
            elif self.BACKEND == 'postgresql':
                self.assertEqual('read committed', conn.exec_driver_sql(
                    'SHOW transaction_isolation').scalar())
            else:
                self.assertEqual(1, conn.exec_driver_sql(
                    'PRAGMA foreign_keys').scalar())

    def test_four_byte_characters_survive(self):
        lease = api.lease_create(self.db, _lease(name='lab \U0001F680'))
        self.assertEqual('lab \U0001F680',
                         api.lease_get(self.db, lease['id'])['name'])

    def test_get_database_is_cached_per_url(self):
        db = api.get_database(_conf(self.url))
        self.assertIs(db, api.get_database(_conf(self.url)))
        self.assertIsNot(db, api.get_database(_conf('sqlite://')))
        api.lease_create(db, _lease())
        self.assertEqual(1, len(api.lease_list(self.db)))
        api.reset_databases()
        self.assertIsNot(db, api.get_database(_conf(self.url)))

    def test_lock_is_reentrant_and_idempotent(self):
        for _ in range(2):
            with self.db.writer() as session:
                api.lock_hosts(session, ['h1', 'h2', 'h1'])
                api.lock_hosts(session, ['h2', 'h3'])
                api.lock_hosts(session, [])
                api.lock(session, ['calendar'])

    def test_lock_prevents_lost_updates(self):
        """Read-modify-write under lock_hosts from 4 threads loses nothing.

        Under READ COMMITTED without the lock, the threads would overwrite
        each other's increments.
        """
        host = api.host_create(self.db, {'hypervisor_hostname': 'h1',
                                         'vcpus': 0, 'memory_mb': 0,
                                         'local_gb': 0})

        @api.retry_on_deadlock
        def _increment():
            with self.db.writer() as session:
                api.lock_hosts(session, ['h1'])
                vcpus = api.host_get(session, host['id'])['vcpus']
                api.host_update(session, host['id'], {'vcpus': vcpus + 1})

        def _worker(_i):
            for _ in range(5):
                _increment()

        self.assertEqual([], threads.errors(threads.race(4, _worker)))
        self.assertEqual(20, api.host_get(self.db, host['id'])['vcpus'])


def _conf(url):
    conf = cfg.ConfigOpts()
    lease_conf.register_opts(conf)
    conf([], project='nova_lease_test', default_config_files=[])
    conf.set_override('connection', url, group='nova_lease_database')
    return conf


class _LockServerTests(object):
    """lock_hosts serialises writers on MySQL and PostgreSQL (row locks)."""

    HOLD = 0.5

    def _race(self, first_names, second_names):
        """A locks first_names and holds; then B locks second_names.

        Returns (time A released, time B got its locks).
        """
        locked = threading.Event()
        times = {}

        def _a():
            with self.db.writer() as session:
                api.lock_hosts(session, first_names)
                locked.set()
                threading.Event().wait(self.HOLD)
                times['released'] = time.monotonic()
            # (commit happens as the block ends, just after 'released')

        def _b():
            locked.wait(10)
            with self.db.writer() as session:
                api.lock_hosts(session, second_names)
                times['acquired'] = time.monotonic()

        self.assertEqual([], threads.errors(
            threads.race(2, lambda i: (_a, _b)[i](), timeout=30)))
        return times['released'], times['acquired']

    def test_common_host_serialises(self):
        # Rows exist after the first lock; test both cases.
        for _ in range(2):
            released, acquired = self._race(['h1'], ['h2', 'h1'])
            self.assertGreaterEqual(acquired, released)

    def test_skip_locked_events(self):
        for i in range(3):
            api.lease_create(self.db, _lease(name='l%d' % i), events=_events(
                T0 + datetime.timedelta(minutes=i)))
        due = T0 + 10 * HOUR
        holding = threading.Event()
        release = threading.Event()
        result = {}

        def _a():
            with self.db.writer() as session:
                result['a'] = api.event_list(session, statuses='UNDONE',
                                             due_before=due, limit=4,
                                             skip_locked=True)
                holding.set()
                release.wait(10)

        thread = threading.Thread(target=_a)
        thread.start()
        try:
            self.assertTrue(holding.wait(10))
            with self.db.writer() as session:
                result['b'] = api.event_list(session, statuses='UNDONE',
                                             due_before=due,
                                             skip_locked=True)
        finally:
            release.set()
            thread.join(10)
        everything = api.event_list(self.db)
        self.assertEqual([e['id'] for e in everything[:4]],
                         [e['id'] for e in result['a']])
        self.assertEqual([e['id'] for e in everything[4:]],
                         [e['id'] for e in result['b']])

    def test_disjoint_hosts_do_not_wait(self):
        with self.db.writer() as session:
            api.lock_hosts(session, ['h1', 'h2'])
        released, acquired = self._race(['h1'], ['h2'])
        self.assertLess(acquired, released)


class _BootPathTests(object):
    """lease_create and reservations_link: what nova-api's boot path
    writes, in one transaction each.
    """

    def _boot_lease(self, **kw):
        events = _events()
        events[0]['next_attempt_at'] = T0 + HOUR
        return api.lease_create(
            self.db, _lease(before_end_date=T0 + HOUR, retries=1, **kw),
            reservations=[_instance_reservation(
                resource_id=None, properties={'vcpus': 1, 'index': i})
                for i in range(2)],
            events=events)

    def test_lease_create_reads_back_what_it_returned(self):
        top = api.change_probe(self.db)[1] or 0
        created = self._boot_lease()
        self.assertEqual(created, api.lease_get(self.db, created['id']))
        # Microseconds and the reservations' JSON survive the round trip.
        self.assertEqual(T0, created['start_date'])
        self.assertEqual(T0 + HOUR, created['events'][0]['next_attempt_at'])
        self.assertEqual(
            {created['id']},
            {lease_id for _id, lease_id, _r in api.change_rows(self.db, top)})
        self.assertEqual(
            {r['id'] for r in created['reservations']},
            {rid for _id, _l, rid in api.change_rows(self.db, top)})

    def test_reservations_link(self):
        lease = self._boot_lease()
        first, second = lease['reservations']
        start = lease['events'][0]
        top = api.change_probe(self.db)[1]
        api.reservations_link(self.db, [(first['id'], 'server-a')],
                              drop=[second['id']],
                              release_events=[start['id']], now=T0)
        again = api.lease_get(self.db, lease['id'])
        [linked] = again['reservations']
        self.assertEqual('server-a', linked['resource_id'])
        self.assertEqual(T0, linked['updated_at'])
        self.assertIsNone(again['events'][0]['next_attempt_at'])
        self.assertEqual({first['id'], second['id']},
                         {rid for _id, _l, rid in
                          api.change_rows(self.db, top)})

    def test_link_refusals_leave_nothing(self):
        # A refused link raises the mapped error and rolls back; nothing
        # of the refused transaction is left.
        lease = self._boot_lease()
        first, second = lease['reservations']
        start = lease['events'][0]
        api.reservations_link(self.db, [(first['id'], 'server-a')])
        top = api.change_probe(self.db)[1]
        self.assertRaises(api.StatusConflict, api.reservations_link,
                          self.db, [(second['id'], 'server-b'),
                                    (first['id'], 'server-c')])
        self.assertRaises(api.ReservationNotFound, api.reservations_link,
                          self.db, [(second['id'], 'server-b')],
                          drop=['no-such-reservation'])
        self.assertRaises(api.StatusConflict, api.reservations_link,
                          self.db, [(second['id'], 'server-b')],
                          release_events=[start['id']],
                          event_status='DONE')
        again = api.lease_get(self.db, lease['id'])
        self.assertEqual({first['id']: 'server-a', second['id']: None},
                         {r['id']: r['resource_id']
                          for r in again['reservations']})
        self.assertEqual(T0 + HOUR, again['events'][0]['next_attempt_at'])
        self.assertEqual(top, api.change_probe(self.db)[1])

    def test_lease_create_errors_are_mapped(self):
        lease = self._boot_lease()
        self.assertRaises(api.LeaseExists, self._boot_lease, id=lease['id'])
        self.assertEqual([lease['id']],
                         [x['id'] for x in api.lease_list(self.db)])

    def test_errors_in_the_callers_transaction_are_mapped(self):
        # In the caller's transaction too, the database's error is mapped
        # through oslo.db's filters.
        lease = self._boot_lease()
        taken = lease['reservations'][0]['id']
        for values, reservation, error in (
                (_lease(id=lease['id']), {}, api.LeaseExists),
                (_lease(), {'id': taken}, api.ReservationExists)):
            def create():
                with self.db.writer() as session:
                    api.lease_create(session, values, reservations=[
                        _instance_reservation(**reservation)])
            self.assertRaises(error, create)
        self.assertEqual([lease['id']],
                         [x['id'] for x in api.lease_list(self.db)])

    def test_the_boot_path_prunes_the_journal(self):
        timeutils.set_time_override(T0 - api.CHANGE_RETENTION - HOUR)
        self.addCleanup(timeutils.clear_time_override)
        self._boot_lease(name='old')
        timeutils.set_time_override(T0)
        self.patch(changes, 'CHANGE_PRUNE_EVERY', 1)
        new = self._boot_lease(name='new')
        self.assertEqual({new['id']},
                         {lease_id for _i, lease_id, _r in
                          api.change_rows(self.db, 0)})


class BootPathSQLiteTest(_BootPathTests, base.SQLiteTestCase):
    pass


class BootPathMySQLTest(_BootPathTests, base.MySQLTestCase):
    pass


class BootPathPostgreSQLTest(_BootPathTests, base.PostgreSQLTestCase):
    pass


class LeaseSQLiteTest(_LeaseTests, base.SQLiteTestCase):
    pass


class LeaseMySQLTest(_LeaseTests, base.MySQLTestCase):
    pass


class LeasePostgreSQLTest(_LeaseTests, base.PostgreSQLTestCase):
    pass


class ReservationSQLiteTest(_ReservationTests, base.SQLiteTestCase):
    pass


class ReservationMySQLTest(_ReservationTests, base.MySQLTestCase):
    pass


class ReservationPostgreSQLTest(_ReservationTests, base.PostgreSQLTestCase):
    pass


class EventSQLiteTest(_EventTests, base.SQLiteTestCase):
    pass


class EventMySQLTest(_EventTests, base.MySQLTestCase):
    pass


class EventPostgreSQLTest(_EventTests, base.PostgreSQLTestCase):
    pass


class AllocationSQLiteTest(_AllocationTests, base.SQLiteTestCase):
    pass


class AllocationMySQLTest(_AllocationTests, base.MySQLTestCase):
    pass


class AllocationPostgreSQLTest(_AllocationTests, base.PostgreSQLTestCase):
    pass


class HostSQLiteTest(_HostTests, base.SQLiteTestCase):
    pass


class HostMySQLTest(_HostTests, base.MySQLTestCase):
    pass


class HostPostgreSQLTest(_HostTests, base.PostgreSQLTestCase):
    pass


class TransactionSQLiteTest(_TransactionTests, base.SQLiteTestCase):
    pass


class TransactionMySQLTest(_TransactionTests, base.MySQLTestCase):
    pass


class TransactionPostgreSQLTest(_TransactionTests, base.PostgreSQLTestCase):
    pass


class LockMySQLTest(_LockServerTests, base.MySQLTestCase):
    pass


class LockPostgreSQLTest(_LockServerTests, base.PostgreSQLTestCase):
    pass
