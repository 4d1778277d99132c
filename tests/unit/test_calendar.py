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
"""The capacity calendar against a brute-force reference."""

import datetime
import functools
import math
import random

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from nova_lease import calendar

BASE = datetime.datetime(2026, 3, 1, 8, 0)
HOUR = datetime.timedelta(hours=1)
HOSTS = ('h0', 'h1', 'h2')
ORPHAN = 'hx'   # has items but no capacity


def T(k, unit=datetime.timedelta(minutes=30)):
    return BASE + k * unit


class Reference(object):
    """Brute force: sum the items directly at every boundary instant."""

    def __init__(self, capacities, items):
        self.caps = {h: calendar.HostCapacity(*c)
                     for h, c in capacities.items()}
        self.items = [it for it in items
                      if it.end is None or it.end > it.start]

    @functools.lru_cache(maxsize=None)
    def _on(self, host):
        return tuple(it for it in self.items if it.host == host)

    @functools.lru_cache(maxsize=None)
    def usage_at(self, host, t):
        """(vcpus, memory_mb, disk_gb, items, whole_host) at instant t."""
        v = m = d = n = 0
        whole = False
        for it in self._on(host):
            if it.start <= t and (it.end is None or t < it.end):
                n += 1
                if it.whole_host:
                    whole = True
                else:
                    v += it.vcpus
                    m += it.memory_mb
                    d += it.disk_gb
        return v, m, d, n, whole

    def points(self, host, s, e):
        """Instants in [s, e) where the usage may change, and s."""
        if e is not None and e <= s:
            return []
        pts = {s}
        for it in self._on(host):
            for b in (it.start, it.end):
                if b is not None and s < b and (e is None or b < e):
                    pts.add(b)
        return sorted(pts)

    def fits_at(self, host, demand, t):
        cap = self.caps[host]
        v, m, d, n, whole = self.usage_at(host, t)
        if demand.whole_host:
            return n == 0
        return (not whole and v + demand.vcpus <= cap.vcpus and
                m + demand.memory_mb <= cap.memory_mb and
                d + demand.disk_gb <= cap.disk_gb)

    def fits(self, host, demand, s, e):
        if host not in self.caps:
            return False
        pts = self.points(host, s, e)
        if not pts:
            cap = self.caps[host]
            return demand.whole_host or (
                demand.vcpus <= cap.vcpus and
                demand.memory_mb <= cap.memory_mb and
                demand.disk_gb <= cap.disk_gb)
        return all(self.fits_at(host, demand, t) for t in pts)

    def peak(self, host, s, e):
        usages = [self.usage_at(host, t) for t in self.points(host, s, e)]
        if not usages:
            return calendar.Usage(0, 0, 0, False)
        return calendar.Usage(max(u[0] for u in usages),
                              max(u[1] for u in usages),
                              max(u[2] for u in usages),
                              any(u[4] for u in usages))

    def hosts_that_fit(self, demand, s, e, hosts):
        return [h for h in hosts if self.fits(h, demand, s, e)]

    def free_periods(self, host, demand, min_length, ws, we):
        if host not in self.caps:
            return []
        pts = self.points(host, ws, we)
        periods = []
        for a, b in zip(pts, pts[1:] + [we]):
            if not self.fits_at(host, demand, a):
                continue
            if periods and periods[-1][1] == a:
                periods[-1] = (periods[-1][0], b)
            else:
                periods.append((a, b))
        return [(a, b) for a, b in periods
                if b is None or b - a >= min_length]

    def fit_horizon(self, host, demand, s):
        if host not in self.caps:
            return s
        for t in self.points(host, s, None):
            if not self.fits_at(host, demand, t):
                return t
        return None

    def slack_seconds(self, demand, s, e, host):
        if host not in self.caps:
            return -math.inf
        horizon = self.fit_horizon(host, demand, s)
        if horizon is None:
            return math.inf
        if e is None:
            return -math.inf
        return (horizon - e).total_seconds()

    def next_demand_start(self, host, after):
        starts = [it.start for it in self._on(host) if it.start >= after]
        return min(starts) if starts else None


# ---------------------------------------------------------------------------
# strategies: few instants on a coarse grid, so that items touch and collide

