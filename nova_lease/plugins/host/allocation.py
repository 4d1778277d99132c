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
"""Host allocation (physical:host): booking whole hosts for leases.

:func:`allocate` chooses and locks free hosts for the host
reservations of a lease in the booking pipeline's writer transaction
(nova_lease.booking; the type is nova_lease.plugins.host.rtype), with
whole-host allocations over ``[start, end + cleaning_time)``, under
per-host locks (``db.api.lock_hosts``), so that no host is ever booked
twice, even by concurrent requests in several nova-api processes. A
lease that cannot get ``min`` free hosts is refused with
:class:`NotEnoughHosts` (409) and leaves nothing behind; a best-effort
one hunts for the rest (:func:`hunt`). :func:`move_host_lease` and
:func:`extend_host_lease` re-book a lease whose dates change;
:func:`host_allocations` is Blazar's view of who holds each host.

Hosts are chosen among the registered ones
(:mod:`nova_lease.plugins.host.registry`) that match the request
(:mod:`nova_lease.plugins.host.matching`).
"""

import dataclasses
import datetime

from oslo_log import log as logging

from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import params as lease_params
from nova_lease.plugins.host import registry
from nova_lease.plugins.host import request as host_request
from nova_lease import resource_types as types

LOG = logging.getLogger(__name__)

RESOURCE_TYPE = types.HOST


class NotEnoughHosts(exception.Conflict):
    msg_fmt = '%(reason)s'


def booked_end(end, cleaning_minutes):
    """Where an allocation for a lease ending at ``end`` stops."""
    return end + datetime.timedelta(minutes=cleaning_minutes or 0)


def window_text(start, end, cleaning_minutes):
    text = '[%s, %s)' % (lease_params.format_short(start),
                         lease_params.format_short(end))
    if cleaning_minutes:
        text += ' plus %d minutes of cleaning time' % cleaning_minutes
    return text


def _pick(hosts, requests, busy_of, window):
    """Choose hosts for each request: [(field, [host rows])].

    Candidates are looked at best first, in small batches: one indexed
    query per batch tells which are booked over the window (``busy_of``),
    so a request rarely reads more than a few hosts' allocations.
    """
    taken = set()
    picks = []
    for field, request in requests:
        matching = registry.matching_hosts(hosts, request)
        chosen = []
        free = 0
        batch = max(16, 2 * request.max)
        for i in range(0, len(matching), batch):
            part = [h for h in matching[i:i + batch]
                    if h['hypervisor_hostname'] not in taken]
            busy = busy_of([h['hypervisor_hostname'] for h in part])
            for h in part:
                if h['hypervisor_hostname'] in busy:
                    continue
                free += 1
                if len(chosen) < request.max:
                    chosen.append(h)
            if len(chosen) >= request.max:
                break
        if len(chosen) < request.min:
            raise NotEnoughHosts(reason=(
                '%s: not enough free hosts for %s: %d reservable host(s) '
                'match the request, %d of them free, at least %d needed'
                % (field, window, len(matching), free, request.min)))
        taken.update(h['hypervisor_hostname'] for h in chosen)
        picks.append((field, chosen))
    return picks


class _RegistryChanged(Exception):
    pass


def allocate(session, requests, start, stop, window, exclude_reservations):
    """Pick, lock and re-check hosts in the writer ``session``.

    The cached host registry is checked against its fingerprint by the
    first query that reads allocations (one round trip for both).
    """
    cached = registry.cached_registry(session)
    if cached is None:
        hosts, fingerprint = registry.read_registry(session)
        checked = True
    else:
        (hosts, fingerprint), checked = cached, False
    excluded = set(exclude_reservations or ())
    known_busy = set()

    def busy_hosts(names):
        nonlocal checked
        if checked:
            busy = db_api.allocation_busy(session, names, start, stop)
        else:
            busy, current = db_api.allocation_busy(
                session, names, start, stop, fingerprint=True)
            checked = True
            if current != fingerprint:
                raise _RegistryChanged()
        return {host for host, reservation_id in busy
                if reservation_id not in excluded}

    def busy_of(names):
        return known_busy | busy_hosts(
            [n for n in names if n not in known_busy])

    locked = set()
    while True:
        refused = None
        try:
            picks = _pick(hosts, requests, busy_of, window)
        except NotEnoughHosts as e:
            picks, refused = None, e
        except _RegistryChanged:
            picks = None
        if not checked:
            # (No allocation was read: nothing matched.)
            checked = db_api.host_fingerprint(session) == fingerprint
        if refused is not None and checked:
            raise refused
        if picks is None or not checked:
            # The registry changed since this process read it.
            hosts, fingerprint = registry.read_registry(session)
            checked = True
            known_busy = set()
            continue
        names = sorted({h['hypervisor_hostname']
                        for _field, chosen in picks for h in chosen})
        # Lock what we chose, then look again: a concurrent writer may
        # have booked one of them after our first read (READ COMMITTED:
        # this read sees what the previous lock holder committed).
        db_api.lock_hosts(session, [n for n in names if n not in locked])
        locked.update(names)
        lost = busy_hosts(names)
        if not lost:
            return picks
        LOG.debug('Hosts %s were booked concurrently; choosing again',
                  ', '.join(sorted(lost)))
        known_busy |= lost


