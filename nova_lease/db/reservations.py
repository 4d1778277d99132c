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
"""Reservations and their links to resources (the servers made for them).
"""

from oslo_db import exception as db_exc
from oslo_serialization import jsonutils
from oslo_utils import timeutils
import sqlalchemy as sa

from nova_lease.db import changes as changes_db
from nova_lease.db import common
from nova_lease.db import models
from nova_lease.db import transaction

RESERVATIONS = models.RESERVATIONS
EVENTS = models.EVENTS
ALLOCATIONS = models.ALLOCATIONS


def reservation_create(db, values):
    """Create a reservation of lease values['lease_id'].

    values may carry 'allocations' (a list, as in lease_create). Returns
    the reservation dict. Raises LeaseNotFound.
    """
    values = dict(values)
    nested = values.pop('allocations', ())
    lease_id = values.get('lease_id')
    if lease_id is None:
        raise common.InvalidField(kind='reservation',
                                  fields='lease_id (missing)')
    row = common.prepare_reservation(values, lease_id)
    allocation_rows = [common.prepare_allocation(a, row['id']) for a in nested]
    with transaction.writing(db) as session:
        try:
            session.execute(sa.insert(RESERVATIONS).values(**row))
        except db_exc.DBReferenceError:
            raise common.LeaseNotFound(lease_id=lease_id)
        except db_exc.DBDuplicateEntry:
            raise common.ReservationExists(reservation_id=row['id'])
        common.insert_many(session, ALLOCATIONS, allocation_rows)
        changes_db.journal(session, [(lease_id, row['id'])])
        return _reservation_get(session, row['id'])


def _reservation_get(session, reservation_id):
    row = session.execute(
        sa.select(RESERVATIONS).where(RESERVATIONS.c.id == reservation_id)
    ).mappings().first()
    if row is None:
        raise common.ReservationNotFound(reservation_id=reservation_id)
    return common.reservation_dict(row)


def reservation_get(db, reservation_id):
    """The reservation dict ('properties' decoded). ReservationNotFound."""
    with transaction.reading(db) as session:
        return _reservation_get(session, reservation_id)


def reservation_list(db, lease_id=None, resource_id=None,
                     resource_type=None, statuses=None):
    """Reservation dicts matching every given filter."""
    stmt = sa.select(RESERVATIONS)
    if lease_id is not None:
        stmt = stmt.where(RESERVATIONS.c.lease_id == lease_id)
    if resource_id is not None:
        stmt = stmt.where(RESERVATIONS.c.resource_id == resource_id)
    if resource_type is not None:
        stmt = stmt.where(RESERVATIONS.c.resource_type == resource_type)
    statuses = common.as_list(statuses)
    if statuses is not None:
        stmt = stmt.where(RESERVATIONS.c.status.in_(statuses))
    stmt = stmt.order_by(RESERVATIONS.c.created_at, RESERVATIONS.c.id)
    with transaction.reading(db) as session:
        return [common.reservation_dict(r)
                for r in session.execute(stmt).mappings()]


def reservation_update(db, reservation_id, values, expected_status=None,
                       expected=None, fetch=True):
    """Update a reservation (compare-and-set as lease_update).

    'properties', if given, replaces the whole dict. Returns the
    reservation dict (None with ``fetch=False``, which saves reading the
    row back). Raises ReservationNotFound or StatusConflict.
    """
    values = dict(values)
    if 'properties' in values:
        values['properties'] = jsonutils.dumps(values['properties'] or {})
    with transaction.writing(db) as session:
        common.compare_and_set(
            session, RESERVATIONS, 'reservation', reservation_id, values,
            expected_status, expected,
            common.ReservationNotFound(reservation_id=reservation_id))
        if changes_db.JOURNALED_RESERVATION_FIELDS.intersection(values):
            changes_db.journal(session, [(None, reservation_id)])
        return _reservation_get(session, reservation_id) if fetch else None


def reservation_destroy(db, reservation_id):
    """Delete a reservation and its allocations. ReservationNotFound."""
    with transaction.writing(db) as session:
        result = session.execute(sa.delete(RESERVATIONS).where(
            RESERVATIONS.c.id == reservation_id))
        if result.rowcount != 1:
            raise common.ReservationNotFound(reservation_id=reservation_id)
        changes_db.journal(session, [(None, reservation_id)])


_LINK_RESERVATION = (
    sa.update(RESERVATIONS)
    .where(RESERVATIONS.c.id == sa.bindparam('b_id'),
           RESERVATIONS.c.resource_id.is_(None))
    .values(resource_id=sa.bindparam('b_resource_id'),
            updated_at=sa.bindparam('b_now')))


_RELEASE_EVENT = (
    sa.update(EVENTS)
    .where(EVENTS.c.id == sa.bindparam('b_id'),
           EVENTS.c.status == sa.bindparam('b_status'))
    .values(next_attempt_at=None, updated_at=sa.bindparam('b_now')))


def reservations_link(db, links, drop=(), release_events=(),
                      event_status='UNDONE', now=None):
    """Link reservations to their resources, in one transaction.

    ``links``: ``(reservation id, resource id)`` pairs; each reservation
    must not be linked yet (``resource_id`` NULL), else StatusConflict
    (ReservationNotFound if it is gone). ``drop``: reservation ids deleted
    with their allocations (ReservationNotFound if one is gone).
    ``release_events``: event ids whose ``next_attempt_at`` is cleared;
    each must be in ``event_status`` (StatusConflict, EventNotFound).
    Rows updated get ``updated_at = now``. Nothing is read back.
    """
    now = common.naive_utc(now or timeutils.utcnow())
    changed = [rid for rid, _ in links] + list(drop)
    with transaction.writing(db) as conn:
        for reservation_id, resource_id in links:
            if conn.execute(_LINK_RESERVATION, {
                    'b_id': reservation_id, 'b_resource_id': resource_id,
                    'b_now': now}).rowcount != 1:
                common.cas_failed(
                    conn, RESERVATIONS, 'reservation', reservation_id, None,
                    {'resource_id': None},
                    common.ReservationNotFound(reservation_id=reservation_id))
        for reservation_id in drop:
            if conn.execute(sa.delete(RESERVATIONS).where(
                    RESERVATIONS.c.id == reservation_id)).rowcount != 1:
                raise common.ReservationNotFound(reservation_id=reservation_id)
        for event_id in release_events:
            if conn.execute(_RELEASE_EVENT, {
                    'b_id': event_id, 'b_status': event_status,
                    'b_now': now}).rowcount != 1:
                common.cas_failed(conn, EVENTS, 'event', event_id,
                                  [event_status], None,
                                  common.EventNotFound(event_id=event_id))
        if changed:
            changes_db.journal(conn, [(None, rid) for rid in changed])


def reservation_lease_ids(db, reservation_ids):
    """{reservation id: lease id} for the given reservation ids."""
    reservation_ids = sorted(set(reservation_ids))
    result = {}
    with transaction.reading(db) as session:
        for i in range(0, len(reservation_ids), 500):
            part = reservation_ids[i:i + 500]
            result.update(session.execute(
                sa.select(RESERVATIONS.c.id, RESERVATIONS.c.lease_id)
                .where(RESERVATIONS.c.id.in_(part))).all())
    return result
