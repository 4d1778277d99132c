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
"""The engine's runner: its jobs, the two-priority pool, the observer.

:class:`Runner` is the part of the event engine
(:class:`nova_lease.periodic.engine.Engine`) that runs the claimed
events' actions. It knows nothing of the database's claims or of the
loop's sleep; the engine gives it claimed events (:meth:`Runner.submit`)
and takes back their results (:meth:`Runner.take_finished`,
:meth:`Runner.retire`):

* a worker runs the resource plugin method of the event's type
  (:data:`ACTIONS`) for each reservation of the lease, with the job's
  guard installed (nova_lease.guard), and sends the before-end
  notification;
* a plugin that asked Nova for something slow returns a Wait: the job is
  parked with the observer (nova_lease.periodic.observer), its worker is
  free, and the job continues in a worker once the Wait is over;
* :meth:`Runner.check_timeouts` fails a job stuck in a plugin call longer
  than ``plugin_call_timeout`` and replaces its worker thread;
* a finished job's result (nova_lease.periodic.outcomes) waits in
  :meth:`Runner.take_finished` for the engine to record it.

Why a pool of two priorities (jobs.WorkerPool) rather than
concurrent.futures: in a burst of starts, the jobs resumed after a Wait
(their bookkeeping requests to nova-api) go behind the new starts, which
get servers placed sooner (benchmarks/wakeup.py); and its threads are
daemons, so a process whose plugin call hangs still exits at stop.
"""

import collections
import functools
import threading
import time

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease.booking import pipeline
from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import gate
from nova_lease import guard
from nova_lease import notifications
from nova_lease.periodic import jobs
from nova_lease.periodic import observer
from nova_lease.periodic import outcomes
from nova_lease.plugins import base as plugin_base
from nova_lease.plugins.host import allocation as host_allocation
from nova_lease import status
from nova_lease import usage as lease_usage

LOG = logging.getLogger(__name__)

_R = status.ReservationStatus
_E = status.EventStatus
_T = status.EventType

#: The plugin method run for each event type.
ACTIONS = {
    _T.START_LEASE: 'on_start',
    _T.BEFORE_END_LEASE: 'before_end',
    _T.END_LEASE: 'on_end',
}


