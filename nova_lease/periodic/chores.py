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
"""The engine's periodic chores on one ``futurist.periodics`` worker.

Registration heartbeats, the check of Nova's scheduler services, the
idle-host pass and the compute hook's reconcile pass each run every so
many seconds (each its own option). :class:`Chores` runs them all on one
:class:`futurist.periodics.PeriodicWorker`, instead of a hand-written
thread per chore with its own stop event, error handling and back-off:

* one scheduling thread, and a small pool that runs the chores due (one
  thread per chore at most: a chore never overlaps itself, and a slow
  one -- an idle pass waiting on Nova -- never delays the heartbeat,
  which other engines watch to take this one for dead);
* uniform errors: a chore that raises is logged (its traceback the first
  time in a row, one line after), counted, and run again at its next
  time;
* per-chore metrics (:meth:`Chores.metrics`: runs, failures, consecutive
  failures, last duration, last error), which the engine reports with
  its counters (``stats['chores']``, logged at stop).

A chore returns :data:`DONE` (or raises ``futurist.periodics.NeverAgain``)
when it has nothing more to do (an idle action set to ``none`` enables
the hosts it disabled before, once). Its spacing is read at each run
(``spacing`` may be a callable): a mutable option takes effect at the
chore's next run.
"""

import threading
import time

import futurist
from futurist import periodics
from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: Returned by a chore that is not to run again.
DONE = object()


class _Chore(object):

    def __init__(self, name, func, spacing, run_immediately):
        self.name = name
        self.func = func
        self._spacing = spacing
        self.run_immediately = run_immediately
        self.runs = 0
        self.failures = 0
        self.consecutive_failures = 0
        self.last_duration = None
        self.last_error = None
        self.done = False

    @property
    def spacing(self):
        value = self._spacing() if callable(self._spacing) else self._spacing
        return max(float(value), 0.01)

    def metrics(self):
        return {'runs': self.runs, 'failures': self.failures,
                'consecutive_failures': self.consecutive_failures,
                'last_duration_s': (None if self.last_duration is None
                                    else round(self.last_duration, 3)),
                'last_error': self.last_error, 'done': self.done}

    def __call__(self):
        began = time.monotonic()
        try:
            outcome = self.func()
        except periodics.NeverAgain:
            outcome = DONE
        except Exception as e:
            self.failures += 1
            self.consecutive_failures += 1
            self.last_error = str(e) or type(e).__name__
            LOG.warning('Engine chore %(name)s failed (%(n)d in a row; '
                        'next run in %(spacing).0f s): %(error)s',
                        {'name': self.name,
                         'n': self.consecutive_failures,
                         'spacing': self.spacing, 'error': e},
                        exc_info=self.consecutive_failures == 1)
            outcome = None
        else:
            if self.consecutive_failures:
                LOG.info('Engine chore %s works again', self.name)
            self.consecutive_failures = 0
        finally:
            self.runs += 1
            self.last_duration = time.monotonic() - began
        if outcome is DONE:
            self.done = True
            raise periodics.NeverAgain()


class Chores(object):
    """Periodic chores of one engine on one futurist PeriodicWorker.

    Add chores (:meth:`add`) before or after :meth:`start`; :meth:`stop`
    returns within its timeout even if a chore hangs (the pool's threads
    are daemons).
    """

    def __init__(self, name='lease-chores'):
        self.name = name
        self._lock = threading.Lock()
        self._chores = {}
        self._worker = None
        self._thread = None

    def add(self, name, func, spacing, run_immediately=True):
        """Run ``func()`` every ``spacing`` seconds (a number, or a
        callable read at each run).
        """
        chore = _Chore(name, func, spacing, run_immediately)

        @periodics.periodic(chore.spacing, run_immediately=run_immediately)
        def run():
            try:
                chore()
            finally:
                # futurist reads the spacing when it schedules the next
                # run (after this one): a changed option applies then.
                run._periodic_spacing = chore.spacing
        run.chore = chore
        with self._lock:
            if name in self._chores:
                raise ValueError('chore %s already added' % name)
            self._chores[name] = (chore, run)
            worker = self._worker
        if worker is not None:
            worker.add(run)
        return chore

    def start(self):
        """Start the worker's thread (with what was added so far)."""
        with self._lock:
            if self._worker is not None:
                return
            runs = [run for _, run in self._chores.values()]
            self._worker = periodics.PeriodicWorker(
                [(run, None, None) for run in runs],
                executor_factory=lambda: futurist.ThreadPoolExecutor(
                    max_workers=8),
                schedule_strategy='last_started')
            self._thread = threading.Thread(
                target=self._worker.start, kwargs={'allow_empty': True},
                name=self.name, daemon=True)
            self._thread.start()

    def stop(self, timeout=10):
        """Stop scheduling; wait up to ``timeout`` for running chores."""
        with self._lock:
            worker, self._worker = self._worker, None
            thread = self._thread
        if worker is None:
            return True
        worker.stop()
        thread.join(timeout)
        return not thread.is_alive()

    def metrics(self):
        """``{chore name: {runs, failures, consecutive_failures,
        last_duration_s, last_error, done}}``.
        """
        with self._lock:
            chores = [c for c, _ in self._chores.values()]
        return {c.name: c.metrics() for c in chores}
