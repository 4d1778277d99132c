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
"""The booking pipeline (see nova_lease.booking): create, change, delete.

Each operation takes what its caller checked (the request's shape and
meaning) and runs the same steps for every reservation type: the types'
hooks (nova_lease.resource_types.ReservationType) do the type's part of
each step, in booking order. No step dispatches on a type string.
"""

import copy
import dataclasses
import datetime
import typing

from oslo_log import log as logging

from nova_lease.booking import offers
from nova_lease.db import api as db_api
from nova_lease import enforcement
from nova_lease import exception
from nova_lease import params as lease_params
from nova_lease import resource_types as types
from nova_lease import status

LOG = logging.getLogger(__name__)

_L = status.LeaseStatus
_E = status.EventStatus
_T = status.EventType


@dataclasses.dataclass
class Caller:
    """Who asks, and how to reach Nova for them.

    :ivar ctx: the request's nova context (None outside nova-api).
    :ivar conf: the ConfigOpts ([nova_lease], [nova_lease_api],
        [nova_lease_enforcement]).
    :ivar db: the side Database.
    :ivar region: the region name of this Nova, for host requests.
    :ivar nova: what the types ask of Nova before and after a booking
        (nova-api's in-process Nova: nova_lease.api_ext.nova_effects),
        or None where nothing is asked of Nova.
    """

    ctx: typing.Any
    conf: typing.Any
    db: typing.Any = None
    region: typing.Optional[str] = None
    nova: typing.Any = None


@dataclasses.dataclass
class Item:
    """One reservation asked for: its field (``reservations[0]``,
    ``lease_params``), its type and its parsed request. ``made`` is what
    the type's ``prepare`` made in Nova for it (its reservation id among
    them), ``None`` before.
    """

    field: str
    type: types.ReservationType
    request: typing.Any
    made: typing.Any = None


@dataclasses.dataclass
class Booking:
    """A lease to create.

    :ivar values: the lease's columns (``id``, ``project_id``,
        ``start_date``, ``end_date``, ``status`` PENDING...); a type may
        change its ``status`` (a best-effort lease: IN_PROGRESS).
    :ivar events: its event rows (nova_lease.lease_events).
    :ivar items: its :class:`Item` s.
    :ivar hunt: for a best-effort lease, the hunt for hosts of its host
        reservations (nova_lease.api_ext.best_effort), else None.
    :ivar limits: checked against the usage limits (False: a default
        lease, the operator's own).
    :ivar cleaning: minutes kept free after the end on whole hosts
        (default ``[nova_lease_api] cleaning_time``).
    :ivar taken: the whole hosts that the types booked before (instance
        slots avoid them), filled while booking.
    :ivar flexible: a :class:`nova_lease.booking.offers.Flexible` window
        (the start is chosen in the transaction, at the first offer), or
        None: ``values`` has the dates.
    """

    conf: typing.Any
    values: dict
    events: list
    items: list
    now: datetime.datetime
    hunt: typing.Any = None
    limits: bool = True
    cleaning: typing.Optional[int] = None
    taken: set = dataclasses.field(default_factory=set)
    flexible: typing.Any = None

    def __post_init__(self):
        if self.cleaning is None:
            self.cleaning = self.conf.nova_lease_api.cleaning_time

    @property
    def start(self):
        return self.values['start_date']

    @property
    def end(self):
        return self.values['end_date']


def lease_values(params, project_id, user_id, before_end, lease_type,
                 retries):
    """The columns of a new PENDING lease (:attr:`Booking.values`) asked
    with ``params`` (nova_lease.params.LeaseParams) by ``user_id`` of
    ``project_id``; ``before_end``, ``lease_type`` and ``retries`` as
    the options make them of ``params``.
    """
    return {
        'name': params.name, 'project_id': project_id, 'user_id': user_id,
        'start_date': params.start, 'end_date': params.end,
        'before_end_date': before_end, 'status': str(_L.PENDING),
        'on_end': params.on_end, 'retries': retries,
        'lease_type': lease_type,
    }


def _attempt(booking):
    """A fresh copy of ``booking`` for one attempt of the transaction (a
    deadlock retries it from the start).
    """
    return dataclasses.replace(booking, values=dict(booking.values),
                               events=copy.deepcopy(booking.events),
                               taken=set())


