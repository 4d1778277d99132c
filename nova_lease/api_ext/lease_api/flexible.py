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
"""Flexible windows and offers as the lease API shows them.

A lease body with ``"start_date": "earliest"`` gives a ``duration``
instead of an ``end_date``, and optionally ``earliest_start`` (default
now) and ``latest_start`` (default ``earliest_start`` + 30 days). The
body is checked as a lease from ``earliest_start`` to ``earliest_start +
duration`` (every rule of a lease body applies to it), then the booking
pipeline books it at the first offer, in its transaction
(nova_lease.booking.offers). :func:`offer_view` is how an offer is
shown, here and by ``GET /offers``.
"""

from nova_lease.booking import offers
from nova_lease import lease_events
from nova_lease import params as lease_params
from nova_lease.policies import capacity as capacity_policies
from nova_lease import policy

_error = lease_params.error


def offer_view(offer, show_hosts):
    """An offer as the API shows it: ``hosts`` are names for an admin,
    else their number (distinct hosts).
    """
    return {
        'start_date': lease_params.format_datetime(offer.start),
        'end_date': lease_params.format_datetime(offer.end),
        'hosts': sorted(offer.hosts) if show_hosts
        else len(set(offer.hosts)),
        'score': offer.score,
    }


def shows_hosts(ctx):
    """Whether ``ctx`` sees host names (the whole cloud's capacity)."""
    return policy.authorize(ctx, capacity_policies.ALL,
                            {'project_id': ctx.project_id}, fatal=False)


def window(body, now):
    """``(the body as a lease from earliest_start, partial window)`` of
    a flexible lease body (``start_date`` "earliest").

    :raises LeaseParamError: (400) naming ``duration``,
        ``earliest_start`` or ``latest_start``.
    """
    duration = lease_params.parse_duration(body['duration'], 'duration')
    raw = body.get('earliest_start')
    earliest = now
    if raw is not None:
        earliest = lease_params.parse_datetime(raw, 'earliest_start')
        lease_params.check_not_past(earliest, now, 'earliest_start')
        earliest = max(earliest, now)
    raw = body.get('latest_start')
    if raw is None:
        latest = lease_params.later(earliest, offers.DEFAULT_SPAN,
                                    'earliest_start')
    else:
        latest = lease_params.parse_datetime(raw, 'latest_start')
        if latest < earliest:
            raise _error('latest_start', 'order', "'latest_start' (%s) is "
                         "before 'earliest_start' (%s)",
                         lease_params.format_short(latest),
                         lease_params.format_short(earliest))
    if body.get('end_date') is not None:
        raise _error('end_date', 'exclusive', "a flexible window "
                     "('start_date': 'earliest') gives 'duration', not "
                     "'end_date'")
    end = lease_params.later(earliest, duration, 'duration')
    lease = {k: v for k, v in body.items()
             if k not in ('duration', 'earliest_start', 'latest_start')}
    lease['start_date'] = 'now' if earliest <= now else \
        lease_params.format_datetime(earliest)
    lease['end_date'] = lease_params.format_datetime(end)
    return lease, {'duration': duration, 'latest': latest}


def booking_window(partial, params, items, before_end):
    """The pipeline's :class:`nova_lease.booking.offers.Flexible` of a
    flexible lease parsed as ``params`` (from its earliest start).
    """
    offers.only_item(items)
    if params.lease_type in ('immediate', 'best_effort'):
        raise _error('lease_type', 'unsupported', "'lease_type': %s "
                     "leases start now; a flexible window "
                     "('start_date': 'earliest') starts at its first "
                     "offer", params.lease_type)
    return offers.Flexible(
        duration=partial['duration'], earliest=params.start,
        latest=max(partial['latest'], params.start),
        before=None if before_end is None else params.end - before_end,
        events=lease_events.lease_events)


def conflict(error, ctx):
    """The 409 of a flexible lease without an offer, its body carrying
    the next offers after the window.
    """
    show = shows_hosts(ctx)
    error.extra_body = {'offers': [offer_view(o, show)
                                   for o in error.offers]}
    return error
