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
"""Consumption of leases over a window, for billing (pure: no I/O).

For each lease overlapping ``[start, end)``, two sets of figures, in
hours (a quantity times the hours it was held):

``reserved``
    what the lease promised over the part of the window it overlaps: its
    period is ``[start_date, end_date)`` (the lease's dates; a lease
    ended early -- deleted, or all its servers deleted -- stops at the
    time its end was recorded), clipped to the window. Future promises
    inside the window count: ``reserved`` is the planned consumption too.

``used``
    what the engine actually provided, as the side database records it:
    from the time the lease's ``start_lease`` event was done (the start
    succeeded; a lease that never started has none) to the time its
    ``end_lease`` event was done or failed (or ``now`` for a lease still
    running), clipped to the lease's own dates and to the window. It is
    never more than ``reserved``. It does not look inside a server: a
    server stopped or paused by its owner still holds its capacity, and
    counts.

Per reservation (``hosts`` of a host reservation: the hosts it was
allocated, each with its capacity):

* ``physical:host``: per host, 1 host and the host's vCPUs, RAM (MB) and
  disk (GB), the whole host;
* ``virtual:instance`` (one server): the flavor's vCPUs, RAM and disk;
  once its server is deleted (the reservation is ``deleted``), nothing
  after that time, neither reserved nor used; a reservation whose server
  never started (still ``pending``) has no ``used``;
* ``flavor:instance`` (Blazar's flavor-based instance reservations):
  ``amount`` times the flavor's sizes, the slots held whether or not
  servers were booted into them.

``lease_hours`` is the lease's own period (once per lease, whatever it
holds). A deleted lease is gone from the database: its figures are in
its ``lease.end`` notification (see nova_lease.notifications).
"""

import datetime

from nova_lease import resource_types as types

#: The figures of a lease, in this order.
FIELDS = ('lease_hours', 'host_hours', 'vcpu_hours', 'memory_mb_hours',
          'disk_gb_hours')

#: Reservation statuses after which a reservation holds nothing.
_GONE = ('deleted', 'error')

START = 'start_lease'
END = 'end_lease'

#: The last_error of an event that did not run (nova_lease.plugins.
#: instance.leases cancels, the engine skips).
_NOT_RUN = ('cancelled:', 'skipped:')

#: Decimals of the hours shown.
DIGITS = 4


def zero():
    return dict.fromkeys(FIELDS, 0.0)


def _hours(start, end):
    if start is None or end is None or end <= start:
        return 0.0
    return (end - start).total_seconds() / 3600.0


def _clip(period, start, end):
    """``period`` (a pair) within [start, end); None if empty."""
    if period is None:
        return None
    s, e = max(period[0], start), min(period[1], end)
    return (s, e) if s < e else None


def _event(lease, event_type):
    for event in lease.get('events') or ():
        if event.get('event_type') == event_type:
            return event
    return None


def _ran(event):
    return (event is not None and event.get('status') == 'DONE' and
            not (event.get('last_error') or '').startswith(_NOT_RUN))


def ended_at(lease):
    """When the lease's end was recorded (its end_lease event done, run
    or cancelled by an early end), or None.
    """
    event = _event(lease, END)
    if event is not None and event.get('status') in ('DONE', 'ERROR'):
        return event.get('updated_at')
    return None


def reserved_period(lease):
    """``(start, end)`` the lease promised (see the module doc)."""
    end = lease['end_date']
    ended = ended_at(lease)
    if ended is not None:
        end = min(end, ended)
    return (lease['start_date'], end) if lease['start_date'] < end else None


def used_period(lease, now):
    """``(start, end)`` the lease was provided, or None (never started).
    """
    started = _event(lease, START)
    if not _ran(started) or started.get('updated_at') is None:
        return None
    stopped = ended_at(lease)
    if stopped is None:
        stopped = now
    return _clip((started['updated_at'], stopped), lease['start_date'],
                 lease['end_date'])


def _units(reservation):
    """``[(hosts, vcpus, memory_mb, disk_gb)]`` one reservation holds."""
    facts = types.of(reservation)
    props = reservation.get('properties') or {}
    if facts is None:
        # (A type of no resource: the noop plugin's, in benchmarks.)
        return []

    def size(name, where=props):
        try:
            return max(0, int(where.get(name) or 0))
        except (TypeError, ValueError):
            return 0

    if facts.whole_hosts:
        return [(1, size('vcpus', h), size('memory_mb', h),
                 size('local_gb', h) or size('disk_gb', h))
                for h in reservation.get('hosts') or ()]
    amount = size('amount') if facts.counts_amount else 1
    return [(0, amount * size('vcpus'), amount * size('memory_mb'),
             amount * size('disk_gb'))]


