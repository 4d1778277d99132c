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
"""Snapshot.patched() equals a snapshot built from scratch (no I/O)."""

import datetime

import fixtures
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from nova_lease import calendar
from nova_lease import resource_types as types
from nova_lease.scheduler import mappings
from nova_lease.scheduler import snapshot

NOW = datetime.datetime(2030, 1, 1)
HOUR = datetime.timedelta(hours=1)
RIDS = ['r%d' % k for k in range(8)]
LEASES = ['l0', 'l1', 'l2']


@st.composite
def _reservation(draw, rid):
    start = NOW + draw(st.integers(-3, 5)) * HOUR
    end = start + draw(st.integers(1, 6)) * HOUR
    kind = draw(st.sampled_from([types.SERVER, types.HOST]))
    # A server belongs to one reservation at most.
    server = draw(st.sampled_from([None, 'server-' + rid])) \
        if kind == types.SERVER else None
    size = draw(st.sampled_from([None, calendar.Demand(1, 2, 3)]))
    res = snapshot.Reservation(rid, draw(st.sampled_from(LEASES)), 'p',
                               kind, server, start, end,
                               draw(st.sampled_from(['PENDING', 'ACTIVE'])),
                               size if server else None)
    items = [calendar.Item(draw(st.sampled_from(['h0', 'h1', 'h2'])),
                           start, end, draw(st.integers(0, 3)), 1, 1,
                           kind == types.HOST, rid)
             for _ in range(draw(st.integers(0, 2)))]
    return res, items


@st.composite
def _state(draw):
    state = {}
    for rid in draw(st.lists(st.sampled_from(RIDS), unique=True)):
        state[rid] = draw(_reservation(rid))
    return state


def _build(state):
    items = [it for _res, its in state.values() for it in its]
    return snapshot.Snapshot(items, {rid: res for rid, (res, _its)
                                     in state.items()})


def _sorted(mapping):
    return {k: sorted(v) for k, v in mapping.items()}


class PatchedTest(testtools.TestCase):

    def _assert_same(self, full, snap):
        self.assertEqual(sorted(full.items), sorted(snap.items))
        self.assertEqual(dict(full.reservations), dict(snap.reservations))
        self.assertEqual(len(full.reservations), len(snap.reservations))
        self.assertEqual(_sorted(full.allocations), _sorted(snap.allocations))
        self.assertEqual(len(full.allocations), len(snap.allocations))
        self.assertEqual(_sorted(full.host_items), _sorted(snap.host_items))
        self.assertEqual(_sorted(full.by_lease), _sorted(snap.by_lease))
        self.assertEqual(full.servers, snap.servers)
        self.assertEqual(full.server_rows, snap.server_rows)
        cals = [s.calendar or calendar.Calendar({}) for s in (full, snap)]
        for h in ('h0', 'h1', 'h2'):
            for start, end in ((NOW, None), (NOW + HOUR, NOW + 4 * HOUR)):
                self.assertEqual(*[c.peak(h, start, end) for c in cals])
                self.assertEqual(*[c.next_demand_start(h, start)
                                   for c in cals])
        for hosts in (['h0'], ['h1', 'h2']):
            for refs in ([], ['r0', 'r1']):
                a, b = (s.calendar_without(refs, hosts) for s in (full, snap))
                self.assertEqual(sorted(a.items) if a else [],
                                 sorted(b.items) if b else [])

    @settings(max_examples=150, deadline=None, database=None)
    @given(st.data())
    def test_patched_equals_built(self, data):
        # Merge the overlays often too.
        self.useFixture(fixtures.MonkeyPatch(
            'nova_lease.scheduler.mappings.COMPACT_SIZE',
            data.draw(st.sampled_from([0, 2, 4096]))))
        state = data.draw(_state())
        snap = _build(state)
        for _ in range(data.draw(st.integers(1, 5))):
            rids = data.draw(st.lists(st.sampled_from(RIDS), unique=True))
            reservations, items = {}, []
            for rid in rids:
                if data.draw(st.booleans()):
                    res, its = data.draw(_reservation(rid))
                    state[rid] = (res, its)
                    reservations[rid] = res
                    items.extend(its)
                else:
                    state.pop(rid, None)
            snap = snap.patched(rids, reservations, items, ('v',), {})
            self._assert_same(_build(state), snap)
        self.assertEqual(('v',), snap.version)


class LayeredTest(testtools.TestCase):

    def test_mapping(self):
        base = {'a': 1, 'b': 2}
        layer = mappings.Layered(base)
        new = layer.patched({'a': mappings.GONE, 'c': 3, 'b': 4})
        self.assertEqual({'a': 1, 'b': 2}, dict(layer))
        self.assertEqual({'b': 4, 'c': 3}, dict(new))
        self.assertEqual(2, len(new))
        self.assertNotIn('a', new)
        self.assertIsNone(new.get('a'))
        self.assertRaises(KeyError, new.__getitem__, 'a')
        self.assertEqual(4, new['b'])
        self.assertIs(base, new._base)
        again = new.patched({'a': 5, 'zz': mappings.GONE})
        self.assertEqual({'a': 5, 'b': 4, 'c': 3}, dict(again))
        self.assertEqual(3, len(again))
        self.assertIs(again, again.patched({}))

    def test_compaction(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_lease.scheduler.mappings.COMPACT_SIZE', 1))
        layer = mappings.Layered({'a': 1})
        new = layer.patched({'b': 2, 'a': mappings.GONE})
        self.assertEqual({}, new._top)
        self.assertEqual({'b': 2}, new._base)
        self.assertEqual({'a': 1}, dict(layer))
