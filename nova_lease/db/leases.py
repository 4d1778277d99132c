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
"""Leases: created with their reservations, events and allocations in
one transaction, read back with them, updated with compare-and-set.
"""

from oslo_db import exception as db_exc
from oslo_utils import timeutils
import sqlalchemy as sa

from nova_lease.db import changes as changes_db
from nova_lease.db import common
from nova_lease.db import models
from nova_lease.db import transaction

LEASES = models.LEASES
RESERVATIONS = models.RESERVATIONS
EVENTS = models.EVENTS
ALLOCATIONS = models.ALLOCATIONS


def lease_create(db, lease_values, reservations=(), events=(),
                 allocations=()):
    """Create a lease with its reservations, events and allocations.

    All in one transaction. ``id`` fields are optional (uuids are
    generated). ``lease_id`` of reservations and events is set here.
    Allocations come either nested in their reservation, as a list under
    the reservation's ``'allocations'`` key (their ``reservation_id`` is
    set here), or in ``allocations``, each with the ``reservation_id`` of
    one of these reservations (the caller then chooses reservation ids).

    Returns the lease dict, as :func:`lease_get`.
    """
    lease = common.new_row(LEASES, 'lease', lease_values)
    lease_id = lease['id']
    reservation_rows = []
    allocation_rows = []
    for values in reservations:
        values = dict(values)
        nested = values.pop('allocations', ())
        row = common.prepare_reservation(values, lease_id)
        reservation_rows.append(row)
        allocation_rows.extend(common.prepare_allocation(a, row['id'])
                               for a in nested)
    reservation_ids = {row['id'] for row in reservation_rows}
    for values in allocations:
        row = common.prepare_allocation(values)
        if row.get('reservation_id') not in reservation_ids:
            raise common.InvalidField(kind='allocation',
                                      fields='reservation_id')
        allocation_rows.append(row)
    event_rows = [common.new_row(EVENTS, 'event', dict(e, lease_id=lease_id))
                  for e in events]
    # Every row is inserted complete (created_at included) so that the
    # result is built from them: no read-back on the boot path.
    now = common.naive_utc(timeutils.utcnow())
    lease = common.complete(LEASES, lease, now)
    reservation_rows = [common.complete(RESERVATIONS, r, now)
                        for r in reservation_rows]
    event_rows = [common.complete(EVENTS, e, now) for e in event_rows]
    changes = ([(lease_id, r['id']) for r in reservation_rows]
               or [(lease_id, None)])
    step = [None]
    try:
        with transaction.writing(db) as conn:
            step[0] = LEASES
            conn.execute(sa.insert(LEASES), [lease])
            step[0] = RESERVATIONS
            common.insert_many(conn, RESERVATIONS, reservation_rows)
            step[0] = EVENTS
            common.insert_many(conn, EVENTS, event_rows)
            step[0] = None
            common.insert_many(conn, ALLOCATIONS, allocation_rows)
            changes_db.journal(conn, changes)
    except db_exc.DBDuplicateEntry as e:
        if step[0] is LEASES:
            raise common.LeaseExists(lease_id=lease_id)
        if step[0] is RESERVATIONS:
            raise common.ReservationExists(reservation_id=e.value)
        if step[0] is EVENTS:
            raise common.EventExists(event_id=e.value)
        raise
    result = dict(lease)
    result['reservations'] = [
        common.reservation_dict(r) for r in
        sorted(reservation_rows, key=lambda r: (r['created_at'], r['id']))]
    order = len(common.EVENT_TYPE_ORDER)
    result['events'] = [dict(e) for e in sorted(
        event_rows, key=lambda e: (e['time'],
                                   common.EVENT_TYPE_ORDER.get(e['event_type'],
                                                               order),
                                   e['id']))]
    return result


