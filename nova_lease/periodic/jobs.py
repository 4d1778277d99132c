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
"""What the event engine runs: jobs, their worker threads and claims.

* :class:`Job`: one claimed event being run (its state, its guard, the
  plugin Waits it is parked on);
* :class:`Waiting`: one plugin Wait of a job, watched by the observer
  (nova_lease.periodic.observer);
* :class:`ClaimChecker`: confirms, for the jobs' guards, that the engine
  still holds their claims, several in one query;
* :class:`WorkerPool`: the engine's daemon worker threads;
* the errors a job fails with when no plugin could finish it.
"""

import collections
import datetime
import threading
import time

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import guard

LOG = logging.getLogger(__name__)


class PluginTimeout(exception.NovaLeaseException):
    msg_fmt = ('%(what)s did not finish within %(timeout)s s '
               '([nova_lease_engine] plugin_call_timeout)')


class NoPlugin(exception.NovaLeaseException):
    msg_fmt = ('no resource plugin handles %(type)s reservations: add it to '
               '[nova_lease_engine] resource_plugins of nova-lease-engine')


class GaveUp(exception.NovaLeaseException):
    msg_fmt = ('started %(attempts)d times without finishing (the engines '
               'running it died or hung); last error: %(error)s')


class Waiting(object):
    """One plugin Wait of a job, watched by the engine's observer."""

    __slots__ = ('job', 'plugin', 'wait', 'what', 'deadline', 'since')

    def __init__(self, job, plugin, wait, what, timeout):
        self.job = job
        self.plugin = plugin
        self.wait = wait
        self.what = what
        self.deadline = time.monotonic() + timeout
        # Changes of the server since a little before the wait began
        # (the server may have changed between the plugin's look and
        # now; Nova's updated_at has second precision).
        self.since = timeutils.utcnow() - CHANGES_MARGIN


#: How far before a wait began its batched poll looks for changes.
CHANGES_MARGIN = datetime.timedelta(seconds=10)


class Job(object):
    __slots__ = ('event', 'state', 'result', 'notices', 'call_started',
                 'call_what', 'guard', 'waits', 'parked', 'notes', 'gone')

    def __init__(self, event, claim_check=None):
        self.event = event
        # queued -> running -> (waiting -> running ...) -> done;
        # timed_out | cancelled
        self.state = 'queued'
        self.waits = 0            # Waits of the job not yet resumed
        self.parked = []          # its Waits until the job is 'waiting'
        self.notes = []           # the plugins' notes so far
        # (plugin, resource id) a start found gone (plugins.base.
        # ResourceGone): told to the plugin once the start is recorded.
        self.gone = []
        self.result = None
        self.notices = ()
        self.call_started = None  # monotonic start of the plugin call
        self.call_what = None
        self.guard = guard.JobGuard(
            '%s of lease %s (event %s, attempt %s)'
            % (event['event_type'], event['lease_id'], event['id'],
               event.get('attempts')), claim_check)


