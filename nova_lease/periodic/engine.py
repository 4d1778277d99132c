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
   resource plugins, each call bounded by ``plugin_call_timeout``
   (nova_lease.periodic.jobs); a plugin that asked Nova for something
   slow returns a Wait, and the observer (nova_lease.periodic.observer)
   resumes the job when its server is ready, without holding a worker;
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
seconds (by this engine's clock) are released at once
(nova_lease.periodic.liveness).

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
``status_reason`` that says what failed (nova_lease.periodic.outcomes).
Database errors make the loop
wait and try again, never stop. "Now" is
``oslo_utils.timeutils.utcnow()``, so tests drive the engine with a
clock override and :meth:`Engine.process_due`.
"""

import collections
import datetime
import functools
import os
import socket
import threading
import time
import weakref

from oslo_log import log as logging
from oslo_utils import timeutils
from oslo_utils import uuidutils

from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import guard
from nova_lease import notifications
from nova_lease.periodic import jobs
from nova_lease.periodic import liveness
from nova_lease.periodic import observer
from nova_lease.periodic import outcomes
from nova_lease.plugins import base as plugin_base
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
        self._pool = jobs.WorkerPool(self.opts.engine_workers, 'lease-engine')
        self._claims = jobs.ClaimChecker(self.db, self.engine_id)
        self._notify_pool = jobs.WorkerPool(1, 'lease-notify')
        # Watches the servers that plugin Waits wait for.
        self.observer = observer.Observer(self.engine_id, self.opts,
                                          self._resume_later)
        self._last_recovery = None
        self._last_refresh = timeutils.utcnow()
        self.stats = {'claimed': 0, 'done': 0, 'retried': 0, 'failed': 0,
                      'skipped': 0, 'recovered': 0, 'released': 0,
                      'db_errors': 0, 'probes': 0, 'probe_wakeups': 0}
        # Registration and heartbeats (see run()).
        self.liveness = liveness.Liveness(self)
        _ENGINES.add(self)

    def __repr__(self):
        return '<Engine %s>' % self.engine_id

    # -- control ----------------------------------------------------------

    def wake(self):
        """Look at the database now (thread-safe)."""
        self._wakeup.set()

    def observe_now(self, server_id=None, server=None):
        """A server changed (thread-safe; e.g. it sent a notification):
        see :meth:`nova_lease.periodic.observer.Observer.observe_now`.
        """
        self.observer.observe_now(server_id, server)

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
        (see :class:`nova_lease.periodic.observer.Observer`).
        """
        return self.observer.notices_flow

    @property
    def in_flight(self):
        with self._lock:
            return len(self._jobs)

    def run(self):
        """The loop; returns after :meth:`stop` (claims finished/released).

        :raises nova_lease.exception.DatabaseNotReady: the database has
            no schema (nothing is claimed).
        """
        self.liveness.register(at_start=True)
        self.liveness.start()
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
            self.liveness.stop()
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
                reason='%s failed: %s' % (job.call_what, jobs.PluginTimeout(
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
            new = [jobs.Job(e, functools.partial(
                self._claims.held, e['id'], e['attempts'])) for e in events]
            for job in new:
                self._jobs[job.event['id']] = job
        for job in new:
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
        self.observer.stop()
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

    # -- registration and heartbeats (see liveness) -----------------------

    @property
    def process_id(self):
        """This engine's row in the processes table (None until run())."""
        return self.liveness.process_id

    def held_event_ids(self):
        """The events this engine holds a job of (thread-safe)."""
        with self._lock:
            return list(self._jobs)

    def beat(self):
        """One heartbeat, and a look at the other engines' heartbeats."""
        self.liveness.beat()

    def check_registrations(self):
        """Warn about nova-scheduler services that never registered here
        (see :class:`~nova_lease.periodic.liveness.Liveness`).
        """
        return self.liveness.check_registrations()

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
                result = outcomes.result(
                    event, _E.DONE, last_error='skipped: %s' % event['_skip'])
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
        entry = jobs.Waiting(job, plugin, wait, '%s: %s' % (what, wait.what),
                             self.opts.plugin_call_timeout)
        LOG.debug('%(job)s waits for %(what)s',
                  {'job': job.guard.describe, 'what': wait.what})
        with self._lock:
            job.waits += 1
            if job.state == 'waiting':
                self.observer.add([entry])
            else:
                job.parked.append(entry)
        self.observer.start()

    def _wait_for(self, job):
        """After the job's plugin calls: True if it now waits (its worker
        is free; the observer resumes it).
        """
        with self._lock:
            if not job.waits or job.state != 'running':
                return False
            job.state = 'waiting'
            self.observer.add(job.parked)
            job.parked = []
        self.observer.start()
        return True

    def _resume_later(self, entry, server, error):
        """The observer saw a Wait over: resume its job in a worker.

        :raises RuntimeError: the engine is stopping (its claims are
            released).
        """
        self._pool.submit(self._resume, entry, server, error)

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
            self.observer.drop(job)
        event = job.event
        if failure is not None:
            result, notices = self._failure(event, event['lease'], failure)
        else:
            result, notices = self._success(event, event['lease'],
                                            job.notes)
        self._finish(job, result, notices)

    def _finish(self, job, result, notices):
        """Hand the job's result to the recorder.

        Returns jobs.RETIRE when the job timed out meanwhile (its failure is
        recorded already, this result is dropped, and the worker thread
        that ran it has been replaced).
        """
        with self._lock:
            if job.state == 'timed_out':
                LOG.warning('%(type)s of lease %(lease)s finished after its '
                            'time-out; result dropped',
                            {'type': job.event['event_type'],
                             'lease': job.event['lease_id']})
                return jobs.RETIRE
            job.notices = notices
            job.result = result
            self._finished.append(job)
        if self._recorder is not None:
            self._record_wakeup.set()
        else:
            self._wakeup.set()
        return None

    def _act(self, job, event, lease):
        etype = event['event_type']
        limit = outcomes.max_retries(lease, self.opts) + 1
        if event['attempts'] > limit:
            raise jobs.GaveUp(attempts=event['attempts'] - 1,
                              error=event.get('last_error') or
                              'none recorded')
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
                raise jobs.NoPlugin(type=rtype)
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

    def _success(self, event, lease, notes=()):
        """The result and notices of a finished action (see outcomes)."""
        self.stats['done'] += 1
        return outcomes.success(event, lease, notes)

    def _failure(self, event, lease, error):
        """The result and notices of a failed action: retried later, or
        the lease in ERROR (see outcomes).
        """
        result, notices = outcomes.failure(event, lease, error, self.opts)
        self.stats['retried' if result['status'] == _E.UNDONE
                   else 'failed'] += 1
        return result, notices

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
