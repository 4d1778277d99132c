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

import datetime
import re

import testtools

from nova_lease import exception
from nova_lease import status

L = status.LeaseStatus
R = status.ReservationStatus
E = status.EventStatus
T = status.EventType

ENUMS = {status.LEASE: L, status.RESERVATION: R, status.EVENT: E}


def _doc_table():
    """The transitions as the module docstring documents them."""
    tables, kind, source = {}, None, None
    for line in status.__doc__.splitlines():
        header = re.match(r"\w+ \(``kind='(\w+)'``\)::", line)
        if header:
            kind = header.group(1)
            tables[kind] = {}
            continue
        if kind is None or not line.startswith('  '):
            if line.strip() and kind is not None and not line.startswith(' '):
                kind = None
            continue
        terminal = re.match(r'\s+(\w+)\s+\(terminal\)', line)
        if terminal:
            tables[kind][terminal.group(1)] = set()
            continue
        arrow = re.match(r'\s+(\w+)?\s+-> ([\w, ]+?)(?:\s{2,}|\s*\(|$)', line)
        if arrow:
            source = arrow.group(1) or source
            targets = {t.strip() for t in arrow.group(2).split(',')}
            tables[kind].setdefault(source, set()).update(targets)
    return tables


class TablesTest(testtools.TestCase):

    def test_values(self):
        self.assertEqual(
            {'PENDING', 'STARTING', 'ACTIVE', 'TERMINATING', 'TERMINATED',
             'ERROR', 'IN_PROGRESS', 'TIMEDOUT'}, set(L))
        self.assertEqual({'pending', 'active', 'deleted', 'error'}, set(R))
        self.assertEqual({'UNDONE', 'IN_PROGRESS', 'DONE', 'ERROR'}, set(E))
        self.assertEqual({'start_lease', 'end_lease', 'before_end_lease'},
                         set(T))
        self.assertEqual('PENDING', str(L.PENDING))
        self.assertEqual('pending', '%s' % R.PENDING)

    def test_tables_closed(self):
        for kind, enum in ENUMS.items():
            table = status.TRANSITIONS[kind]
            self.assertEqual(set(enum), set(table), kind)
            for old, targets in table.items():
                self.assertIsInstance(targets, frozenset)
                self.assertLessEqual(set(targets), set(enum), kind)
                self.assertNotIn(old, targets, '%s %s' % (kind, old))

    def test_docstring_matches_table(self):
        documented = _doc_table()
        self.assertEqual(set(ENUMS), set(documented))
        for kind, table in status.TRANSITIONS.items():
            actual = {str(k): {str(v) for v in vs} for k, vs in table.items()}
            self.assertEqual(actual, documented[kind], kind)

    def test_every_status_reachable_from_initial(self):
        initial = {status.LEASE: L.PENDING, status.RESERVATION: R.PENDING,
                   status.EVENT: E.UNDONE}
        for kind, start in initial.items():
            seen, todo = {start}, [start]
            while todo:
                for nxt in status.TRANSITIONS[kind][todo.pop()]:
                    if nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
            self.assertEqual(set(ENUMS[kind]), seen, kind)