def allocation_rows(hosts, start, stop):
    return [{'host': h['hypervisor_hostname'], 'start_date': start,
             'end_date': stop, 'vcpus': h.get('vcpus') or 0,
             'memory_mb': h.get('memory_mb') or 0,
             'disk_gb': h.get('local_gb') or 0, 'whole_host': True}
            for h in hosts]


#: The key of a best-effort host reservation's properties that names the
#: hosts it took from the cloud (their servers are to be migrated away):
#: ``{'hosts': [hypervisor hostnames], 'services': {hypervisor hostname:
#: compute service host}}``.
BEST_EFFORT = 'best_effort'


def hunt(session, requests, start, stop, window, hunter):
    """The picks of a best-effort lease: the free reservable hosts each
    request can get, then ``hunter`` for the rest of its ``min``:
    ``hunter(session, field, request, needed, taken)`` -> host rows of
    ``needed`` more hosts (not among the hypervisor hostnames ``taken``),
    locked, whose servers are to be migrated away; or it raises a 409.

    :returns: ``(picks, {field: [hosts hunted]})``.
    """
    relaxed = [(field, dataclasses.replace(request, min=0))
               for field, request in requests]
    picks = allocate(session, relaxed, start, stop, window, ())
    taken = {h['hypervisor_hostname'] for _f, chosen in picks
             for h in chosen}
    hunted, out = {}, []
    for (field, request), (_f, chosen) in zip(requests, picks):
        needed = request.min - len(chosen)
        if needed > 0:
            extra = hunter(session, field, request, needed, set(taken))
            names = [h['hypervisor_hostname'] for h in extra]
            taken.update(names)
            hunted[field] = {
                'hosts': names,
                'services': {h['hypervisor_hostname']:
                             h.get('service_host') or
                             h['hypervisor_hostname'] for h in extra}}
            chosen = list(chosen) + list(extra)
        out.append((field, chosen))
    return out, hunted


def move_host_lease(session, lease, reservations, start, end,
                    cleaning_minutes=0):
    """Re-book the host ``reservations`` of ``lease`` for [start, end).

    Runs in the caller's writer ``session`` (which also updates the lease
    and its events). The hosts the lease holds are kept when they are
    free over the new window; otherwise hosts are chosen again.

    :returns: ``{reservation_id: [hostnames]}``.
    :raises NotEnoughHosts: (409) the caller's transaction must roll back.
    """
    stop = booked_end(end, cleaning_minutes)
    window = window_text(start, end, cleaning_minutes)
    own = [r['id'] for r in reservations]
    current = {}
    for a in db_api.allocation_list(session, reservation_id=own):
        current.setdefault(a['reservation_id'], []).append(a)
    names = sorted({a['host'] for allocs in current.values()
                    for a in allocs})
    db_api.lock_hosts(session, names)
    busy = {a['host'] for a in db_api.allocation_list(
        session, hosts=names, start=start, end=stop)
        if a['reservation_id'] not in own}
    result = {}
    if not busy:
        # Same hosts, new dates.
        for r in reservations:
            for a in current.get(r['id'], ()):
                db_api.allocation_update(session, a['id'], {
                    'start_date': start, 'end_date': stop})
            result[r['id']] = sorted(
                a['host'] for a in current.get(r['id'], ()))
        return result
    requests = [('reservation %s' % r['id'],
                 host_request.HostRequest.from_properties(r['properties']))
                for r in reservations]
    picks = allocate(session, requests, start, stop, window, own)
    for r, (_field, chosen) in zip(reservations, picks):
        db_api.allocation_destroy_by_reservation(session, r['id'])
        for row in allocation_rows(chosen, start, stop):
            db_api.allocation_create(session,
                                     dict(row, reservation_id=r['id']))
        result[r['id']] = sorted(h['hypervisor_hostname'] for h in chosen)
    return result