def create(db, booking, caller=None):
    """Book a new lease, all or nothing; return the lease dict.

    Each item's type prepares what Nova must have first (undone if the
    booking is refused), then :func:`_book` records everything in one
    transaction.

    :raises: what the types raise (400, 409), LimitExceeded (403).
    """
    prepared = []
    try:
        for item in booking.items:
            item.type.prepare(caller, booking, item)
            prepared.append(item)
        lease = _book(db, booking)
        if booking.flexible is not None:
            # (Chosen in the transaction, on a copy of the booking.)
            booking.values.update(start_date=lease['start_date'],
                                  end_date=lease['end_date'])
    except Exception:
        for item in reversed(prepared):
            try:
                item.type.unprepare(caller, item)
            except Exception:
                LOG.exception('Could not undo what %s made in Nova for a '
                              'refused lease', item.field)
        raise
    after_create(caller, booking, lease)
    return lease


def after_create(caller, booking, lease):
    """After :func:`create` committed: what Nova is told (each type's
    ``after_create``; nothing without a ``caller.nova``). The lease is
    booked: a failure here is logged, not raised.
    """
    if caller is None or caller.nova is None:
        return
    for kind in types.by_order(i.type.name for i in booking.items):
        try:
            kind.after_create(caller, booking, lease)
        except Exception:
            LOG.exception('Lease %(lease)s is booked, but what its %(type)s '
                          'reservations tell Nova after the booking failed',
                          {'lease': lease['id'], 'type': kind.name})


@db_api.retry_on_deadlock
def _book(db, booking):
    booking = _attempt(booking)
    with db.writer() as session:
        limited = booking.limits and enforcement.lock_project(
            session, booking.conf, booking.values['project_id'])
        if booking.flexible is not None:
            # Under the candidate hosts' locks: the start is the first
            # offer, booked below like any other lease.
            offers.choose_start(session, booking)
        if limited:
            enforcement.check_request(
                booking.conf, session, booking.values['project_id'],
                booking.start, booking.now, created=True,
                field=_start_field(booking))
        reservations = []
        kinds = types.by_order(i.type.name for i in booking.items)
        for kind in kinds:
            reservations.extend(kind.book(session, booking, [
                i for i in booking.items if i.type is kind]))
        lease = db_api.lease_create(session, booking.values, reservations,
                                    booking.events)
        for kind in kinds:
            kind.after_insert(session, booking, lease)
        if booking.limits:
            enforcement.check_holding(booking.conf, session, lease,
                                      booking.now)
        return lease


def _start_field(booking):
    for item in booking.items:
        return item.type.start_field
    return 'start_date'


class LeaseBusy(exception.Conflict):
    msg_fmt = ('lease %(lease_id)s is %(status)s: %(action)s is not '
               'possible now%(hint)s')


def check_changeable(lease, action):
    """409 unless the lease is PENDING or ACTIVE."""
    if lease['status'] not in (_L.PENDING, _L.ACTIVE):
        raise LeaseBusy(lease_id=lease['id'], status=lease['status'],
                        action=action,
                        hint='' if status.is_terminal(
                            status.LEASE, lease['status'])
                        else '; retry in a moment')


@dataclasses.dataclass
class Window:
    """A lease's new dates (validated by the caller), with the change of
    its events they make (``move_events(session, lease)``).
    """

    start: datetime.datetime
    end: datetime.datetime
    before_end: typing.Optional[datetime.datetime]
    move_events: typing.Callable


@dataclasses.dataclass
class Update:
    """One reservation's update: the new request, and what it did
    (filled by its type: the hosts that joined it, whether its size
    changed).
    """

    field: str
    reservation: dict
    request: typing.Any
    added: list = dataclasses.field(default_factory=list)
    resized: bool = False

    @property
    def type(self):
        return types.get(self.reservation['resource_type'])


