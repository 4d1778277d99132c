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
"""What the scheduler's HostStates tell about the lease calendar (no I/O).

:func:`host_loads` turns HostStates into the :class:`fit.Loads
<nova_lease.calendar.fit.Loads>` of the batch fit queries (capacities,
usage, and the running servers the snapshot knows to be leased);
:func:`aggregate_marks` and :func:`aggregate_rule` apply the rules of the
free pool, of the host reservations' aggregates and of the registered
hosts. doc/source/reference/scheduling.rst explains the rules.
"""

import math
import operator

import nova.conf
import numpy as np

from nova_lease import calendar
from nova_lease.calendar import fit
from nova_lease import conf as lease_conf
from nova_lease.scheduler import request as lease_request
from nova_lease import wire

CONF = nova.conf.CONF
lease_conf.register_opts(CONF)

#: Metadata key of a host reservation's aggregate naming the reservation
#: (nova_lease.plugins.host.aggregates.META_RESERVATION: the engine sets it at
#: the lease's start and deletes the aggregate at its end).
RESERVATION_KEY = wire.AGGREGATE_RESERVATION_ID


def reserved_of(conf):
    """(vcpus, memory_mb, disk_gb) that Nova reserves on every host."""
    return (conf.reserved_host_cpus, conf.reserved_host_memory_mb,
            int(math.ceil(conf.reserved_host_disk_mb / 1024.0)))


def _instance_size(instance):
    try:
        if all(instance.obj_attr_is_set(f) for f in
               ('vcpus', 'memory_mb', 'root_gb', 'ephemeral_gb')):
            return calendar.Demand(instance.vcpus or 0,
                                   instance.memory_mb or 0,
                                   (instance.root_gb or 0) +
                                   (instance.ephemeral_gb or 0))
    except AttributeError:
        pass
    return None


def leased_entry(res, host, size, snap, now):
    """``(end, size)`` of a running leased server for a HostLoad.

    None when it counts as unleased (its lease is over, or its size is
    unknown).
    """
    if size is None or res.end <= now:
        return None
    if res.start > now:
        return (res.start, size)
    for item in snap.allocations.get(res.id, ()):
        if item.host == host and item.start <= now < item.end:
            # Its allocation already holds its capacity: stop counting it
            # separately from now on.
            return (now, size)
    return (res.end, size)


def host_key(host_state):
    """The calendar's name of a HostState (the hypervisor hostname)."""
    return host_state.nodename or host_state.host


_HOST_NUMBERS = operator.attrgetter(
    'vcpus_total', 'vcpus_used', 'total_usable_ram_mb', 'free_ram_mb',
    'total_usable_disk_gb', 'disk_mb_used', 'cpu_allocation_ratio',
    'ram_allocation_ratio', 'disk_allocation_ratio')


def host_loads(host_states, snap, now, reserved, usage=None):
    """The :class:`fit.Loads` of HostStates (no I/O).

    Capacities and usage from the HostStates' totals, ratios and usage
    (as consumed by the scheduler so far), and their servers that the
    snapshot knows to be leased. ``usage``: ``{host key: (vcpus,
    memory_mb, disk_gb)}`` that placement has, for hosts whose record
    may miss a server that arrived (:mod:`nova_lease.scheduler.moves`):
    the larger of the two counts.
    """
    n = len(host_states)
    keys = [host_key(hs) for hs in host_states]
    numbers = np.array([_HOST_NUMBERS(hs) for hs in host_states],
                       dtype=float).reshape(n, 9).T
    ratios = np.nan_to_num(numbers[6:9], nan=1.0)
    ratios[ratios == 0] = 1.0
    v_tot, v_used, m_tot, m_free, d_tot, d_used_mb = np.nan_to_num(
        numbers[:6], nan=0.0)
    rv, rm, rd = reserved
    cap = np.floor(np.stack((v_tot - rv, m_tot - rm, d_tot - rd)) *
                   ratios).astype(np.int64)
    used = np.maximum(np.stack((v_used - rv, m_tot - m_free - rm,
                                np.ceil(d_used_mb / 1024.0) - rd)),
                      0).astype(np.int64)
    if usage:
        for k, key in enumerate(keys):
            more = usage.get(key)
            if more is not None:
                used[:, k] = np.maximum(used[:, k], more)
    l_own, l_end, l_size = [], [], []
    servers = snap.servers
    if servers:
        rows = snap.server_rows
        rows_get = rows.get
        server_keys = servers.keys()
        found_k, found_rows = [], []
        for k, hs in enumerate(host_states):
            instances = hs.instances
            if not instances:
                continue
            found = instances.keys() & server_keys
            if not found:
                continue
            for uuid in found:
                row = rows_get(uuid)
                if row is not None:
                    found_k.append(k)
                    found_rows.append(row)
                    continue
                # Size unknown to the lease: the Instance may tell.
                entry = leased_entry(servers[uuid], keys[k],
                                     _instance_size(instances[uuid]),
                                     snap, now)
                if entry is not None:
                    end, size = entry
                    l_own.append(k)
                    l_end.append(calendar.to_us(end))
                    l_size.append(size[:3])
        if found_rows:
            own, until, size = _leased_rows(found_k, found_rows, keys,
                                            calendar.to_us(now))
            return fit.Loads.from_arrays(
                keys, cap, used, np.ones(n, bool),
                np.concatenate((np.asarray(l_own, np.int64), own)),
                np.concatenate((np.asarray(l_end, np.int64), until)),
                np.concatenate((np.asarray(l_size, np.int64).reshape(-1, 3),
                                size)))
    return fit.Loads.from_arrays(keys, cap, used, np.ones(n, bool), l_own,
                                 l_end, l_size)