def amounts(reservation):
    """What a reservation holds, in all: ``{'amount', 'hosts', 'vcpus',
    'memory_mb', 'disk_gb'}`` (``amount``: hosts, servers or slots;
    ``hosts``: the hostnames of a host reservation, else empty).
    """
    facts = types.of(reservation)
    units = _units(reservation)
    hosts = [h.get('hypervisor_hostname')
             for h in reservation.get('hosts') or ()] \
        if facts and facts.whole_hosts else []
    if facts is None:
        amount = 0
    elif facts.whole_hosts:
        amount = len(units)
    elif facts.one_server:
        amount = 1
    else:
        props = reservation.get('properties') or {}
        try:
            amount = max(0, int(props.get('amount') or 0))
        except (TypeError, ValueError):
            amount = 0
    return {'amount': amount, 'hosts': hosts,
            'vcpus': sum(u[1] for u in units),
            'memory_mb': sum(u[2] for u in units),
            'disk_gb': sum(u[3] for u in units)}


def _add(totals, units, hours):
    if hours <= 0:
        return
    for hosts, vcpus, memory_mb, disk_gb in units:
        totals['host_hours'] += hosts * hours
        totals['vcpu_hours'] += vcpus * hours
        totals['memory_mb_hours'] += memory_mb * hours
        totals['disk_gb_hours'] += disk_gb * hours


def _reservation_period(reservation, period, used):
    """``period`` cut at the reservation's end (its server deleted)."""
    if period is None:
        return None
    status = reservation.get('status')
    if used and status == 'pending':
        return None
    if status in _GONE and reservation.get('updated_at') is not None:
        return _clip(period, period[0], reservation['updated_at'])
    return period


def lease_usage(lease, start, end, now):
    """``{'reserved': {field: hours}, 'used': {field: hours}}`` of one
    lease within [start, end) (hours not rounded).

    :param lease: a lease dict (as the database returns it) with its
        ``events`` and ``reservations``; a host reservation carries
        ``hosts``: the hosts it was allocated (dicts with ``vcpus``,
        ``memory_mb``, ``local_gb``).
    :param now: the present: a lease still running is used until then.
    """
    out = {}
    periods = {'reserved': reserved_period(lease),
               'used': used_period(lease, now)}
    for kind, period in periods.items():
        totals = zero()
        window = _clip(period, start, end)
        totals['lease_hours'] = _hours(*window) if window else 0.0
        if window is not None:
            for reservation in lease.get('reservations') or ():
                cut = _clip(_reservation_period(reservation, period,
                                                kind == 'used'),
                            start, end)
                if cut is not None:
                    _add(totals, _units(reservation), _hours(*cut))
        out[kind] = totals
    return out


def _rounded(totals):
    return {k: round(v, DIGITS) for k, v in totals.items()}


def overlaps(lease, start, end):
    period = reserved_period(lease)
    return period is not None and period[0] < end and period[1] > start


def usage(leases, start, end, now):
    """The usage of ``leases`` in [start, end), per project and lease.

    ``[{'project_id', 'reserved': {...}, 'used': {...}, 'leases': [{'id',
    'name', 'status', 'lease_type', 'user_id', 'start_date',
    'end_date', 'reserved', 'used'}]}]`` ordered by project id, the
    leases as given (those that do not overlap the window left out),
    hours rounded to :data:`DIGITS` decimals.

    :raises ValueError: end is not after start.
    """
    if end <= start:
        raise ValueError('end (%s) must be after start (%s)' % (end, start))
    projects = {}
    for lease in leases:
        if not overlaps(lease, start, end):
            continue
        figures = lease_usage(lease, start, end, now)
        project = projects.setdefault(lease['project_id'], {
            'project_id': lease['project_id'], 'reserved': zero(),
            'used': zero(), 'leases': []})
        for kind in ('reserved', 'used'):
            for field, value in figures[kind].items():
                project[kind][field] += value
        project['leases'].append({
            'id': lease['id'], 'name': lease.get('name'),
            'status': lease.get('status'),
            'lease_type': lease.get('lease_type'),
            'user_id': lease.get('user_id'),
            'start_date': lease['start_date'],
            'end_date': lease['end_date'],
            'reserved': _rounded(figures['reserved']),
            'used': _rounded(figures['used'])})
    result = []
    for project_id in sorted(projects):
        project = projects[project_id]
        project['reserved'] = _rounded(project['reserved'])
        project['used'] = _rounded(project['used'])
        result.append(project)
    return result


def whole_lease(lease, now):
    """The figures of the whole lease (its reserved and used hours
    whatever the window), rounded: what ``lease.end`` carries.
    """
    start = min(lease['start_date'], now)
    end = max(lease['end_date'], now) + datetime.timedelta(seconds=1)
    figures = lease_usage(lease, start, end, now)
    return {k: _rounded(v) for k, v in figures.items()}
