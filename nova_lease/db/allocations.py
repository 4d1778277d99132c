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
"""Host allocations: which host a reservation holds over which period.
"""

from oslo_db import exception as db_exc
import sqlalchemy as sa

from nova_lease.db import changes as changes_db
from nova_lease.db import common
from nova_lease.db import hosts as hosts_db
from nova_lease.db import models
from nova_lease.db import transaction

RESERVATIONS = models.RESERVATIONS
ALLOCATIONS = models.ALLOCATIONS


def allocation_create(db, values):
    """Create an allocation (values['reservation_id'] required); its dict.

    Raises ReservationNotFound.
    """
    row = common.prepare_allocation(values)
    if row.get('reservation_id') is None:
        raise common.InvalidField(kind='allocation',
                                  fields='reservation_id (missing)')
    with transaction.writing(db) as session:
        try:
            result = session.execute(sa.insert(ALLOCATIONS).values(**row))
        except db_exc.DBReferenceError:
            raise common.ReservationNotFound(
                reservation_id=row.get('reservation_id'))
        changes_db.journal(session, [(None, row['reservation_id'])])
        return _allocation_get(session, result.inserted_primary_key[0])


def _allocation_get(session, allocation_id):
    row = session.execute(sa.select(*common.ALLOCATION_COLUMNS).where(
        ALLOCATIONS.c.id == allocation_id)).mappings().first()
    if row is None:
        raise common.AllocationNotFound(allocation_id=allocation_id)
    return dict(row)


def _allocation_reservation(session, allocation_id):
    rid = session.execute(sa.select(ALLOCATIONS.c.reservation_id).where(
        ALLOCATIONS.c.id == allocation_id)).scalar()
    if rid is None:
        raise common.AllocationNotFound(allocation_id=allocation_id)
    return rid


def allocation_list(db, hosts=None, start=None, end=None,
                    reservation_id=None, lease_id=None):
    """Allocation dicts overlapping [start, end), ordered by host, start.

    An allocation [s, e) overlaps when s < end and e > start; a missing
    bound is unbounded. hosts: a list of hypervisor hostnames;
    reservation_id: one id or a list of them.
    """
    stmt = sa.select(*common.ALLOCATION_COLUMNS)
    hosts = common.as_list(hosts)
    if hosts is not None:
        stmt = stmt.where(ALLOCATIONS.c.host.in_(hosts))
    if end is not None:
        stmt = stmt.where(ALLOCATIONS.c.start_date < common.naive_utc(end))
    if start is not None:
        stmt = stmt.where(ALLOCATIONS.c.end_date > common.naive_utc(start))
    reservation_ids = common.as_list(reservation_id)
    if reservation_ids is not None:
        stmt = stmt.where(ALLOCATIONS.c.reservation_id.in_(reservation_ids))
    if lease_id is not None:
        stmt = stmt.where(ALLOCATIONS.c.reservation_id.in_(
            sa.select(RESERVATIONS.c.id)
            .where(RESERVATIONS.c.lease_id == lease_id)))
    stmt = stmt.order_by(ALLOCATIONS.c.host, ALLOCATIONS.c.start_date,
                         ALLOCATIONS.c.id)
    with transaction.reading(db) as session:
        return common.dicts(session.execute(stmt))


def allocation_busy(session, hosts, start, end, fingerprint=False):
    """``(host, reservation id)`` of the allocations overlapping [start,
    end) on hosts (hypervisor hostnames), in the caller's transaction.

    What host allocation asks at every step: one indexed query. With
    ``fingerprint``, the same query also reads :func:`host_fingerprint`:
    returns (that set, the fingerprint).
    """
    hosts = list(hosts)
    if not hosts and not fingerprint:
        return set()
    busy = sa.and_(ALLOCATIONS.c.host.in_(hosts),
                   ALLOCATIONS.c.start_date < common.naive_utc(end),
                   ALLOCATIONS.c.end_date > common.naive_utc(start))
    if not fingerprint:
        return {tuple(row) for row in session.execute(sa.select(
            ALLOCATIONS.c.host, ALLOCATIONS.c.reservation_id).where(
                busy).distinct())}
    marker = hosts_db.host_fingerprint_select().subquery('fingerprint')
    rows = session.execute(sa.select(
        *marker.c, ALLOCATIONS.c.host, ALLOCATIONS.c.reservation_id)
        .select_from(marker.outerjoin(ALLOCATIONS, busy))).all()
    width = len(rows[0]) - 2
    return ({tuple(row[width:]) for row in rows if row[width] is not None},
            tuple(str(v) for v in rows[0][:width]))


def allocation_update(db, allocation_id, values):
    """Update an allocation; its dict. Raises AllocationNotFound."""
    values = common.clean(ALLOCATIONS, 'allocation', values,
                          read_only=common.ALLOCATION_READ_ONLY)
    with transaction.writing(db) as session:
        if values:
            old = _allocation_reservation(session, allocation_id)
            result = session.execute(sa.update(ALLOCATIONS).where(
                ALLOCATIONS.c.id == allocation_id).values(**values))
            if result.rowcount != 1:
                raise common.AllocationNotFound(allocation_id=allocation_id)
            changes_db.journal(session, [(None, rid) for rid in sorted(
                {old, values.get('reservation_id', old)})])
        return _allocation_get(session, allocation_id)


def allocation_destroy(db, allocation_id):
    """Delete an allocation. Raises AllocationNotFound."""
    with transaction.writing(db) as session:
        old = _allocation_reservation(session, allocation_id)
        result = session.execute(sa.delete(ALLOCATIONS).where(
            ALLOCATIONS.c.id == allocation_id))
        if result.rowcount != 1:
            raise common.AllocationNotFound(allocation_id=allocation_id)
        changes_db.journal(session, [(None, old)])


def allocation_destroy_by_reservation(db, reservation_id):
    """Delete every allocation of a reservation; return how many."""
    with transaction.writing(db) as session:
        count = session.execute(sa.delete(ALLOCATIONS).where(
            ALLOCATIONS.c.reservation_id == reservation_id)).rowcount
        if count:
            changes_db.journal(session, [(None, reservation_id)])
        return count


def allocation_cut(db, reservation_ids, at):
    """End the allocations of reservations at ``at`` (an early end).

    Allocations that start at or after ``at`` are deleted, those that
    run past it end there; earlier ones are kept. Returns how many rows
    changed.
    """
    reservation_ids = sorted(set(reservation_ids))
    if not reservation_ids:
        return 0
    at = common.naive_utc(at)
    with transaction.writing(db) as session:
        mine = ALLOCATIONS.c.reservation_id.in_(reservation_ids)
        count = session.execute(sa.delete(ALLOCATIONS).where(
            mine, ALLOCATIONS.c.start_date >= at)).rowcount
        count += session.execute(sa.update(ALLOCATIONS).where(
            mine, ALLOCATIONS.c.end_date > at).values(end_date=at)).rowcount
        if count:
            changes_db.journal(session,
                               [(None, rid) for rid in reservation_ids])
        return count