def _leased_rows(owners, rows, keys, now_us):
    """(host positions, ends, sizes (n, 3)) of running leased servers of
    known size, as the Loads columns take them.

    ``rows``: their snapshot rows (``Snapshot.server_rows``), on the
    hosts at positions ``owners``. Each counts until its lease ends; one
    built before its lease starts until the start (it is shelved then);
    one whose allocation on this host covers now stops counting now (the
    allocation holds its capacity). Vectorised: thousands of them run in
    a big cloud.
    """
    (start, end, vcpus, memory, disk, a_host, a_start,
     a_end) = zip(*rows)
    own = np.array(owners, np.int64)
    start = np.array(start, np.int64)
    end = np.array(end, np.int64)
    a_start = np.array(a_start, np.int64)
    a_end = np.array(a_end, np.int64)
    here = np.array(a_host, object) == np.array(keys, object)[own]
    until = np.where(start > now_us, start,
                     np.where(here & (a_start <= now_us) & (now_us < a_end),
                              now_us, end))
    keep = end > now_us
    size = np.array((vcpus, memory, disk), np.int64).T
    return own[keep], until[keep], size[keep]


_NO_MARKS = (False, frozenset())


def aggregate_marks(host_state, conf=CONF, freepool=None):
    """``(in the free pool?, {reservation ids})`` of a HostState.

    The reservation ids are those of the host reservations whose
    aggregate (metadata :data:`RESERVATION_KEY`) holds the host: from the
    engine's start of the lease to its end. No I/O: Nova keeps the
    HostStates' aggregates up to date. ``freepool``: the free pool
    aggregate's name (default: ``[nova_lease] freepool_aggregate``).
    """
    aggregates = host_state.aggregates
    if not aggregates:
        return _NO_MARKS
    name = conf.nova_lease.freepool_aggregate if freepool is None \
        else freepool
    free = False
    held_for = set()
    for agg in aggregates:
        if getattr(agg, 'name', None) == name:
            free = True
        rid = (getattr(agg, 'metadata', None) or {}).get(RESERVATION_KEY)
        if rid:
            held_for.add(rid)
    return free, held_for


def _registered(host_state, registered):
    return bool(registered) and (
        host_state.host in registered or host_key(host_state) in registered)


def aggregate_rule(req, host_state, freepool, registered=()):
    """Why ``host_state`` cannot take ``req`` whatever the calendar says
    (None if it may): the rules of the free pool (aggregate
    ``freepool``), of the host reservations' aggregates and of the
    registered hosts. No I/O.
    """
    free, held_for = aggregate_marks(host_state, freepool=freepool)
    if (held_for or req.kind == lease_request.HOST_RESERVATION) and \
            req.reservation not in held_for:
        # A host in a reservation's aggregate is the owner's until the
        # engine ends the lease (then it deletes the servers left
        # there), even past the end of the allocation; a hinted request
        # needs the host in its aggregate (after an early end, a stale
        # snapshot still shows the lease ACTIVE).
        if held_for:
            return 'host reservation %s holds it' % ', '.join(
                sorted(held_for))
        return 'not in the aggregate of reservation %s' % req.reservation
    if req.kind != lease_request.HOST_RESERVATION and free:
        # The free pool is for host reservations, whose admission only
        # sees allocations: no server may hide there.
        return 'only host reservations use the free pool'
    if req.kind != lease_request.HOST_RESERVATION and _registered(
            host_state, registered):
        # A registered host outside both aggregates (an operator moved
        # it, or the engine is between two steps) is still for host
        # reservations only.
        return 'registered for host reservations (os-hosts)'
    return None