def extend_host_lease(session, lease, reservations, new_end,
                      cleaning_minutes=0):
    """Move the end of the host ``reservations`` of a started lease,
    keeping their hosts.

    Shortening always works; extending works only if every host of the
    lease is free until the new end (plus cleaning time).

    :raises NotEnoughHosts: (409) a host is booked by another lease.
    """
    stop = booked_end(new_end, cleaning_minutes)
    own = {r['id'] for r in lease['reservations']}
    allocations = db_api.allocation_list(session, reservation_id=[
        r['id'] for r in reservations])
    names = sorted({a['host'] for a in allocations})
    db_api.lock_hosts(session, names)
    if new_end > lease['end_date']:
        clash = [a for a in db_api.allocation_list(
            session, hosts=names, start=booked_end(lease['end_date'],
                                                   cleaning_minutes),
            end=stop) if a['reservation_id'] not in own]
        if clash:
            raise NotEnoughHosts(reason=(
                "end_date: the lease cannot be extended to %s: host(s) %s "
                "are reserved by another lease from %s" % (
                    lease_params.format_short(new_end),
                    ', '.join(sorted({a['host'] for a in clash})),
                    lease_params.format_short(
                        min(a['start_date'] for a in clash)))))
    for a in allocations:
        db_api.allocation_update(session, a['id'], {'end_date': stop})


def update_host_reservation(session, reservation, request, start, end,
                            cleaning_minutes=0, started=False,
                            field='reservation'):
    """Re-book one host reservation whose request changed (Blazar's rules).

    In the caller's writer ``session``: its hosts that no longer match
    the request, and those over its ``max``, leave it (refused on a
    started lease: its hosts stay its own); free matching hosts join it up
    to ``max``, at least up to ``min`` (409 otherwise). The reservation's
    properties become the request's.

    :returns: ``(added, removed)``: hypervisor hostnames.
    :raises NotEnoughHosts: (409) the caller's transaction must roll back.
    """
    stop = booked_end(end, cleaning_minutes)
    window = window_text(start, end, cleaning_minutes)
    allocations = sorted(db_api.allocation_list(
        session, reservation_id=reservation['id']), key=lambda a: a['host'])
    names = sorted({a['host'] for a in allocations})
    db_api.lock_hosts(session, names)
    hosts, _fingerprint = registry.read_registry(session)
    matching = {h['hypervisor_hostname']
                for h in registry.matching_hosts(hosts, request)}
    kept = [a for a in allocations if a['host'] in matching]
    removed = [a for a in allocations if a['host'] not in matching]
    removed += kept[request.max:]
    kept = kept[:request.max]
    if removed and started:
        raise NotEnoughHosts(reason=(
            'Not enough hosts available (%s: the lease has started, and '
            'host(s) %s would leave it: a started host reservation keeps '
            'its hosts)' % (field, ', '.join(sorted(
                a['host'] for a in removed)))))
    added = []
    if len(kept) < request.max:
        more = dataclasses.replace(request,
                                   min=max(0, request.min - len(kept)),
                                   max=request.max - len(kept))
        [(_f, chosen)] = allocate(session, [(field, more)], start, stop,
                                  window, ())
        for row in allocation_rows(chosen, start, stop):
            db_api.allocation_create(session,
                                     dict(row, reservation_id=reservation[
                                         'id']))
            added.append(row['host'])
    for a in removed:
        db_api.allocation_destroy(session, a['id'])
    db_api.reservation_update(session, reservation['id'],
                              {'properties': request.properties()},
                              fetch=False)
    return added, sorted(a['host'] for a in removed)


