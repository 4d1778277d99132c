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
"""Shared pieces of the side database modules: the errors every
function may raise, the ordering of events, and the helpers that check
and normalise values and run compare-and-set updates.
"""

import datetime

from oslo_serialization import jsonutils
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from nova_lease.db import models
from nova_lease import exception
from nova_lease import status

RESERVATIONS = models.RESERVATIONS
EVENTS = models.EVENTS
ALLOCATIONS = models.ALLOCATIONS


# Events due at the same time run in this order (nova_lease.status);
# unknown types run last.
EVENT_TYPE_ORDER = {str(event_type): rank for event_type, rank
                    in status.EVENT_TYPE_ORDER.items()}


class LeaseNotFound(exception.NotFound):
    msg_fmt = 'Lease %(lease_id)s could not be found.'


class ReservationNotFound(exception.NotFound):
    msg_fmt = 'Reservation %(reservation_id)s could not be found.'


class EventNotFound(exception.NotFound):
    msg_fmt = 'Event %(event_id)s could not be found.'


class AllocationNotFound(exception.NotFound):
    msg_fmt = 'Allocation %(allocation_id)s could not be found.'


class HostNotFound(exception.NotFound):
    msg_fmt = 'Host %(host)s could not be found.'


class StatusConflict(exception.Conflict):
    """A compare-and-set update found the row in another state.

    Attributes: ``kind`` ('lease', 'reservation' or 'event'), ``id``,
    ``actual`` (the row's current status), ``expected`` (the list of
    expected statuses, or None) and ``conditions`` (the ``expected`` dict
    of other columns, or None).
    """

    msg_fmt = ('%(kind)s %(id)s is %(actual)s, expected %(expected)s '
               '(it was changed concurrently).')

    def __init__(self, kind, id, actual, expected, conditions=None):
        self.kind = kind
        self.id = id
        self.actual = actual
        self.expected = expected
        self.conditions = conditions
        wanted = ' and '.join(
            str(w) for w in (expected, conditions) if w is not None)
        super().__init__(kind=kind.capitalize(), id=id, actual=actual,
                         expected=wanted)


class LeaseExists(exception.Conflict):
    msg_fmt = 'Lease %(lease_id)s already exists.'


class ReservationExists(exception.Conflict):
    msg_fmt = 'Reservation %(reservation_id)s already exists.'


class EventExists(exception.Conflict):
    msg_fmt = 'Event %(event_id)s already exists.'


class HostExists(exception.Conflict):
    msg_fmt = 'Host %(host)s already exists.'


class InvalidField(exception.Invalid):
    msg_fmt = 'Invalid %(kind)s field(s): %(fields)s.'


def as_list(value):
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    return list(value)


def naive_utc(value):
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return timeutils.normalize_time(value)
    return value


def clean(table, kind, values, read_only=('id',)):
    """Check values' keys against table's columns; normalise datetimes."""
    values = dict(values)
    unknown = sorted(k for k in values
                     if k not in table.c or k in read_only)
    if unknown:
        raise InvalidField(kind=kind, fields=', '.join(unknown))
    return {k: naive_utc(v) for k, v in values.items()}


def new_row(table, kind, values):
    """A row to insert in a uuid-keyed table: an id is generated if none."""
    values = dict(values)
    row_id = values.pop('id', None)
    row = clean(table, kind, values)
    row['id'] = row_id or uuidutils.generate_uuid()
    return row


def _written(table):
    """The columns of ``table`` that writers set (not the computed ones).
    """
    return [column for column in table.c if column.computed is None]


def complete(table, row, now):
    """``row`` with every column: absent ones get their default.

    Lets a function return what it inserted without reading it back: the
    models' defaults are Python-side scalars, or _utcnow for created_at.
    """
    full = {}
    for column in _written(table):
        key = column.key
        if key in row:
            full[key] = row[key]
        elif column.default is not None and column.default.is_scalar:
            full[key] = column.default.arg
        elif column.default is not None and column.default.is_callable:
            full[key] = now
        else:
            full[key] = None
    return full


def insert_many(session, table, rows):
    # executemany needs one key set per statement.
    groups = {}
    for row in rows:
        groups.setdefault(frozenset(row), []).append(row)
    for group in groups.values():
        session.execute(sa.insert(table), group)


def compare_and_set(session, table, kind, row_id, values, expected_status,
                    expected, not_found):
    values = clean(table, kind, values)
    if not values:
        values = {'updated_at': timeutils.utcnow()}
    stmt = sa.update(table).where(table.c.id == row_id).values(**values)
    statuses = as_list(expected_status)
    if statuses is not None:
        stmt = stmt.where(table.c.status.in_(statuses))
    for key, value in clean(table, kind, expected or {}, ()).items():
        column = table.c[key]
        stmt = stmt.where(column.is_(None) if value is None
                          else column == value)
    if session.execute(stmt).rowcount == 1:
        return
    cas_failed(session, table, kind, row_id, statuses, expected, not_found)


def cas_failed(session, table, kind, row_id, statuses, expected,
               not_found):
    """Raise not_found, or StatusConflict, for a failed compare-and-set.
    """
    actual = session.execute(
        sa.select(table.c.status).where(table.c.id == row_id)).first()
    if actual is None:
        raise not_found
    raise StatusConflict(kind, row_id, actual.status, statuses,
                         dict(expected) if expected else None)


def dicts(result):
    # (zip with the keys: a RowMapping per row costs more than the row.)
    keys = list(result.keys())
    return [dict(zip(keys, row)) for row in result]


def reservation_dict(row):
    reservation = dict(row)
    reservation['properties'] = (jsonutils.loads(reservation['properties'])
                                 if reservation['properties'] else {})
    return reservation


def event_order():
    return sa.case(EVENT_TYPE_ORDER, value=EVENTS.c.event_type,
                   else_=len(EVENT_TYPE_ORDER))


def prepare_reservation(values, lease_id):
    values = dict(values)
    values['lease_id'] = lease_id
    values['properties'] = jsonutils.dumps(values.get('properties') or {})
    return new_row(RESERVATIONS, 'reservation', values)


def prepare_allocation(values, reservation_id=None):
    values = dict(values)
    if reservation_id is not None:
        values['reservation_id'] = reservation_id
    return clean(ALLOCATIONS, 'allocation', values,
                 read_only=ALLOCATION_READ_ONLY)


#: Allocation columns no writer sets: the key, and what the database
#: computes (span_class, see nova_lease.db.models).
ALLOCATION_READ_ONLY = ('id',) + tuple(
    column.key for column in ALLOCATIONS.c if column.computed is not None)


#: What an allocation dict holds (span_class is for queries only).
ALLOCATION_COLUMNS = tuple(column for column in ALLOCATIONS.c
                           if column.computed is None)
