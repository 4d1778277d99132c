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
"""Offers and flexible-window leases (the I/O around the pure search).

:func:`search` asks each reservation type which hosts a request may use
(``ReservationType.offer_hosts``: the registered hosts that match it)
and runs :func:`nova_lease.calendar.offers.find_offers` over their
allocations: those of a calendar given by the caller (the lease API's
``GET /offers`` passes the scheduler's snapshot, current through the
change journal) or, else, read in the caller's transaction. The booking
pipeline (:mod:`.pipeline`) books a flexible lease with ``lock=True``:
the candidate hosts are locked first (the locks host and slot bookings
take), their allocations read fresh, and the lease is booked at the
first offer in the same transaction, so that two racing requests never
get the same slot.

A flexible lease holds one reservation: its offers are that
reservation's.
"""

import dataclasses
import datetime
import typing

from nova_lease import calendar
from nova_lease.calendar import offers as calendar_offers
from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import params as lease_params
from nova_lease import status

#: The default span of starts searched (``latest`` - ``earliest``), and
#: the span searched after a window that had none, for the 409.
DEFAULT_SPAN = datetime.timedelta(days=30)
#: The default and largest number of offers.
DEFAULT_LIMIT = 5
MAX_LIMIT = 50

DEAD_RESERVATIONS = (str(status.ReservationStatus.DELETED),
                     str(status.ReservationStatus.ERROR))
DEAD_LEASES = (str(status.LeaseStatus.TERMINATED),
               str(status.LeaseStatus.ERROR))


@dataclasses.dataclass
class Flexible:
    """A lease's window, to be chosen: starts in ``[earliest, latest]``,
    lasting ``duration``; ``before`` is how long before its end the
    before-end event runs (None: none); ``events(start, end,
    before_end)`` makes its event rows once the start is chosen.
    """

    duration: datetime.timedelta
    earliest: datetime.datetime
    latest: datetime.datetime
    before: typing.Optional[datetime.timedelta]
    events: typing.Callable


class NoOffer(exception.Conflict):
    """No start in the window fits (409); ``offers`` are the next ones
    after it.
    """

    msg_fmt = ('no start between %(earliest)s and %(latest)s fits '
               '%(field)s for %(duration)s: %(reason)s')

    def __init__(self, offers=(), **kwargs):
        self.offers = list(offers)
        super().__init__(**kwargs)


def only_item(items):
    """The one item of a flexible lease or an offer request (400 for
    none or several).
    """
    if len(items) != 1:
        raise lease_params.error(
            'reservations', 'unsupported', "'reservations': a lease with "
            "a flexible window ('start_date': 'earliest') holds exactly "
            "one reservation, got %d", len(items))
    return items[0]


def _name(item, key):
    """How a refusal names ``key`` of ``item``'s request: inside a lease
    body (``reservations[0].min``), or as the query parameter.
    """
    if item.field.startswith('reservations'):
        return '%s.%s' % (item.field, key)
    return key


def search(session, conf, item, now, duration, earliest, latest, limit,
           cal=None, lock=False, cleaning=None, strict=False):
    """The first ``limit`` offers (nova_lease.calendar.offers.Offer) for
    ``item`` (a pipeline Item), and the number of candidate hosts.

    :param cal: a Calendar of the allocations to search (None: read in
        ``session``'s transaction).
    :param lock: lock the candidate hosts first (a writer session).
    :param strict: a request that no empty calendar of its candidate
        hosts would hold is a 400 naming the field (else: no offer).
    :raises LeaseParamError: (strict) naming ``min`` or ``amount``.
    """
    if cleaning is None:
        cleaning = conf.nova_lease_api.cleaning_time
    clean = datetime.timedelta(minutes=cleaning or 0)
    request, names, sizes = item.type.offer_hosts(session, conf,
                                                  item.request)
    if not names:
        return [], 0
    never = calendar_offers.possible(names, request, sizes)
    if strict and never is not None:
        field = _name(item, never[0])
        raise lease_params.error(field, 'range', "'%s': %s", field,
                                 never[1])
    if lock:
        db_api.lock_hosts(session, sorted(names))
    if cal is None:
        # (Booking under the locks: what the window needs, no more; the
        # scores see what comes after it as free.)
        rows = db_api.window_allocation_items(
            session, now, DEAD_RESERVATIONS, DEAD_LEASES, earliest,
            latest + duration + clean, hosts=names)
        cal = calendar.Calendar({}, rows) if rows else None
    found = calendar_offers.find_offers(
        cal, names, request, duration, earliest, latest, limit,
        cleaning=clean, sizes=sizes)
    return found, len(names)


def none_reason(item, candidates, earliest, latest, duration):
    """Why no offer was found (for an empty answer and a 409)."""
    if not candidates:
        return ('no registered host matches %s' % item.field)
    return ('%d registered host(s) match %s, but it fits on none of them '
            'for %s at any start from %s to %s' % (
                candidates, item.field, lease_params.format_duration(
                    duration), lease_params.format_short(earliest),
                lease_params.format_short(latest)))


def choose_start(session, booking):
    """Book ``booking`` (a pipeline Booking with ``flexible``) at its
    first offer: lock the candidate hosts, read their allocations, set
    the lease's dates and events. In the pipeline's writer ``session``.

    :raises NoOffer: (409) carrying the next offers after the window.
    """
    flex = booking.flexible
    item = only_item(booking.items)
    earliest = max(flex.earliest, booking.now)
    found, candidates = search(session, booking.conf, item, booking.now,
                               flex.duration, earliest, flex.latest, 1,
                               lock=True, cleaning=booking.cleaning)
    if not found:
        later, _n = search(session, booking.conf, item, booking.now,
                           flex.duration, flex.latest,
                           flex.latest + DEFAULT_SPAN, DEFAULT_LIMIT,
                           cleaning=booking.cleaning)
        raise NoOffer(
            offers=later, earliest=lease_params.format_short(earliest),
            latest=lease_params.format_short(flex.latest),
            field=item.field,
            duration=lease_params.format_duration(flex.duration),
            reason=none_reason(item, candidates, earliest, flex.latest,
                               flex.duration))
    start = found[0].start
    end = start + flex.duration
    before_end = None if flex.before is None else end - flex.before
    booking.values.update(start_date=start, end_date=end,
                          before_end_date=before_end)
    booking.events = flex.events(start, end, before_end)