class ClaimChecker(object):
    """Confirms claims for the jobs' guards, several in one query.

    A worker that needs a confirmation queues it. If no query is running,
    it leads one: it waits ``gather`` seconds for the other workers'
    confirmations to join, then asks the database about every queued one
    (its own included). Otherwise it waits; when the running query ends,
    the workers it answered go on and one of those still waiting leads
    the next. Each answer so comes from a query that began after it was
    asked for, and no worker serves more than its own round.
    """

    class _Ask(object):
        __slots__ = ('claim', 'wake', 'lead', 'held', 'error')

        def __init__(self, claim):
            self.claim = claim
            # Released once: when answered, or when made the leader.
            self.wake = threading.Lock()
            self.wake.acquire()
            self.lead = False
            self.held = False
            self.error = None

    #: Real seconds a query waits for more confirmations to join it (in a
    #: burst, the other workers reach their checks within a few
    #: milliseconds: one query then answers most of them).
    gather = 0.002

    def __init__(self, db, engine_id):
        self.db = db
        self.engine_id = engine_id
        self._lock = threading.Lock()
        self._queue = []
        self._busy = False
        #: How many queries ran (the engine's stats).
        self.queries = 0

    def held(self, event_id, attempts):
        ask = self._Ask((event_id, attempts))
        with self._lock:
            self._queue.append(ask)
            ask.lead = not self._busy
            self._busy = True
        if not ask.lead:
            ask.wake.acquire()
        if ask.lead:
            self._serve()
        if ask.error is not None:
            raise ask.error
        return ask.held

    def _serve(self):
        batch = []
        try:
            if self.gather:
                time.sleep(self.gather)
            with self._lock:
                batch, self._queue = self._queue, []
            self.queries += 1
            try:
                held = db_api.engine_claims_held(
                    self.db, self.engine_id, [a.claim for a in batch])
            except Exception as e:
                for ask in batch:
                    ask.error = e
            else:
                for ask in batch:
                    ask.held = ask.claim in held
        finally:
            with self._lock:
                # The first of those asked meanwhile leads the next query.
                following = self._queue[0] if self._queue else None
                if following is None:
                    self._busy = False
                else:
                    following.lead = True
            for ask in batch:
                ask.lead = False
                ask.wake.release()
            if following is not None:
                following.wake.release()


#: Returned by a worker's callable: this worker thread should exit (it
#: was replaced while stuck in a plugin call that timed out).
RETIRE = object()


class WorkerPool(object):
    """A fixed set of daemon worker threads running callables in order.

    Two queues: :meth:`submit` (first come, first served) and
    :meth:`submit_later`, whose callables run only when nothing submitted
    is waiting, or once they have waited ``max_defer`` seconds. The
    engine resumes the jobs whose Nova work is over with the latter: in
    a burst of starts, the requests that get the servers placed go to
    nova-api before the bookkeeping of the servers already running (its
    metadata and tag requests), which would otherwise slow every
    placement down (benchmarks/wakeup.py).

    Unlike concurrent.futures, its threads are daemons: a process that
    stops while a plugin call hangs exits at once (the claim was
    released), instead of joining the worker at interpreter exit.
    """

    _STOP = object()

    def __init__(self, size, name, max_defer=30.0):
        self._cond = threading.Condition()
        self._first = collections.deque()
        self._later = collections.deque()     # (queued at, item)
        self._stops = 0
        self._max_defer = max_defer
        self._closed = False
        self._name = name
        self._threads = []
        for _ in range(size):
            self.add_worker()

    def add_worker(self):
        thread = threading.Thread(
            target=self._work, daemon=True,
            name='%s-%d' % (self._name, len(self._threads)))
        self._threads.append(thread)
        thread.start()

    def _next(self):
        with self._cond:
            while True:
                if self._later and (not self._first or (
                        time.monotonic() - self._later[0][0] >=
                        self._max_defer)):
                    return self._later.popleft()[1]
                if self._first:
                    return self._first.popleft()
                if self._stops:
                    self._stops -= 1
                    return self._STOP
                self._cond.wait()

    def _work(self):
        while True:
            item = self._next()
            if item is self._STOP:
                return
            func, args = item
            try:
                if func(*args) is RETIRE:
                    return
            except Exception:
                LOG.exception('Unexpected error in an engine worker')

    def submit(self, func, *args):
        if self._closed:
            raise RuntimeError('the pool is shut down')
        with self._cond:
            self._first.append((func, args))
            self._cond.notify()

    def submit_later(self, func, *args):
        """Like :meth:`submit`, behind everything submitted meanwhile
        (for ``max_defer`` seconds at most).
        """
        if self._closed:
            raise RuntimeError('the pool is shut down')
        with self._cond:
            self._later.append((time.monotonic(), (func, args)))
            self._cond.notify()

    def shutdown(self, cancel=True):
        """Stop the workers after what they run; drop what is queued
        (``cancel``), or run it first.
        """
        with self._cond:
            self._closed = True
            if cancel:
                self._first.clear()
                self._later.clear()
            self._stops += len(self._threads)
            self._cond.notify_all()

    def join(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            thread.join(None if deadline is None
                        else max(0, deadline - time.monotonic()))