class Runner(object):
    """Runs the jobs of claimed events (thread-safe; see the module doc).

    :param conf: the options (``[nova_lease_engine]`` above all).
    :param plugins: ``{resource type: plugin}``.
    :param engine_id: the engine's name, for messages and the observer.
    :param db: the side database (notifications read the lease's hosts).
    :param claim_check: ``claim_check(event_id, attempts)``: True while
        the engine holds that claim (the jobs' guards ask it).
    :param notifier: a nova_lease.notifications.LeaseNotifier, or None.
    :param stats: the engine's counters (``done``, ``retried``,
        ``failed``, ``skipped`` are counted here).
    :param on_finished: called (no argument) when a job finished: its
        result waits in :meth:`take_finished`.
    :param on_gone: called when a recorded start found a resource gone
        and the plugin ended leases for it (the engine looks again).
    """

    def __init__(self, conf, plugins, engine_id, db=None, claim_check=None,
                 notifier=None, stats=None, on_finished=None, on_gone=None):
        self.conf = conf
        self.opts = conf.nova_lease_engine
        self.plugins = plugins
        self.engine_id = engine_id
        self.db = db
        self.notifier = notifier
        self.stats = stats if stats is not None else collections.Counter()
        self._claim_check = claim_check
        self._on_finished = on_finished or (lambda: None)
        self._on_gone = on_gone or (lambda: None)
        self._lock = threading.Lock()
        self._jobs = {}         # {event id: job} held (running or not)
        self._calls = {}        # {id(job): job} of the jobs in a call
        self._finished = []     # jobs whose result is not recorded yet
        self._changed = threading.Event()   # a job finished
        self._closing = False
        self.pool = jobs.WorkerPool(self.opts.engine_workers, 'lease-engine')
        self._notify_pool = jobs.WorkerPool(1, 'lease-notify')
        # Watches the servers that plugin Waits wait for.
        self.observer = observer.Observer(engine_id, self.opts,
                                          self._resume_later)

    def _count(self, key):
        self.stats[key] = self.stats.get(key, 0) + 1

    # -- what the engine asks ---------------------------------------------

    @property
    def in_flight(self):
        """How many jobs are held (queued, running, waiting or finished
        but not recorded).
        """
        with self._lock:
            return len(self._jobs)

    def held_event_ids(self):
        """The events this runner holds a job of."""
        with self._lock:
            return list(self._jobs)

    def unfinished(self):
        """The jobs without a result yet."""
        with self._lock:
            return [j for j in self._jobs.values() if j.result is None]

    def room(self):
        """How many events to claim now (0: wait for a bigger chunk).

        At most ``engine_batch_size`` are held. A claim costs a
        transaction of several queries whatever its size, so while enough
        actions are queued for the workers (they would not start the new
        ones sooner), the engine waits until a quarter of a batch is free
        instead of claiming a few events at every finished action.
        """
        in_flight = self.in_flight
        room = self.opts.engine_batch_size - in_flight
        if (in_flight >= 2 * self.opts.engine_workers and
                room < self.opts.engine_batch_size // 4):
            return 0
        return max(room, 0)

    def submit(self, events):
        """Run the actions of these claimed events; returns how many were
        handed to the workers (fewer once :meth:`drain` began).
        """
        with self._lock:
            new = [jobs.Job(e, None if self._claim_check is None else
                            functools.partial(self._claim_check, e['id'],
                                              e['attempts']))
                   for e in events]
            for job in new:
                self._jobs[job.event['id']] = job
        started = 0
        for job in new:
            LOG.debug('Claimed %(type)s %(id)s of lease %(lease)s',
                      {'type': job.event['event_type'],
                       'id': job.event['id'],
                       'lease': job.event['lease_id']})
            try:
                self.pool.submit(self._execute, job)
            except RuntimeError:     # the pool is shut down: stopping
                break
            started += 1
        return started

    def has_finished(self):
        with self._lock:
            return bool(self._finished)

    def take_finished(self):
        """The finished jobs not taken yet (their ``result`` set)."""
        with self._lock:
            finished, self._finished = self._finished, []
            self._changed.clear()
        return finished

    def put_back(self, finished):
        """Jobs taken whose results could not be recorded: take them
        again next time.
        """
        with self._lock:
            self._finished[:0] = finished

    def retire(self, finished, applied):
        """Forget recorded jobs; send the notices of those whose result
        was recorded (``applied``: their event ids), and tell the plugins
        what their starts found gone.
        """
        with self._lock:
            for job in finished:
                self._jobs.pop(job.event['id'], None)
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
            self._resources_gone(job)

    def oldest_call(self):
        """Monotonic start of the oldest plugin call running, or None."""
        with self._lock:
            calls = [j.call_started for j in self._calls.values()
                     if j.state == 'running' and j.call_started is not None]
        return min(calls) if calls else None

    def wait_finished(self, timeout):
        """Wait up to timeout for a job to finish; True if one did."""
        return self._changed.wait(timeout)

    def drain(self, timeout):
        """Stop: drop the jobs not started, stop the workers and the
        observer, and wait up to ``timeout`` seconds for the running
        actions. Returns nothing; see :meth:`unfinished`.
        """
        with self._lock:
            self._closing = True
            for job in self._jobs.values():
                if job.state == 'queued':
                    job.state = 'cancelled'
                    job.guard.cancel('engine %s stopped before it ran'
                                     % self.engine_id)
        self.pool.shutdown(cancel=True)
        self.observer.stop()
        deadline = time.monotonic() + timeout
        while True:
            running = [j for j in self.unfinished() if j.state == 'running']
            if not running or time.monotonic() >= deadline:
                return
            self._changed.wait(min(0.1, max(0, deadline - time.monotonic())))
            self._changed.clear()

    def close(self, timeout=10):
        """Send the notifications queued, then stop their thread."""
        self._notify_pool.shutdown(cancel=False)
        self._notify_pool.join(timeout)

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
                self._count('skipped')
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

    def check_timeouts(self):
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
                             '([nova_lease_engine] plugin_call_timeout)'
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
                self._changed.set()
                closing = self._closing
            self._on_finished()
            if not closing:
                self.pool.add_worker()

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
        """The observer saw a Wait over: resume its job in a worker, once
        the events due meanwhile have one (see jobs.WorkerPool).

        :raises RuntimeError: the engine is stopping (its claims are
            released).
        """
        self.pool.submit_later(self._resume, entry, server, error)

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
                failure.__cause__ = e
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
            self._changed.set()
        self._on_finished()
        return None

    def _act(self, job, event, lease):
        etype = event['event_type']
        limit = outcomes.max_retries(lease, self.conf) + 1
        if event['attempts'] > limit and not outcomes.hunting(event, lease):
            raise jobs.GaveUp(attempts=event['attempts'] - 1,
                              error=event.get('last_error') or
                              'none recorded')
        method = ACTIONS.get(etype)
        if method is None:
            raise exception.NovaLeaseException(
                'unknown event type %s' % etype)
        if etype == _T.END_LEASE and pipeline.never_started(lease):
            # Deleted before its start: what it holds in Nova never served
            # the user, each type's cancel releases it (an instance
            # lease's server is deleted, whatever its on_end says). (A
            # claimed end's lease comes with its events.)
            method = 'cancel'
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
            except plugin_base.ResourceGone as e:
                if etype != _T.START_LEASE:
                    raise plugin_base.PluginError(
                        reason='%s failed: %s' % (what, e)) from e
                # Deleted by its user (while this start ran: the hook
                # left it to the engine). Nothing to start; once the start
                # is recorded, the plugin handles the deletion (the lease
                # ends at once when nothing is left).
                LOG.info('%(what)s: nothing to start, %(why)s',
                         {'what': what, 'why': e})
                job.gone.append((plugin, e.resource_id))
                note = '%s: nothing started (%s)' % (what, e)
            except gate.Refused as e:
                if not (e.lease_gone and etype == _T.START_LEASE):
                    raise plugin_base.PluginError(
                        reason='%s failed: %s' % (what, e)) from e
                # A start run after its lease ended (an engine that caught
                # up late) or was deleted: nothing to give it, its end
                # follows.
                LOG.info('%(what)s: nothing done, %(why)s',
                         {'what': what, 'why': e})
                note = '%s: nothing done (%s)' % (what, e.kwargs.get(
                    'reason', e))
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
        self._count('done')
        return outcomes.success(event, lease, notes)

    def _failure(self, event, lease, error):
        """The result and notices of a failed action: retried later, or
        the lease in ERROR (see outcomes).
        """
        result, notices = outcomes.failure(event, lease, error, self.conf)
        self._count('retried' if result['status'] == _E.UNDONE
                    else 'failed')
        return result, notices

    def _send(self, event_type, lease):
        if self.notifier is None or not getattr(self.notifier, 'enabled',
                                                True):
            return
        reservations, figures = self._billing(event_type, lease)
        self.notifier.notify(event_type, lease, reservations, usage=figures)

    def _billing(self, event_type, lease):
        """The reservations of a notification with what they hold (their
        hosts read from the database), and at ``lease.end`` the lease's
        reserved and used hours (nova_lease.usage): ``(reservations,
        usage)``. As the notice's lease has them if the lease cannot be
        read (then no usage).
        """
        reservations = [dict(r) for r in lease.get('reservations') or ()]
        try:
            try:
                current = db_api.lease_get(self.db, lease['id'])
            except db_api.LeaseNotFound:
                current = dict(lease, reservations=reservations, events=[])
            host_allocation.attach_hosts(self.db, [current])
        except Exception as e:
            LOG.warning('Could not read lease %(lease)s for its %(type)s '
                        'notification: %(error)s',
                        {'lease': lease.get('id'), 'type': event_type,
                         'error': e})
            return reservations, None
        figures = None
        if event_type == notifications.END and current.get('events'):
            figures = lease_usage.whole_lease(current, timeutils.utcnow())
        return current['reservations'], figures

    def _resources_gone(self, job):
        """Tell the plugins what a recorded start found gone."""
        for plugin, resource_id in job.gone:
            try:
                ended = plugin.resource_gone(self.db, resource_id)
            except Exception:
                # Reconcile ends such a lease later.
                LOG.exception('Could not record that %(id)s (lease '
                              '%(lease)s) is gone',
                              {'id': resource_id,
                               'lease': job.event['lease_id']})
                continue
            if ended:
                LOG.info('Lease(s) %(leases)s end now: %(id)s is gone',
                         {'leases': ', '.join(ended), 'id': resource_id})
                self._on_gone()

    def _notify_later(self, event_type, lease):
        if self.notifier is None:
            return
        try:
            self._notify_pool.submit(self._send, event_type, lease)
        except RuntimeError:      # shutting down: send it here
            self._send(event_type, lease)