def host_allocations(db, hosts=None, lease_id=None, reservation_id=None,
                     start=None, end=None):
    """Blazar's allocations: ``[{'resource_id', 'reservations': [...]}]``.

    One entry per registered host (``hosts``: host rows; all by default),
    each listing the reservations that hold it (``id``, ``lease_id``,
    ``start_date``, ``end_date``, as booked).
    """
    with db.reader() as session:
        if hosts is None:
            hosts = db_api.host_list(session)
        allocations = db_api.allocation_list(
            session, start=start, end=end, lease_id=lease_id,
            reservation_id=reservation_id)
        # Any reservation's (an instance lease's allocation on a host
        # registered later names its lease too).
        leases = db_api.reservation_lease_ids(
            session, [a['reservation_id'] for a in allocations])
    by_host = {}
    for a in allocations:
        by_host.setdefault(a['host'], []).append({
            'id': a['reservation_id'],
            'lease_id': leases.get(a['reservation_id']),
            'start_date': a['start_date'], 'end_date': a['end_date']})
    filtered = lease_id is not None or reservation_id is not None
    result = []
    for host in hosts:
        items = by_host.get(host['hypervisor_hostname'], [])
        if filtered and not items:
            continue
        result.append({'resource_id': str(host['id']),
                       'reservations': items})
    return result


def idle_periods(bookings, start, end):
    """The periods of ``[start, end)`` that ``bookings`` leave free.

    :param bookings: ``(start, end)`` pairs of one host (its allocations
        as booked, cleaning time included).
    :returns: ``(periods, until)``: the free ``(start, end)`` pairs
        within the window, and when the host is next booked at or after
        ``start`` (None: never, as far as the calendar knows).
    """
    periods = []
    cursor = start
    for b_start, b_end in sorted(bookings):
        if b_end <= cursor:
            continue
        if b_start >= end:
            break
        if b_start > cursor:
            periods.append((cursor, b_start))
        cursor = max(cursor, b_end)
    if cursor < end:
        periods.append((cursor, end))
    after = [b_start for b_start, b_end in bookings if b_end > start]
    until = max(min(after), start) if after else None
    return periods, until


def idle_hosts(db, start, end, min_hours=0.0):
    """Registered hosts free for at least ``min_hours`` in [start, end).

    ``[{'host': host row, 'periods': [(start, end)], 'idle_until':
    datetime or None}]``, the periods at least ``min_hours`` long.
    """
    with db.reader() as session:
        hosts = db_api.host_list(session)
        allocations = db_api.allocation_list(session, end=None,
                                             start=start)
    by_host = {}
    for a in allocations:
        by_host.setdefault(a['host'], []).append((a['start_date'],
                                                  a['end_date']))
    shortest = datetime.timedelta(hours=min_hours)
    result = []
    for host in hosts:
        periods, until = idle_periods(
            by_host.get(host['hypervisor_hostname'], ()), start, end)
        periods = [(s, e) for s, e in periods if e - s >= shortest]
        if periods:
            result.append({'host': host, 'periods': periods,
                           'idle_until': until})
    return result


def attach_hosts(db, leases):
    """Give each host reservation of ``leases`` its ``hosts``: the hosts
    it was allocated (``{'hypervisor_hostname', 'vcpus', 'memory_mb',
    'local_gb'}``, by name), in place; returns ``leases``.

    A host no longer registered keeps the sizes its allocation recorded.
    """
    ids = [r['id'] for lease in leases for r in lease['reservations']
           if r['resource_type'] == RESOURCE_TYPE]
    if not ids:
        return leases
    with db.reader() as session:
        allocations = db_api.allocation_list(session, reservation_id=ids)
        names = sorted({a['host'] for a in allocations})
        hosts = {h['hypervisor_hostname']: h for h in db_api.host_list(
            session, hostnames=names)} if names else {}
    by_reservation = {}
    for a in allocations:
        host = hosts.get(a['host']) or {'vcpus': a['vcpus'],
                                        'memory_mb': a['memory_mb'],
                                        'local_gb': a['disk_gb']}
        by_reservation.setdefault(a['reservation_id'], {})[a['host']] = {
            'hypervisor_hostname': a['host'], 'vcpus': host['vcpus'],
            'memory_mb': host['memory_mb'], 'local_gb': host['local_gb']}
    for lease in leases:
        for r in lease['reservations']:
            if r['resource_type'] == RESOURCE_TYPE:
                found = by_reservation.get(r['id'], {})
                r['hosts'] = [found[name] for name in sorted(found)]
    return leases
