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
"""Calendar.with_changes() splices rebuilt hosts: it must answer exactly
like a calendar built from scratch with the same items.
"""

import datetime
import random

import fixtures
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from nova_lease import calendar
from nova_lease.calendar import fit
from tests.unit import test_calendar as base

T = base.T
HOSTS = base.HOSTS
ORPHAN = base.ORPHAN
ALL = base._ALL_HOSTS + ('new1', 'new2')


def _assert_same(test, full, inc, rng, rounds=20,
                 unit=datetime.timedelta(minutes=30), span=20):
    """Every query of ``inc`` answers like ``full``."""
    test.assertEqual(sorted(full.items, key=repr),
                     sorted(inc.items, key=repr))
    test.assertEqual(full.hosts, inc.hosts)
    for _ in range(rounds):
        s = T(rng.randrange(-1, span), unit)
        e = rng.choice([None, s, s + rng.randrange(0, span) * unit])
        demand = calendar.Demand(rng.randint(0, 6), rng.randint(0, 8),
                                 rng.randint(0, 6), rng.random() < 0.15)
        test.assertEqual(full.hosts_that_fit(demand, s, e, hosts=ALL),
                         inc.hosts_that_fit(demand, s, e, hosts=ALL))
        test.assertEqual(full.hosts_that_fit(demand, s, e),
                         inc.hosts_that_fit(demand, s, e))
        test.assertEqual(full.slack_seconds(demand, s, e, hosts=ALL),
                         inc.slack_seconds(demand, s, e, hosts=ALL))
        test.assertEqual(full.next_demand_starts(s, hosts=ALL),
                         inc.next_demand_starts(s, hosts=ALL))
        for h in ALL:
            test.assertEqual(full.fits(h, demand, s, e),
                             inc.fits(h, demand, s, e), h)
            test.assertEqual(full.peak(h, s, e), inc.peak(h, s, e), h)
            test.assertEqual(full.fit_horizon(h, demand, s),
                             inc.fit_horizon(h, demand, s), h)
            test.assertEqual(full.next_demand_start(h, s),
                             inc.next_demand_start(h, s), h)
            test.assertEqual(full.usage_steps(h, s, e),
                             inc.usage_steps(h, s, e), h)
            test.assertEqual(
                full.free_periods(h, demand, unit, s, e),
                inc.free_periods(h, demand, unit, s, e), h)
        # What the scheduler asks (nova_lease.calendar.fit), with
        # leased servers on the hosts.
        loads = fit.Loads.from_host_loads([
            fit.HostLoad(h, calendar.HostCapacity(8, 10, 8), (1, 1, 1),
                         ((T(rng.randrange(0, span), unit),
                           calendar.Demand(1, 1, 1)),))
            for h in ALL])
        demand = demand._replace(whole_host=False)
        test.assertEqual(fit.fits(full, loads, demand, s, e),
                         fit.fits(inc, loads, demand, s, e))
        test.assertEqual(fit.slack_seconds(full, loads, demand, s, e),
                         fit.slack_seconds(inc, loads, demand, s, e))
        test.assertEqual(fit.next_promise_seconds(full, ALL, s),
                         fit.next_promise_seconds(inc, ALL, s))


@st.composite
def _changes(draw, items):
    """A sequence of (add, remove) batches valid for ``items``."""
    current = list(items)
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        remove = []
        if current:
            picks = draw(st.lists(st.integers(0, len(current) - 1),
                                  max_size=3, unique=True))
            remove = [current[k] for k in picks]
        add = draw(st.lists(st.one_of(
            base._items(),
            st.builds(lambda it, h: it._replace(host=h), base._items(),
                      st.sampled_from(('new1', 'new2')))), max_size=4))
        for it in remove:
            current.remove(it)
        current.extend(add)
        steps.append((add, remove))
    return steps, current


class IncrementalPropertyTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        # Always splice (small calendars would be rebuilt in full).
        self.useFixture(fixtures.MonkeyPatch(
            'nova_lease.calendar.store.REBUILD_SHARE', 1e9))

    @settings(max_examples=150, deadline=None, database=None)
    @given(st.data())
    def test_spliced_equals_full_build(self, data):
        caps, items = data.draw(base._scenarios())
        steps, final = data.draw(_changes(items))
        cal = calendar.Calendar(caps, items)
        for add, remove in steps:
            cal = cal.with_changes(add=add, remove=remove)
        full = calendar.Calendar(caps, final)
        _assert_same(self, full, cal, random.Random(len(final)))

    def test_unchanged_calendar_is_not_modified(self):
        i1 = calendar.Item('h0', T(0), T(4), 2, 1, 1, ref='a')
        i2 = calendar.Item('h1', T(1), T(3), 1, 1, 1, ref='b')
        cal = calendar.Calendar({'h0': (4, 4, 4), 'h1': (4, 4, 4)},
                                [i1, i2])
        times = cal._times[:cal._used].copy()
        new = cal.with_changes(add=[i1._replace(ref='c')], remove=[i2])
        self.assertTrue((times == cal._times[:cal._used]).all())
        self.assertEqual(['h0', 'h1'],
                         cal.hosts_that_fit(calendar.Demand(2), T(0), T(4)))
        self.assertEqual(['h1'],
                         new.hosts_that_fit(calendar.Demand(2), T(0), T(4)))
        self.assertEqual(
            ['h0', 'h1'], new.with_changes(remove=[i1, i1._replace(
                ref='c')]).hosts_that_fit(calendar.Demand(4), T(0), T(4)))
        self.assertRaises(ValueError, new._times.__setitem__, 0, 1)
        self.assertRaises(KeyError, new.with_changes, remove=[i2])
        self.assertRaises(ValueError, cal.with_changes, add=[
            calendar.Item('h0', T(2), T(1), 1)])


class IncrementalLargeTest(testtools.TestCase):
    """Many items per host: several blocks and sparse-table levels; runs
    that grow past the table's levels (the whole calendar is rebuilt).
    """

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MonkeyPatch(
            'nova_lease.calendar.store.REBUILD_SHARE', 1e9))

    def _item(self, rng, host=None):
        minute = datetime.timedelta(minutes=1)
        start = T(rng.randrange(0, 3000), minute)
        x = rng.random()
        end = None if x < 0.03 else start + rng.randrange(0, 240) * minute
        return calendar.Item(
            host or rng.choice(HOSTS + (ORPHAN,)), start, end,
            rng.randint(0, 6), rng.randint(0, 12), rng.randint(0, 8),
            whole_host=x > 0.995, ref=rng.randrange(10 ** 9))

    @settings(max_examples=10, deadline=None, database=None)
    @given(st.integers(0, 2 ** 32), st.integers(50, 400))
    def test_against_full_build(self, seed, n_items):
        rng = random.Random(seed)
        caps = {h: calendar.HostCapacity(rng.randint(20, 60),
                                         rng.randint(40, 120),
                                         rng.randint(30, 90))
                for h in HOSTS}
        items = [self._item(rng) for _ in range(n_items)]
        cal = calendar.Calendar(caps, items)
        current = list(items)
        for _ in range(rng.randint(1, 12)):
            # A burst on one host: its run may outgrow the table.
            host = rng.choice(HOSTS + ('new1',))
            add = [self._item(rng, host)
                   for _ in range(rng.choice((1, 2, 5, 300)))]
            remove = rng.sample(current, min(len(current),
                                             rng.randint(0, 5)))
            for it in remove:
                current.remove(it)
            current.extend(add)
            cal = cal.with_changes(add=add, remove=remove)
        full = calendar.Calendar(caps, current)
        _assert_same(self, full, cal, rng, rounds=8,
                     unit=datetime.timedelta(minutes=1), span=3300)
        # Its range table has the levels its runs need (it grew when a run
        # outgrew it; it never shrinks, so it may have more than a
        # calendar built afresh).
        self.assertGreaterEqual(cal._table.shape[1], full._table.shape[1])

    def test_derived_calendars_do_not_disturb_each_other(self):
        # Calendars derived from one another share their arrays: each
        # writes only where the others never read; two derived from the
        # same one do not share.
        rng = random.Random(7)
        items = [self._item(rng) for _ in range(500)]
        cal = calendar.Calendar({}, items)
        chain = [(cal, list(items))]
        for k in range(60):
            parent, its = chain[rng.randrange(len(chain))] if k % 3 \
                else chain[-1]
            add = [self._item(rng, rng.choice(HOSTS))
                   for _ in range(rng.choice((1, 3, 40)))]
            remove = rng.sample(its, min(len(its), 2))
            new_items = [it for it in its if it not in remove] + add
            chain.append((parent.with_changes(add=add, remove=remove),
                          new_items))
        for cal, its in chain:
            _assert_same(self, calendar.Calendar({}, its), cal, rng,
                         rounds=2, unit=datetime.timedelta(minutes=1),
                         span=3300)
            for name in ('_times', '_vals', '_table', '_nextrel', '_off',
                         '_real', '_end'):
                self.assertFalse(getattr(cal, name).flags.writeable, name)
