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
"""The fault drill's phases (benchmarks/faults.py) wait as the drill says.

The quick drill waits past the ends of a phase's leases (not at all with
--overlap) and has no fault at the ends; the full drill waits until just
before the ends, then injects its fault there.
"""

import importlib.util
import os
import sys

import fixtures
import testtools

_FAULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'benchmarks', 'faults.py')


class _Drill(object):
    """Records what a phase asks of the drill."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def call(*args, **kwargs):
            self.calls.append((name,) + args)
        return call


class PhaseWaitsTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        # Loading the drill puts this tree first on its paths.
        self.useFixture(fixtures.EnvironmentVariable(
            'PYTHONPATH', os.environ.get('PYTHONPATH')))
        self.addCleanup(setattr, sys, 'path', list(sys.path))
        spec = importlib.util.spec_from_file_location('_fault_drill',
                                                      _FAULTS)
        self.faults = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.faults)

    def _run(self, phase, quick, overlap=False):
        self.faults.quick_overlap = overlap
        drill = _Drill()
        phase(drill, quick)
        return drill.calls

    def _waits(self, calls):
        """The waits after the first, in seconds after the first."""
        waits = [c for c in calls if c[0] == 'wait_until']
        first = waits[0][1]
        return [round((w[1] - first).total_seconds()) for w in waits[1:]]

    def test_engine_kills(self):
        phase = self.faults.phase_engine_kills
        lease = self.faults.LEASE_SECONDS
        # Waits are from "2 s before the start".
        calls = self._run(phase, quick=True)
        self.assertEqual([2 + lease + 10], self._waits(calls))
        self.assertEqual(['start_lease'], [c[3] for c in calls
                                           if c[0] == 'kill_claimer'])
        calls = self._run(phase, quick=True, overlap=True)
        self.assertEqual([], self._waits(calls))
        self.assertEqual(['start_lease'], [c[3] for c in calls
                                           if c[0] == 'kill_claimer'])
        calls = self._run(phase, quick=False)
        self.assertEqual([2 + lease - 2], self._waits(calls))
        self.assertEqual(['start_lease', 'end_lease'],
                         [c[3] for c in calls if c[0] == 'kill_claimer'])

    def test_cuts(self):
        phase = self.faults.phase_cuts
        lease = self.faults.LEASE_SECONDS
        # Waits are from "3 s before the start".
        calls = self._run(phase, quick=True)
        self.assertEqual([3 + lease + 15], self._waits(calls))
        self.assertEqual([('cut', 'rabbitmq_cut', 'rabbit')],
                         [c for c in calls if c[0] == 'cut'])
        calls = self._run(phase, quick=True, overlap=True)
        self.assertEqual([], self._waits(calls))
        calls = self._run(phase, quick=False)
        self.assertEqual([3 + lease - 3], self._waits(calls))
        self.assertEqual(['rabbit', 'mysql'],
                         [c[2] for c in calls if c[0] == 'cut'])
