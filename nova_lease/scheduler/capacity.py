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
"""Capacity over time from a snapshot of the calendar and Nova's facts.

The lease API (``GET /os-reservation/capacity``) and ``nova-lease-manage
capacity`` both call :func:`report`: they read Nova's facts their own way
(nova-api from Nova's databases, the command from the compute API and
placement, as the auditor) and hand them over as :class:`ComputeFacts`;
the promises come from the scheduler's snapshot of the calendar
(:class:`nova_lease.scheduler.snapshot.Snapshot`), never from per-host
reads. The figures are :mod:`nova_lease.calendar.capacity`'s.
"""

import collections

from nova_lease import calendar
from nova_lease.calendar import capacity as core
from nova_lease.scheduler import hosts as lease_hosts

CapacityError = core.CapacityError


class ComputeFacts(collections.namedtuple(
        'ComputeFacts', 'name service_host capacity used')):
    """One compute node: hypervisor hostname, service host, usable
    :class:`nova_lease.calendar.HostCapacity` and (vcpus, memory_mb,
    disk_gb) used now by every server on it.
    """

    __slots__ = ()


def capacity_hosts(snap, computes, running, zones, aggregates, now):
    """:class:`core.CapacityHost` of every compute node.

    :param snap: the snapshot (its linked servers and host registry).
    :param computes: :class:`ComputeFacts` of every compute node.
    :param running: {server uuid: (hypervisor hostname, Demand)} of the
        snapshot's linked servers that run on a node.
    :param zones: {service host: availability zone}.
    :param aggregates: {service host: aggregate names}.
    """
    leased = collections.defaultdict(list)
    now_us = calendar.to_us(now)
    rows = snap.server_rows
    for uuid, (node, size) in running.items():
        rid = snap.server_reservation_id(uuid)
        if rid is None:
            continue
        row = rows.get(uuid)
        if row is None:
            # Size unknown to the lease: Nova's.
            entry = lease_hosts.leased_entry(snap.servers[uuid], node, size,
                                             snap, now)
            if entry is not None:
                leased[node].append((entry[0], tuple(entry[1][:3]), rid))
            continue
        # As lease_hosts.leased_entry, from the snapshot's integer row:
        # until its lease's start (built before it), now (its allocation
        # on this host holds it) or its lease's end.
        (start, end, vcpus, memory_mb, disk_gb, a_host, a_start,
         a_end) = row
        if end <= now_us:
            continue
        if start > now_us:
            until = start
        elif a_host == node and a_start <= now_us < a_end:
            until = now_us
        else:
            until = end
        leased[node].append((until, (vcpus, memory_mb, disk_gb), rid))
    registered = snap.registered
    return [core.CapacityHost(
        c.name, c.capacity, c.used,
        registered=c.name in registered or c.service_host in registered,
        service_host=c.service_host,
        availability_zone=zones.get(c.service_host),
        aggregates=aggregates.get(c.service_host, ()),
        leased=leased.get(c.name, ())) for c in computes]


def report(snap, hosts, start, end, step, now, lease_names=None, **kwargs):
    """The capacity body (see :func:`core.capacity_over_time`, whose
    keyword arguments it takes) of ``hosts`` (:func:`capacity_hosts`)
    against the snapshot ``snap``.

    ``lease_names``: a callable {lease ids} -> {id: name} that fills the
    host details' bookings' ``lease_name``.
    """
    if kwargs.get('project_id') is not None:
        kwargs['project_items'] = snap.project_items(kwargs['project_id'])
    body = core.capacity_over_time(
        hosts, snap.calendar, snap.host_items, snap.reservations, start,
        end, step, now, **kwargs)
    details = body['capacity'].get('host_details')
    if details and lease_names is not None:
        ids = {b['lease_id'] for h in details for b in h['bookings']
               if b['lease_id']}
        names = lease_names(ids) if ids else {}
        for h in details:
            for b in h['bookings']:
                b['lease_name'] = names.get(b['lease_id'])
    return body
