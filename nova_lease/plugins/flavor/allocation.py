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
"""Instance slots of Blazar instance reservations, booked on hosts.

:func:`pick_slots` runs in the lease's writer transaction. For each
request it locks every registered (reservable) host that matches it
(``db.api.lock_hosts``: the lock host leases and other slot bookings
take), then reads those hosts' allocations over the window, fresh:

* a host with a whole-host allocation (a host lease, its cleaning time
  included) overlapping the window is not used;
* on the others, the peak of what other slots take over the window
  (vCPUs, RAM and disk, each at its own peak: conservative) is taken
  from the host's size; what is left holds ``floor(left / slot)`` slots.

Then: ``affinity`` true puts every slot on one host that can hold them
all, false each on a host of its own, null wherever they fit; hosts that
are fullest already are used first (Blazar's order: fewer hosts left
half-used). Each slot is one allocation row (``whole_host`` false) over
``[start, end)``; host leases see the host busy then
(``db.api.allocation_busy``).
"""

import collections
import dataclasses

from oslo_log import log as logging

from nova_lease.calendar import offers
from nova_lease.capacity import inventory as nova_inventory
from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import params as lease_params
from nova_lease.plugins.host import registry
from nova_lease import status

LOG = logging.getLogger(__name__)

DEAD_RESERVATIONS = (str(status.ReservationStatus.DELETED),
                     str(status.ReservationStatus.ERROR))
DEAD_LEASES = (str(status.LeaseStatus.TERMINATED),
               str(status.LeaseStatus.ERROR))


class NotEnoughSlots(exception.Conflict):
    msg_fmt = '%(reason)s'


def _peaks(rows):
    """{host: (vcpus, memory_mb, disk_gb) peak, or None if whole-host}."""
    by_host = collections.defaultdict(list)
    for (_id, _rid, host, start, end, vcpus, memory_mb, disk_gb,
         whole) in rows:
        by_host[host].append((start, end, vcpus, memory_mb, disk_gb, whole))
    peaks = {}
    for host, items in by_host.items():
        if any(item[5] for item in items):
            peaks[host] = None
            continue
        peak = [0, 0, 0]
        # The load is highest at the start of some item.
        for start in sorted({item[0] for item in items}):
            load = [0, 0, 0]
            for s, e, v, m, d, _w in items:
                if s <= start < e:
                    load[0] += v
                    load[1] += m
                    load[2] += d
            peak = [max(a, b) for a, b in zip(peak, load)]
        peaks[host] = tuple(peak)
    return peaks


def capacities(conf):
    """{hypervisor hostname: HostCapacity} as placement offers it:
    ``(total - reserved) * allocation ratio`` of each compute node
    (nova_lease.capacity.inventory; read by nova-api).

    A slot must fit there: a host's raw size (the registry's) counts the
    memory Nova keeps for the host itself, so a host full by its raw size
    would refuse its last promised boot.
    """
    hosts, _cached = nova_inventory.default_inventory(conf).compute_hosts()
    return {h.name: h.capacity for h in hosts if h.capacity is not None}


def size_of(host, sizes):
    """(vcpus, memory_mb, disk_gb) a registered host offers slots."""
    known = (sizes or {}).get(host['hypervisor_hostname'])
    if known is not None:
        return tuple(known)
    return ((host.get('vcpus') or 0), (host.get('memory_mb') or 0),
            (host.get('local_gb') or 0))


def _free_slots(host, peak, request, sizes=None):
    if peak is None:
        return 0
    size = size_of(host, sizes)
    left = (size[0] - peak[0], size[1] - peak[1], size[2] - peak[2])
    counts = [left[i] // size for i, size in enumerate(
        (request.vcpus, request.memory_mb, request.disk_gb)) if size > 0]
    return max(0, min(counts)) if counts else 0


def _choose(request, free):
    """[host name per slot] from {host: free slots}, or None."""
    return offers.choose_slots(free, request, free)


