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
"""The event engine: fires lease events exactly once, on time.

One loop thread per :class:`Engine`:

1. records the results of finished actions (one transaction per batch;
   while :meth:`Engine.run` runs, a recorder thread does it, so that the
   claims and the records of a burst overlap);
2. releases claims abandoned by stuck engines (older than
   ``engine_claim_timeout``) and renews its own running claims;
3. claims due events atomically (``db.api.engine_claim_events``: SELECT
   ... FOR UPDATE SKIP LOCKED on MySQL/PostgreSQL, the write lock on
   SQLite), at most ``engine_batch_size`` outstanding, moving their
   leases (start: PENDING -> STARTING, end: -> TERMINATING);
4. hands them to a pool of ``engine_workers`` threads that run the
   resource plugins, each call bounded by ``plugin_call_timeout``;
5. sleeps until the next due event, at most ``engine_max_sleep``, or until
   woken: by a finished action, :meth:`Engine.wake` (e.g.
   :func:`wake_all` after a lease is created in this process, or a test
   clock that moved), :meth:`Engine.stop`, or a probe of the database
   (every ``engine_probe_interval``, :func:`db.api.engine_probe`) that
   shows events created or moved by another process (nova-api) since
   the engine last looked.

A second thread beats (``engine_heartbeat_interval``) in the
``processes`` table where the engine registered when :meth:`Engine.run`
began, and watches the other engines' heartbeats: the claims of an engine
whose heartbeat counter has not moved for ``engine_heartbeat_timeout``
seconds (by this engine's clock) are released at once.

Each job carries a guard (nova_lease.guard), installed for its worker
thread: a job that timed out, or whose claims were released at stop, is
cancelled, and ``nova_lease.compute`` refuses every further request of a
cancelled job, and every request that changes something once the job no
longer holds its claim in the database. The thread of a timed-out call
so sends nothing more to Nova when the call returns.

The events of one lease run one after the other (start, before_end,
end): an event is not claimable while an earlier one of its lease is
unfinished. A failed action is retried with exponential back-off
(``retry_interval`` x 2^n) up to ``max_retries`` (or the lease's own
``retries``); then the event and the lease go to ERROR with a
``status_reason`` that says what failed. Database errors make the loop
wait and try again, never stop. "Now" is
``oslo_utils.timeutils.utcnow()``, so tests drive the engine with a
clock override and :meth:`Engine.process_due`.
"""

import collections
import datetime
import functools
import os
import queue
import socket
import threading
import time
import weakref

from oslo_log import log as logging
from oslo_utils import timeutils
from oslo_utils import uuidutils

from nova_lease import compute
from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import guard
from nova_lease import notifications
from nova_lease.plugins import base as plugin_base
from nova_lease import registration
from nova_lease import status

LOG = logging.getLogger(__name__)

_L = status.LeaseStatus
_R = status.ReservationStatus
_E = status.EventStatus
_T = status.EventType

#: The plugin method run for each event type.
ACTIONS = {
    _T.START_LEASE: 'on_start',
    _T.BEFORE_END_LEASE: 'before_end',
    _T.END_LEASE: 'on_end',
}
_SUCCESS_NOTICES = {
    _T.START_LEASE: notifications.START,
    _T.END_LEASE: notifications.END,
}

_ENGINES = weakref.WeakSet()


def wake_all():
    """Wake every engine of this process (e.g. a lease was just created)."""
    for engine in list(_ENGINES):
        engine.wake()


def server_changed(server_id=None, server=None):
    """A server changed (a versioned notification): engines of this
    process that wait for a server look at once instead of at their next
    poll. ``server``: the server as the notification shows it (a dict as
    the compute API shows a server, with ``status`` and
    ``OS-EXT-STS:task_state``), or None.
    """
    for engine in list(_ENGINES):
        engine.observe_now(server_id, server)


def check_options(opts):
    """Refuse options that contradict each other (``[nova_lease]``).

    :raises nova_lease.exception.ConfigurationError: with what to change.
    """
    problems = []
    if opts.engine_claim_timeout <= opts.plugin_call_timeout:
        problems.append(
            '[nova_lease] engine_claim_timeout (%s s) must be larger than '
            'plugin_call_timeout (%s s): a claim must outlive the longest '
            'plugin call, or another engine takes over an action that is '
            'still running' % (opts.engine_claim_timeout,
                               opts.plugin_call_timeout))
    if opts.engine_heartbeat_timeout < 3 * opts.engine_heartbeat_interval:
        problems.append(
            '[nova_lease] engine_heartbeat_timeout (%s s) must be at least '
            'three times engine_heartbeat_interval (%s s), or live engines '
            'are taken for dead' % (opts.engine_heartbeat_timeout,
                                    opts.engine_heartbeat_interval))
    if problems:
        raise exception.ConfigurationError(reason='; '.join(problems))


def default_engine_id():
    return '%s:%d:%s' % (socket.gethostname(), os.getpid(),
                         uuidutils.generate_uuid(dashed=False)[:8])


def _sources(kind, new):
    """Every status of ``kind`` that may move to ``new``."""
    return sorted(old for old in status.TRANSITIONS[kind]
                  if status.can_transition(kind, old, new))


class PluginTimeout(exception.NovaLeaseException):
    msg_fmt = ('%(what)s did not finish within %(timeout)s s '
               '([nova_lease] plugin_call_timeout)')


class NoPlugin(exception.NovaLeaseException):
    msg_fmt = ('no resource plugin handles %(type)s reservations: add it to '
               '[nova_lease] resource_plugins of nova-lease-engine')


class GaveUp(exception.NovaLeaseException):
    msg_fmt = ('started %(attempts)d times without finishing (the engines '
               'running it died or hung); last error: %(error)s')


class _Waiting(object):
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
        self.since = timeutils.utcnow() - _CHANGES_MARGIN


#: How far before a wait began its batched poll looks for changes.
_CHANGES_MARGIN = datetime.timedelta(seconds=10)


