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
"""Statuses of leases, reservations and events, and their transitions.

Statuses are ``enum.StrEnum`` members, so they compare equal to (and store
as) their plain string values. This table is the reference; every status
change goes through :func:`check_transition`. Changing a status to itself
is refused: a caller that wants to be idempotent compares first.

Lease (``kind='lease'``)::

  PENDING     -> STARTING     the engine begins the start
              -> IN_PROGRESS  best-effort start: hunting for capacity
              -> TERMINATING  deleted before start, resources to release
              -> TERMINATED   deleted before start, nothing to release
              -> ERROR        found unusable before start
  STARTING    -> ACTIVE       started
              -> PENDING      start failed, will be retried (back-off)
              -> ERROR        start failed, no retry left
  IN_PROGRESS -> ACTIVE       enough capacity freed
              -> TIMEDOUT     gave up hunting
              -> TERMINATING  deleted while hunting
              -> ERROR
  ACTIVE      -> TERMINATING  end time reached, or deleted
              -> ERROR        the leased resources were lost
  TERMINATING -> TERMINATED   end done (it stays TERMINATING while
                              the end is retried)
              -> ERROR        end failed, no retry left
  ERROR       -> PENDING      an operator retries a failed start
              -> TERMINATING  end time reached, deleted, or end retried
  TIMEDOUT    -> TERMINATING  end time reached or deleted: release what
                              the hunt got
  TERMINATED  (terminal)

Reservation (``kind='reservation'``)::

  pending -> active, deleted, error
  active  -> deleted, error
  error   -> pending, deleted  (pending: an operator retries it)
  deleted (terminal)

Event (``kind='event'``)::

  UNDONE      -> IN_PROGRESS  claimed by an engine
  IN_PROGRESS -> DONE         action done
              -> ERROR        action failed, no retry left
              -> UNDONE       claim released: retry later, or the claim
                              of a dead engine expired
  ERROR       -> UNDONE       an operator retries it
  DONE (terminal)

Events of one lease due at the same time run in the order
``before_end_lease``, ``end_lease``, ``start_lease`` (see
:func:`event_sort_key`): a lease ending at T frees its capacity before a
lease starting at T takes it.
"""

import enum

from nova_lease import exception
from nova_lease import wire

LEASE = 'lease'
RESERVATION = 'reservation'
EVENT = 'event'


class LeaseStatus(enum.StrEnum):
    PENDING = 'PENDING'
    STARTING = 'STARTING'
    ACTIVE = 'ACTIVE'
    TERMINATING = 'TERMINATING'
    TERMINATED = 'TERMINATED'
    ERROR = 'ERROR'
    IN_PROGRESS = 'IN_PROGRESS'
    TIMEDOUT = 'TIMEDOUT'


class ReservationStatus(enum.StrEnum):
    PENDING = 'pending'
    ACTIVE = 'active'
    DELETED = 'deleted'
    ERROR = 'error'


class EventStatus(enum.StrEnum):
    UNDONE = 'UNDONE'
    IN_PROGRESS = 'IN_PROGRESS'
    DONE = 'DONE'
    ERROR = 'ERROR'


class EventType(enum.StrEnum):
    START_LEASE = 'start_lease'
    END_LEASE = 'end_lease'
    BEFORE_END_LEASE = 'before_end_lease'


# Rank of each event type among events due at the same time (of any
# leases): a lease that ends at T frees its resources before a lease that
# starts at T takes them, and the before-end action runs before the end.
EVENT_TYPE_ORDER = {
    EventType.BEFORE_END_LEASE: 0,
    EventType.END_LEASE: 1,
    EventType.START_LEASE: 2,
}

#: Within one lease, an event runs only after every earlier one here has
#: finished (DONE or ERROR): an end never runs before its start finished,
#: even when the start is being retried.
EVENT_LIFECYCLE_ORDER = {
    EventType.START_LEASE: 0,
    EventType.BEFORE_END_LEASE: 1,
    EventType.END_LEASE: 2,
}

_L, _R, _E = LeaseStatus, ReservationStatus, EventStatus