def _describe(request):
    rule = {True: 'all on one host', False: 'each on its own host',
            None: 'anywhere'}[request.affinity]
    return '%d instance(s) of %d vCPU, %d MB RAM, %d GB disk (%s)' % (
        request.amount, request.vcpus, request.memory_mb, request.disk_gb,
        rule)


def pick_slots(session, requests, start, end, now, busy_hosts=(),
               only=None, sizes=None):
    """Book the slots of ``requests`` in the writer ``session``.

    :param requests: ``[(field, SlotRequest)]``.
    :param busy_hosts: hosts this lease's host reservations take.
    :param only: None, or the only hosts to use.
    :param sizes: :func:`capacities` (None: the hosts' raw sizes).
    :returns: ``[[allocation dict per slot]]``, one list per request.
    :raises NotEnoughSlots: (409, Blazar's message first) a request does
        not fit.
    """
    hosts, _fingerprint = registry.read_registry(session)
    planned = collections.defaultdict(list)
    taken = set(busy_hosts)
    window = '[%s, %s)' % (lease_params.format_short(start),
                           lease_params.format_short(end))
    out = []
    for field, request in requests:
        matching = [h for h in registry.matching_hosts(
            hosts, request.host_request())
            if h['hypervisor_hostname'] not in taken and
            (only is None or h['hypervisor_hostname'] in only)]
        names = sorted(h['hypervisor_hostname'] for h in matching)
        if names:
            db_api.lock_hosts(session, names)
            rows = db_api.window_allocation_rows(
                session, now, DEAD_RESERVATIONS, DEAD_LEASES, start, end,
                hosts=names) + planned_rows(planned, start, end)
        else:
            rows = []
        peaks = _peaks(rows)
        free = {h['hypervisor_hostname']: _free_slots(
            h, peaks.get(h['hypervisor_hostname'], (0, 0, 0)), request,
            sizes) for h in matching}
        chosen = _choose(request, free)
        if chosen is None:
            raise NotEnoughSlots(reason=(
                'Not enough hosts available (%s: %s over %s: %d registered '
                'host(s) match, with %d free slot(s) on %d of them)' % (
                    field, _describe(request), window, len(matching),
                    sum(free.values()),
                    sum(1 for n in free.values() if n))))
        allocations = [{'host': host, 'start_date': start, 'end_date': end,
                        'vcpus': request.vcpus,
                        'memory_mb': request.memory_mb,
                        'disk_gb': request.disk_gb, 'whole_host': False}
                       for host in chosen]
        for allocation in allocations:
            planned[allocation['host']].append(allocation)
        out.append(allocations)
    return out


def planned_rows(planned, start, end):
    """The allocations this lease books, as window_allocation_rows has
    them (so that its next request sees them).
    """
    return [(None, None, host, a['start_date'], a['end_date'], a['vcpus'],
             a['memory_mb'], a['disk_gb'], False)
            for host, items in planned.items() for a in items
            if a['start_date'] < end and a['end_date'] > start]


