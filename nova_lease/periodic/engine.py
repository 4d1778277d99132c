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

Periodic chores run beside the loop, on one ``futurist.periodics``
worker (nova_lease.periodic.chores: uniform error logging, per-chore
metrics): a heartbeat (``engine_heartbeat_interval``) in the
``processes`` table where the engine registered when :meth:`Engine.run`
began, which also watches the other engines' heartbeats -- the claims of
an engine whose heartbeat counter has not moved for
``engine_heartbeat_timeout`` seconds (by this engine's clock) are
released at once (nova_lease.periodic.liveness); the check of Nova's
scheduler services; the idle-host action (``[nova_lease_engine]
idle_host_action``, nova_lease.periodic.idle); and the compute hook's
reconcile pass (:meth:`Engine.add_chore`).

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

This module wires the parts (:meth:`Engine.run`, :meth:`Engine.run_once`,
:meth:`Engine.process_due`) and holds the recorder thread and the
shutdown. The claims and records of steps 1 to 3 are
nova_lease.periodic.claiming's :class:`~.claiming.Claims`, the actions of
step 4 nova_lease.periodic.actions' :class:`~.actions.Runner`, the sleep
of step 5 nova_lease.periodic.loop's :class:`~.loop.Loop`: an engine has
one of each (composition, no shared private state).
"""

import collections
import os
import socket
import threading
import time

from oslo_log import log as logging
from oslo_utils import uuidutils

from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease.periodic import actions
from nova_lease.periodic import chores as engine_chores
from nova_lease.periodic import claiming
from nova_lease.periodic import idle
from nova_lease.periodic import liveness
from nova_lease.periodic import loop as engine_loop
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


class Engine(object):
    """One event engine (thread-safe; run it with :meth:`run`).

    Composed of three parts with narrow interfaces, each tested alone
    (tests/unit/test_engine_parts.py):

    * :attr:`claims` (:class:`~.claiming.Claims`): the database side;
    * :attr:`runner` (:class:`~.actions.Runner`): the jobs, the workers
      and the observer;
    * :attr:`loop` (:class:`~.loop.Loop`): the sleep and its wake-ups.

    The engine wires them (a pass: record, recover, refresh, claim,
    submit) and owns the threads around them: the recorder, the
    heartbeat (:attr:`liveness`) and the idle-host pass
    (:attr:`idle_hosts`).
    """

    #: Real seconds the loop waits after a wake-up while actions are
    #: running, so that their results are recorded in one transaction.
    coalesce_delay = 0.005

    #: Seconds run() waits at stop for a periodic chore still running
    #: (its threads are daemons: one stuck on Nova does not hold the
    #: process).
    CHORES_STOP_TIMEOUT = 5

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
        self.engine_id = engine_id or default_engine_id()
        self.stats = {'claimed': 0, 'done': 0, 'retried': 0, 'failed': 0,
                      'skipped': 0, 'recovered': 0, 'released': 0,
                      'db_errors': 0, 'probes': 0, 'probe_wakeups': 0}
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._running = False
        self._shutting_down = False
        self._state_lock = threading.Lock()
        # While run() runs, a recorder thread records the results (in
        # parallel with the loop's claims: both wait on the database).
        self._recorder = None
        self._record_wakeup = threading.Event()
        self._recorder_stop = threading.Event()
        self.loop = engine_loop.Loop(self.db, self.opts, self.stats,
                                     self.engine_id)
        self.claims = claiming.Claims(self.db, self.engine_id,
                                      self.shared.engine_claim_timeout,
                                      self.stats)
        self.runner = actions.Runner(
            conf, self.plugins, self.engine_id, db=self.db,
            claim_check=self.claims.held, notifier=notifier,
            stats=self.stats, on_finished=self._job_finished,
            on_gone=self.wake)
        # The periodic chores, on one futurist worker while run() runs:
        # registration heartbeats and the service check (liveness), the
        # idle-host pass (idle), and what else the process adds
        # (add_chore: the compute hook's reconcile pass).
        self.chores = engine_chores.Chores()
        self.liveness = liveness.Liveness(self)
        self.idle_hosts = idle.IdleHosts(self)

    def __repr__(self):
        return '<Engine %s>' % self.engine_id

    @property
    def notifier(self):
        """The engine's LeaseNotifier (or None): the runner's, which
        sends what the actions come to; the idle pass and the liveness
        chores read it here.
        """
        return self.runner.notifier

    @notifier.setter
    def notifier(self, notifier):
        self.runner.notifier = notifier

    # -- control ----------------------------------------------------------

    @property
    def observer(self):
        """The runner's observer (nova_lease.periodic.observer)."""
        return self.runner.observer

    def wake(self):
        """Look at the database now (thread-safe)."""
        self.loop.wake()

    def observe_now(self, server_id=None, server=None):
        """A server changed (thread-safe; e.g. it sent a notification):
        see :meth:`nova_lease.periodic.observer.Observer.observe_now`.
        """
        self.runner.observer.observe_now(server_id, server)

    def add_chore(self, name, func, spacing, run_immediately=True):
        """Run ``func()`` every ``spacing`` seconds while :meth:`run`
        runs, with the engine's other chores (nova_lease.periodic.chores).
        """
        return self.chores.add(name, func, spacing,
                               run_immediately=run_immediately)

    def status(self):
        """The engine's counters, with its chores' metrics."""
        return dict(self.stats, in_flight=self.in_flight,
                    chores=self.chores.metrics())

    def stop(self):
        """Ask :meth:`run` to finish or release its claims and return."""
        self._stopping.set()
        self.loop.wake()

    @property
    def stopping(self):
        return self._stopping.is_set()

    @property
    def notices_flow(self):
        """True while Nova's notifications count as reaching this engine
        (see :class:`nova_lease.periodic.observer.Observer`).
        """
        return self.runner.observer.notices_flow

    @property
    def in_flight(self):
        return self.runner.in_flight

    def run(self):
        """The loop; returns after :meth:`stop` (claims finished/released).

        :raises nova_lease.exception.DatabaseNotReady: the database has
            no schema (nothing is claimed).
        """
        self.liveness.register(at_start=True)
        self.liveness.add_chores(self.chores)
        self.idle_hosts.add_chores(self.chores)
        self.chores.start()
        self._recorder = threading.Thread(target=self._recorder_loop,
                                          name='lease-recorder', daemon=True)
        self._recorder.start()
        LOG.info('Lease engine %s started', self.engine_id)
        backoff = 0.0
        self._running = True
        try:
            while not self._stopping.is_set():
                self.loop.clear()
                baseline = None
                try:
                    claimed = self.run_once()
                    timeout, baseline = self._plan(claimed)
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
                    woken = self.loop.sleep(timeout, baseline)
                    if woken and self.in_flight and self.coalesce_delay:
                        time.sleep(self.coalesce_delay)
        finally:
            self._shutdown()
            self._recorder_stop.set()
            self._record_wakeup.set()
            self._recorder.join(30)
            if not self.chores.stop(self.CHORES_STOP_TIMEOUT):
                LOG.warning('Lease engine %s: a periodic chore did not '
                            'finish at stop', self.engine_id)
            self.liveness.stop()
            self.stats['claim_checks'] = self.claims.queries
            self.stats['chores'] = self.chores.metrics()
            LOG.info('Lease engine %(id)s stopped: %(stats)s',
                     {'id': self.engine_id, 'stats': self.stats})

    def run_once(self, force_recovery=False):
        """One pass without sleeping: record, recover, claim, dispatch.

        Returns the number of events claimed (their actions run in the
        worker threads; see :meth:`process_due` to wait for them).
        """
        self.runner.check_timeouts()
        if self._recorder is None:
            self._record()
        self.claims.recover(force_recovery)
        self.claims.refresh(lambda: [j.event['id']
                                     for j in self.runner.unfinished()])
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
            while self.runner.unfinished():
                if time.monotonic() > deadline:
                    raise RuntimeError('events still running after %s s'
                                       % timeout)
                self.loop.wait(0.05)
                self.runner.check_timeouts()
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

    def _claim(self):
        if self._stopping.is_set():
            return 0
        events = self.claims.claim(self.runner.room())
        if events:
            self.runner.submit(events)
        return len(events)

    def _plan(self, claimed):
        """(seconds to sleep, probe baseline or None)."""
        if self._recorder is None and self.runner.has_finished():
            return 0, None
        return self.loop.plan(claimed, self.runner.room(),
                              self.runner.oldest_call())

    def _job_finished(self):
        """A job finished (a worker's thread): record it soon."""
        if self._recorder is not None:
            self._record_wakeup.set()
        else:
            self.loop.wake()

    def _record(self):
        """Write finished results; then send their notifications."""
        finished = self.runner.take_finished()
        if not finished:
            return
        try:
            applied = self.claims.complete([j.result for j in finished])
        except Exception:
            self.runner.put_back(finished)
            raise
        # One line per batch (failures and retries have their own).
        outcome = collections.Counter(
            (j.event['event_type'], j.result['status']) for j in finished
            if j.event['id'] in applied)
        LOG.info('Lease engine %(id)s recorded %(n)d event results: '
                 '%(outcome)s', {'id': self.engine_id, 'n': len(applied),
                                 'outcome': ', '.join(
                                     '%s %s: %d' % (t, st, n) for (t, st), n
                                     in sorted(outcome.items()))})
        self.runner.retire(finished, applied)

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
                if self.runner.has_finished():
                    self._record()
                    self.loop.wake()      # room for the next claims
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
        with self._state_lock:
            if self._shutting_down:
                return
            self._shutting_down = True
        self.runner.drain(self.opts.engine_shutdown_timeout)
        for attempt in range(3):
            try:
                self._record()
                unfinished = self.runner.unfinished()
                for job in unfinished:
                    # Whatever the thread does next, it sends nothing.
                    job.guard.cancel('engine %s stopped and released its '
                                     'claim' % self.engine_id)
                released = self.claims.release(
                    [j.event['id'] for j in unfinished],
                    'engine %s stopped before the action finished'
                    % self.engine_id)
                if released:
                    LOG.warning('Released %d unfinished claims',
                                len(released))
                break
            except Exception as e:
                LOG.warning('Could not record/release claims at stop '
                            '(%s); they expire after engine_claim_timeout',
                            e)
                time.sleep(0.5)
        self.runner.close(10)
        self._stopped.set()

    # -- registration and heartbeats (see liveness) -----------------------

    @property
    def process_id(self):
        """This engine's row in the processes table (None until run())."""
        return self.liveness.process_id

    def held_event_ids(self):
        """The events this engine holds a job of (thread-safe)."""
        return self.runner.held_event_ids()

    def beat(self):
        """One heartbeat, and a look at the other engines' heartbeats."""
        self.liveness.beat()

    def check_registrations(self):
        """Warn about nova-scheduler services that never registered here
        (see :class:`~nova_lease.periodic.liveness.Liveness`).
        """
        return self.liveness.check_registrations()
