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
   woken: by a finished action, :meth:`Engine.wake` (e.g. a test clock
   that moved), :meth:`Engine.stop`, or a probe of the database
   (every ``engine_probe_interval``, :func:`db.api.engine_probe`) that
   shows events created or moved by another process (nova-api) since
   the engine last looked.

A second thread beats (``engine_heartbeat_interval``) in the
``processes`` table where the engine registered when :meth:`Engine.run`
began, and watches the other engines' heartbeats: the claims of an engine
whose heartbeat counter has not moved for ``engine_heartbeat_timeout``
seconds (by this engine's clock) are released at once
(nova_lease.periodic.liveness). A third one runs the idle-host action
(``[nova_lease_engine] idle_host_action``, nova_lease.periodic.idle).

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

This module holds the loop (:meth:`Engine.run`, :meth:`Engine.run_once`,
:meth:`Engine.process_due`), its sleep, the recorder thread and the
shutdown. The claims and records of steps 1 to 3 are in
nova_lease.periodic.claiming, the actions of step 4 in
nova_lease.periodic.actions; :class:`Engine` inherits both.
"""

import datetime
import os
import socket
import threading
import time

from oslo_log import log as logging
from oslo_utils import timeutils
from oslo_utils import uuidutils

from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease.periodic import actions
from nova_lease.periodic import claiming
from nova_lease.periodic import idle
from nova_lease.periodic import jobs
from nova_lease.periodic import liveness
from nova_lease.periodic import observer
from nova_lease.plugins import base as plugin_base

LOG = logging.getLogger(__name__)


def check_options(conf):
    """Refuse options that contradict each other (``[nova_lease]`` and
    ``[nova_lease_engine]`` of ``conf``).

    :raises nova_lease.exception.ConfigurationError: with what to change.
    """
    shared, opts = conf.nova_lease, conf.nova_lease_engine
    problems = []
    if shared.engine_claim_timeout <= opts.plugin_call_timeout:
        problems.append(
            '[nova_lease] engine_claim_timeout (%s s) must be larger than '
            '[nova_lease_engine] plugin_call_timeout (%s s): a claim must '
            'outlive the longest plugin call, or another engine takes over '
            'an action that is still running' % (
                shared.engine_claim_timeout, opts.plugin_call_timeout))
    if shared.engine_heartbeat_timeout < 3 * opts.engine_heartbeat_interval:
        problems.append(
            '[nova_lease] engine_heartbeat_timeout (%s s) must be at least '
            'three times [nova_lease_engine] engine_heartbeat_interval '
            '(%s s), or live engines are taken for dead' % (
                shared.engine_heartbeat_timeout,
                opts.engine_heartbeat_interval))
    if problems:
        raise exception.ConfigurationError(reason='; '.join(problems))


def default_engine_id():
    return '%s:%d:%s' % (socket.gethostname(), os.getpid(),
                         uuidutils.generate_uuid(dashed=False)[:8])


class Engine(claiming.ClaimingMixin, actions.ActionsMixin):
    """One event engine (thread-safe; run it with :meth:`run`).

    Its claims and records are :class:`~.claiming.ClaimingMixin`'s, the
    actions of its jobs :class:`~.actions.ActionsMixin`'s.
    """

    #: Real seconds the loop waits after a wake-up while actions are
    #: running, so that their results are recorded in one transaction.
    coalesce_delay = 0.005

    def __init__(self, conf, db=None, plugins=None, notifier=None,
                 engine_id=None):
        self.conf = conf
        # The options only the engine reads, and those it shares with
        # other processes (see nova_lease.conf).
        self.opts = conf.nova_lease_engine
        self.shared = conf.nova_lease
        check_options(conf)
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
        # The idle-host action (a thread of its own while run() runs).
        self.idle_hosts = idle.IdleHosts(self)

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
        self.idle_hosts.start()
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
            self.idle_hosts.stop()
            self.stats['claim_checks'] = self._claims.queries
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

    def _shutdown(self):
        with self._lock:
            if self._shutting_down:
                return
            self._shutting_down = True
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
