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
"""The change journal (lease_changes): which leases and reservations
changed, for the scheduler's snapshot (read by
nova_lease.scheduler.snapshot_reads). Every writer that changes what the
snapshot holds adds its rows in its own transaction.
"""

import datetime
import threading

from oslo_utils import timeutils
import sqlalchemy as sa

from nova_lease.db import common
from nova_lease.db import models
from nova_lease.db import transaction

LEASE_CHANGES = models.LEASE_CHANGES


#: Journal rows older than this are deleted (by the writers, see
#: journal). A snapshot older than half of it is read again in full.
CHANGE_RETENTION = datetime.timedelta(hours=24)


#: One journaling transaction in this many (per process) also prunes.
CHANGE_PRUNE_EVERY = 256
#: At most this many journal rows pruned by one transaction.
PRUNE_BATCH = 1000


JOURNALED_LEASE_FIELDS = frozenset(
    ('start_date', 'end_date', 'status', 'project_id'))


JOURNALED_RESERVATION_FIELDS = frozenset(
    ('lease_id', 'resource_type', 'resource_id', 'status', 'properties'))


_journal_count = [0]


_journal_lock = threading.Lock()


def _journal_prune_due():
    """Count a journal write; True for one in CHANGE_PRUNE_EVERY."""
    with _journal_lock:
        _journal_count[0] += 1
        return _journal_count[0] % CHANGE_PRUNE_EVERY == 0


def journal(session, pairs):
    """Record (lease id, reservation id) pairs (either may be None), in the
    caller's transaction (a Session or a Connection).
    """
    if not pairs:
        return
    now = common.naive_utc(timeutils.utcnow())
    session.execute(sa.insert(LEASE_CHANGES), [
        {'lease_id': lease_id, 'reservation_id': rid, 'created_at': now}
        for lease_id, rid in pairs])
    if _journal_prune_due():
        # The old rows by their ids, read without locks, then deleted one
        # by one: a range delete on created_at would wait (InnoDB's
        # next-key lock) for any writer in flight whose new journal row
        # borders the range, up to the lock wait timeout.
        old = session.execute(
            sa.select(LEASE_CHANGES.c.id)
            .where(LEASE_CHANGES.c.created_at < now - CHANGE_RETENTION)
            .limit(PRUNE_BATCH)).scalars().all()
        if old:
            session.execute(sa.delete(LEASE_CHANGES).where(
                LEASE_CHANGES.c.id.in_(old)))


def change_prune(db, before):
    """Delete the journal rows created before ``before``; how many."""
    with transaction.writing(db) as session:
        return session.execute(sa.delete(LEASE_CHANGES).where(
            LEASE_CHANGES.c.created_at < common.naive_utc(before))).rowcount


# The scheduler runs these at every request (or change): built once, with
# bound parameters (building a statement costs more than running it).
_CHANGE_TOP = sa.select(sa.func.max(LEASE_CHANGES.c.id))


_CHANGE_PROBE = (
    sa.select(sa.func.max(LEASE_CHANGES.c.id),
              sa.func.min(LEASE_CHANGES.c.id), sa.func.count())
    .where(LEASE_CHANGES.c.id > sa.bindparam('low')))


_CHANGE_ROWS = (
    sa.select(LEASE_CHANGES.c.id, LEASE_CHANGES.c.lease_id,
              LEASE_CHANGES.c.reservation_id)
    .where(LEASE_CHANGES.c.id > sa.bindparam('low'))
    .order_by(LEASE_CHANGES.c.id))


def change_probe(db, low=None, margin=1000):
    """(low, highest id, lowest id, count) of the journal rows above low.

    ``low`` defaults to the highest id minus ``margin``. One index range
    scan: a cheap marker of the changes, that also moves when a
    transaction that took a lower id commits after a higher one (within
    ``margin`` ids), or when old rows are pruned.
    """
    with transaction.reading(db) as session:
        if low is None:
            top = session.execute(_CHANGE_TOP).scalar()
            low = (top or 0) - margin
        top, bottom, count = session.execute(_CHANGE_PROBE,
                                             {'low': low}).one()
    return (low, top, bottom, count)


def change_rows(db, low):
    """Journal rows ``(id, lease_id, reservation_id)`` with id > low."""
    with transaction.reading(db) as session:
        return [tuple(row) for row in session.execute(_CHANGE_ROWS,
                                                      {'low': low})]
