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
"""nova_lease.calendar.fit against the calendar's own single-host answers.

The batch queries of fit.py read the calendar's internal arrays; here every
answer is compared with a Calendar built the slow, obvious way (current
usage as an open-ended item, each running leased server as an item ending
at its lease end) and asked through its public single-host methods.
"""

import datetime
import math
import random

import testtools

from nova_lease import calendar
from nova_lease.calendar import fit

T0 = datetime.datetime(2030, 1, 1)
EPOCH = datetime.datetime(2000, 1, 1)


def _t(hours):
    return T0 + datetime.timedelta(hours=hours)


def _random_case(rng, nhosts=4):
    hosts = ['h%d' % k for k in range(nhosts)]
    items = []
    for _n in range(rng.randint(0, 12)):
        a = rng.randint(-4, 20)
        b = a + rng.randint(1, 10)
        whole = rng.random() < 0.05
        items.append(calendar.Item(rng.choice(hosts), _t(a), _t(b),
                                   rng.randint(0, 4), rng.randint(0, 4096),
                                   rng.randint(0, 20), whole,
                                   'r%d' % rng.randint(0, 5)))
    loads = []
    for host in hosts:
        cap = calendar.HostCapacity(rng.randint(2, 10),
                                    rng.randint(2048, 16384),
                                    rng.randint(20, 200))
        leased = tuple(
            (_t(rng.randint(-1, 24)),
             calendar.Demand(rng.randint(0, 3), rng.randint(0, 2048),
                             rng.randint(0, 10)))
            for _n in range(rng.randint(0, 3)))
        extra = (rng.randint(0, 3), rng.randint(0, 2048),
                 rng.randint(0, 20))
        used = tuple(extra[i] + sum(s[i] for _e, s in leased)
                     for i in range(3))
        loads.append(fit.HostLoad(host, None if rng.random() < 0.05
                                  else cap, used, leased))
    return items, loads


def _reference(items, loads, now, drop_leased_before=None,
               leased_forever_after=None):
    caps = {load.host: load.capacity for load in loads
            if load.capacity is not None}
    ref = list(items)
    for load in loads:
        leased_sum = [sum(s[i] for _e, s in load.leased) for i in range(3)]
        unleased = [max(load.used[i] - leased_sum[i], 0) for i in range(3)]
        ref.append(calendar.Item(load.host, EPOCH, None, *unleased))
        for end, size in load.leased:
            if leased_forever_after is not None:
                if end <= leased_forever_after:
                    continue
                end = None
            ref.append(calendar.Item.for_demand(load.host, size, EPOCH, end))
    return calendar.Calendar(caps, ref)


class FitTest(testtools.TestCase):

    def test_fits_matches_single_host_fits(self):
        rng = random.Random(1234)
        for _case in range(400):
            items, loads = _random_case(rng)
            cal = calendar.Calendar({}, items) if items else None
            demand = calendar.Demand(rng.randint(0, 4),
                                     rng.randint(0, 4096),
                                     rng.randint(0, 20))
            start = _t(rng.randint(0, 10))
            end = (None if rng.random() < 0.2
                   else start + datetime.timedelta(
                       hours=rng.randint(1, 12)))
            ref = _reference(items, loads, start)
            expected = [load.capacity is not None and
                        ref.fits(load.host, demand, start, end)
                        for load in loads]
            self.assertEqual(expected,
                             fit.fits(cal, loads, demand, start, end),
                             (items, loads, demand, start, end))

    def test_slack_matches_fit_horizon(self):
        rng = random.Random(99)
        for _case in range(400):
            items, loads = _random_case(rng)
            cal = calendar.Calendar({}, items) if items else None
            demand = calendar.Demand(rng.randint(0, 2), rng.randint(0, 1024),
                                     rng.randint(0, 5))
            start = _t(rng.randint(0, 10))
            end = start + datetime.timedelta(hours=rng.randint(1, 6))
            got = fit.slack_seconds(cal, loads, demand, start, end)
            ref = _reference(items, loads, start, leased_forever_after=end)
            for load, slack in zip(loads, got):
                if load.capacity is None:
                    self.assertEqual(-math.inf, slack)
                    continue
                if not fit.fits(cal, [load], demand, start, end)[0]:
                    continue
                horizon = ref.fit_horizon(load.host, demand, end)
                expected = (math.inf if horizon is None
                            else (horizon - end).total_seconds())
                self.assertEqual(expected, slack,
                                 (items, load, demand, start, end))

    def test_headroom_matches_peak(self):
        rng = random.Random(4321)
        for _case in range(400):
            items, loads = _random_case(rng)
            cal = calendar.Calendar({}, items) if items else None
            demand = calendar.Demand(rng.randint(0, 2), rng.randint(0, 1024),
                                     rng.randint(0, 5))
            start = _t(rng.randint(0, 10))
            end = (None if rng.random() < 0.2
                   else start + datetime.timedelta(
                       hours=rng.randint(1, 6)))
            got = fit.headroom(cal, loads, demand, start, end)
            ref = _reference(items, loads, start)
            for load, room in zip(loads, got):
                if load.capacity is None:
                    self.assertEqual(-math.inf, room)
                    continue
                peak = ref.peak(load.host, start, end)
                expected = min(
                    (cap - used - want) / cap for cap, used, want in zip(
                        load.capacity, peak[:3], demand))
                if peak.whole_host:
                    expected = min(expected, -1.0)
                self.assertAlmostEqual(expected, room, places=9,
                                       msg=(items, load, demand, start,
                                            end))
                self.assertEqual(
                    room >= 0 and not peak.whole_host,
                    fit.fits(cal, [load], demand, start, end)[0])

    def test_lending_before_a_promise(self):
        # A 4-vcpu host promised entirely from T+2h to T+4h.
        items = [calendar.Item('h', _t(2), _t(4), 4, 0, 0, ref='r')]
        cal = calendar.Calendar({}, items)
        load = fit.HostLoad('h', calendar.HostCapacity(4, 8192, 100),
                            (0, 0, 0), ())
        four = calendar.Demand(4, 512, 1)
        self.assertEqual([True], fit.fits(cal, [load], four, _t(0), _t(1)))
        self.assertEqual([True], fit.fits(cal, [load], four, _t(0), _t(2)))
        self.assertEqual([False], fit.fits(cal, [load], four, _t(0), _t(3)))
        self.assertEqual([False], fit.fits(cal, [load], four, _t(0), None))
        # Tight: ends 1h before the promise; 0 s when it ends right at it.
        self.assertEqual([3600.0], fit.slack_seconds(cal, [load], four,
                                                     _t(0), _t(1)))
        self.assertEqual([0.0], fit.slack_seconds(cal, [load], four,
                                                  _t(0), _t(2)))

    def test_running_leased_server_ends_before_promise(self):
        # 4 vcpus: 2 used by a leased server until T+1h, 2 promised from
        # T+2h: a 2-vcpu request until T+3h fits (the steps never add up).
        items = [calendar.Item('h', _t(2), _t(4), 2, 0, 0, ref='r')]
        cal = calendar.Calendar({}, items)
        load = fit.HostLoad('h', calendar.HostCapacity(4, 8192, 100),
                            (2, 0, 0), ((_t(1), calendar.Demand(2)),))
        two = calendar.Demand(2)
        self.assertEqual([True], fit.fits(cal, [load], two, _t(0), _t(3)))
        three = calendar.Demand(3)
        self.assertEqual([False], fit.fits(cal, [load], three, _t(0), _t(3)))
        self.assertEqual([True], fit.fits(cal, [load], three, _t(1), _t(2)))