class TransitionTest(testtools.TestCase):

    def assertPath(self, kind, *path):
        for old, new in zip(path, path[1:]):
            status.check_transition(kind, old, new)
            self.assertTrue(status.can_transition(kind, old, new))

    def assertRefused(self, kind, old, new):
        self.assertFalse(status.can_transition(kind, old, new))
        err = self.assertRaises(status.InvalidStatusTransition,
                                status.check_transition, kind, old, new)
        self.assertEqual((kind, old, new), (err.kind, err.old, err.new))
        for word in (kind, old, new):
            self.assertIn(str(word), str(err))
        return err

    def test_lease_paths(self):
        lease = status.LEASE
        self.assertPath(lease, L.PENDING, L.STARTING, L.ACTIVE,
                        L.TERMINATING, L.TERMINATED)
        self.assertPath(lease, L.PENDING, L.STARTING, L.PENDING, L.STARTING,
                        L.ERROR, L.TERMINATING, L.TERMINATED)
        self.assertPath(lease, L.PENDING, L.IN_PROGRESS, L.ACTIVE)
        self.assertPath(lease, L.PENDING, L.IN_PROGRESS, L.TIMEDOUT,
                        L.TERMINATING)
        self.assertPath(lease, L.IN_PROGRESS, L.TERMINATING)
        self.assertPath(lease, L.PENDING, L.TERMINATED)
        self.assertPath(lease, L.PENDING, L.TERMINATING)
        self.assertPath(lease, L.ERROR, L.PENDING)
        self.assertPath(lease, L.ACTIVE, L.ERROR)
        self.assertPath(lease, L.TERMINATING, L.ERROR)
        # Plain strings work as well as enum members.
        self.assertPath(lease, 'PENDING', 'STARTING')

    def test_lease_refused(self):
        lease = status.LEASE
        for old, new in ((L.ACTIVE, L.PENDING), (L.ACTIVE, L.STARTING),
                         (L.STARTING, L.TERMINATED), (L.ACTIVE, L.TERMINATED),
                         (L.TERMINATING, L.ACTIVE), (L.TIMEDOUT, L.ACTIVE),
                         (L.ERROR, L.ACTIVE), (L.PENDING, L.ACTIVE),
                         (L.PENDING, L.TIMEDOUT)):
            self.assertRefused(lease, old, new)
        err = self.assertRefused(lease, L.ACTIVE, L.PENDING)
        self.assertEqual('Invalid lease status transition: ACTIVE -> PENDING '
                         '(allowed from ACTIVE: ERROR, TERMINATING)', str(err))
        self.assertIsInstance(err, exception.Conflict)
        self.assertEqual(409, err.code)

    def test_reservation_paths(self):
        res = status.RESERVATION
        self.assertPath(res, R.PENDING, R.ACTIVE, R.DELETED)
        self.assertPath(res, R.PENDING, R.ERROR, R.PENDING, R.DELETED)
        self.assertPath(res, R.ACTIVE, R.ERROR, R.DELETED)
        self.assertRefused(res, R.ACTIVE, R.PENDING)
        self.assertRefused(res, 'error', 'active')

    def test_event_paths(self):
        ev = status.EVENT
        self.assertPath(ev, E.UNDONE, E.IN_PROGRESS, E.DONE)
        self.assertPath(ev, E.UNDONE, E.IN_PROGRESS, E.UNDONE, E.IN_PROGRESS,
                        E.ERROR, E.UNDONE)
        for old, new in ((E.UNDONE, E.DONE), (E.UNDONE, E.ERROR),
                         (E.ERROR, E.DONE), (E.ERROR, E.IN_PROGRESS)):
            self.assertRefused(ev, old, new)

    def test_same_status_refused(self):
        for kind, enum in ENUMS.items():
            for value in enum:
                self.assertRefused(kind, value, value)

    def test_terminal_has_no_exit(self):
        terminal = {status.LEASE: {L.TERMINATED},
                    status.RESERVATION: {R.DELETED},
                    status.EVENT: {E.DONE}}
        for kind, enum in ENUMS.items():
            for value in enum:
                self.assertEqual(value in terminal[kind],
                                 status.is_terminal(kind, value),
                                 '%s %s' % (kind, value))
            for value in terminal[kind]:
                for new in enum:
                    err = self.assertRefused(kind, value, new)
                    self.assertIn('is final', str(err))

    def test_unknown_status(self):
        err = self.assertRefused(status.LEASE, 'BOGUS', L.ACTIVE)
        self.assertIn('unknown status BOGUS', str(err))
        err = self.assertRefused(status.LEASE, L.ACTIVE, 'active')
        self.assertIn('unknown status active', str(err))
        self.assertRaises(ValueError, status.is_terminal, status.EVENT,
                          'done')

    def test_unknown_kind(self):
        for func in (status.check_transition, status.can_transition):
            self.assertRaises(ValueError, func, 'host', 'a', 'b')
        self.assertRaises(ValueError, status.is_terminal, 'host', 'a')


class EventOrderTest(testtools.TestCase):

    def test_tie_order(self):
        at = datetime.datetime(2026, 6, 1, 12)
        later = at + datetime.timedelta(seconds=1)
        events = [(T.START_LEASE, at), (T.END_LEASE, later),
                  (T.END_LEASE, at), ('before_end_lease', at),
                  (T.BEFORE_END_LEASE, later)]
        ordered = sorted(events, key=lambda e: status.event_sort_key(*e))
        self.assertEqual([('before_end_lease', at), (T.END_LEASE, at),
                          (T.START_LEASE, at), (T.BEFORE_END_LEASE, later),
                          (T.END_LEASE, later)], ordered)

    def test_unknown_type(self):
        self.assertRaises(ValueError, status.event_sort_key, 'reboot',
                          datetime.datetime(2026, 6, 1))