TRANSITIONS = {
    LEASE: {
        _L.PENDING: frozenset({_L.STARTING, _L.IN_PROGRESS, _L.TERMINATING,
                               _L.TERMINATED, _L.ERROR}),
        _L.STARTING: frozenset({_L.ACTIVE, _L.PENDING, _L.ERROR}),
        _L.IN_PROGRESS: frozenset({_L.ACTIVE, _L.TIMEDOUT, _L.TERMINATING,
                                   _L.ERROR}),
        _L.ACTIVE: frozenset({_L.TERMINATING, _L.ERROR}),
        _L.TERMINATING: frozenset({_L.TERMINATED, _L.ERROR}),
        _L.ERROR: frozenset({_L.PENDING, _L.TERMINATING}),
        _L.TIMEDOUT: frozenset({_L.TERMINATING}),
        _L.TERMINATED: frozenset(),
    },
    RESERVATION: {
        _R.PENDING: frozenset({_R.ACTIVE, _R.DELETED, _R.ERROR}),
        _R.ACTIVE: frozenset({_R.DELETED, _R.ERROR}),
        _R.ERROR: frozenset({_R.PENDING, _R.DELETED}),
        _R.DELETED: frozenset(),
    },
    EVENT: {
        _E.UNDONE: frozenset({_E.IN_PROGRESS}),
        _E.IN_PROGRESS: frozenset({_E.DONE, _E.ERROR, _E.UNDONE}),
        _E.ERROR: frozenset({_E.UNDONE}),
        _E.DONE: frozenset(),
    },
}


class InvalidStatusTransition(exception.Conflict):
    msg_fmt = 'Invalid %(kind)s status transition: %(old)s -> %(new)s'

    def __init__(self, kind, old, new, reason=None):
        self.kind, self.old, self.new = kind, old, new
        message = self.msg_fmt % {'kind': kind, 'old': old, 'new': new}
        if reason:
            message = '%s (%s)' % (message, reason)
        super().__init__(message, kind=kind, old=old, new=new)


def _table(kind):
    try:
        return TRANSITIONS[kind]
    except KeyError:
        raise ValueError('unknown status kind %r; expected one of %s'
                         % (kind, ', '.join(TRANSITIONS))) from None


def can_transition(kind, old, new):
    """True when ``kind`` may go from status ``old`` to ``new``."""
    return new in _table(kind).get(old, ())


def check_transition(kind, old, new):
    """Raise :class:`InvalidStatusTransition` unless old -> new is allowed.

    :raises ValueError: ``kind`` is not 'lease', 'reservation' or 'event'.
    """
    table = _table(kind)
    if old not in table:
        raise InvalidStatusTransition(kind, old, new,
                                      'unknown status %s' % old)
    if new not in table:
        raise InvalidStatusTransition(kind, old, new,
                                      'unknown status %s' % new)
    allowed = table[old]
    if new not in allowed:
        if not allowed:
            reason = '%s is final' % old
        else:
            reason = 'allowed from %s: %s' % (old,
                                              ', '.join(sorted(allowed)))
        raise InvalidStatusTransition(kind, old, new, reason)


def is_terminal(kind, status):
    """True when ``status`` of ``kind`` has no way out."""
    table = _table(kind)
    if status not in table:
        raise ValueError('unknown %s status %r' % (kind, status))
    return not table[status]


def event_sort_key(event_type, time):
    """Sort key for events: by time, then by :data:`EVENT_TYPE_ORDER`."""
    try:
        return time, EVENT_TYPE_ORDER[event_type]
    except KeyError:
        raise ValueError('unknown event type %r' % (event_type,)) from None


#: What the reason of a nova-compute service that the engine's idle-host
#: action disabled starts with (nova_lease.periodic.idle): the engine
#: enables only those again, and a lease's start or update wakes them.
IDLE_HOST_REASON = wire.IDLE_HOST_REASON


def idle_disabled(disabled, reason):
    """True if a service (``disabled`` flag, its ``reason``) was disabled
    by the idle-host action.
    """
    return bool(disabled) and (reason or '').startswith(IDLE_HOST_REASON)
