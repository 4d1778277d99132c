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
"""The engine's periodic chores on one futurist worker
(nova_lease.periodic.chores).
"""

import threading
import time

import fixtures
import testtools

from nova_lease.periodic import chores as engine_chores


def _until(predicate, timeout=10):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class ChoresTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.chores = engine_chores.Chores()
        self.addCleanup(self.chores.stop, 1)
        self.log = self.useFixture(fixtures.FakeLogger())

    def test_runs_every_spacing_and_counts(self):
        runs = []
        self.chores.add('tick', lambda: runs.append(time.monotonic()), 0.05)
        self.chores.start()
        self.assertTrue(_until(lambda: len(runs) >= 3))
        metrics = self.chores.metrics()['tick']
        self.assertGreaterEqual(metrics['runs'], 3)
        self.assertEqual(0, metrics['failures'])
        self.assertIsNotNone(metrics['last_duration_s'])
        self.assertGreaterEqual(runs[2] - runs[1], 0.04)

    def test_a_failing_chore_is_logged_counted_and_run_again(self):
        calls = []

        def fail():
            calls.append(1)
            raise RuntimeError('database away')
        self.chores.add('flaky', fail, 0.02)
        self.chores.start()
        self.assertTrue(_until(lambda: len(calls) >= 3))
        metrics = self.chores.metrics()['flaky']
        self.assertGreaterEqual(metrics['failures'], 3)
        self.assertGreaterEqual(metrics['consecutive_failures'], 3)
        self.assertEqual('database away', metrics['last_error'])
        self.assertIn('Engine chore flaky failed (1 in a row',
                      self.log.output)
        # The traceback once, not at every failure.
        self.assertEqual(1, self.log.output.count('Traceback'))

    def test_done_runs_no_more(self):
        calls = []
        self.chores.add('once', lambda: calls.append(1) or
                        engine_chores.DONE, 0.01)
        self.chores.start()
        self.assertTrue(_until(
            lambda: self.chores.metrics()['once']['done']))
        time.sleep(0.1)
        self.assertEqual([1], calls)

    def test_a_hung_chore_delays_no_other_and_stop_is_bounded(self):
        hang = threading.Event()
        self.addCleanup(hang.set)
        beats = []
        self.chores.add('stuck', lambda: hang.wait(30), 0.01)
        self.chores.add('heartbeat', lambda: beats.append(1), 0.02)
        self.chores.start()
        self.assertTrue(_until(lambda: len(beats) >= 5))
        began = time.monotonic()
        self.assertFalse(self.chores.stop(0.3))
        self.assertLess(time.monotonic() - began, 2)

    def test_added_after_start_and_spacing_read_at_each_run(self):
        spacing = [10.0]
        runs = []
        self.chores.start()
        self.chores.add('late', lambda: runs.append(1), lambda: spacing[0])
        self.assertTrue(_until(lambda: len(runs) == 1))
        # Not again for ten seconds... unless the option changed before
        # the run that schedules the next one.
        time.sleep(0.1)
        self.assertEqual(1, len(runs))

    def test_spacing_change_applies_at_the_next_scheduling(self):
        spacing = [0.02]
        runs = []
        self.chores.add('tick', lambda: runs.append(1), lambda: spacing[0])
        self.chores.start()
        self.assertTrue(_until(lambda: len(runs) >= 2))
        count = len(runs)
        spacing[0] = 30
        # At most the run already scheduled (at the old spacing), then
        # none for 30 s.
        time.sleep(0.5)
        after = len(runs)
        self.assertLessEqual(after - count, 1)
        time.sleep(0.5)
        self.assertEqual(after, len(runs))

    def test_same_name_twice_is_refused(self):
        self.chores.add('a', lambda: None, 1)
        self.assertRaises(ValueError, self.chores.add, 'a', lambda: None, 1)