_times = st.integers(0, 16)
_demands = st.builds(calendar.Demand, st.integers(0, 4), st.integers(0, 4),
                     st.integers(0, 3),
                     st.sampled_from([False] * 5 + [True]))


@st.composite
def _items(draw):
    start = draw(_times)
    length = draw(st.one_of(st.none(), st.integers(0, 8)))
    return calendar.Item(
        draw(st.sampled_from(HOSTS + (ORPHAN,))), T(start),
        None if length is None else T(start + length),
        draw(st.integers(0, 4)), draw(st.integers(0, 4)),
        draw(st.integers(0, 3)), draw(st.sampled_from([False] * 8 + [True])))


@st.composite
def _scenarios(draw):
    caps = {h: calendar.HostCapacity(draw(st.integers(-1, 8)),
                                     draw(st.integers(0, 8)),
                                     draw(st.integers(0, 6)))
            for h in HOSTS[:draw(st.integers(0, len(HOSTS)))]}
    items = draw(st.lists(_items(), max_size=14))
    return caps, items


@st.composite
def _intervals(draw):
    start = draw(st.integers(-1, 18))
    length = draw(st.one_of(st.none(), st.integers(0, 10)))
    return T(start), None if length is None else T(start + length)


_ALL_HOSTS = HOSTS + (ORPHAN, 'unknown')


class PropertyTest(testtools.TestCase):
    """Small random calendars, every query against the reference."""

    @settings(max_examples=120, deadline=None, database=None)
    @given(_scenarios(), _demands, _intervals())
    def test_fits_and_hosts_that_fit(self, scenario, demand, interval):
        caps, items = scenario
        cal = calendar.Calendar(caps, items)
        ref = Reference(caps, items)
        s, e = interval
        for h in _ALL_HOSTS:
            self.assertEqual(ref.fits(h, demand, s, e),
                             cal.fits(h, demand, s, e), h)
        self.assertEqual(ref.hosts_that_fit(demand, s, e, list(caps)),
                         cal.hosts_that_fit(demand, s, e))
        hosts = [ORPHAN, 'h2', 'unknown', 'h0', 'h2']
        self.assertEqual(ref.hosts_that_fit(demand, s, e, hosts),
                         cal.hosts_that_fit(demand, s, e, hosts=hosts))

    @settings(max_examples=80, deadline=None, database=None)
    @given(_scenarios(), _intervals())
    def test_peak(self, scenario, interval):
        caps, items = scenario
        cal = calendar.Calendar(caps, items)
        ref = Reference(caps, items)
        for h in _ALL_HOSTS:
            self.assertEqual(ref.peak(h, *interval), cal.peak(h, *interval))

    @settings(max_examples=80, deadline=None, database=None)
    @given(_scenarios(), _demands, _intervals(), st.integers(0, 6))
    def test_free_periods(self, scenario, demand, window, min_len):
        caps, items = scenario
        cal = calendar.Calendar(caps, items)
        ref = Reference(caps, items)
        min_length = T(min_len) - T(0)
        for h in _ALL_HOSTS:
            self.assertEqual(
                ref.free_periods(h, demand, min_length, *window),
                cal.free_periods(h, demand, min_length, *window), h)

    @settings(max_examples=80, deadline=None, database=None)
    @given(_scenarios(), _demands, _intervals())
    def test_horizon_slack_next_start(self, scenario, demand, interval):
        caps, items = scenario
        cal = calendar.Calendar(caps, items)
        ref = Reference(caps, items)
        s, e = interval
        slack = cal.slack_seconds(demand, s, e, hosts=_ALL_HOSTS)
        starts = cal.next_demand_starts(s, hosts=_ALL_HOSTS)
        for h in _ALL_HOSTS:
            self.assertEqual(ref.fit_horizon(h, demand, s),
                             cal.fit_horizon(h, demand, s), h)
            self.assertEqual(ref.slack_seconds(demand, s, e, h), slack[h])
            self.assertEqual(ref.next_demand_start(h, s),
                             cal.next_demand_start(h, s))
            self.assertEqual(ref.next_demand_start(h, s), starts[h])

    @settings(max_examples=60, deadline=None, database=None)
    @given(_scenarios(), _intervals())
    def test_usage_steps(self, scenario, window):
        caps, items = scenario
        cal = calendar.Calendar(caps, items)
        ref = Reference(caps, items)
        for h in _ALL_HOSTS:
            steps = cal.usage_steps(h, *window)
            pts = ref.points(h, *window)
            self.assertEqual(bool(pts), bool(steps))
            if not pts:
                continue
            self.assertEqual(window[0], steps[0][0])
            for (t0, u0), (t1, u1) in zip(steps, steps[1:]):
                self.assertLess(t0, t1)
                self.assertNotEqual(u0, u1)
            for t in pts:
                current = [u for st_, u in steps if st_ <= t][-1]
                v, m, d, n, whole = ref.usage_at(h, t)
                self.assertEqual(calendar.Usage(v, m, d, whole), current)