def _lease_get(session, lease_id):
    row = session.execute(
        sa.select(LEASES).where(LEASES.c.id == lease_id)).mappings().first()
    if row is None:
        raise common.LeaseNotFound(lease_id=lease_id)
    lease = dict(row)
    lease['reservations'] = [
        common.reservation_dict(r) for r in session.execute(
            sa.select(RESERVATIONS).where(RESERVATIONS.c.lease_id == lease_id)
            .order_by(RESERVATIONS.c.created_at, RESERVATIONS.c.id))
        .mappings()]
    lease['events'] = common.dicts(session.execute(
        sa.select(EVENTS).where(EVENTS.c.lease_id == lease_id)
        .order_by(EVENTS.c.time, common.event_order(), EVENTS.c.id)))
    return lease


def lease_get(db, lease_id):
    """The lease dict: its columns plus 'reservations' and 'events'.

    Raises LeaseNotFound.
    """
    with transaction.reading(db) as session:
        return _lease_get(session, lease_id)


def lease_list(db, project_id=None, statuses=None, start=None, end=None):
    """Leases (dicts as lease_get), ordered by start_date, in 3 queries.

    ``start``/``end``: only the leases whose dates overlap [start, end)
    (a missing bound is unbounded).
    """
    ids = sa.select(LEASES.c.id)
    if project_id is not None:
        ids = ids.where(LEASES.c.project_id == project_id)
    if end is not None:
        ids = ids.where(LEASES.c.start_date < common.naive_utc(end))
    if start is not None:
        ids = ids.where(LEASES.c.end_date > common.naive_utc(start))
    statuses = common.as_list(statuses)
    if statuses is not None:
        ids = ids.where(LEASES.c.status.in_(statuses))
    with transaction.reading(db) as session:
        leases = common.dicts(session.execute(
            sa.select(LEASES).where(LEASES.c.id.in_(ids))
            .order_by(LEASES.c.start_date, LEASES.c.created_at,
                      LEASES.c.id)))
        by_id = {}
        for lease in leases:
            lease['reservations'] = []
            lease['events'] = []
            by_id[lease['id']] = lease
        if not leases:
            return leases
        for row in session.execute(
                sa.select(RESERVATIONS)
                .where(RESERVATIONS.c.lease_id.in_(ids))
                .order_by(RESERVATIONS.c.created_at,
                          RESERVATIONS.c.id)).mappings():
            lease = by_id.get(row['lease_id'])
            if lease is not None:
                lease['reservations'].append(common.reservation_dict(row))
        for row in session.execute(
                sa.select(EVENTS).where(EVENTS.c.lease_id.in_(ids))
                .order_by(EVENTS.c.time, common.event_order(),
                          EVENTS.c.id)).mappings():
            lease = by_id.get(row['lease_id'])
            if lease is not None:
                lease['events'].append(dict(row))
        return leases


def lease_names(db, lease_ids):
    """{lease id: name} of those leases (the ones that exist)."""
    ids = sorted(set(lease_ids))
    out = {}
    with transaction.reading(db) as session:
        for k in range(0, len(ids), 500):
            out.update(session.execute(
                sa.select(LEASES.c.id, LEASES.c.name)
                .where(LEASES.c.id.in_(ids[k:k + 500]))).all())
    return out


def lease_update(db, lease_id, values, expected_status=None, expected=None):
    """Update a lease's columns and return the lease dict (as lease_get).

    With ``expected_status`` (a status or a list of statuses) the update
    happens only if the lease is in one of them; ``expected`` (a dict of
    column: value) adds more such conditions. Otherwise raises
    StatusConflict. Raises LeaseNotFound.
    """
    with transaction.writing(db) as session:
        common.compare_and_set(session, LEASES, 'lease', lease_id, values,
                               expected_status, expected,
                               common.LeaseNotFound(lease_id=lease_id))
        if changes_db.JOURNALED_LEASE_FIELDS.intersection(values):
            changes_db.journal(session, [(lease_id, None)])
        return _lease_get(session, lease_id)


def lease_destroy(db, lease_id):
    """Delete a lease and (cascade) its reservations, events, allocations.

    Raises LeaseNotFound.
    """
    with transaction.writing(db) as session:
        result = session.execute(
            sa.delete(LEASES).where(LEASES.c.id == lease_id))
        if result.rowcount != 1:
            raise common.LeaseNotFound(lease_id=lease_id)
        changes_db.journal(session, [(lease_id, None)])
