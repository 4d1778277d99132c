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
"""No scheduling request waits for a full read of the lease calendar.

A full read of the side database (seconds to a minute with a million
reservations) is made beside the snapshot in use: at the scheduler's
start (cold start) and when the snapshot is older than
``scheduler_snapshot_ttl``. Requests are answered meanwhile -- from the
old snapshot, kept current through the change journal, or at a cold
start from a per-request read of the candidate hosts' allocations -- and
keep every promise. A read that fails keeps the old snapshot.

Here the full read is made slow (or made to fail) by wrapping
``nova_lease.scheduler.snapshot_reads.load``, the function that reads it.
host1 is big (Nova's weighers prefer it), host2 small.
"""

import datetime
import threading

import fixtures

from nova_lease.scheduler import snapshot_cache
from nova_lease.scheduler import snapshot_reads
from nova_lease.scheduler import view
from tests.functional import base
from tests.functional import test_scheduler_outage

HOUR = datetime.timedelta(hours=1)
BIG = (8, 16384, 200)
SMALL = (4, 8192, 100)
# How long a slowed full read waits to be released: a request that waits
# for the read returns only after it (the test then fails).
HOLD = 10


class _SlowLoad(fixtures.Fixture):
    """The first full read waits (at most HOLD seconds) to be released."""

    def _setUp(self):
        self.started = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()
        self.calls = 0
        real = snapshot_reads.load

        def load(*args, **kwargs):
            self.calls += 1
            if self.calls == 1:
                self.started.set()
                self.release.wait(HOLD)
            try:
                return real(*args, **kwargs)
            finally:
                if self.calls == 1:
                    self.finished.set()

        self.addCleanup(self.release.set)
        self.useFixture(fixtures.MockPatchObject(snapshot_reads, 'load', load))


class _FailingLoad(fixtures.Fixture):
    """Every full read fails (until ``failing`` is set to False)."""

    def _setUp(self):
        self.calls = 0
        self.failing = True
        real = snapshot_reads.load

        def load(*args, **kwargs):
            self.calls += 1
            if self.failing:
                raise RuntimeError('full read failed (test)')
            return real(*args, **kwargs)

        self.useFixture(fixtures.MockPatchObject(snapshot_reads, 'load', load))


class SnapshotReloadTest(test_scheduler_outage.SchedulerMixin,
                         base.LeaseFunctionalBase):

    COMPUTES = {'host1': BIG, 'host2': SMALL}

    def setUp(self):
        super().setUp()
        self.T = self.clock.now

    def _due_for_a_full_read(self):
        """Every snapshot is older than the TTL from now on."""
        self.flags(scheduler_snapshot_ttl=0.001, group='nova_lease')

    def test_cold_start_does_not_wait_for_the_first_read(self):
        # host1 is promised in full from T+1h.
        self.promise('host1', self.T + HOUR, self.T + 3 * HOUR, 8)
        snapshot_cache.CACHE.invalidate()
        slow = self.useFixture(_SlowLoad())

        unleased = self._boot(name='unleased')
        self.assertEqual('host2', self._host(unleased))
        leased = self._boot(self._hints(self.T + HOUR / 2), name='leased')
        self.assertIn(self._host(leased), ('host1', 'host2'))
        # Both were answered before the full read ended.
        self.assertTrue(slow.started.is_set())
        self.assertFalse(slow.finished.is_set())

        slow.release.set()
        self.assertTrue(slow.finished.wait(60))
        self._wait_for_snapshot()

    def test_cold_start_refuses_what_it_cannot_check(self):
        # More promises on the hosts than a request reads for itself:
        # refused until the snapshot is there, then answered.
        self.useFixture(fixtures.MockPatchObject(view, 'COLD_READ_LIMIT',
                                                 0))
        self.promise('host1', self.T + HOUR, self.T + 3 * HOUR, 1)
        snapshot_cache.CACHE.invalidate()
        slow = self.useFixture(_SlowLoad())
        refused = self._boot(name='refused', wait='ERROR')
        self.assertIn('No valid host', refused['fault']['message'])
        self.assertFalse(slow.finished.is_set())
        slow.release.set()
        self._wait_for_snapshot()
        self.assertEqual('host1', self._host(self._boot(name='later')))

    def test_requests_are_answered_during_a_full_read(self):
        old = self._wait_for_snapshot()
        slow = self.useFixture(_SlowLoad())
        self._due_for_a_full_read()
        # Admitted while the old snapshot is in use: the journal brings
        # it to the next request, full read or not.
        self.promise('host1', self.T + HOUR, self.T + 3 * HOUR, 8)

        unleased = self._boot(name='unleased')
        self.assertEqual('host2', self._host(unleased))
        self.assertTrue(slow.started.is_set())
        self.assertFalse(slow.finished.is_set())
        short = self._boot(self._hints(self.T + HOUR / 2), name='short')
        self.assertFalse(slow.finished.is_set())
        self.assertIn(self._host(short), ('host1', 'host2'))

        # Once read, the new snapshot replaces the old one.
        slow.release.set()
        self.assertTrue(slow.finished.wait(60))
        new = self._wait_for_snapshot(other_than=old)
        self.assertEqual([8], [item.vcpus for item in new.host_items['host1']])

    def test_failed_full_read_keeps_the_old_snapshot(self):
        self.promise('host1', self.T + HOUR, self.T + 3 * HOUR, 8)
        old = self._wait_for_snapshot()
        failing = self.useFixture(_FailingLoad())
        self._due_for_a_full_read()

        # host1's promise still holds, though Nova's weighers prefer it.
        for n in range(2):
            server = self._boot(name='unleased-%d' % n)
            self.assertEqual('host2', self._host(server))
        self.assertGreater(failing.calls, 0)
        self.assertIn('full read of the lease calendar failed',
                      self.stdlog.logger.output)

        # When the database answers again, a new snapshot comes.
        failing.failing = False
        self._wait_for_snapshot(other_than=old)
