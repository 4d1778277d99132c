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
"""The offer search (nova_lease.calendar.offers) against a brute force.

The reference looks at every minute of the window, host by host, with
plain Python overlap checks: the first offer must be the first minute
that fits, every offer must fit as it says, and the offers must be the
first ``limit`` feasible starts among the allocations' boundaries.
"""

import datetime

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from nova_lease import calendar
from nova_lease.calendar import offers

T0 = datetime.datetime(2030, 1, 1)
SIZE = (8, 8192, 100)


def _t(minute):
    return T0 + datetime.timedelta(minutes=minute)


def _overlaps(item, s, e):
    return item[1] < e and s < item[2]


def _host_free(items, host, s, e):
    return not any(i[0] == host and _overlaps(i, s, e) for i in items)


def _slots_free(items, host, s, e, req, size):
    mine = [i for i in items if i[0] == host and _overlaps(i, s, e)]
    if any(i[6] for i in mine):
        return 0
    peak = [0, 0, 0]
    for t in sorted({max(s, i[1]) for i in mine}):
        load = [0, 0, 0]
        for i in mine:
            if i[1] <= t < i[2]:
                for r in range(3):
                    load[r] += i[3 + r]
        peak = [max(a, b) for a, b in zip(peak, load)]
    counts = [(size[r] - peak[r]) // need
              for r, need in enumerate((req.vcpus, req.memory_mb,
                                        req.disk_gb)) if need > 0]
    return max(0, min(counts)) if counts else req.amount


def _fits(items, hosts, req, s, length):
    e = s + length
    if isinstance(req, offers.HostsRequest):
        return sum(_host_free(items, h, s, e) for h in hosts) >= req.min
    free = [_slots_free(items, h, s, e, req, SIZE) for h in hosts]
    if req.affinity:
        return max(free) >= req.amount
    if req.affinity is False:
        return sum(1 for f in free if f >= 1) >= req.amount
    return sum(free) >= req.amount


items_st = st.lists(st.tuples(
    st.sampled_from(['h0', 'h1', 'h2', 'h3']),
    st.integers(0, 300), st.integers(1, 120),
    st.integers(0, 8), st.integers(0, 8192), st.integers(0, 100),
    st.booleans()), max_size=14)


class OffersPropertyTest(testtools.TestCase):

    def _check(self, raw, req, duration, earliest, latest, cleaning, limit):
        items = [(h, s, s + d, v, m, g, w) for h, s, d, v, m, g, w in raw]
        cal = calendar.Calendar({}, [
            calendar.Item(h, _t(s), _t(e), v, m, g, w, ref=n)
            for n, (h, s, e, v, m, g, w) in enumerate(items)]) \
            if items else None
        hosts = ['h0', 'h1', 'h2', 'h3']
        whole = isinstance(req, offers.HostsRequest)
        length = duration + (cleaning if whole else 0)
        found = offers.find_offers(
            cal, hosts, req, datetime.timedelta(minutes=duration),
            _t(earliest), _t(latest), limit,
            cleaning=datetime.timedelta(minutes=cleaning),
            sizes=dict.fromkeys(hosts, SIZE))
        feasible = [m for m in range(earliest, latest + 1)
                    if _fits(items, hosts, req, m, length)]
        if not feasible:
            self.assertEqual([], found)
            return
        self.assertTrue(found)
        # The first offer is the first minute that fits.
        self.assertEqual(_t(feasible[0]), found[0].start)
        if whole:
            # The offers: the first `limit` feasible starts where a host
            # becomes free (or the earliest).
            def opens(m):
                return m == earliest or any(
                    _host_free(items, h, m, m + length) and
                    not _host_free(items, h, m - 1, m - 1 + length)
                    for h in hosts)
            expected = [m for m in feasible if opens(m)][:limit]
        else:
            # The first `limit` feasible boundaries (or the earliest).
            bounds = {earliest} | {i[1] for i in items} | {
                i[2] for i in items}
            expected = [m for m in feasible if m in bounds][:limit]
        self.assertEqual([_t(m) for m in expected],
                         [o.start for o in found])
        for o in found:
            s = int((o.start - T0).total_seconds() // 60)
            self.assertEqual(o.start + datetime.timedelta(minutes=duration),
                             o.end)
            self.assertTrue(0 < o.score <= 1)
            if whole:
                self.assertGreaterEqual(len(o.hosts), req.min)
                self.assertLessEqual(len(o.hosts), req.max)
                self.assertEqual(len(set(o.hosts)), len(o.hosts))
                for h in o.hosts:
                    self.assertTrue(_host_free(items, h, s, s + length))
            else:
                self.assertEqual(req.amount, len(o.hosts))
                for h in set(o.hosts):
                    self.assertLessEqual(
                        o.hosts.count(h),
                        _slots_free(items, h, s, s + length, req, SIZE))
                if req.affinity:
                    self.assertEqual(1, len(set(o.hosts)))
                if req.affinity is False:
                    self.assertEqual(len(o.hosts), len(set(o.hosts)))

    @settings(max_examples=200, deadline=None, database=None)
    @given(items_st, st.integers(1, 4), st.integers(0, 3),
           st.integers(1, 90), st.integers(0, 200), st.integers(0, 150),
           st.integers(0, 30), st.integers(1, 4))
    def test_hosts(self, raw, lo, extra, duration, earliest, span, cleaning,
                   limit):
        req = offers.HostsRequest(lo, lo + extra)
        self._check(raw, req, duration, earliest, earliest + span, cleaning,
                    limit)

    @settings(max_examples=200, deadline=None, database=None)
    @given(items_st, st.integers(0, 4), st.integers(0, 4096),
           st.integers(0, 50), st.integers(1, 6),
           st.sampled_from([True, False, None]), st.integers(1, 90),
           st.integers(0, 200), st.integers(0, 150), st.integers(1, 4))
    def test_slots(self, raw, vcpus, mem, disk, amount, affinity, duration,
                   earliest, span, limit):
        req = offers.SlotsRequest(vcpus, mem, disk, amount, affinity)
        self._check(raw, req, duration, earliest, earliest + span, 0, limit)

    def test_nothing_booked(self):
        found = offers.find_offers(
            None, ['a', 'b'], offers.HostsRequest(2, 2),
            datetime.timedelta(hours=4), T0, T0 + datetime.timedelta(days=1),
            5)
        self.assertEqual(1, len(found))
        self.assertEqual((T0, T0 + datetime.timedelta(hours=4)),
                         found[0][:2])
        self.assertEqual(['a', 'b'], sorted(found[0].hosts))

    def test_tightest_hosts_chosen(self):
        # b's next allocation starts right at the end of the offer: b
        # fits tightest and is chosen over a (free for ever).
        cal = calendar.Calendar({}, [
            calendar.Item('b', _t(60), _t(120), whole_host=True)])
        found = offers.find_offers(
            cal, ['a', 'b'], offers.HostsRequest(1, 1),
            datetime.timedelta(minutes=60), T0, _t(10), 1)
        self.assertEqual(['b'], found[0].hosts)
        self.assertEqual(1.0, found[0].score)