def parse_updates(lease, items):
    """The :class:`Update` s of an update body's ``reservations`` (their
    keys and types checked by each reservation's type).

    :raises LeaseParamError: (400) naming ``reservations[i].<key>``.
    """
    if not isinstance(items, list):
        raise lease_params.error('reservations', 'type', "'reservations' "
                                 "must be an array of objects")
    by_id = {r['id']: r for r in lease['reservations']}
    updates = []
    for i, item in enumerate(items):
        field = 'reservations[%d]' % i
        if not isinstance(item, dict):
            raise lease_params.error(field, 'type', "'%s' must be an "
                                     "object", field)
        if item.get('id') in (None, ''):
            raise lease_params.error(
                field + '.id', 'required', "Missing parameter reservation "
                "ID ('%s.id' is required)", field)
        reservation = by_id.get(item['id'])
        if reservation is None:
            raise lease_params.error(
                field + '.id', 'choice', "Please enter valid reservation "
                "IDs. Invalid reservation IDs are: %s (not a reservation of "
                "lease %s)", item['id'], lease['id'])
        kind = types.get(reservation['resource_type'])
        shown = kind.shown_type(reservation)
        given = item.get('resource_type')
        if given is not None and given != shown:
            raise lease_params.error(
                field + '.resource_type', 'unsupported', "Cannot update "
                "parameter resource_type (%s is a %s reservation)",
                item['id'], shown)
        updates.append(Update(field, reservation,
                              kind.parse_update(field, reservation, item)))
    return updates


@db_api.retry_on_deadlock
def change(db, conf, lease_id, now, name=None, window=None, items=None,
           check=None):
    """Rename a lease, move its window, update its reservations: one
    transaction, all or nothing.

    :param window: a function ``window(lease)`` -> :class:`Window` (the
        new dates, validated against the lease as it is in the
        transaction), or None.
    :param items: the update body's ``reservations``, or None.
    :param check: ``check(lease)``, called first with the lease as it is
        in the transaction (e.g. the caller's authorization), or None.
    :returns: ``(the lease as changed, [Update])``: what
        :func:`after_change` tells Nova once committed.
    :raises LeaseBusy: (409) the lease is not PENDING or ACTIVE, or the
        engine started or ended it meanwhile.
    """
    updates = []
    with db.writer() as session:
        current = db_api.lease_get(session, lease_id)
        if check is not None:
            check(current)
        values = {}
        if name is not None:
            values['name'] = name
        start, end = current['start_date'], current['end_date']
        moved = None
        if window is not None:
            check_changeable(current, 'changing its dates')
            moved = window(current)
            start, end = moved.start, moved.end
        if items:
            check_changeable(current, 'changing its reservations')
            updates = parse_updates(current, items)
        if not values and moved is None and not updates:
            return current, updates
        limited = enforcement.lock_project(session, conf,
                                           current['project_id'])
        if limited and moved is not None:
            enforcement.check_request(
                conf, session, current['project_id'], start, now,
                start_moved=start != current['start_date'],
                field='start_date')
        if moved is not None:
            for kind, reservations in types.group(current['reservations']):
                kind.move(session, conf, current, reservations, start, end,
                          now)
            values.update(start_date=start, end_date=end,
                          before_end_date=moved.before_end)
            moved.move_events(session, current)
        started = current['status'] != _L.PENDING
        for update in updates:
            update.type.apply_update(session, conf, update, start, end,
                                     now, started)
        values['updated_at'] = now
        # Compare-and-set: the engine may have started or ended it since.
        try:
            lease = db_api.lease_update(session, current['id'], values,
                                        expected_status=current['status'])
        except db_api.StatusConflict as e:
            raise LeaseBusy(lease_id=lease_id, status=e.actual,
                            action='this update',
                            hint='; retry in a moment') from None
        if limited:
            enforcement.check_holding(conf, session, lease, now)
        return lease, updates


def after_change(caller, lease, updates):
    """After :func:`change` committed: what Nova is told (each type's
    ``after_update``).
    """
    started = lease['status'] != _L.PENDING
    for update in updates:
        update.type.after_update(caller, lease, update, started)


#: Who cancels the start of a best-effort lease deleted while it hunts
#: (the event's ``claimed_by`` on its way to DONE).
_DELETER = 'lease-delete'


