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
"""The engine's loop: how long to sleep, and what wakes it.

:class:`Loop` is the part of the event engine
(:class:`nova_lease.periodic.engine.Engine`) that decides when to look at
the database again. It knows nothing of claims or jobs: the engine tells
it what it just claimed, how much room its runner has and when the
oldest plugin call began (:meth:`Loop.plan`), then sleeps
(:meth:`Loop.sleep`) until

* the next due event (``db.api.engine_next_event_time``), at most
  ``engine_max_sleep`` seconds;
* the oldest plugin call times out (``plugin_call_timeout``);
* :meth:`Loop.wake`: a finished action, :meth:`Engine.wake` (a test
  clock that moved, a lease ended because its server is gone),
  :meth:`Engine.stop`;
* or a probe of the database (every ``engine_probe_interval``,
  ``db.api.engine_probe``) that shows events created or moved by another
  process (nova-api) since the sleep began. The probe is one indexed
  query: cheaper than waking every engine from nova-api, which does not
  know the engines, and it bounds a late lease's lag by the interval.
"""

import datetime
import threading
import time

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease.db import api as db_api

LOG = logging.getLogger(__name__)


class Loop(object):
    """When the engine looks at the database again (see the module doc).

    :param db: the side database.
    :param opts: the ``[nova_lease_engine]`` options (read at each sleep:
        ``engine_max_sleep``, ``engine_probe_interval`` and
        ``plugin_call_timeout`` may change while it runs).
    :param stats: the engine's counters (``probes``, ``probe_wakeups``).
    :param engine_id: for messages.
    """

    def __init__(self, db, opts, stats=None, engine_id=None):
        self.db = db
        self.opts = opts
        self.stats = stats if stats is not None else {}
        self.engine_id = engine_id
        self._wakeup = threading.Event()

    def _count(self, key):
        self.stats[key] = self.stats.get(key, 0) + 1

    def wake(self):
        """End the current (or the next) sleep now (thread-safe)."""
        self._wakeup.set()

    def clear(self):
        """Forget the wake-ups so far (the loop is about to look)."""
        self._wakeup.clear()

    def wait(self, timeout):
        """Wait up to timeout for a wake-up (no probe); True if woken,
        and the wake-up is then forgotten.
        """
        woken = self._wakeup.wait(timeout)
        if woken:
            self._wakeup.clear()
        return woken

    def plan(self, claimed, room, oldest_call=None):
        """``(seconds to sleep, probe baseline or None)`` after a pass.

        :param claimed: how many events the pass claimed.
        :param room: how many more the runner would take now.
        :param oldest_call: monotonic start of the oldest plugin call
            running, or None.
        """
        longest = self.opts.engine_max_sleep
        if oldest_call is not None:
            # Wake up when the oldest plugin call times out.
            longest = min(longest, max(
                0.05, oldest_call + self.opts.plugin_call_timeout
                - time.monotonic()))
        if claimed and room > 0:
            return 0, None    # a full batch: more may be due
        if room <= 0:
            return longest, None    # a finished action wakes the loop
        # The baseline of the probes is taken before the next due time is
        # read: an event committed before the baseline is in that time,
        # one committed after it changes the probe.
        baseline = self._baseline(longest)
        next_time = db_api.engine_next_event_time(self.db)
        if next_time is None:
            return longest, baseline
        delta = (next_time - timeutils.utcnow()).total_seconds()
        if delta <= 0:
            # Due but not claimed: another engine is claiming it.
            return 0.05, None
        return min(delta, longest), baseline

    def _baseline(self, longest):
        """(horizon, fingerprint) for the probes of the coming sleep."""
        if not self.opts.engine_probe_interval:
            return None
        horizon = timeutils.utcnow() + datetime.timedelta(seconds=longest)
        try:
            return horizon, db_api.engine_probe(self.db, horizon)
        except Exception as e:
            LOG.debug('Probe failed (%s); sleeping without probes', e)
            return None

    def sleep(self, timeout, baseline=None):
        """Sleep up to timeout; True if woken (or a probe saw a change).
        """
        interval = self.opts.engine_probe_interval
        if baseline is None or not interval:
            return self._wakeup.wait(timeout)
        horizon, fingerprint = baseline
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self._wakeup.wait(min(left, interval)):
                return True
            if deadline - time.monotonic() <= 0:
                return False
            try:
                self._count('probes')
                now = db_api.engine_probe(self.db, horizon)
            except Exception as e:
                LOG.debug('Probe failed (%s); sleeping without probes', e)
                return self._wakeup.wait(max(0, deadline - time.monotonic()))
            if now != fingerprint:
                self._count('probe_wakeups')
                LOG.debug('Lease engine %s: events changed while it slept',
                          self.engine_id)
                return True
