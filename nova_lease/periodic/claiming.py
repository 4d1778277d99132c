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
"""The engine's claims: due events taken in the database, kept, given back.

:class:`Claims` is the part of the event engine
(:class:`nova_lease.periodic.engine.Engine`) that talks to the database
about the events it holds. It knows nothing of jobs or threads:

* :meth:`Claims.claim` claims due events atomically
  (``db.api.engine_claim_events``: SELECT ... FOR UPDATE SKIP LOCKED on
  MySQL/PostgreSQL, the write lock on SQLite) and, in the same
  transaction, moves their leases (start: PENDING -> STARTING, end: ->
  TERMINATING) or marks an action to skip (``event['_skip']``);
* :meth:`Claims.complete` writes the results of finished actions, one
  transaction per batch, and says which claims were still ours;
* :meth:`Claims.recover` releases the claims abandoned by stuck engines
  (older than ``engine_claim_timeout``), :meth:`Claims.refresh` renews
  the engine's own, :meth:`Claims.release` gives back those it will not
  finish (at stop);
* :attr:`Claims.held` confirms, for the jobs' guards, that a claim is
  still this engine's (:class:`nova_lease.periodic.jobs.ClaimChecker`:
  several workers' questions in one query).

Why row locks and not, say, a queue in memory: several engines may run
against one database, and the claim (``claimed_by``, ``attempts``) is
what makes an action run once; SKIP LOCKED lets two engines claim at once
without waiting on each other's rows (benchmarks/engine.py, mysql:2).
"""

import datetime
import time

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease.db import api as db_api
from nova_lease.periodic import jobs
from nova_lease import status

LOG = logging.getLogger(__name__)

_L = status.LeaseStatus
_T = status.EventType


def claim_status(event, lease):
    """The lease's next status when ``event`` is claimed, or None.

    Sets ``event['_skip']`` to a reason when the action must not run.
    """
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


def _on_claim(event, lease):
    """In the claim transaction: the lease's next status, or None."""
    new = claim_status(event, lease)
    if new is not None:
        status.check_transition(status.LEASE, lease['status'], new)
    return new


class Claims(object):
    """The claims of one engine in the database (thread-safe: each
    method is one or a few transactions; :meth:`recover` and
    :meth:`refresh` are called from the engine's loop only).

    :param db: the side database (nova_lease.db.api.Database).
    :param engine_id: the name recorded on the claims.
    :param claim_timeout: ``[nova_lease] engine_claim_timeout``.
    :param stats: the engine's counters (``claimed``, ``recovered``,
        ``released`` are counted here).
    """

    def __init__(self, db, engine_id, claim_timeout, stats=None):
        self.db = db
        self.engine_id = engine_id
        self.claim_timeout = claim_timeout
        self.stats = stats if stats is not None else {}
        self._checker = jobs.ClaimChecker(db, engine_id)
        self._last_recovery = None
        self._last_refresh = timeutils.utcnow()

    @property
    def queries(self):
        """How many claim checks ran (several jobs each)."""
        return self._checker.queries

    def held(self, event_id, attempts):
        """True while this engine holds that claim (a job's guard asks).
        """
        return self._checker.held(event_id, attempts)

    def _count(self, key, n):
        self.stats[key] = self.stats.get(key, 0) + n

    def claim(self, limit):
        """Claim up to ``limit`` due events; returns them (their
        ``lease`` loaded, ``_skip`` set when the action must not run).
        """
        if limit <= 0:
            return []
        events = db_api.engine_claim_events(
            self.db, self.engine_id, timeutils.utcnow(), limit,
            on_claim=_on_claim)
        self._count('claimed', len(events))
        return events

    def complete(self, results):
        """Record results; the ids of the events whose claim was still
        this engine's (the others' results are dropped).
        """
        return set(db_api.engine_complete_events(self.db, self.engine_id,
                                                 results))

    def release(self, event_ids, reason):
        """Give back claims this engine will not finish; returns those
        released.
        """
        if not event_ids:
            return []
        released = db_api.engine_release_events(self.db, self.engine_id,
                                                list(event_ids), reason)
        self._count('released', len(released))
        return released

    def recover(self, force=False):
        """Release the claims of stuck engines (every
        ``min(engine_claim_timeout / 2, 10)`` seconds unless forced).
        """
        interval = min(self.claim_timeout / 2.0, 10.0)
        last = self._last_recovery
        if not force and last is not None and (
                time.monotonic() - last < interval):
            return 0
        self._last_recovery = time.monotonic()
        recovered = db_api.engine_recover_events(
            self.db, timeutils.utcnow(), self.claim_timeout)
        for event in recovered:
            self._count('recovered', 1)
            LOG.warning('Released the expired claim of %(by)s (at %(at)s) '
                        'on %(type)s %(id)s of lease %(lease)s',
                        {'by': event['claimed_by'],
                         'at': event['claimed_at'],
                         'type': event['event_type'], 'id': event['id'],
                         'lease': event['lease_id']})
        return len(recovered)

    def refresh(self, held):
        """Renew this engine's claims (every ``engine_claim_timeout / 3``
        seconds; a no-op in between).

        :param held: returns the ids of the events to renew (called only
            when it is time).
        """
        now = timeutils.utcnow()
        every = datetime.timedelta(seconds=self.claim_timeout / 3.0)
        if now - self._last_refresh < every:
            return False
        event_ids = held()
        if event_ids:
            db_api.engine_refresh_claims(self.db, self.engine_id,
                                         list(event_ids), now)
        self._last_refresh = now
        return True
