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
"""Usage enforcement: the peak and the start-ahead check (no database)."""

import datetime
import random

from oslo_config import cfg
import testtools

from nova_lease import conf as lease_conf
from nova_lease import enforcement

T = datetime.datetime(2030, 1, 1)
H = datetime.timedelta(hours=1)


class PeakTest(testtools.TestCase):

    def test_half_open_and_clipped(self):
        # Back to back: never together.
        self.assertEqual((2, T), enforcement.peak(
            [(T, T + H, 2), (T + H, T + 2 * H, 2)], T, T + 2 * H))
        self.assertEqual((5, T + H), enforcement.peak(
            [(T, T + 2 * H, 2), (T + H, T + 3 * H, 3)], T, T + 3 * H))
        # Outside the window: not counted.
        self.assertEqual((3, T + H), enforcement.peak(
            [(T, T + H, 9), (T + H, T + 3 * H, 3)], T + H, T + 2 * H))
        self.assertEqual((0, T), enforcement.peak([], T, T + H))

    def test_against_brute_force(self):
        rng = random.Random(3)
        for _n in range(200):
            intervals = []
            for _i in range(rng.randrange(0, 8)):
                s = T + rng.randrange(0, 20) * H
                intervals.append((s, s + rng.randrange(1, 8) * H,
                                  rng.randrange(0, 5)))
            start = T + rng.randrange(0, 20) * H
            end = start + rng.randrange(1, 10) * H
            best = max(
                [sum(v for s, e, v in intervals if s <= t < e)
                 for t in (start + k * H for k in range(
                     int((end - start) / H)))] or [0])
            self.assertEqual(best, enforcement.peak(intervals, start,
                                                    end)[0])


class StartAheadTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = cfg.ConfigOpts()
        lease_conf.register_opts(self.conf)
        self.conf([])
        self.opts = self.conf.nova_lease_enforcement

    def test_no_limit_by_default_a_year_when_set(self):
        # As in Blazar: no limit unless the operator sets one.
        enforcement.check_start(self.opts, datetime.datetime(9999, 1, 1), T,
                                'start')
        self.conf.set_override('max_start_ahead', '365d',
                               group='nova_lease_enforcement')
        enforcement.check_start(self.opts, T + 365 * 24 * H, T, 'start')
        e = self.assertRaises(enforcement.LimitExceeded,
                              enforcement.check_start, self.opts,
                              T + 366 * 24 * H, T, 'start_date')
        self.assertEqual(403, e.code)
        self.assertEqual('max_start_ahead', e.option)
        self.assertIn('[nova_lease_enforcement] max_start_ahead', str(e))
        self.assertIn("'start_date' (2031-01-02 00:00)", str(e))

    def test_zero_is_no_limit_and_garbage_is_loud(self):
        self.conf.set_override('max_start_ahead', '0',
                               group='nova_lease_enforcement')
        enforcement.check_start(self.opts, datetime.datetime(9999, 1, 1), T,
                                'start')
        self.conf.set_override('max_start_ahead', 'soon',
                               group='nova_lease_enforcement')
        e = self.assertRaises(enforcement.BadOption, enforcement.check_start,
                              self.opts, T + H, T, 'start')
        self.assertIn('max_start_ahead', str(e))