def rebook_slots(session, lease, own, start, end, now, sizes=None):
    """Move the slots of ``lease``'s instance reservations ``own`` to
    ``[start, end)``, on the same hosts.

    Shortening always works; a later end or an other start works only if
    each host still holds the reservation's slots next to what the other
    reservations take there over the new window (Blazar re-checks an
    update the same way).

    :raises NotEnoughSlots: (409) the caller's transaction must roll back.
    """
    if not own:
        return
    own_ids = {r['id'] for r in own}
    allocations = db_api.allocation_list(session,
                                         reservation_id=sorted(own_ids))
    names = sorted({a['host'] for a in allocations})
    db_api.lock_hosts(session, names)
    grows = start < lease['start_date'] or end > lease['end_date']
    if grows and names:
        rows = [row for row in db_api.window_allocation_rows(
            session, now, DEAD_RESERVATIONS, DEAD_LEASES, start, end,
            hosts=names) if row[1] not in own_ids]
        peaks = _peaks(rows)
        registered = {h['hypervisor_hostname']: h
                      for h in registry.read_registry(session)[0]}
        need = collections.Counter((a['host'], a['vcpus'], a['memory_mb'],
                                    a['disk_gb']) for a in allocations)
        taken = collections.Counter()
        for (host, vcpus, memory_mb, disk_gb), count in sorted(need.items()):
            size = _Size(vcpus, memory_mb, disk_gb)
            # What this lease's other slots there take first.
            left = _free_slots(registered.get(host, {
                'hypervisor_hostname': host}), _add(
                peaks.get(host, (0, 0, 0)), taken[host]), size, sizes)
            if left < count:
                # Members read the refusal: it names no host (other
                # projects' reservations take it then); the log does.
                LOG.info('Slots of lease %(lease)s cannot move to '
                         '[%(start)s, %(end)s): host %(host)s is taken',
                         {'lease': lease['id'], 'start': start, 'end': end,
                          'host': host})
                raise NotEnoughSlots(reason=(
                    'Not enough hosts available (a host of the %d slot(s) '
                    'of %d vCPU, %d MB RAM, %d GB disk of lease %s cannot '
                    'hold them over [%s, %s): other reservations take it)'
                    % (count, vcpus, memory_mb, disk_gb, lease['id'],
                       lease_params.format_short(start),
                       lease_params.format_short(end))))
            taken[host] = _add(taken[host] or (0, 0, 0),
                               (vcpus * count, memory_mb * count,
                                disk_gb * count))
    for a in allocations:
        db_api.allocation_update(session, a['id'], {'start_date': start,
                                                    'end_date': end})


class _Size(collections.namedtuple('_Size', 'vcpus memory_mb disk_gb')):
    __slots__ = ()


def _add(peak, more):
    if peak is None:
        return None
    more = more or (0, 0, 0)
    return tuple(a + b for a, b in zip(peak, more))


def update_slots(session, reservation, request, start, end, now,
                 started=False, field='reservation', sizes=None):
    """Re-book an instance reservation whose request changed.

    Before the start, its slots are chosen again for the new request.
    After it, the slots its servers may use stay: only more slots can be
    added (a larger ``amount``; with affinity on the same host, with
    anti-affinity on other hosts), and the size cannot change (its
    servers run with its flavor).

    :returns: the hosts that got slots (hypervisor hostnames).
    :raises NotEnoughSlots: (409) the caller's transaction must roll back.
    """
    old = reservation['properties'] or {}
    allocations = db_api.allocation_list(session,
                                         reservation_id=reservation['id'])
    size = (request.vcpus, request.memory_mb, request.disk_gb)
    if not started:
        db_api.allocation_destroy_by_reservation(session, reservation['id'])
        [chosen] = pick_slots(session, [(field, request)], start, end, now,
                              sizes=sizes)
    else:
        if size != (old.get('vcpus'), old.get('memory_mb'),
                    old.get('disk_gb')):
            raise NotEnoughSlots(reason=(
                '%s: the lease has started: the size of its instances '
                '(vcpus, memory_mb, disk_gb) cannot change, its servers run '
                'with its flavor' % field))
        if request.amount < len(allocations):
            raise NotEnoughSlots(reason=(
                '%s: the lease has started: its amount cannot go down (%d '
                'to %d)' % (field, len(allocations), request.amount)))
        extra = request.amount - len(allocations)
        hosts = {a['host'] for a in allocations}
        chosen = []
        if extra:
            more = dataclasses.replace(request, amount=extra)
            [chosen] = pick_slots(
                session, [(field, more)], start, end, now,
                busy_hosts=hosts if request.affinity is False else (),
                only=hosts if request.affinity else None, sizes=sizes)
    for allocation in chosen:
        db_api.allocation_create(session, dict(
            allocation, reservation_id=reservation['id']))
    props = dict(old)
    props.update(request.properties(old.get('flavor_id'),
                                    old.get('server_group_id')))
    db_api.reservation_update(session, reservation['id'],
                              {'properties': props}, fetch=False)
    return sorted({a['host'] for a in chosen})