def never_started(lease):
    """True for a lease deleted before its start (PENDING) whose release
    is under way: :func:`delete` removes its start event, which nothing
    else does. The lease API shows it as gone (404); once the engine's end
    has released what it held in Nova, the engine removes it
    (``db.api.engine_complete_events``). ``lease['events']``: its events.
    """
    return (lease['status'] in (_L.TERMINATING, _L.TERMINATED) and
            not any(e['event_type'] == _T.START_LEASE
                    for e in lease.get('events') or ()))


def _cancel_event(session, event, reason, now):
    """An UNDONE event to DONE without running (``cancelled: reason``)."""
    db_api.event_update(session, event['id'],
                        {'status': str(_E.IN_PROGRESS),
                         'claimed_by': _DELETER, 'claimed_at': now},
                        expected_status=str(_E.UNDONE))
    db_api.event_update(session, event['id'],
                        {'status': str(_E.DONE),
                         'last_error': 'cancelled: %s' % reason},
                        expected_status=str(_E.IN_PROGRESS),
                        expected={'claimed_by': _DELETER})


@db_api.retry_on_deadlock
def delete(db, conf, lease_id, now, check=None):
    """Delete or end a lease; returns ``'deleted'`` or ``'ending'``.

    A lease that holds nothing in Nova yet (PENDING, every reservation's
    type says so) or nothing any more (TERMINATED) is removed with its
    rows. A PENDING one that holds something in Nova (an instance
    reservation's flavor and server group, a VM lease's server) is
    removed as Blazar removes a lease that never started: it is gone for
    the lease API at once (:func:`never_started`: TERMINATING, its start
    and before-end events removed), what its reservations hold after now
    is released at once, its end event is due now, and the engine's end
    releases what it holds in Nova (through the action gate) and then
    removes its rows. A started (or failed) one ends now: its end event
    is due now, what its reservations hold after now is released (each
    type's ``release_after``), and the engine releases the resources; it
    stays, TERMINATED.

    :param check: ``check(lease)`` first, with the lease as it is in the
        transaction, or None.
    :raises LeaseBusy: (409) the engine is starting or ending it.
    """
    with db.writer() as session:
        lease = db_api.lease_get(session, lease_id)
        if check is not None:
            check(lease)
        state = lease['status']
        holds = any(types.get(r['resource_type']).holds_in_nova(r)
                    for r in lease['reservations'])
        if state == _L.TERMINATED or (state == _L.PENDING and not holds):
            try:
                db_api.lease_update(session, lease_id, {'updated_at': now},
                                    expected_status=state)
            except db_api.StatusConflict as e:
                raise LeaseBusy(lease_id=lease_id, status=e.actual,
                                action='deleting it',
                                hint='; retry in a moment') from None
            db_api.lease_destroy(session, lease_id)
            return 'deleted'
        if state in (_L.STARTING, _L.TERMINATING):
            raise LeaseBusy(lease_id=lease_id, status=state,
                            action='deleting it', hint='; retry in a moment')
        for event in db_api.event_list(session, lease_id=lease_id):
            if event['status'] != _E.UNDONE:
                continue
            if event['event_type'] == _T.END_LEASE:
                db_api.event_update(session, event['id'], {'time': now},
                                    expected_status=str(_E.UNDONE))
            elif (state == _L.IN_PROGRESS and
                    event['event_type'] == _T.START_LEASE):
                # (Kept, cancelled: the lease did hunt, and stays
                # TERMINATED.)
                _cancel_event(session, event, 'the lease was deleted', now)
            elif state in (_L.PENDING, _L.IN_PROGRESS) or (
                    event['event_type'] == _T.BEFORE_END_LEASE):
                db_api.event_destroy(session, event['id'])
        when = min(now, lease['end_date'])
        for kind, reservations in types.group(lease['reservations']):
            kind.release_after(session, conf, lease, reservations, when)
        values = {'end_date': when, 'updated_at': now}
        if state == _L.PENDING:
            # Never started: gone from now on (never_started); the
            # engine's end takes it from here.
            values['status'] = str(_L.TERMINATING)
        try:
            db_api.lease_update(session, lease_id, values,
                                expected_status=state)
        except db_api.StatusConflict as e:
            raise LeaseBusy(lease_id=lease_id, status=e.actual,
                            action='deleting it',
                            hint='; retry in a moment') from None
        return 'ending'
