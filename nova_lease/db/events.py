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
"""Lease events (start, before end, end) and their compare-and-set
updates.
"""

from oslo_db import exception as db_exc
import sqlalchemy as sa
from sqlalchemy import orm

from nova_lease.db import common
from nova_lease.db import models
from nova_lease.db import transaction

EVENTS = models.EVENTS


def event_create(db, values):
    """Create an event of lease values['lease_id']; return its dict."""
    row = common.new_row(EVENTS, 'event', values)
    if row.get('lease_id') is None:
        raise common.InvalidField(kind='event', fields='lease_id (missing)')
    with transaction.writing(db) as session:
        try:
            session.execute(sa.insert(EVENTS).values(**row))
        except db_exc.DBReferenceError:
            raise common.LeaseNotFound(lease_id=row['lease_id'])
        except db_exc.DBDuplicateEntry:
            raise common.EventExists(event_id=row['id'])
        return _event_get(session, row['id'])


def _event_get(session, event_id):
    row = session.execute(
        sa.select(EVENTS).where(EVENTS.c.id == event_id)).mappings().first()
    if row is None:
        raise common.EventNotFound(event_id=event_id)
    return dict(row)


def event_get(db, event_id):
    """The event dict. Raises EventNotFound."""
    with transaction.reading(db) as session:
        return _event_get(session, event_id)


def event_list(db, lease_id=None, statuses=None, due_before=None,
               claimed_before=None, limit=None, skip_locked=False):
    """Event dicts, ordered by time, then EVENT_TYPE_ORDER, then id.

    due_before: only events whose time, and next_attempt_at when set, are
    at or before it. claimed_before: only events claimed at or before it
    (to find claims abandoned by a dead engine). limit: at most that many.
    skip_locked (db must be a Database.writer() session): lock the rows
    returned until the transaction ends and skip the rows that other
    transactions hold (SELECT ... FOR UPDATE SKIP LOCKED), so that
    engines claiming due events concurrently do not collide. On SQLite
    the writer already excludes every other writer.
    """
    where = []
    if lease_id is not None:
        where.append(EVENTS.c.lease_id == lease_id)
    statuses = common.as_list(statuses)
    if statuses is not None:
        where.append(EVENTS.c.status.in_(statuses))
    if due_before is not None:
        due_before = common.naive_utc(due_before)
        where.append(EVENTS.c.time <= due_before)
        where.append(sa.or_(EVENTS.c.next_attempt_at.is_(None),
                            EVENTS.c.next_attempt_at <= due_before))
    if claimed_before is not None:
        where.append(EVENTS.c.claimed_at <= common.naive_utc(claimed_before))
    order = (EVENTS.c.time, common.event_order(), EVENTS.c.id)
    stmt = sa.select(EVENTS).where(*where).order_by(*order)
    if limit is not None:
        stmt = stmt.limit(limit)
    if not skip_locked:
        with transaction.reading(db) as session:
            return common.dicts(session.execute(stmt))
    if not isinstance(db, orm.Session):
        raise transaction.TransactionError(
            reason='skip_locked needs a Database.writer() session')
    transaction.require_writer(db)
    backend = db.get_bind().dialect.name
    if backend == 'mysql':
        # InnoDB locks every row the sort reads, not only those under the
        # LIMIT: pick the candidates first, then lock them by primary key
        # (checking the conditions again on the latest committed rows).
        ids = list(db.execute(
            stmt.with_only_columns(EVENTS.c.id)).scalars())
        if not ids:
            return []
        stmt = (sa.select(EVENTS).where(EVENTS.c.id.in_(ids), *where)
                .order_by(*order).with_for_update(skip_locked=True))
    elif backend != 'sqlite':
        stmt = stmt.with_for_update(skip_locked=True)
    return common.dicts(db.execute(stmt))


def event_next_time(db, statuses=('UNDONE',)):
    """The earliest time an event in statuses becomes due, or None.

    That is the smallest next_attempt_at, or time when next_attempt_at is
    not set (a retry is never scheduled before the event's time).
    """
    stmt = sa.select(sa.func.min(
        sa.func.coalesce(EVENTS.c.next_attempt_at, EVENTS.c.time)))
    statuses = common.as_list(statuses)
    if statuses is not None:
        stmt = stmt.where(EVENTS.c.status.in_(statuses))
    with transaction.reading(db) as session:
        return session.execute(stmt).scalar()


def event_update(db, event_id, values, expected_status=None, expected=None,
                 fetch=True):
    """Update an event (compare-and-set as lease_update); its dict.

    With ``fetch=False`` the row is not read back and None is returned.

    Claiming a due event: ``event_update(db, id, {'status': 'IN_PROGRESS',
    'claimed_by': me, 'claimed_at': now}, expected_status='UNDONE')``;
    reclaiming an abandoned one also passes ``expected={'claimed_by':
    old, 'claimed_at': old_at}``. Raises EventNotFound or StatusConflict.
    """
    with transaction.writing(db) as session:
        common.compare_and_set(session, EVENTS, 'event', event_id, values,
                               expected_status, expected,
                               common.EventNotFound(event_id=event_id))
        return _event_get(session, event_id) if fetch else None


def event_destroy(db, event_id):
    """Delete an event. Raises EventNotFound."""
    with transaction.writing(db) as session:
        result = session.execute(
            sa.delete(EVENTS).where(EVENTS.c.id == event_id))
        if result.rowcount != 1:
            raise common.EventNotFound(event_id=event_id)
