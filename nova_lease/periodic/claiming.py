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
"""Claiming due events and recording what their actions came to.

The part of the event engine (:class:`nova_lease.periodic.engine.Engine`
inherits :class:`ClaimingMixin`) that talks to the database about events:

* ``_claim`` claims due events atomically (``db.api.engine_claim_events``),
  at most ``engine_batch_size`` outstanding (``_room``); in the claim
  transaction, ``_on_claim`` moves their leases (start: PENDING ->
  STARTING, end: -> TERMINATING) or marks an action to skip; the claimed
  events become jobs (nova_lease.periodic.jobs) for the engine's workers,
  which run them (nova_lease.periodic.actions);
* ``_record`` writes the results of finished actions, one transaction per
  batch, then sends their notifications;
* ``_recover`` releases the claims abandoned by stuck engines (older than
  ``engine_claim_timeout``) and ``_refresh`` renews the engine's own.
"""

import collections
import datetime
import functools
import time

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease.db import api as db_api
from nova_lease.periodic import jobs
from nova_lease import status

LOG = logging.getLogger(__name__)

_L = status.LeaseStatus
_T = status.EventType


class ClaimingMixin(object):
    """Claims, records and claim upkeep of the engine.

    Uses the engine's ``db``, ``opts``, ``engine_id``, ``stats``, its
    lock and jobs (``_lock``, ``_jobs``, ``_finished``), its worker pool
    (``_pool``, running ``_execute``), ``_claims`` and ``_stopping``.
    """

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
            # STARTING: resume a start; IN_PROGRESS: a best-effort lease
            # hunting (it stays IN_PROGRESS until its hosts are empty).
            if current not in (_L.STARTING, _L.IN_PROGRESS):
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
            self._resources_gone(job)

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
                self.wake()

    def _recover(self, force=False):
        now = timeutils.utcnow()
        interval = min(self.shared.engine_claim_timeout / 2.0, 10.0)
        last = self._last_recovery
        if not force and last is not None and (
                time.monotonic() - last < interval):
            return
        self._last_recovery = time.monotonic()
        for event in db_api.engine_recover_events(
                self.db, now, self.shared.engine_claim_timeout):
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
            seconds=self.shared.engine_claim_timeout / 3.0)
        if now - self._last_refresh < every:
            return
        ids = [j.event['id'] for j in self._unfinished()]
        if ids:
            db_api.engine_refresh_claims(self.db, self.engine_id, ids, now)
        self._last_refresh = now
