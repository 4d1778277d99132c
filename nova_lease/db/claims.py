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
"""The engine's event claims (what nova_lease.periodic.engine runs).

Several engines may share one database: MySQL/MariaDB and PostgreSQL claim
with SELECT ... FOR UPDATE SKIP LOCKED (an engine never waits for, nor
takes, rows another engine is claiming); SQLite's writer holds the
database's write lock (BEGIN IMMEDIATE), so its claims are serialised.
Either way the UPDATEs are conditional (status IN_PROGRESS and
claimed_by), so a claim is never completed by an engine that lost it.

These functions run Core statements only: their own transactions are
Core Connections (``core=True``, see ``Database.reader``), without the
ORM Session that would cost the engine more than the statements of a
short transaction.
"""

import datetime

from oslo_utils import timeutils
import sqlalchemy as sa

from nova_lease.db import changes as changes_db
from nova_lease.db import common
from nova_lease.db import models
from nova_lease.db import transaction
from nova_lease import status

LEASES = models.LEASES
RESERVATIONS = models.RESERVATIONS
EVENTS = models.EVENTS
ALLOCATIONS = models.ALLOCATIONS


# Within one lease, an event is claimable only when every event earlier in
# this order (nova_lease.status) has finished.
EVENT_LIFECYCLE_ORDER = {str(event_type): rank for event_type, rank
                         in status.EVENT_LIFECYCLE_ORDER.items()}


_UNFINISHED = ('UNDONE', 'IN_PROGRESS')


_START_LEASE = 'start_lease'


_END_LEASE = 'end_lease'
_TERMINATED = 'TERMINATED'


# Candidates are read a page at a time (without locks), the blocked ones
# (see EVENT_LIFECYCLE_ORDER) dropped with one indexed look-up per page,
# and only then are the chosen rows locked by primary key. A correlated
# NOT EXISTS in the locking query would make InnoDB lock every row it
# scans, and PostgreSQL choose nested loops over fresh, unanalysed tables
# (seconds for 10,000 due events).
_PAGES = 10


def _lifecycle_rank(event_type):
    return EVENT_LIFECYCLE_ORDER.get(event_type, len(EVENT_LIFECYCLE_ORDER))


#: How long before a start an unfinished end on the same host is looked
#: for (see _ends_in_the_way).
END_LOOKBACK = datetime.timedelta(days=1)


def _ends_in_the_way(session, candidates):
    """{lease id: earliest time} of unfinished ends on the starts' hosts.

    A lease that starts at T on a host where another lease's end is due
    at or before T waits until that end is done (or has failed): run side
    by side, the end could clear the host or return it to the free pool
    after the start took it. Hosts come from the allocations (host leases
    and instance leases admitted for a future start); ends of allocations
    that ended more than END_LOOKBACK before the start are not looked at.
    """
    starts = sorted({c.lease_id for c in candidates
                     if c.event_type == _START_LEASE})
    if not starts:
        return {}
    return {lease_id: _datetime(when) for lease_id, when in
            session.execute(_ENDS_IN_THE_WAY, {'starts': starts})}


def _ends_in_the_way_query():
    mine = ALLOCATIONS.alias('mine')
    mine_res = RESERVATIONS.alias('mine_res')
    theirs = ALLOCATIONS.alias('theirs')
    theirs_res = RESERVATIONS.alias('theirs_res')
    end = EVENTS.alias('end_event')
    return (sa.select(mine_res.c.lease_id, sa.func.min(end.c.time))
            .select_from(
                mine.join(mine_res, mine_res.c.id == mine.c.reservation_id)
                .join(theirs, theirs.c.host == mine.c.host)
                .join(theirs_res,
                      theirs_res.c.id == theirs.c.reservation_id)
                .join(end, end.c.lease_id == theirs_res.c.lease_id))
            .where(mine_res.c.lease_id.in_(sa.bindparam('starts',
                                                        expanding=True)),
                   theirs_res.c.lease_id != mine_res.c.lease_id,
                   theirs.c.end_date >= mine.c.start_date - END_LOOKBACK,
                   theirs.c.start_date < mine.c.start_date,
                   end.c.event_type == _END_LEASE,
                   end.c.status.in_(_UNFINISHED))
            .group_by(mine_res.c.lease_id))