class _Job(object):
    __slots__ = ('event', 'state', 'result', 'notices', 'call_started',
                 'call_what', 'guard', 'waits', 'parked', 'notes')

    def __init__(self, event, claim_check=None):
        self.event = event
        # queued -> running -> (waiting -> running ...) -> done;
        # timed_out | cancelled
        self.state = 'queued'
        self.waits = 0            # Waits of the job not yet resumed
        self.parked = []          # its Waits until the job is 'waiting'
        self.notes = []           # the plugins' notes so far
        self.result = None
        self.notices = ()
        self.call_started = None  # monotonic start of the plugin call
        self.call_what = None
        self.guard = guard.JobGuard(
            '%s of lease %s (event %s, attempt %s)'
            % (event['event_type'], event['lease_id'], event['id'],
               event.get('attempts')), claim_check)


class _ClaimChecker(object):
    """Confirms claims for the jobs' guards, several in one query.

    A worker that needs a confirmation queues it; if no query is running,
    it runs one for every queued confirmation (its own included) until
    none is left, else it waits for the one that will include it. Each
    answer so comes from a query that began after it was asked for.
    """

    class _Ask(object):
        __slots__ = ('claim', 'done', 'held', 'error')

        def __init__(self, claim):
            self.claim = claim
            self.done = threading.Event()
            self.held = False
            self.error = None

    def __init__(self, db, engine_id):
        self.db = db
        self.engine_id = engine_id
        self._lock = threading.Lock()
        self._queue = []
        self._busy = False

    def held(self, event_id, attempts):
        ask = self._Ask((event_id, attempts))
        with self._lock:
            self._queue.append(ask)
            lead = not self._busy
            self._busy = True
        if lead:
            self._serve()
        ask.done.wait()
        if ask.error is not None:
            raise ask.error
        return ask.held

    def _serve(self):
        while True:
            with self._lock:
                batch, self._queue = self._queue, []
                if not batch:
                    self._busy = False
                    return
            try:
                held = db_api.engine_claims_held(
                    self.db, self.engine_id, [a.claim for a in batch])
            except Exception as e:
                for ask in batch:
                    ask.error = e
            else:
                for ask in batch:
                    ask.held = ask.claim in held
            for ask in batch:
                ask.done.set()


#: Returned by a worker's callable: this worker thread should exit (it
#: was replaced while stuck in a plugin call that timed out).
_RETIRE = object()


