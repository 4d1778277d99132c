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
"""The processes that use this side database (see
nova_lease.registration) and the database identity.
"""

from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from nova_lease.db import claims as claims_db
from nova_lease.db import common
from nova_lease.db import models
from nova_lease.db import transaction

EVENTS = models.EVENTS
DATABASE_IDENTITY = models.DATABASE_IDENTITY
PROCESSES = models.PROCESSES


def database_identity(db):
    """The identity (a uuid) of this side database, or None if it has
    none (made by nova-lease-manage db sync).
    """
    with transaction.reading(db) as session:
        return session.execute(
            sa.select(DATABASE_IDENTITY.c.id)
            .order_by(DATABASE_IDENTITY.c.created_at)).scalars().first()


def database_identity_create(db):
    """Give the database an identity if it has none; return it."""
    with transaction.writing(db) as session:
        current = session.execute(
            sa.select(DATABASE_IDENTITY.c.id)).scalars().first()
        if current is not None:
            return current
        identity = uuidutils.generate_uuid()
        session.execute(sa.insert(DATABASE_IDENTITY).values(
            id=identity, created_at=common.naive_utc(timeutils.utcnow())))
        return identity


@transaction.retry_on_deadlock
def process_register(db, values):
    """Insert a process row (``binary``, ``host``, ``pid``, optional
    ``name`` and ``id``); started_at = heartbeat_at = now. Returns it.
    """
    now = common.naive_utc(timeutils.utcnow())
    row = common.new_row(PROCESSES, 'process', values)
    row.setdefault('started_at', now)
    row.setdefault('heartbeat_at', now)
    row.setdefault('heartbeats', 0)
    with transaction.writing(db) as session:
        session.execute(sa.insert(PROCESSES).values(**row))
    return common.complete(PROCESSES, row, now)


@transaction.retry_on_deadlock
def process_heartbeat(db, process_id, now=None):
    """One heartbeat of a registered process.

    Returns None if the row is gone (pruned: register again), else the
    ``stop_reason`` it had if another process had marked it stopped (the
    mark is cleared: it is alive), else ''.
    """
    now = common.naive_utc(now or timeutils.utcnow())
    with transaction.writing(db) as session:
        row = session.execute(
            sa.select(PROCESSES.c.stopped_at, PROCESSES.c.stop_reason)
            .where(PROCESSES.c.id == process_id)).first()
        if row is None:
            return None
        session.execute(
            sa.update(PROCESSES).where(PROCESSES.c.id == process_id)
            .values(heartbeats=PROCESSES.c.heartbeats + 1,
                    heartbeat_at=now, stopped_at=None, stop_reason=None))
        if row.stopped_at is not None:
            return row.stop_reason or 'marked stopped'
        return ''


@transaction.retry_on_deadlock
def process_stop(db, process_id, reason='stopped', now=None):
    """Mark a process stopped (a clean stop); True if it was running."""
    now = common.naive_utc(now or timeutils.utcnow())
    with transaction.writing(db) as session:
        return bool(session.execute(
            sa.update(PROCESSES)
            .where(PROCESSES.c.id == process_id,
                   PROCESSES.c.stopped_at.is_(None))
            .values(stopped_at=now, stop_reason=reason)).rowcount)


def process_list(db, binary=None, running=None):
    """Process rows, oldest first; ``running``: only (not) stopped ones."""
    stmt = sa.select(PROCESSES).order_by(PROCESSES.c.started_at,
                                         PROCESSES.c.id)
    if binary is not None:
        stmt = stmt.where(PROCESSES.c.binary.in_(common.as_list(binary)))
    if running is True:
        stmt = stmt.where(PROCESSES.c.stopped_at.is_(None))
    elif running is False:
        stmt = stmt.where(PROCESSES.c.stopped_at.is_not(None))
    with transaction.reading(db) as session:
        return common.dicts(session.execute(stmt))


@transaction.retry_on_deadlock
def process_prune(db, before):
    """Delete the rows of processes not seen since ``before``; how many."""
    with transaction.writing(db) as session:
        return session.execute(sa.delete(PROCESSES).where(
            PROCESSES.c.heartbeat_at < common.naive_utc(before))).rowcount


@transaction.retry_on_deadlock
def engine_release_dead(db, process_id, heartbeats, reason, keep=(),
                        alive=(), now=None):
    """An engine process is dead: release its claims and mark it stopped.

    Nothing happens unless its heartbeat counter is still ``heartbeats``
    and it is not marked yet (compare-and-set, under a lock of its row: an
    engine that beat meanwhile is alive). Its claims are the IN_PROGRESS
    events claimed by its name, except ``keep`` (the events a live engine
    with the same name runs), and none if a running process other than it
    and those of ``alive`` bears the same name. They become UNDONE and
    unclaimed, due at once; the attempt counts. Claims locked by another
    transaction are skipped; the process is marked stopped (with
    ``reason``) only once none is left, so that the next call releases
    the rest. Returns (marked, released event dicts as
    engine_recover_events).
    """
    now = common.naive_utc(now or timeutils.utcnow())
    with transaction.writing(db) as session:
        row = session.execute(
            sa.select(PROCESSES.c.name)
            .where(PROCESSES.c.id == process_id,
                   PROCESSES.c.heartbeats == heartbeats,
                   PROCESSES.c.stopped_at.is_(None))
            .with_for_update()).first()
        if row is None:
            return False, []
        stale, left = [], None
        others = row.name and session.execute(
            sa.select(PROCESSES.c.id)
            .where(PROCESSES.c.name == row.name,
                   PROCESSES.c.stopped_at.is_(None),
                   PROCESSES.c.id.not_in([process_id] + list(alive)))
        ).first()
        if row.name and others is None:
            where = [EVENTS.c.status == 'IN_PROGRESS',
                     EVENTS.c.claimed_by == row.name]
            if keep:
                where.append(EVENTS.c.id.not_in(list(keep)))
            stmt = (sa.select(EVENTS.c.id, EVENTS.c.lease_id,
                              EVENTS.c.event_type, EVENTS.c.claimed_by,
                              EVENTS.c.claimed_at, EVENTS.c.attempts)
                    .where(*where))
            stale = common.dicts(
                session.execute(claims_db.locking(stmt, session)))
            if stale:
                session.execute(
                    sa.update(EVENTS)
                    .where(EVENTS.c.id.in_([e['id'] for e in stale]),
                           EVENTS.c.status == 'IN_PROGRESS',
                           EVENTS.c.claimed_by == row.name)
                    .values(status='UNDONE', claimed_by=None,
                            claimed_at=None, next_attempt_at=None,
                            updated_at=now,
                            last_error='engine %s died (%s); claim '
                                       'released at %s'
                                       % (row.name, reason, now)))
            left = session.execute(
                sa.select(sa.func.count()).select_from(EVENTS)
                .where(*where)).scalar()
        if left:
            return False, stale
        session.execute(
            sa.update(PROCESSES).where(PROCESSES.c.id == process_id)
            .values(stopped_at=now, stop_reason=reason))
        return True, stale