class LargeRandomTest(testtools.TestCase):
    """Hundreds of items per host: several blocks and sparse-table levels,
    so the vectorised paths (block maxima, binary lifting) are exercised.
    """

    def _scenario(self, seed, n_items):
        rng = random.Random(seed)
        minute = datetime.timedelta(minutes=1)
        caps = {h: calendar.HostCapacity(rng.randint(20, 60),
                                         rng.randint(40, 120),
                                         rng.randint(30, 90))
                for h in HOSTS}
        items = []
        for k in range(n_items):
            start = T(rng.randrange(0, 3000), minute)
            x = rng.random()
            if x < 0.03:
                end = None
            else:
                end = start + rng.randrange(0, 240) * minute
            items.append(calendar.Item(
                rng.choice(HOSTS + (ORPHAN,)), start, end,
                rng.randint(0, 6), rng.randint(0, 12), rng.randint(0, 8),
                whole_host=x > 0.995, ref=k))
        return rng, caps, items

    @settings(max_examples=12, deadline=None, database=None)
    @given(st.integers(0, 2 ** 32), st.integers(100, 700))
    def test_against_reference(self, seed, n_items):
        rng, caps, items = self._scenario(seed, n_items)
        cal = calendar.Calendar(caps, items)
        ref = Reference(caps, items)
        minute = datetime.timedelta(minutes=1)
        for _ in range(25):
            s = T(rng.randrange(-10, 3300), minute)
            e = rng.choice([None, s + rng.randrange(0, 1500) * minute,
                            s + rng.randrange(0, 30) * minute])
            demand = calendar.Demand(rng.randint(0, 20), rng.randint(0, 40),
                                     rng.randint(0, 30), rng.random() < 0.1)
            self.assertEqual(
                ref.hosts_that_fit(demand, s, e, _ALL_HOSTS),
                cal.hosts_that_fit(demand, s, e, hosts=_ALL_HOSTS))
            slack = cal.slack_seconds(demand, s, e, hosts=_ALL_HOSTS)
            starts = cal.next_demand_starts(s, hosts=_ALL_HOSTS)
            for h in _ALL_HOSTS:
                self.assertEqual(ref.slack_seconds(demand, s, e, h),
                                 slack[h], h)
                self.assertEqual(ref.next_demand_start(h, s), starts[h])
            h = rng.choice(_ALL_HOSTS)
            self.assertEqual(ref.fits(h, demand, s, e),
                             cal.fits(h, demand, s, e))
            self.assertEqual(ref.peak(h, s, e), cal.peak(h, s, e))
            self.assertEqual(ref.fit_horizon(h, demand, s),
                             cal.fit_horizon(h, demand, s))
        h = rng.choice(HOSTS)
        demand = calendar.Demand(rng.randint(0, 10), rng.randint(0, 20),
                                 rng.randint(0, 10))
        self.assertEqual(
            ref.free_periods(h, demand, 20 * minute, T(0), T(3500, minute)),
            cal.free_periods(h, demand, 20 * minute, T(0), T(3500, minute)))

    @settings(max_examples=8, deadline=None, database=None)
    @given(st.integers(0, 2 ** 32), st.integers(50, 400),
           st.sampled_from(['all', 'mixed']))
    def test_items_in_microseconds(self, seed, n_items, how):
        # The side database's window reads give dates as integer
        # microseconds (admission); all so, or mixed with datetimes, the
        # calendar answers as with the datetimes.
        rng, caps, items = self._scenario(seed, n_items)

        def us(item, k):
            if how == 'mixed' and k % 3:
                return item
            return item._replace(
                start=calendar.to_us(item.start),
                end=None if item.end is None else calendar.to_us(item.end))

        cal = calendar.Calendar(caps, items)
        cal_us = calendar.Calendar(caps, [us(i, k)
                                          for k, i in enumerate(items)])
        minute = datetime.timedelta(minutes=1)
        for _ in range(10):
            s = T(rng.randrange(-10, 3300), minute)
            e = rng.choice([None, s + rng.randrange(0, 1500) * minute])
            demand = calendar.Demand(rng.randint(0, 20), rng.randint(0, 40),
                                     rng.randint(0, 30))
            self.assertEqual(cal.hosts_that_fit(demand, s, e),
                             cal_us.hosts_that_fit(demand, s, e))
            h = rng.choice(_ALL_HOSTS)
            self.assertEqual(cal.peak(h, s, e), cal_us.peak(h, s, e))
            self.assertEqual(cal.slack_seconds(demand, s, e),
                             cal_us.slack_seconds(demand, s, e))