# Run at every claim: built once, with a bound parameter (building this
# join costs more than running it when no start has a host).
_ENDS_IN_THE_WAY = _ends_in_the_way_query()


def _drop_blocked(session, candidates):
    """The candidates (rows with id, lease_id, event_type, time) not
    blocked: by an unfinished earlier event of their lease, or a start by
    an unfinished end on its hosts (:func:`_ends_in_the_way`).
    """
    first = min(EVENT_LIFECYCLE_ORDER.values())
    in_the_way = _ends_in_the_way(session, candidates)
    if in_the_way:
        candidates = [c for c in candidates
                      if c.event_type != _START_LEASE or
                      in_the_way.get(c.lease_id) is None or
                      in_the_way[c.lease_id] > _datetime(c.time)]
    # The first event of a lease's life (its start) is never blocked by
    # its own lease.
    lease_ids = sorted({c.lease_id for c in candidates
                        if _lifecycle_rank(c.event_type) > first})
    if not lease_ids:
        return list(candidates)
    unfinished = {}
    for row in session.execute(
            sa.select(EVENTS.c.lease_id, EVENTS.c.event_type)
            .where(EVENTS.c.lease_id.in_(lease_ids),
                   EVENTS.c.status.in_(_UNFINISHED))):
        rank = _lifecycle_rank(row.event_type)
        unfinished[row.lease_id] = min(rank, unfinished.get(row.lease_id,
                                                            rank))
    return [c for c in candidates
            if unfinished.get(c.lease_id, len(EVENT_LIFECYCLE_ORDER) + 1)
            >= _lifecycle_rank(c.event_type)]


_CLAIM_KEYS = (EVENTS.c.id, EVENTS.c.lease_id, EVENTS.c.event_type,
               EVENTS.c.time)


