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
"""nova-api's copy of the compute nodes: no request waits for its renewal.

The reads of Nova are replaced by a counter (what is tested is the copy's
life, not Nova: tests/functional/test_admission.py reads a real Nova).
"""

import threading
import types
from unittest import mock

import testtools

from nova_lease.capacity import inventory


class Counting(inventory.NovaInventory):
    """A NovaInventory whose reads return their number; ``gate`` (an
    Event), when set, holds each read until the test sets it.
    """

    def __init__(self, ttl):
        super().__init__(conf=types.SimpleNamespace(
            nova_lease_api=types.SimpleNamespace(
                admission_inventory_ttl=ttl)))
        self.reads = 0
        self.gate = None
        self.reading = threading.Event()
        self.fail = False

    def _read(self):
        self.reading.set()
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail:
            raise RuntimeError('cell database gone')
        self.reads += 1
        return ['read %d' % self.reads]


class CopyTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.now = 1000.0
        self._clock = mock.patch.object(
            inventory.time, 'monotonic', lambda: self.now)
        self._clock.start()
        self.addCleanup(self._clock.stop)
        self.inv = Counting(ttl=30)

    def _wait_refreshed(self):
        for _ in range(1000):
            with self.inv._lock:
                if self.inv._refresher is None:
                    return
            threading.Event().wait(0.01)
        self.fail('the background read did not end')

    def test_first_read_then_copy_within_ttl(self):
        self.assertEqual((['read 1'], False), self.inv.compute_hosts())
        self.now += 29
        self.assertEqual((['read 1'], True), self.inv.compute_hosts())
        self.assertEqual(1, self.inv.reads)

    def test_expired_copy_answers_while_one_read_runs(self):
        self.inv.compute_hosts()
        self.now += 31
        self.inv.gate = threading.Event()
        self.inv.reading.clear()
        # Answered at once, from the old copy, while the read is held.
        self.assertEqual((['read 1'], True), self.inv.compute_hosts())
        self.assertTrue(self.inv.reading.wait(10))
        self.assertEqual((['read 1'], True), self.inv.compute_hosts())
        self.assertEqual(1, self.inv.reads)
        self.inv.gate.set()
        self._wait_refreshed()
        # One background read for both requests.
        self.assertEqual((['read 2'], True), self.inv.compute_hosts())
        self.assertEqual(2, self.inv.reads)

    def test_fresh_reads_now(self):
        self.inv.compute_hosts()
        self.assertEqual((['read 2'], False),
                         self.inv.compute_hosts(fresh=True))
        self.assertEqual((['read 2'], True), self.inv.compute_hosts())

    def test_failed_background_read_drops_the_copy(self):
        self.inv.compute_hosts()
        self.now += 31
        self.inv.fail = True
        self.assertEqual((['read 1'], True), self.inv.compute_hosts())
        self._wait_refreshed()
        # The next request reads itself (and sees the failure).
        self.assertRaises(RuntimeError, self.inv.compute_hosts)
        self.inv.fail = False
        self.assertEqual((['read 2'], False), self.inv.compute_hosts())

    def test_ttl_zero_reads_every_time(self):
        inv = Counting(ttl=0)
        self.assertEqual((['read 1'], False), inv.compute_hosts())
        self.assertEqual((['read 2'], False), inv.compute_hosts())