class _WorkerPool(object):
    """A fixed set of daemon worker threads running callables in order.

    Unlike concurrent.futures, its threads are daemons: a process that
    stops while a plugin call hangs exits at once (the claim was
    released), instead of joining the worker at interpreter exit.
    """

    _STOP = object()

    def __init__(self, size, name):
        self._queue = queue.SimpleQueue()
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

    def _work(self):
        while True:
            item = self._queue.get()
            if item is self._STOP:
                return
            func, args = item
            try:
                if func(*args) is _RETIRE:
                    return
            except Exception:
                LOG.exception('Unexpected error in an engine worker')

    def submit(self, func, *args):
        if self._closed:
            raise RuntimeError('the pool is shut down')
        self._queue.put((func, args))

    def shutdown(self, cancel=True):
        """Stop the workers after what they run; drop what is queued."""
        self._closed = True
        if cancel:
            while True:
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    break
        for _ in list(self._threads):
            self._queue.put(self._STOP)

    def join(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            thread.join(None if deadline is None
                        else max(0, deadline - time.monotonic()))


class Engine(object):
    """One event engine (thread-safe; run it with :meth:`run`)."""

    #: Real seconds the loop waits after a wake-up while actions are
    #: running, so that their results are recorded in one transaction.
    coalesce_delay = 0.005

    def __init__(self, conf, db=None, plugins=None, notifier=None,
                 engine_id=None):
        self.conf = conf
        self.opts = conf.nova_lease
        check_options(self.opts)
        self.db = db if db is not None else db_api.get_database(conf)
        self.plugins = (plugin_base.load_plugins(conf) if plugins is None
                        else dict(plugins))
        self.notifier = notifier
        self.engine_id = engine_id or default_engine_id()
        self._wakeup = threading.Event()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._running = False
        self._shutting_down = False
        self._lock = threading.Lock()
        self._jobs = {}
        self._calls = {}        # {id(job): job} of the jobs in a call
        self._finished = []
        # While run() runs, a recorder thread records the results (in
        # parallel with the loop's claims: both wait on the database).
        self._recorder = None
        self._record_wakeup = threading.Event()
        self._recorder_stop = threading.Event()
        self._pool = _WorkerPool(self.opts.engine_workers, 'lease-engine')
        self._claims = _ClaimChecker(self.db, self.engine_id)
        self._notify_pool = _WorkerPool(1, 'lease-notify')
        # Plugin Waits (nova_lease.plugins.base.Wait) being watched, and
        # the observer thread that watches them (started when needed).
        self._waiting = []
        # Waited servers that sent a notification: {id: the server as
        # the notification shows it, or None}.
        self._notified = {}
        self._poll_due = None       # monotonic time of the next batched poll
        # Nova's notifications reach this process (see _poll_interval).
        self._notices_flow = False
        self._observe = threading.Event()
        self._observer = None
        self._last_recovery = None
        self._last_refresh = timeutils.utcnow()
        # Registration and heartbeats (see run()).
        self.process_id = None
        self.identity = None
        self._beats = threading.Event()       # set: stop beating
        self._observed = {}     # {process id: (heartbeats, monotonic)}
        self._last_look = None  # monotonic time of the last look at them
        self._beat_failing = False
        self._last_prune = None
        self.stats = {'claimed': 0, 'done': 0, 'retried': 0, 'failed': 0,
                      'skipped': 0, 'recovered': 0, 'released': 0,
                      'db_errors': 0, 'probes': 0, 'probe_wakeups': 0}
        _ENGINES.add(self)

    def __repr__(self):
        return '<Engine %s>' % self.engine_id

    # -- control ----------------------------------------------------------

    def wake(self):
        """Look at the database now (thread-safe)."""
        self._wakeup.set()

    def observe_now(self, server_id=None, server=None):
        """A server changed (thread-safe; e.g. it sent a notification):
        if a start waits for it, look at it now instead of at the next
        batched poll; without a server id, poll all the waited servers
        now. ``server``: the server as the notification shows it; when it
        shows the wait over, no request is sent to look at it (else one
        GET of that server).
        """
        if server_id is not None:
            self._notices_flow = True
        if not self._waiting:
            return
        with self._lock:
            if server_id is None:
                self._poll_due = time.monotonic()
            elif any(e.wait.server_id == server_id for e in self._waiting):
                self._notified[server_id] = server
            else:
                return
        self._observe.set()

    def stop(self):
        """Ask :meth:`run` to finish or release its claims and return."""
        self._stopping.set()
        self._wakeup.set()

    @property
    def stopping(self):
        return self._stopping.is_set()

    @property
    def notices_flow(self):
        """True while Nova's notifications count as reaching this engine
        (its batched poll of waited servers is then a safety net; see
        :meth:`_poll_interval`).
        """
        return self._notices_flow

    @property
    def in_flight(self):
        with self._lock:
            return len(self._jobs)

    def run(self):
        """The loop; returns after :meth:`stop` (claims finished/released).

        :raises nova_lease.exception.DatabaseNotReady: the database has
            no schema (nothing is claimed).
        """
        self._register(at_start=True)
        threads = [threading.Thread(target=self._heartbeat_loop,
                                    name='lease-heartbeat', daemon=True),
                   threading.Thread(target=self._service_check_loop,
                                    name='lease-service-check',
                                    daemon=True)]
        for thread in threads:
            thread.start()
        self._recorder = threading.Thread(target=self._recorder_loop,
                                          name='lease-recorder', daemon=True)
        self._recorder.start()
        LOG.info('Lease engine %s started', self.engine_id)
        backoff = 0.0
        self._running = True
        try:
            while not self._stopping.is_set():
                self._wakeup.clear()
                baseline = None
                try:
                    claimed = self.run_once()
                    timeout, baseline = self._sleep_time(claimed)
                    if backoff:
                        LOG.info('Lease engine %s: database reachable '
                                 'again', self.engine_id)
                    backoff = 0.0
                except Exception as e:
                    # Database unreachable (or a bug): wait and retry;
                    # the traceback once per outage.
                    self.stats['db_errors'] += 1
                    first = not backoff
                    backoff = min(backoff * 2 or 0.5,
                                  self.opts.engine_max_sleep)
                    LOG.warning('Lease engine %(id)s: loop failed, retrying '
                                'in %(delay).1f s: %(error)s',
                                {'id': self.engine_id, 'delay': backoff,
                                 'error': e}, exc_info=first)
                    timeout = backoff
                if timeout > 0:
                    woken = self._wait(timeout, baseline)
                    if woken and self.in_flight and self.coalesce_delay:
                        time.sleep(self.coalesce_delay)
        finally:
            self._shutdown()
            self._recorder_stop.set()
            self._record_wakeup.set()
            self._recorder.join(30)
            self._beats.set()
            for thread in threads:
                thread.join(5)
            self._unregister()
            LOG.info('Lease engine %(id)s stopped: %(stats)s',
                     {'id': self.engine_id, 'stats': self.stats})

    def run_once(self, force_recovery=False):
        """One pass without sleeping: record, recover, claim, dispatch.

        Returns the number of events claimed (their actions run in the
        worker threads; see :meth:`process_due` to wait for them).
        """
        self._check_timeouts()
        if self._recorder is None:
            self._record()
        self._recover(force_recovery)
        self._refresh()
        return self._claim()

    def process_due(self, timeout=120.0):
        """Run every due event, wait until recorded; return how many ran.

        For tests and tools: call it after moving the clock. Events made
        claimable by the ones that ran (the end after the start) run too.
        """
        deadline = time.monotonic() + timeout
        total = 0
        force = True
        while True:
            claimed = self.run_once(force_recovery=force)
            force = False
            total += claimed
            while self._unfinished():
                if time.monotonic() > deadline:
                    raise RuntimeError('events still running after %s s'
                                       % timeout)
                self._wakeup.wait(0.05)
                self._wakeup.clear()
                self._check_timeouts()
            self._record()
            if not claimed and not self.in_flight:
                return total

    def close(self, timeout=None):
        """Stop and release everything; wait for :meth:`run` to return."""
        self.stop()
        if self._running:
            if timeout is None:
                timeout = self.opts.engine_shutdown_timeout + 30
            self._stopped.wait(timeout)
        else:
            self._shutdown()

    # -- loop steps -------------------------------------------------------

    def _unfinished(self):
        with self._lock:
            return [j for j in self._jobs.values() if j.result is None]

    def _room(self):
        """How many events to claim now (0: wait for a bigger chunk).

        A claim costs a transaction of several queries whatever its size,
        so while enough actions are queued for the workers (they would not
        start the new ones sooner), the engine waits until a quarter of a
        batch is free instead of claiming a few events at every finished
        action.
        """
        in_flight = self.in_flight
        room = self.opts.engine_batch_size - in_flight
        if (in_flight >= 2 * self.opts.engine_workers and
                room < self.opts.engine_batch_size // 4):
            return 0
        return max(room, 0)

    def _sleep_time(self, claimed):
        """(seconds to sleep, probe baseline or None)."""
        room = self._room()
        with self._lock:
            if self._finished and self._recorder is None:
                return 0, None
            calls = [j.call_started for j in self._calls.values()
                     if j.state == 'running' and j.call_started is not None]
        longest = self.opts.engine_max_sleep
        if calls:
            # Wake up when the oldest plugin call times out.
            longest = min(longest, max(
                0.05, min(calls) + self.opts.plugin_call_timeout
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

    def _wait(self, timeout, baseline):
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
                self.stats['probes'] += 1
                now = db_api.engine_probe(self.db, horizon)
            except Exception as e:
                LOG.debug('Probe failed (%s); sleeping without probes', e)
                return self._wakeup.wait(max(0, deadline - time.monotonic()))
            if now != fingerprint:
                self.stats['probe_wakeups'] += 1
                LOG.debug('Lease engine %s: events changed while it slept',
                          self.engine_id)
                return True

    def _check_timeouts(self):
        """Fail the actions stuck in a plugin call for too long.

        The stuck worker thread cannot be interrupted: it is replaced by a
        new one, and exits (its result dropped) if the call ever returns.
        """
        timeout = self.opts.plugin_call_timeout
        now = time.monotonic()
        expired = []
        with self._lock:
            # (Only the jobs in a plugin call: at most the workers.)
            for job in self._calls.values():
                if (job.state == 'running' and job.call_started is not None
                        and now - job.call_started > timeout):
                    job.state = 'timed_out'
                    expired.append(job)
        for job in expired:
            event = job.event
            job.guard.cancel('%s did not finish within %s s '
                             '([nova_lease] plugin_call_timeout)'
                             % (job.call_what, timeout))
            LOG.error('%(what)s for %(type)s of lease %(lease)s is stuck '
                      'for more than %(timeout)s s: giving up on it',
                      {'what': job.call_what, 'type': event['event_type'],
                       'lease': event['lease_id'], 'timeout': timeout})
            error = plugin_base.PluginError(
                reason='%s failed: %s' % (job.call_what, PluginTimeout(
                    what=job.call_what, timeout=timeout)))
            job.result, job.notices = self._failure(event, event['lease'],
                                                    error)
            with self._lock:
                self._finished.append(job)
            self._record_wakeup.set()
            if not self._stopping.is_set():
                self._pool.add_worker()

    def _claim(self):
        if self._stopping.is_set():
            return 0
        room = self._room()
        if room <= 0:
            return 0
        events = db_api.engine_claim_events(
            self.db, self.engine_id, timeutils.utcnow(), room,
            on_claim=self._on_claim)
        if not events:
            return 0
        self.stats['claimed'] += len(events)
        with self._lock:
            jobs = [_Job(e, functools.partial(
                self._claims.held, e['id'], e['attempts'])) for e in events]
            for job in jobs:
                self._jobs[job.event['id']] = job
        for job in jobs:
            LOG.debug('Claimed %(type)s %(id)s of lease %(lease)s',
                      {'type': job.event['event_type'],
                       'id': job.event['id'],
                       'lease': job.event['lease_id']})
            try:
                self._pool.submit(self._execute, job)
            except RuntimeError:     # the pool is shut down: stopping
                break
        return len(events)

    def _on_claim(self, event, lease):
        """In the claim transaction: the lease's next status, or None.

        Sets event['_skip'] to a reason when the action must not run.
        """
        new = self._claim_status(event, lease)
        if new is not None:
            status.check_transition(status.LEASE, lease['status'], new)
        return new

    def _claim_status(self, event, lease):
        etype, current = event['event_type'], lease['status']
        event['_skip'] = None
        if etype == _T.START_LEASE:
            if current == _L.PENDING:
                return _L.STARTING
            if current != _L.STARTING:     # STARTING: resume a start
                event['_skip'] = 'the lease is %s' % current
        elif etype == _T.END_LEASE:
            if current == _L.TERMINATED:
                event['_skip'] = 'the lease is already TERMINATED'
            elif current != _L.TERMINATING:
                if status.can_transition(status.LEASE, current,
                                         _L.TERMINATING):
                    return _L.TERMINATING
                event['_skip'] = 'the lease is %s' % current
        elif etype == _T.BEFORE_END_LEASE:
            if current != _L.ACTIVE:
                event['_skip'] = 'the lease is %s, not ACTIVE' % current
        return None

    def _record(self):
        """Write finished results; then send their notifications."""
        with self._lock:
            finished, self._finished = self._finished, []
        if not finished:
            return
        try:
            applied = set(db_api.engine_complete_events(
                self.db, self.engine_id, [j.result for j in finished]))
        except Exception:
            with self._lock:
                self._finished[:0] = finished
            raise
        with self._lock:
            for job in finished:
                self._jobs.pop(job.event['id'], None)
        # One line per batch (failures and retries have their own).
        outcome = collections.Counter(
            (j.event['event_type'], j.result['status']) for j in finished
            if j.event['id'] in applied)
        LOG.info('Lease engine %(id)s recorded %(n)d event results: '
                 '%(outcome)s', {'id': self.engine_id, 'n': len(applied),
                                 'outcome': ', '.join(
                                     '%s %s: %d' % (t, st, n) for (t, st), n
                                     in sorted(outcome.items()))})
        for job in finished:
            if job.event['id'] not in applied:
                LOG.warning('Event %(id)s (%(type)s of lease %(lease)s): '
                            'the claim of %(me)s was taken over, result '
                            'dropped', {'id': job.event['id'],
                                        'type': job.event['event_type'],
                                        'lease': job.event['lease_id'],
                                        'me': self.engine_id})
                continue
            for event_type, lease in job.notices:
                self._notify_later(event_type, lease)

    def _recover(self, force=False):
        now = timeutils.utcnow()
        interval = min(self.opts.engine_claim_timeout / 2.0, 10.0)
        last = self._last_recovery
        if not force and last is not None and (
                time.monotonic() - last < interval):
            return
        self._last_recovery = time.monotonic()
        for event in db_api.engine_recover_events(
                self.db, now, self.opts.engine_claim_timeout):
            self.stats['recovered'] += 1
            LOG.warning('Released the expired claim of %(by)s (at %(at)s) '
                        'on %(type)s %(id)s of lease %(lease)s',
                        {'by': event['claimed_by'],
                         'at': event['claimed_at'],
                         'type': event['event_type'], 'id': event['id'],
                         'lease': event['lease_id']})

    def _refresh(self):
        now = timeutils.utcnow()
        every = datetime.timedelta(
            seconds=self.opts.engine_claim_timeout / 3.0)
        if now - self._last_refresh < every:
            return
        ids = [j.event['id'] for j in self._unfinished()]
        if ids:
            db_api.engine_refresh_claims(self.db, self.engine_id, ids, now)
        self._last_refresh = now

    def _shutdown(self):
        with self._lock:
            if self._shutting_down:
                return
            self._shutting_down = True
        _ENGINES.discard(self)
        with self._lock:
            for job in self._jobs.values():
                if job.state == 'queued':
                    job.state = 'cancelled'
                    job.guard.cancel('engine %s stopped before it ran'
                                     % self.engine_id)
        self._pool.shutdown(cancel=True)
        self._observe.set()     # the observer sees _shutting_down
        deadline = time.monotonic() + self.opts.engine_shutdown_timeout
        while True:
            running = [j for j in self._unfinished()
                       if j.state == 'running']
            if not running or time.monotonic() >= deadline:
                break
            self._wakeup.wait(0.1)
            self._wakeup.clear()
        for attempt in range(3):
            try:
                self._record()
                unfinished = self._unfinished()
                for job in unfinished:
                    # Whatever the thread does next, it sends nothing.
                    job.guard.cancel('engine %s stopped and released its '
                                     'claim' % self.engine_id)
                left = [j.event['id'] for j in unfinished]
                if left:
                    released = db_api.engine_release_events(
                        self.db, self.engine_id, left,
                        'engine %s stopped before the action finished'
                        % self.engine_id)
                    self.stats['released'] += len(released)
                    LOG.warning('Released %d unfinished claims',
                                len(released))
                break
            except Exception as e:
                LOG.warning('Could not record/release claims at stop '
                            '(%s); they expire after engine_claim_timeout',
                            e)
                time.sleep(0.5)
        self._notify_pool.shutdown(cancel=False)
        self._notify_pool.join(10)
        self._stopped.set()

    # -- registration, heartbeats, other engines (heartbeat thread) -------

    def _register(self, at_start=False):
        """Register this engine in the processes table (once).

        At start, a database without schema raises DatabaseNotReady; an
        unreachable one is retried by the heartbeat thread.
        """
        if self.process_id is not None:
            return
        try:
            db, self.identity = registration.check_database(self.conf,
                                                            self.db)
            row = registration.register(self.db, registration.ENGINE,
                                        name=self.engine_id)
        except exception.DatabaseNotReady:
            if at_start:
                raise
            LOG.error('Lease engine %s: the nova_lease database has no '
                      'schema any more', self.engine_id)
            return
        except Exception as e:
            LOG.warning('Lease engine %(id)s could not register in the '
                        'nova_lease database (retrying): %(error)s',
                        {'id': self.engine_id, 'error': e})
            return
        self.process_id = row['id']
        registration.log_database(registration.ENGINE,
                                  self.db.url, self.identity)

    def _unregister(self):
        if self.process_id is None:
            return
        try:
            db_api.process_stop(self.db, self.process_id)
        except Exception as e:
            LOG.warning('Lease engine %(id)s could not record its stop: '
                        '%(error)s', {'id': self.engine_id, 'error': e})

    def _heartbeat_loop(self):
        interval = self.opts.engine_heartbeat_interval
        while not self._beats.is_set():
            try:
                self.beat()
            except Exception:
                LOG.exception('Unexpected error in the heartbeat of lease '
                              'engine %s', self.engine_id)
            self._beats.wait(interval)

    def beat(self):
        """One heartbeat, and a look at the other engines' heartbeats."""
        self._register()
        if self.process_id is None:
            return
        now = time.monotonic()
        try:
            was = db_api.process_heartbeat(self.db, self.process_id)
            if was is None:      # our row was pruned: register again
                self.process_id = None
                self._register()
                return
            rows = db_api.process_list(self.db, binary=registration.ENGINE,
                                       running=True)
        except Exception as e:
            if not self._beat_failing:
                LOG.warning('Lease engine %(id)s could not beat in the '
                            'database: %(error)s',
                            {'id': self.engine_id, 'error': e})
            self._beat_failing = True
            self._last_look = None
            return
        if self._beat_failing:
            LOG.info('Lease engine %s beats again', self.engine_id)
            self._beat_failing = False
        if was:
            LOG.warning('Lease engine %(id)s was taken for dead (%(why)s): '
                        'the claims it held were released, and its '
                        'running actions send nothing more to Nova',
                        {'id': self.engine_id, 'why': was})
        timeout = self.opts.engine_heartbeat_timeout
        last, self._last_look = self._last_look, now
        if last is None or now - last > timeout / 2.0:
            # We did not watch (start, or this process was stalled): time
            # counts from now for everyone.
            self._observed = {pid: (count, now) for pid, (count, _)
                              in self._observed.items()}
        dead = []
        observed = {}
        for row in rows:
            if row['id'] == self.process_id:
                continue
            seen = self._observed.get(row['id'])
            if seen is None or seen[0] != row['heartbeats']:
                observed[row['id']] = (row['heartbeats'], now)
                continue
            observed[row['id']] = seen
            if now - seen[1] > timeout:
                dead.append((row, now - seen[1]))
        self._observed = observed
        for row, silent in dead:
            self._release_dead(row, silent)
        self._prune()

    def _release_dead(self, row, silent):
        keep = ()
        if row['name'] == self.engine_id:
            # A previous process with our name: our own jobs stay ours.
            with self._lock:
                keep = list(self._jobs)
        reason = ('no heartbeat for %.0f s, seen by engine %s'
                  % (silent, self.engine_id))
        marked, released = db_api.engine_release_dead(
            self.db, row['id'], row['heartbeats'], reason, keep=keep,
            alive=[self.process_id])
        if marked:
            self._observed.pop(row['id'], None)
            LOG.warning('Lease engine %(name)s (host %(host)s, pid %(pid)s) '
                        'has not beaten for %(silent).0f s: taken for dead',
                        {'name': row['name'], 'host': row['host'],
                         'pid': row['pid'], 'silent': silent})
        # (Not marked with claims left: locked by a transaction of its
        # own still open; the next beat releases them.)
        if released:
            self.stats['recovered'] += len(released)
            LOG.warning('Released %(n)d claim(s) of engine %(name)s (no '
                        'heartbeat for %(silent).0f s): %(events)s',
                        {'n': len(released), 'name': row['name'],
                         'silent': silent,
                         'events': ', '.join(
                             '%s %s of lease %s' % (e['event_type'], e['id'],
                                                    e['lease_id'])
                             for e in released)})
            self.wake()

    #: Rows of processes not seen for this long are deleted.
    PROCESS_RETENTION = datetime.timedelta(days=7)

    def _prune(self):
        now = time.monotonic()
        if self._last_prune is not None and now - self._last_prune < 3600:
            return
        self._last_prune = now
        try:
            db_api.process_prune(self.db, timeutils.utcnow()
                                 - self.PROCESS_RETENTION)
        except Exception as e:
            LOG.debug('Could not prune old process rows: %s', e)

    def _compute_client(self):
        for plugin in self.plugins.values():
            if isinstance(plugin, plugin_base.ComputePlugin):
                return plugin.compute
        return None

    def check_registrations(self):
        """Warn about nova-scheduler services that never registered here.

        Nova reports them up (compute API, os-services), but no process
        row of theirs is in this side database: they schedule without
        LeaseFilter, or with another [nova_lease_database] connection.
        Returns the warnings logged.
        """
        client = self._compute_client()
        if client is None:
            LOG.debug('No compute plugin: Nova services are not checked')
            return []
        services = client.list_services(binary=registration.SCHEDULER)
        up = {s.get('host') for s in services if s.get('state') == 'up'}
        registered = {r['host'] for r in db_api.process_list(
            self.db, binary=registration.SCHEDULER)}
        identity = self.identity or db_api.database_identity(self.db)
        warnings = []
        for host in sorted(h for h in up - registered if h):
            message = (
                '%s on host %s is up but has never registered in this lease '
                'database (%s, identity %s): it does not run LeaseFilter '
                'against it. Check its [nova_lease_database] connection and '
                '[filter_scheduler] enabled_filters, and compare with '
                'nova-lease-manage process list'
                % (registration.SCHEDULER, host,
                   registration.safe_url(self.db.url), identity))
            LOG.warning(message)
            warnings.append(message)
        return warnings

    def _service_check_loop(self):
        # Until the first check succeeds (Nova may start after the
        # engine), every minute; then every engine_service_check_interval.
        interval = self.opts.engine_service_check_interval
        done = False
        while not self._beats.is_set():
            try:
                self.check_registrations()
                done = True
            except Exception as e:
                LOG.warning('Lease engine %(id)s could not check Nova\'s '
                            'scheduler services: %(error)s',
                            {'id': self.engine_id, 'error': e})
            if done and not interval:
                return
            if self._beats.wait(interval if done else 60):
                return

    # -- actions (worker threads) -----------------------------------------

    def _execute(self, job):
        with self._lock:
            if job.state != 'queued':
                return
            job.state = 'running'
        event = job.event
        lease = event['lease']
        try:
            if event.get('_skip'):
                self.stats['skipped'] += 1
                LOG.info('Skipped %(type)s of lease %(lease)s: %(why)s',
                         {'type': event['event_type'],
                          'lease': lease['id'], 'why': event['_skip']})
                result = self._result(event, _E.DONE,
                                      last_error='skipped: %s'
                                      % event['_skip'])
                notices = ()
            else:
                try:
                    with guard.installed(job.guard):
                        notes = self._act(job, event, lease)
                except Exception as e:
                    if job.state == 'timed_out':
                        # Its failure is recorded already (time-out).
                        result, notices = None, ()
                        LOG.warning('%(job)s stopped: %(error)s',
                                    {'job': job.guard.describe, 'error': e})
                    else:
                        result, notices = self._failure(event, lease, e)
                else:
                    job.notes.extend(notes)
                    if self._wait_for(job):
                        return      # the observer resumes it
                    result, notices = self._success(event, lease,
                                                    job.notes)
        except Exception as e:     # a bug: keep the claim, say so
            LOG.exception('Engine error on event %s', event['id'])
            result, notices = self._failure(event, lease, e)
        return self._finish(job, result, notices)

    def _recorder_loop(self):
        """Record finished results while run() runs (see _record)."""
        backoff = 0.0
        while not self._recorder_stop.is_set():
            self._record_wakeup.wait(self.opts.engine_max_sleep)
            self._record_wakeup.clear()
            if self._recorder_stop.is_set():
                return
            if self.coalesce_delay:
                # Let the results of one burst gather: one transaction.
                time.sleep(self.coalesce_delay)
            try:
                with self._lock:
                    pending = bool(self._finished)
                if pending:
                    self._record()
                    self._wakeup.set()      # room for the next claims
                backoff = 0.0
            except Exception as e:
                self.stats['db_errors'] += 1
                backoff = min(backoff * 2 or 0.5, self.opts.engine_max_sleep)
                LOG.warning('Lease engine %(id)s could not record results, '
                            'retrying in %(delay).1f s: %(error)s',
                            {'id': self.engine_id, 'delay': backoff,
                             'error': e})
                self._recorder_stop.wait(backoff)
                self._record_wakeup.set()

    # -- acting, then observing (plugin Waits) ----------------------------

    def _park(self, job, plugin, wait, what):
        """Watch a plugin's Wait of job (see nova_lease.plugins.base)."""
        entry = _Waiting(job, plugin, wait, '%s: %s' % (what, wait.what),
                         self.opts.plugin_call_timeout)
        LOG.debug('%(job)s waits for %(what)s',
                  {'job': job.guard.describe, 'what': wait.what})
        with self._lock:
            job.waits += 1
            if job.state == 'waiting':
                self._waiting.append(entry)
            else:
                job.parked.append(entry)
        self._start_observer()
        self._observe.set()

    def _wait_for(self, job):
        """After the job's plugin calls: True if it now waits (its worker
        is free; the observer resumes it).
        """
        with self._lock:
            if not job.waits or job.state != 'running':
                return False
            job.state = 'waiting'
            self._waiting.extend(job.parked)
            job.parked = []
        self._observe.set()
        return True

    def _start_observer(self):
        with self._lock:
            if self._observer is not None or self._shutting_down:
                return
            self._observer = threading.Thread(
                target=self._observe_loop, name='lease-observer',
                daemon=True)
        self._observer.start()

    def _observe_loop(self):
        """Watch the waited servers: one batched poll per interval, and
        one GET of each server that sent a notification meanwhile.
        """
        while not self._shutting_down:
            with self._lock:
                entries = list(self._waiting)
                if not entries:
                    self._poll_due = None
            if not entries:
                self._observe.wait(self.opts.engine_max_sleep)
                self._observe.clear()
                continue
            interval = min(getattr(e.plugin.compute, 'poll_interval', 1.0)
                           for e in entries)
            with self._lock:
                if self._poll_due is None:
                    # New waits: their first batched look is one
                    # interval on (or sooner, at a notification).
                    self._poll_due = time.monotonic() + self._poll_interval(
                        interval)
                delay = self._poll_due - time.monotonic()
            if delay > 0 and not self._notified:
                self._observe.wait(delay)
            self._observe.clear()
            with self._lock:
                notified, self._notified = self._notified, {}
                entries = list(self._waiting)
                full = time.monotonic() >= self._poll_due
                if full:
                    self._poll_due = time.monotonic() + self._poll_interval(
                        interval)
            try:
                if full:
                    self._poll(entries, notified)
                elif notified:
                    self._poll_notified(entries, notified)
            except Exception:
                LOG.exception('Lease engine %s: error while watching '
                              'servers', self.engine_id)

    def _poll_interval(self, interval):
        """Seconds to the next batched poll.

        While Nova's notifications reach this process, each waited server
        is looked at when its own notification comes, and the batched
        poll, a list of every server changed since the earliest wait, is
        only the safety net for a lost one: it runs every
        ``engine_max_sleep`` seconds instead of every ``interval`` (in a
        burst of a hundred starts, a list per second costs Nova more than
        the starts). Notifications count as reaching it once one came,
        until a batched poll finds a wait over that no notification
        announced (see :meth:`_poll`).
        """
        if self._notices_flow:
            return max(interval, self.opts.engine_max_sleep)
        return interval

    def _poll(self, entries, notified=()):
        """One list of every server changed since the earliest wait
        began, per compute client (``notified``: the waited servers whose
        notification came since the last look).
        """
        groups = collections.defaultdict(list)
        for entry in entries:
            groups[id(entry.plugin.compute)].append(entry)
        for group in groups.values():
            client = group[0].plugin.compute
            try:
                changed = client.list_servers_changed_since(
                    min(e.since for e in group))
            except Exception as e:
                LOG.warning('Lease engine %(id)s: cannot list the servers '
                            'it waits for (%(error)s); trying again',
                            {'id': self.engine_id, 'error': e})
                changed = {}
            for entry in group:
                server_id = entry.wait.server_id
                if (self._look(entry, client, changed) and
                        self._notices_flow and server_id not in notified
                        and server_id not in self._notified):
                    # Over, and its notification has not come: do not
                    # count on them until the next one.
                    LOG.debug('Lease engine %(id)s: %(what)s is over '
                              'without a notification; polling every '
                              '%(interval)s s', {
                                  'id': self.engine_id, 'what': entry.what,
                                  'interval': getattr(
                                      client, 'poll_interval', 1.0)})
                    self._notices_flow = False

    def _poll_notified(self, entries, notified):
        """Look at the waited servers that sent a notification: as the
        notification shows them when that ends their wait (a finished
        unshelve), else with one GET each (a batched poll lists every
        server changed since the earliest wait, a hundred in a burst of
        starts).
        """
        servers = {}
        for entry in entries:
            server_id = entry.wait.server_id
            if server_id not in notified:
                continue
            client = entry.plugin.compute
            shown = notified[server_id]
            if shown is not None and entry.wait.outcome(shown) == 'done':
                self._look(entry, client, {server_id: shown})
                continue
            key = (id(client), server_id)
            if key not in servers:
                try:
                    servers[key] = {server_id: client.get_server(server_id)}
                except Exception as e:
                    # Seen at the next batched poll.
                    LOG.debug('Lease engine %(id)s: cannot read server '
                              '%(server)s: %(error)s',
                              {'id': self.engine_id, 'server': server_id,
                               'error': e})
                    servers[key] = {}
            self._look(entry, client, servers[key])

    def _look(self, entry, client, changed):
        """Resume the entry's job if its wait is over; True if it was."""
        if entry.job.guard.cancelled:
            self._unwatch(entry)
            return False
        server = changed.get(entry.wait.server_id)
        outcome = entry.wait.outcome(server) if server is not None else None
        error = None
        if outcome is None and time.monotonic() > entry.deadline:
            # One last look of its own before giving up.
            try:
                server = client.get_server(entry.wait.server_id)
            except compute.ServerNotFound:
                server = None
            except Exception:
                pass
            outcome = entry.wait.outcome(server)
            if outcome is None:
                error = PluginTimeout(what=entry.what,
                                      timeout=self.opts.plugin_call_timeout)
        if outcome == 'failed':
            error = entry.wait.failure(server)
        if outcome is None and error is None:
            return False
        if not self._unwatch(entry):
            return False
        try:
            self._pool.submit(self._resume, entry, server, error)
        except RuntimeError:    # stopping: its claim is released
            pass
        return True

    def _unwatch(self, entry):
        with self._lock:
            try:
                self._waiting.remove(entry)
            except ValueError:
                return False
        return True

    def _resume(self, entry, server, error):
        """In a worker: continue a job once a Wait of it is over."""
        job = entry.job
        with self._lock:
            if job.state != 'waiting':
                return
        failure = None
        if error is not None:
            failure = plugin_base.PluginError(
                reason='%s failed: %s' % (entry.what, error))
        else:
            try:
                with guard.installed(job.guard):
                    job.guard.check(entry.what, side_effect=False)
                    note = entry.wait.then(server)
            except Exception as e:
                failure = plugin_base.PluginError(
                    reason='%s failed: %s' % (entry.what, e))
            else:
                if isinstance(note, plugin_base.Wait):
                    self._park(job, entry.plugin, note, entry.what)
                elif isinstance(note, str) and note:
                    job.notes.append(note)
        with self._lock:
            job.waits -= 1
            done = failure is not None or job.waits == 0
            if not done or job.state != 'waiting':
                return
            job.state = 'running'
            # The other Waits of a failed job are dropped.
            self._waiting = [e for e in self._waiting if e.job is not job]
        event = job.event
        if failure is not None:
            result, notices = self._failure(event, event['lease'], failure)
        else:
            result, notices = self._success(event, event['lease'],
                                            job.notes)
        self._finish(job, result, notices)

    def _finish(self, job, result, notices):
        """Hand the job's result to the recorder.

        Returns _RETIRE when the job timed out meanwhile (its failure is
        recorded already, this result is dropped, and the worker thread
        that ran it has been replaced).
        """
        with self._lock:
            if job.state == 'timed_out':
                LOG.warning('%(type)s of lease %(lease)s finished after its '
                            'time-out; result dropped',
                            {'type': job.event['event_type'],
                             'lease': job.event['lease_id']})
                return _RETIRE
            job.notices = notices
            job.result = result
            self._finished.append(job)
        if self._recorder is not None:
            self._record_wakeup.set()
        else:
            self._wakeup.set()
        return None

    def _max_retries(self, lease):
        retries = lease.get('retries')
        return self.opts.max_retries if retries is None else retries

    def _act(self, job, event, lease):
        etype = event['event_type']
        limit = self._max_retries(lease) + 1
        if event['attempts'] > limit:
            raise GaveUp(attempts=event['attempts'] - 1,
                         error=event.get('last_error') or 'none recorded')
        method = ACTIONS.get(etype)
        if method is None:
            raise exception.NovaLeaseException(
                'unknown event type %s' % etype)
        LOG.debug('Running %(type)s of lease %(lease)s (%(name)s), '
                  'attempt %(n)d', {'type': etype, 'lease': lease['id'],
                                    'name': lease.get('name'),
                                    'n': event['attempts']})
        notes = []
        for reservation in lease.get('reservations') or ():
            if reservation.get('status') == _R.DELETED:
                continue
            rtype = reservation.get('resource_type')
            what = ('%s of %s reservation %s (resource %s)'
                    % (method, rtype, reservation['id'],
                       reservation.get('resource_id')))
            plugin = self.plugins.get(rtype)
            if plugin is None:
                raise NoPlugin(type=rtype)
            job.guard.check(what, side_effect=False)
            job.call_what = what
            with self._lock:
                job.call_started = time.monotonic()
                self._calls[id(job)] = job
            try:
                note = getattr(plugin, method)(lease, reservation)
            except Exception as e:
                raise plugin_base.PluginError(
                    reason='%s failed: %s' % (what, e)) from e
            finally:
                with self._lock:
                    job.call_started = None
                    self._calls.pop(id(job), None)
            if isinstance(note, plugin_base.Wait):
                self._park(job, plugin, note, what)
            elif isinstance(note, str) and note:
                notes.append(note)
        if etype == _T.BEFORE_END_LEASE:
            job.guard.check('the %s notification' % notifications.BEFORE_END)
            self._send(notifications.BEFORE_END, lease)
        return notes

    def _result(self, event, event_status, **extra):
        result = {'event_id': event['id'], 'lease_id': event['lease_id'],
                  'status': str(event_status)}
        result.update(extra)
        return result

    def _success(self, event, lease, notes=()):
        """The result of a finished action.

        ``notes``: what the plugins said about it (see
        nova_lease.plugins.base: e.g. servers left alone); they become
        the lease's status_reason (None clears an old one) and the
        event's last_error, and go with its notification.
        """
        etype = event['event_type']
        self.stats['done'] += 1
        note = '; '.join(notes) or None
        extra = {}
        if note:
            LOG.warning('%(type)s of lease %(lease)s: %(note)s',
                        {'type': etype, 'lease': lease['id'],
                         'note': note})
            extra = {'status_reason': note, 'last_error': note}
        new = None
        if etype == _T.START_LEASE:
            new = _L.ACTIVE
            extra.update({'lease_status': str(new),
                          'lease_expected': [str(_L.STARTING)],
                          'status_reason': note,
                          'reservation_status': str(_R.ACTIVE),
                          'reservation_expected': [str(_R.PENDING)]})
        elif etype == _T.END_LEASE:
            new = _L.TERMINATED
            extra.update({'lease_status': str(new),
                          'lease_expected': [str(_L.TERMINATING)],
                          'status_reason': note,
                          'reservation_status': str(_R.DELETED),
                          'reservation_expected': _sources(
                              status.RESERVATION, _R.DELETED)})
        notices = ()
        if etype in _SUCCESS_NOTICES:
            notices = ((_SUCCESS_NOTICES[etype],
                        dict(lease, status=str(new), status_reason=note)),)
        LOG.debug('%(type)s of lease %(lease)s done',
                  {'type': etype, 'lease': lease['id']})
        return self._result(event, _E.DONE, **extra), notices

    def _failure(self, event, lease, error):
        etype = event['event_type']
        attempts = event['attempts']
        retries = self._max_retries(lease)
        message = str(error) or type(error).__name__
        now = timeutils.utcnow()
        if attempts <= retries and not isinstance(error, GaveUp):
            self.stats['retried'] += 1
            delay = self.opts.retry_interval * 2 ** (attempts - 1)
            at = now + datetime.timedelta(seconds=delay)
            reason = ('%s failed (attempt %d of %d), retrying at %s UTC: %s'
                      % (etype, attempts, retries + 1,
                         at.strftime('%Y-%m-%d %H:%M:%S'), message))
            LOG.warning('Lease %(lease)s: %(reason)s',
                        {'lease': lease['id'], 'reason': reason})
            extra = {'last_error': message, 'next_attempt_at': at,
                     'status_reason': reason}
            if etype == _T.START_LEASE:
                extra.update(lease_status=str(_L.PENDING),
                             lease_expected=[str(_L.STARTING)])
            return self._result(event, _E.UNDONE, **extra), ()
        self.stats['failed'] += 1
        reason = ('%s failed %d time(s), giving up: %s. Fix the cause, then '
                  'retry by setting event %s back to UNDONE%s.'
                  % (etype, attempts, message, event['id'],
                     ' (and the lease back to PENDING)'
                     if etype == _T.START_LEASE else ''))
        LOG.error('Lease %(lease)s is now ERROR: %(reason)s',
                  {'lease': lease['id'], 'reason': reason})
        extra = {'last_error': message, 'status_reason': reason,
                 'lease_status': str(_L.ERROR),
                 'lease_expected': _sources(status.LEASE, _L.ERROR),
                 'reservation_status': str(_R.ERROR),
                 'reservation_expected': _sources(status.RESERVATION,
                                                  _R.ERROR)}
        notices = ((notifications.ERROR,
                    dict(lease, status=str(_L.ERROR),
                         status_reason=reason)),)
        return self._result(event, _E.ERROR, **extra), notices

    # -- notifications ----------------------------------------------------

    def _send(self, event_type, lease):
        if self.notifier is not None:
            self.notifier.notify(event_type, lease)

    def _notify_later(self, event_type, lease):
        if self.notifier is None:
            return
        try:
            self._notify_pool.submit(self._send, event_type, lease)
        except RuntimeError:      # shutting down: send it here
            self._send(event_type, lease)