def _claimable(session, where, limit, columns=(EVENTS,)):
    """Up to limit unblocked events matching where, in due order (rows
    of ``columns``: at least id, lease_id and event_type).
    """
    found = []
    page = max(limit + limit // 4, 50)
    base = (sa.select(*columns)
            .where(*where)
            .order_by(EVENTS.c.time, common.event_order(), EVENTS.c.id))
    # The due order sorts on an expression (the event type's rank): every
    # matching row would be sorted for each page (a filesort of the whole
    # backlog on MySQL, tens of milliseconds per claim with 10,000 due).
    # The time of the last row of the page, read in index order, bounds
    # the rows to sort: the first rows in due order all come no later.
    times = sa.select(EVENTS.c.time).where(*where).order_by(EVENTS.c.time)
    for number in range(_PAGES):
        stmt = base
        bound = session.execute(
            times.offset((number + 1) * page - 1).limit(1)).scalar()
        if bound is not None:
            stmt = stmt.where(EVENTS.c.time <= bound)
        rows = session.execute(stmt.offset(number * page)
                               .limit(page)).all()
        found.extend(_drop_blocked(session, rows))
        if len(found) >= limit or len(rows) < page:
            break
    return found[:limit]


def locking(stmt, session):
    if transaction.dialect_name(session) in ('mysql', 'postgresql'):
        return stmt.with_for_update(skip_locked=True)
    return stmt


def _datetime(value):
    if isinstance(value, str):
        # SQLite returns the stored text of an aggregate on a datetime.
        return datetime.datetime.fromisoformat(value)
    return value


def _leases_with_reservations(session, lease_ids):
    leases = {row['id']: row for row in common.dicts(session.execute(
        sa.select(LEASES).where(LEASES.c.id.in_(lease_ids))))}
    for lease in leases.values():
        lease['reservations'] = []
    for row in common.dicts(session.execute(
            sa.select(RESERVATIONS)
            .where(RESERVATIONS.c.lease_id.in_(lease_ids))
            .order_by(RESERVATIONS.c.created_at, RESERVATIONS.c.id))):
        leases[row['lease_id']]['reservations'].append(
            common.reservation_dict(row))
    return leases


def _attach_events(session, leases, lease_ids):
    """Give ``leases[id]`` for each of ``lease_ids`` its ``'events'`` (an
    end tells a lease deleted before its start by them: see
    nova_lease.booking.pipeline.never_started), in one query.
    """
    lease_ids = sorted(set(lease_ids))
    if not lease_ids:
        return
    for lease_id in lease_ids:
        leases[lease_id]['events'] = []
    for row in common.dicts(session.execute(
            sa.select(EVENTS).where(EVENTS.c.lease_id.in_(lease_ids))
            .order_by(EVENTS.c.time, common.event_order(), EVENTS.c.id))):
        leases[row['lease_id']]['events'].append(row)


@transaction.retry_on_deadlock
def engine_claim_events(db, engine_id, now, limit, on_claim=None):
    """Claim up to ``limit`` due events for ``engine_id``, atomically.

    Due: UNDONE, ``time`` and ``next_attempt_at`` (when set) at or before
    ``now``, no unfinished earlier event of the same lease (see
    EVENT_LIFECYCLE_ORDER) and, for a start, no unfinished end of another
    lease due at or before it on the same hosts (see _ends_in_the_way).
    Claimed events become IN_PROGRESS with ``claimed_by=engine_id``,
    ``claimed_at=now`` and ``attempts`` + 1.

    ``on_claim(event, lease)``, if given, is called in the transaction
    for each claimed event and returns the lease's new status or None
    (the lease is updated compare-and-set on the status on_claim saw; if
    it changed meanwhile, the event is still claimed and its ``'lease'``
    shows the current status).

    Returns the claimed event dicts, in due order, each with ``'lease'``:
    the lease dict (after on_claim) with its ``'reservations'`` and, for
    an end, its ``'events'`` (read in the claim's transaction).
    """
    now = common.naive_utc(now)
    with transaction.writing(db, core=True) as session:
        due = (EVENTS.c.status == 'UNDONE', EVENTS.c.time <= now,
               sa.or_(EVENTS.c.next_attempt_at.is_(None),
                      EVENTS.c.next_attempt_at <= now))
        locking = transaction.dialect_name(session) in ('mysql', 'postgresql')
        # (Where they are read again, locked, their keys are enough.)
        candidates = _claimable(session, due, limit,
                                _CLAIM_KEYS if locking else (EVENTS,))
        if not candidates:
            return []
        if locking:
            # Lock them, skipping those another engine is claiming, and
            # read them again: one may have been claimed (or retried and
            # put off) since the candidates were read.
            events = common.dicts(session.execute(
                sa.select(EVENTS)
                .where(EVENTS.c.id.in_([c.id for c in candidates]), *due)
                .order_by(EVENTS.c.time, common.event_order(), EVENTS.c.id)
                .with_for_update(skip_locked=True)))
        else:
            # SQLite: this writer holds the database's write lock since
            # before the candidates were read.
            events = [dict(c._mapping) for c in candidates]
        if not events:
            return []
        ids = [e['id'] for e in events]
        claimed = session.execute(
            sa.update(EVENTS)
            .where(EVENTS.c.id.in_(ids), EVENTS.c.status == 'UNDONE')
            .values(status='IN_PROGRESS', claimed_by=engine_id,
                    claimed_at=now, attempts=EVENTS.c.attempts + 1,
                    updated_at=now)).rowcount
        if claimed != len(ids):
            raise transaction.TransactionError(
                reason='claimed %d of %d locked events' % (claimed,
                                                           len(ids)))
        for event in events:
            event.update(status='IN_PROGRESS', claimed_by=engine_id,
                         claimed_at=now, attempts=event['attempts'] + 1,
                         updated_at=now)
        leases = _leases_with_reservations(
            session, sorted({e['lease_id'] for e in events}))
        _attach_events(session, leases, [
            e['lease_id'] for e in events if e['event_type'] == _END_LEASE])
        moves = {}
        for event in events:
            lease = leases[event['lease_id']]
            new = on_claim(event, lease) if on_claim else None
            if new is not None and new != lease['status']:
                moves.setdefault((lease['status'], new), []).append(lease)
            event['lease'] = lease
        for (old, new), moving in moves.items():
            ids = [lease['id'] for lease in moving]
            moved = session.execute(
                sa.update(LEASES)
                .where(LEASES.c.id.in_(ids), LEASES.c.status == old)
                .values(status=new, updated_at=now)).rowcount
            current = {}
            if moved != len(ids):
                # Read back: a lease changed concurrently keeps its status.
                current = dict(session.execute(
                    sa.select(LEASES.c.id, LEASES.c.status)
                    .where(LEASES.c.id.in_(ids))).all())
            for lease in moving:
                lease['status'] = current.get(lease['id'], new)
                if lease['status'] == new:
                    lease['updated_at'] = now
            changes_db.journal(session, [(lease_id, None) for lease_id in ids])
        return events


def _still_claimed(event_ids, engine_id):
    """The condition: events ``event_ids`` still IN_PROGRESS, claimed by
    ``engine_id`` (a claim that expired and was taken over is not).
    """
    return sa.and_(EVENTS.c.id.in_(list(event_ids)),
                   EVENTS.c.status == 'IN_PROGRESS',
                   EVENTS.c.claimed_by == engine_id)


@transaction.retry_on_deadlock
def engine_complete_events(db, engine_id, results, now=None):
    """Record what the engine's actions did, in one transaction.

    ``results``: dicts with ``event_id``, ``lease_id``, ``status`` (the
    event's new status: DONE, ERROR, or UNDONE to retry it later) and
    optionally ``last_error``, ``next_attempt_at``, ``lease_status`` with
    ``lease_expected`` (compare-and-set: the lease moves only from one of
    these statuses), ``status_reason`` (set on the lease whatever its
    status when the key is present; None clears it) and
    ``reservation_status`` with ``reservation_expected`` (every
    reservation of the lease in one of those statuses moves).

    Only events still IN_PROGRESS and claimed by ``engine_id`` are
    touched (a claim that expired and was taken over is skipped, with its
    lease). UNDONE releases the claim. Returns the list of event ids
    recorded.
    """
    now = common.naive_utc(now or timeutils.utcnow())
    by_id = {r['event_id']: r for r in results}
    if not by_id:
        return []
    with transaction.writing(db, core=True) as session:
        owned = set(session.execute(
            sa.select(EVENTS.c.id)
            .where(_still_claimed(by_id, engine_id))
            .with_for_update()).scalars())
        groups = {}
        for event_id in owned:
            r = by_id[event_id]
            key = (r['status'], r.get('last_error'),
                   r.get('next_attempt_at'))
            groups.setdefault(key, []).append(event_id)
        for (new, error, next_at), ids in groups.items():
            values = {'status': new, 'last_error': error,
                      'next_attempt_at': common.naive_utc(next_at),
                      'updated_at': now}
            if new == 'UNDONE':
                values.update(claimed_by=None, claimed_at=None)
            session.execute(sa.update(EVENTS)
                            .where(EVENTS.c.id.in_(ids)).values(**values))
        lease_groups, reservation_groups = {}, {}
        changed = set()     # leases to journal (once each)
        for event_id in owned:
            r = by_id[event_id]
            if r.get('lease_status') is not None:
                key = (r['lease_status'],
                       tuple(sorted(r.get('lease_expected') or ())),
                       'status_reason' in r, r.get('status_reason'))
                lease_groups.setdefault(key, []).append(r['lease_id'])
            elif 'status_reason' in r:
                key = (None, (), True, r['status_reason'])
                lease_groups.setdefault(key, []).append(r['lease_id'])
            if r.get('reservation_status') is not None:
                key = (r['reservation_status'],
                       tuple(sorted(r.get('reservation_expected') or ())))
                reservation_groups.setdefault(key, []).append(r['lease_id'])
        for (new, expected, has_reason, reason), ids in lease_groups.items():
            values = {'updated_at': now}
            if has_reason:
                values['status_reason'] = reason
            if new is None:
                session.execute(sa.update(LEASES)
                                .where(LEASES.c.id.in_(ids))
                                .values(**values))
                continue
            moved = session.execute(
                sa.update(LEASES)
                .where(LEASES.c.id.in_(ids), LEASES.c.status.in_(expected))
                .values(status=new, **values)).rowcount
            if moved:
                changed.update(ids)
            if has_reason and moved != len(ids):
                # The reason is set whatever the status.
                session.execute(
                    sa.update(LEASES)
                    .where(LEASES.c.id.in_(ids),
                           LEASES.c.status.not_in(expected))
                    .values(**values))
        for (new, expected), ids in reservation_groups.items():
            moved = session.execute(
                sa.update(RESERVATIONS)
                .where(RESERVATIONS.c.lease_id.in_(ids),
                       RESERVATIONS.c.status.in_(expected))
                .values(status=new, updated_at=now)).rowcount
            if moved:
                changed.update(ids)
        _remove_never_started(session, sorted(
            by_id[event_id]['lease_id'] for event_id in owned
            if by_id[event_id].get('lease_status') == _TERMINATED))
        changes_db.journal(session, [(lease_id, None)
                                     for lease_id in sorted(changed)])
    return sorted(owned)


def _remove_never_started(session, lease_ids):
    """Remove the leases of ``lease_ids`` that are TERMINATED without a
    start event: deleted before their start (the booking pipeline's
    ``never_started``), whose end has just released what they held in
    Nova. Their reservations, events and allocations go with them.
    """
    if not lease_ids:
        return
    started = set(session.execute(
        sa.select(EVENTS.c.lease_id)
        .where(EVENTS.c.lease_id.in_(lease_ids),
               EVENTS.c.event_type == _START_LEASE)).scalars())
    gone = [lease_id for lease_id in lease_ids if lease_id not in started]
    if gone:
        session.execute(sa.delete(LEASES).where(
            LEASES.c.id.in_(gone), LEASES.c.status == _TERMINATED))


@transaction.retry_on_deadlock
def engine_refresh_claims(db, engine_id, event_ids, now):
    """Renew ``claimed_at`` of events engine_id still runs; their count."""
    if not event_ids:
        return 0
    with transaction.writing(db, core=True) as session:
        return session.execute(
            sa.update(EVENTS)
            .where(_still_claimed(event_ids, engine_id))
            .values(claimed_at=common.naive_utc(now))).rowcount


@transaction.retry_on_deadlock
def engine_release_events(db, engine_id, event_ids, reason, now=None):
    """Give back claims engine_id could not finish (it is stopping).

    The events become UNDONE and unclaimed, with the attempt not counted
    and ``last_error=reason``. Returns the ids released.
    """
    if not event_ids:
        return []
    now = common.naive_utc(now or timeutils.utcnow())
    with transaction.writing(db, core=True) as session:
        ids = list(session.execute(
            sa.select(EVENTS.c.id)
            .where(_still_claimed(event_ids, engine_id))
            .with_for_update()).scalars())
        if ids:
            session.execute(
                sa.update(EVENTS).where(EVENTS.c.id.in_(ids))
                .values(status='UNDONE', claimed_by=None, claimed_at=None,
                        attempts=sa.case((EVENTS.c.attempts > 0,
                                          EVENTS.c.attempts - 1),
                                         else_=0),
                        last_error=reason, updated_at=now))
        return sorted(ids)


@transaction.retry_on_deadlock
def engine_recover_events(db, now, claim_timeout):
    """Release claims older than ``claim_timeout`` seconds (dead engines).

    They become UNDONE and unclaimed, due at once; the attempt counts.
    Returns dicts ``{'id', 'lease_id', 'event_type', 'claimed_by',
    'claimed_at', 'attempts'}`` of the events released.
    """
    now = common.naive_utc(now)
    cutoff = now - datetime.timedelta(seconds=claim_timeout)
    with transaction.writing(db, core=True) as session:
        stmt = (sa.select(EVENTS.c.id, EVENTS.c.lease_id,
                          EVENTS.c.event_type, EVENTS.c.claimed_by,
                          EVENTS.c.claimed_at, EVENTS.c.attempts)
                .where(EVENTS.c.status == 'IN_PROGRESS',
                       EVENTS.c.claimed_at < cutoff))
        stale = common.dicts(session.execute(locking(stmt, session)))
        for event in stale:
            session.execute(
                sa.update(EVENTS)
                .where(EVENTS.c.id == event['id'],
                       EVENTS.c.status == 'IN_PROGRESS',
                       EVENTS.c.claimed_by == event['claimed_by'])
                .values(status='UNDONE', claimed_by=None, claimed_at=None,
                        next_attempt_at=None, updated_at=now,
                        last_error='claim by %s at %s expired (the engine '
                                   'died or hung); released at %s'
                                   % (event['claimed_by'],
                                      event['claimed_at'], now)))
        return stale


def engine_next_event_time(db):
    """When the next claimable event is due (may be past), or None.

    Like event_next_time, but events waiting for an earlier event of
    their lease do not count.
    """
    with transaction.reading(db, core=True) as session:
        first = _claimable(session, (EVENTS.c.status == 'UNDONE',
                                     EVENTS.c.next_attempt_at.is_(None)), 1)
        # A retried event has run: nothing earlier of its lease is left.
        retry = session.execute(
            sa.select(sa.func.min(EVENTS.c.next_attempt_at))
            .where(EVENTS.c.status == 'UNDONE',
                   EVENTS.c.next_attempt_at.is_not(None))).scalar()
    times = [_datetime(t) for t in ([first[0].time] if first else [])
             + [retry] if t is not None]
    return min(times) if times else None


def engine_claims_held(db, engine_id, claims):
    """Which of ``claims``, (event id, attempts) pairs, ``engine_id``
    still holds: the event is IN_PROGRESS, claimed by it, and not claimed
    again since (a released and re-claimed event has more attempts).

    One primary key look-up per event, in one statement. Returns a set of
    pairs.
    """
    claims = set(claims)
    if not claims:
        return set()
    ids = sorted({event_id for event_id, _ in claims})
    with transaction.reading(db, core=True) as conn:
        held = {(row.id, row.attempts) for row in conn.execute(
            sa.select(EVENTS.c.id, EVENTS.c.attempts).where(
                EVENTS.c.id.in_(ids), EVENTS.c.status == 'IN_PROGRESS',
                EVENTS.c.claimed_by == engine_id))}
    return held & claims


def engine_claim_held(db, engine_id, event_id, attempts):
    """Whether ``engine_id`` still holds attempt ``attempts`` of event
    ``event_id`` (see engine_claims_held).
    """
    return bool(engine_claims_held(db, engine_id, [(event_id, attempts)]))


_PROBE = (
    sa.select(sa.func.count(), sa.func.min(EVENTS.c.id),
              sa.func.max(EVENTS.c.id))
    .where(EVENTS.c.status == 'UNDONE',
           EVENTS.c.time <= sa.bindparam('horizon')))


def engine_probe(db, horizon):
    """A cheap fingerprint of the UNDONE events due at or before horizon.

    One range scan of ix_events_status_time: (count, lowest id, highest
    id). It changes when such an event is created, moved before horizon,
    claimed or released; a sleeping engine compares it with the one it
    took before its last look.
    """
    with transaction.reading(db, core=True) as session:
        return tuple(session.execute(
            _PROBE, {'horizon': common.naive_utc(horizon)}).one())