class CapacityTest(testtools.TestCase):

    def test_placement_formula(self):
        # placement: capacity = (total - reserved) * allocation_ratio
        cap = calendar.HostCapacity.from_inventory(
            vcpus=8, memory_mb=16384, disk_gb=100,
            cpu_allocation_ratio=4.0, ram_allocation_ratio=1.5,
            disk_allocation_ratio=1.0, reserved_vcpus=2,
            reserved_memory_mb=512, reserved_disk_gb=10)
        self.assertEqual(calendar.HostCapacity(24, 23808, 90), cap)

    def test_matches_placement_inventory(self):
        from placement.objects import inventory
        rng = random.Random(7)
        for _ in range(200):
            total = rng.randint(0, 5000)
            reserved = rng.randint(0, total)
            ratio = rng.choice([1.0, 1.5, 0.9, 4.0, 16.0, 1.33])
            inv = inventory.Inventory(total=total, reserved=reserved,
                                      allocation_ratio=ratio)
            self.assertEqual(inv.capacity, calendar.usable_capacity(
                total, reserved, ratio))

    def test_fractional_capacity_rounds_down(self):
        self.assertEqual(4, calendar.usable_capacity(3, 0, 1.5))
        # More reserved than total: nothing is usable, not even 0 extra.
        self.assertEqual(-1, calendar.usable_capacity(1, 2, 0.5))

    def test_ratio_and_reserved_in_fits(self):
        cap = calendar.HostCapacity.from_inventory(
            4, 4096, 40, cpu_allocation_ratio=2.0, reserved_vcpus=1,
            reserved_memory_mb=1024, reserved_disk_gb=0)
        self.assertEqual((6, 3072, 40), tuple(cap))
        cal = calendar.Calendar({'h': cap},
                                [calendar.Item('h', T(0), T(4), 4, 1024, 0)])
        self.assertTrue(cal.fits('h', calendar.Demand(2, 2048), T(0), T(4)))
        self.assertFalse(cal.fits('h', calendar.Demand(3, 0), T(0), T(4)))
        self.assertFalse(cal.fits('h', calendar.Demand(0, 2049), T(1), T(2)))
        self.assertTrue(cal.fits('h', calendar.Demand(6, 3072), T(4), None))


class EdgeCaseTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.caps = {'a': calendar.HostCapacity(4, 4096, 100),
                     'b': calendar.HostCapacity(4, 4096, 100)}
        self.full = calendar.Demand(4, 4096, 100)
        self.one = calendar.Demand(1, 1, 1)

    def cal(self, *items):
        return calendar.Calendar(self.caps, items)

    def test_touching_intervals_do_not_overlap(self):
        cal = self.cal(calendar.Item('a', T(2), T(4), 4, 4096, 100))
        self.assertTrue(cal.fits('a', self.full, T(0), T(2)))
        self.assertTrue(cal.fits('a', self.full, T(4), T(6)))
        self.assertTrue(cal.fits('a', self.full, T(4), None))
        self.assertFalse(cal.fits('a', self.one, T(0), T(3)))
        self.assertFalse(cal.fits('a', self.one, T(3), T(5)))
        us = datetime.timedelta(microseconds=1)
        self.assertFalse(cal.fits('a', self.one, T(0), T(2) + us))
        self.assertFalse(cal.fits('a', self.one, T(4) - us, T(6)))
        self.assertEqual(['b'], cal.hosts_that_fit(self.one, T(0), T(3)))
        self.assertEqual(['a', 'b'], cal.hosts_that_fit(self.full, T(4),
                                                        None))

    def test_zero_length(self):
        cal = self.cal(calendar.Item('a', T(2), T(2), 4, 4096, 100),
                       calendar.Item('b', T(0), T(4), 4, 4096, 100))
        self.assertTrue(cal.fits('a', self.full, T(0), None))  # ignored item
        self.assertEqual([], cal.free_periods('a', self.one, HOUR, T(1),
                                              T(1)))
        # An empty request interval uses nothing: it fits if the demand
        # fits the empty host.
        self.assertTrue(cal.fits('b', self.full, T(1), T(1)))
        self.assertFalse(cal.fits('b', calendar.Demand(5), T(1), T(1)))
        self.assertEqual(calendar.Usage(0, 0, 0, False),
                         cal.peak('b', T(1), T(1)))

    def test_open_ended(self):
        cal = self.cal(calendar.Item('a', T(-100), None, 2, 0, 0),
                       calendar.Item('b', T(10), T(12), 3, 0, 0))
        big = calendar.Demand(3)
        self.assertFalse(cal.fits('a', big, T(1000000), None))
        self.assertTrue(cal.fits('a', calendar.Demand(2), T(0), None))
        # [now, forever) sees a promise far in the future.
        self.assertFalse(cal.fits('b', calendar.Demand(2), T(0), None))
        self.assertTrue(cal.fits('b', calendar.Demand(2), T(0), T(10)))
        self.assertEqual(
            [(T(0), T(10)), (T(12), None)],
            cal.free_periods('b', calendar.Demand(2), HOUR, T(0), None))
        self.assertEqual({'a': math.inf, 'b': 0.0},
                         cal.slack_seconds(calendar.Demand(2), T(0), T(10)))
        # 'a' cannot take it even now: the slack is negative.
        self.assertEqual({'a': -5 * 3600.0, 'b': 0.0},
                         cal.slack_seconds(big, T(0), T(10)))
        self.assertEqual({'a': math.inf, 'b': -math.inf},
                         cal.slack_seconds(calendar.Demand(2), T(0), None))
        self.assertEqual({'a': math.inf, 'b': math.inf},
                         cal.slack_seconds(calendar.Demand(1), T(0), None))

    def test_extreme_datetimes(self):
        lo, hi = datetime.datetime.min, datetime.datetime.max
        cal = self.cal(calendar.Item('a', lo, hi, 4, 0, 0),
                       calendar.Item('b', lo, T(0), 4, 0, 0))
        self.assertFalse(cal.fits('a', self.one, hi - HOUR, None))
        self.assertTrue(cal.fits('b', self.one, T(0), None))
        self.assertFalse(cal.fits('b', self.one, lo, T(0)))
        self.assertEqual(calendar.Usage(4, 0, 0, False),
                         cal.peak('a', lo, None))

    def test_whole_host(self):
        whole = calendar.Demand.whole()
        cal = self.cal(calendar.Item('a', T(2), T(4), whole_host=True),
                       calendar.Item('b', T(6), T(7), 0, 0, 0))
        # Nothing fits next to a whole-host item, not even a zero demand.
        self.assertFalse(cal.fits('a', calendar.Demand(), T(3), T(5)))
        self.assertTrue(cal.fits('a', self.full, T(4), T(5)))
        self.assertEqual(calendar.Usage(0, 0, 0, True),
                         cal.peak('a', T(0), None))
        # A whole-host demand needs an empty host, even of a zero item.
        self.assertEqual(['b'], cal.hosts_that_fit(whole, T(2), T(4)))
        self.assertEqual(['a'], cal.hosts_that_fit(whole, T(5), T(8)))
        self.assertEqual([], cal.hosts_that_fit(whole, T(3), T(7)))
        self.assertEqual([(T(0), T(2)), (T(4), None)],
                         cal.free_periods('a', whole, HOUR, T(0), None))
        self.assertEqual(T(6), cal.fit_horizon('b', whole, T(0)))

    def test_empty_and_unknown_hosts(self):
        cal = calendar.Calendar(self.caps, [
            calendar.Item('orphan', T(0), T(2), 1, 1, 1)])
        self.assertEqual(('a', 'b'), cal.hosts)
        self.assertTrue(cal.fits('a', self.full, T(0), None))
        self.assertFalse(cal.fits('a', calendar.Demand(5), T(0), None))
        self.assertEqual(calendar.Usage(0, 0, 0, False),
                         cal.peak('a', T(0), None))
        self.assertEqual([(T(0), None)],
                         cal.free_periods('a', self.one, HOUR, T(0), None))
        self.assertIsNone(cal.next_demand_start('a', T(0)))
        self.assertIsNone(cal.fit_horizon('a', self.one, T(0)))
        # A host with items but no capacity never fits; it still has usage.
        self.assertFalse(cal.fits('orphan', calendar.Demand(), T(5), T(6)))
        self.assertEqual(calendar.Usage(1, 1, 1, False),
                         cal.peak('orphan', T(0), None))
        self.assertFalse(cal.fits('nowhere', calendar.Demand(), T(0), T(1)))
        self.assertEqual(['a'], cal.hosts_that_fit(
            self.one, T(0), T(1), hosts=['nowhere', 'orphan', 'a']))
        self.assertEqual({'nowhere': -math.inf, 'a': math.inf},
                         cal.slack_seconds(self.one, T(0), T(1),
                                           hosts=['nowhere', 'a']))
        self.assertEqual({'nowhere': None, 'orphan': T(0)},
                         cal.next_demand_starts(T(0),
                                                hosts=['nowhere', 'orphan']))

    def test_no_hosts_no_items(self):
        cal = calendar.Calendar({}, [])
        self.assertEqual([], cal.hosts_that_fit(self.one, T(0), None))
        self.assertEqual({}, cal.slack_seconds(self.one, T(0), None))
        self.assertEqual({}, cal.next_demand_starts(T(0)))
        self.assertFalse(cal.fits('a', self.one, T(0), None))
        cal = calendar.Calendar(self.caps, [])
        self.assertEqual(['a', 'b'], cal.hosts_that_fit(self.full, T(0),
                                                        None))

    def test_next_demand_start_is_inclusive(self):
        cal = self.cal(calendar.Item('a', T(2), T(4), 1, 1, 1),
                       calendar.Item('a', T(6), None, 1, 1, 1))
        self.assertEqual(T(2), cal.next_demand_start('a', T(2)))
        self.assertEqual(T(6), cal.next_demand_start('a', T(3)))
        self.assertIsNone(cal.next_demand_start('a', T(7)))
        self.assertIsNone(cal.next_demand_start('b', T(0)))

    def test_tight_fit_has_smallest_slack(self):
        cal = self.cal(calendar.Item('a', T(4), T(8), 4, 0, 0),
                       calendar.Item('b', T(10), T(12), 4, 0, 0))
        slack = cal.slack_seconds(self.one, T(0), T(3))
        self.assertEqual({'a': 1800.0, 'b': 7 * 1800.0}, slack)
        self.assertEqual('a', min(slack, key=slack.get))
        self.assertEqual(T(4), cal.fit_horizon('a', self.one, T(0)))
        self.assertEqual(T(5), cal.fit_horizon('a', self.one, T(5)))

    def test_horizon_far_away(self):
        # Long runs of small items, then one that blocks: the horizon must
        # be found across many blocks (every sparse-table level).
        minute = datetime.timedelta(minutes=1)
        caps = {'h%d' % k: calendar.HostCapacity(8, 100, 100)
                for k in range(6)}
        items = []
        for k, runs in enumerate((0, 3, 17, 40, 130, 600)):
            host = 'h%d' % k
            for r in range(runs):
                items.append(calendar.Item(host, T(r, minute),
                                           T(r + 1, minute), 1, 1, 1))
            items.append(calendar.Item(host, T(runs + 5, minute), None,
                                       8, 0, 0))
        cal = calendar.Calendar(caps, items)
        ref = Reference(caps, items)
        demand = calendar.Demand(1, 1, 1)
        for start in (T(-1), T(0), T(2, minute), T(39, minute)):
            slack = cal.slack_seconds(demand, start, start + minute)
            for host in caps:
                self.assertEqual(
                    ref.slack_seconds(demand, start, start + minute, host),
                    slack[host], host)
                self.assertEqual(ref.fit_horizon(host, demand, start),
                                 cal.fit_horizon(host, demand, start))

    def test_peak_per_resource_at_different_times(self):
        cal = self.cal(calendar.Item('a', T(0), T(1), 4, 0, 0),
                       calendar.Item('a', T(1), T(2), 0, 4096, 0))
        self.assertEqual(calendar.Usage(4, 4096, 0, False),
                         cal.peak('a', T(0), T(2)))
        # fits() is exact per instant: each resource is checked against
        # its own peak, which is the same as checking every instant.
        self.assertFalse(cal.fits('a', calendar.Demand(1, 0), T(0), T(2)))
        self.assertTrue(cal.fits('a', calendar.Demand(0, 0, 100), T(0),
                                 T(2)))

    def test_aware_datetimes_are_converted(self):
        tz = datetime.timezone(datetime.timedelta(hours=2))
        aware = (T(2) + 2 * HOUR).replace(tzinfo=tz)   # == T(2) in UTC
        cal = self.cal(calendar.Item('a', aware, None, 4, 0, 0))
        self.assertTrue(cal.fits('a', self.one, T(0), T(2)))
        self.assertFalse(cal.fits('a', self.one, T(0), aware + HOUR))
        self.assertEqual(T(2), cal.next_demand_start('a', T(0)))

    def test_invalid_input(self):
        cal = self.cal()
        self.assertRaises(ValueError, cal.fits, 'a', self.one, T(2), T(1))
        self.assertRaises(ValueError, cal.hosts_that_fit, self.one, T(2),
                          T(1))
        self.assertRaises(ValueError, cal.fits, 'a', calendar.Demand(-1),
                          T(0), T(1))
        self.assertRaises(ValueError, self.cal,
                          calendar.Item('a', T(2), T(1), 1))
        self.assertRaises(ValueError, self.cal,
                          calendar.Item('a', T(0), T(1), -1))

    def test_with_changes(self):
        i1 = calendar.Item('a', T(0), T(4), 4, 0, 0, ref='r1')
        i2 = calendar.Item('b', T(0), None, 4, 0, 0, ref='r2')
        cal = self.cal(i1)
        changed = cal.with_changes(add=[i2], remove=[i1])
        self.assertEqual(['a'], changed.hosts_that_fit(self.one, T(0), T(1)))
        self.assertEqual(['b'], cal.hosts_that_fit(self.one, T(0), T(1)))
        self.assertEqual((i2,), changed.items)
        self.assertEqual(i2, calendar.Item.for_demand(
            'b', calendar.Demand(4), T(0), ref='r2'))
        self.assertRaises(KeyError, cal.with_changes, remove=[i2])
        dup = self.cal(i1, i1).with_changes(remove=[i1])
        self.assertEqual((i1,), dup.items)
        recapped = cal.with_changes(capacities={
            'a': calendar.HostCapacity(8, 4096, 100), 'b': None,
            'c': (1, 1, 1)})
        self.assertEqual(('a', 'c'), recapped.hosts)
        self.assertEqual(['a', 'c'],
                         recapped.hosts_that_fit(self.one, T(0), None))

    def test_snapshot_is_read_only(self):
        cal = self.cal(calendar.Item('a', T(0), T(4), 4, 0, 0))
        self.assertRaises(ValueError, cal._vals.__setitem__, (0, 0), 1)
        self.assertRaises(ValueError, cal._times.__setitem__, 0, 1)
