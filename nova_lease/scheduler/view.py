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
"""One scheduling request seen against the lease calendar.

:func:`resolve` decides which interval a request needs and where it may
go; :class:`RequestView` answers, for a list of HostStates at once, which
hosts it fits and how tightly (LeaseFilter and LeaseWeigher share one view
per request, see :func:`view_for`). doc/scheduling.rst explains the rules.
"""

import collections
import math
import operator
import threading
import time
import weakref

import nova.conf
import numpy as np
from oslo_log import log as logging
from oslo_serialization import jsonutils
from oslo_utils import timeutils

from nova_lease import calendar
from nova_lease.calendar import fit
from nova_lease import conf as lease_conf
from nova_lease.db import api as db_api
from nova_lease import exception as lease_exception
from nova_lease import params
from nova_lease.scheduler import snapshot
from nova_lease.scheduler import snapshot_cache
from nova_lease.scheduler import snapshot_reads
from nova_lease import status

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
lease_conf.register_opts(CONF)

UNLEASED = 'unleased'
LEASED = 'leased'
HOST_RESERVATION = 'host reservation'

#: Metadata key of a host reservation's aggregate naming the reservation
#: (nova_lease.plugins.host.plugin.META_RESERVATION: the engine sets it at
#: the lease's start and deletes the aggregate at its end).
RESERVATION_KEY = 'nova_lease_reservation_id'

# Weigher scales (seconds): slack of an hour, next promise in a day.
_SLACK_SCALE = 3600.0
_PROMISE_SCALE = 86400.0


class Request(collections.namedtuple(
        'Request', 'kind demand start end allowed exclude why reservation',
        defaults=(None,))):
    """What a request needs.

    :ivar kind: UNLEASED, LEASED or HOST_RESERVATION.
    :ivar demand: a calendar Demand.
    :ivar start, end: the interval (``end`` None: forever).
    :ivar allowed: None, or the set of the only hosts it may use.
    :ivar exclude: reservation ids whose allocations do not count against
        it (its own).
    :ivar why: how the interval was found (for logs).
    :ivar reservation: for HOST_RESERVATION, the hinted reservation id:
        only the hosts in its aggregate may take the request.
    """

    __slots__ = ()


def _is_set(obj, name):
    try:
        return obj.obj_attr_is_set(name)
    except AttributeError:
        return getattr(obj, name, None) is not None


def demand_of(spec_obj):
    """The Demand of one instance of a RequestSpec (placement's sizes)."""
    flavor = spec_obj.flavor
    swap_gb = int(math.ceil((flavor.swap or 0) / 1024.0))
    is_bfv = _is_set(spec_obj, 'is_bfv') and spec_obj.is_bfv
    root = 0 if is_bfv else flavor.root_gb
    return calendar.Demand(flavor.vcpus, flavor.memory_mb,
                           root + flavor.ephemeral_gb + swap_gb)


def _hint(spec_obj, name):
    value = spec_obj.get_scheduler_hint(name)
    if isinstance(value, list):
        value = value[0] if value else None
    return value


def _instance_reservation(row, lease, items):
    props = row['properties'] or {}
    size = snapshot.size_from(jsonutils.dumps(props), items)
    return snapshot.Reservation(
        row['id'], lease['id'], lease['project_id'], snapshot.INSTANCE,
        row['resource_id'], lease['start_date'], lease['end_date'],
        lease['status'], size)


def _items(db, reservation_id):
    return [calendar.Item(a['host'], a['start_date'], a['end_date'],
                          a['vcpus'], a['memory_mb'], a['disk_gb'],
                          a['whole_host'], reservation_id)
            for a in db_api.allocation_list(db,
                                            reservation_id=reservation_id)]


def _live(lease, now):
    return (lease['status'] not in snapshot.DEAD_LEASES and
            lease['end_date'] > now)


def lookup_server(conf, uuid, now):
    """The live instance Reservation of server ``uuid`` and the hosts of
    its allocations, read from the side database; (None, ()) if none.

    For a request with an internal lease hint whose server the snapshot
    does not know as leased: the server may have been linked to its lease
    after the snapshot was read. One indexed query (plus two when found).
    """
    db = db_api.get_database(conf)
    for row in db_api.reservation_list(db, resource_id=uuid,
                                       resource_type=snapshot.INSTANCE):
        if row['status'] in snapshot.DEAD_RESERVATIONS:
            continue
        lease = db_api.lease_get(db, row['lease_id'])
        if not _live(lease, now):
            continue
        items = _items(db, row['id'])
        return (_instance_reservation(row, lease, items),
                {item.host for item in items if item.end > now})
    return None, ()


def lookup_lease(conf, lease_id, now):
    """The live instance Reservations of lease ``lease_id``, read from the
    side database: [] when the lease is gone, over or dead.

    For a first boot (hint ``nova_lease_id``) of a lease the snapshot does
    not know: it may be younger than the snapshot, or over.
    """
    db = db_api.get_database(conf)
    try:
        lease = db_api.lease_get(db, lease_id)
    except lease_exception.NotFound:
        return []
    if not _live(lease, now):
        return []
    return [_instance_reservation(row, lease, ())
            for row in lease['reservations']
            if row['resource_type'] == snapshot.INSTANCE and
            row['status'] not in snapshot.DEAD_RESERVATIONS]


def lookup_deferred(conf, reservation_id, now):
    """``(Reservation, hosts, live)`` of the instance reservation named by
    a ``nova_lease_reservation`` hint, read from the side database;
    ``(None, (), False)`` if it is unknown or not an instance reservation.

    ``live``: neither the reservation nor its lease is dead or over.
    """
    db = db_api.get_database(conf)
    try:
        row = db_api.reservation_get(db, reservation_id)
        lease = db_api.lease_get(db, row['lease_id'])
    except lease_exception.NotFound:
        return None, (), False
    if row['resource_type'] != snapshot.INSTANCE:
        return None, (), False
    items = _items(db, row['id'])
    live = (row['status'] not in snapshot.DEAD_RESERVATIONS and
            _live(lease, now))
    return (_instance_reservation(row, lease, items),
            {item.host for item in items if item.end > now}, live)


def lookup_reservation(conf, reservation_id, now):
    """A host Reservation and its allocated hosts, read from the side
    database; (None, ()) if unknown.

    For a ``reservation`` hint that the snapshot does not show ACTIVE:
    the lease may have started after the snapshot was read.
    """
    db = db_api.get_database(conf)
    try:
        row = db_api.reservation_get(db, reservation_id)
        lease = db_api.lease_get(db, row['lease_id'])
    except lease_exception.NotFound:
        return None, ()
    hosts = {a['host'] for a in db_api.allocation_list(
        db, reservation_id=reservation_id)}
    res = snapshot.Reservation(
        row['id'], lease['id'], lease['project_id'], row['resource_type'],
        row['resource_id'], lease['start_date'], lease['end_date'],
        lease['status'], None)
    return res, hosts


def _ask(lookup, default, what, *args):
    """lookup(*args), or ``default`` (logged) if it fails."""
    try:
        return lookup(*args)
    except Exception:
        LOG.exception('nova_lease: cannot look up %s', what)
        return default


def _linked(spec_obj, demand, res, hosts, snap, now):
    """The Request of a server linked to the live reservation ``res``."""
    if res.end <= now:
        return Request(UNLEASED, demand, now, None, None, (),
                       'its lease %s is over' % res.lease_id)
    if res.start > now:
        # Built before its lease starts (a lease made before servers were
        # created at their start): it is shelved right away.
        return Request(LEASED, demand, now, res.start, None, (),
                       'lease %s not started' % res.lease_id)
    if hosts is None:
        hosts = {item.host for item in snap.allocations.get(res.id, ())
                 if item.end > now}
    ignore = set(spec_obj.ignore_hosts or ()) \
        if _is_set(spec_obj, 'ignore_hosts') else set()
    allowed = hosts if hosts and not hosts & ignore else None
    return Request(LEASED, demand, now, res.end, allowed, (res.id,),
                   'lease %s' % res.lease_id)


def _first_boot(demand, lease_id, uuid, project, snap, now, lookup_lease):
    """The Request of the first boot of a server of lease ``lease_id``
    (hint ``nova_lease_id``), or None when it is not one: the lease is
    over or unknown, of another project, or every reservation of it is
    linked to another server (Nova reloads the hint for every move).
    """
    rids = snap.by_lease.get(lease_id) or ()
    found = [snap.reservations[rid] for rid in rids
             if rid in snap.reservations]
    if not found and lookup_lease is not None:
        found = _ask(lookup_lease, [], 'lease %s' % lease_id, lease_id, now)
    found = [r for r in found if r.resource_type == snapshot.INSTANCE and
             r.end > now]
    if not found or found[0].project_id != project:
        return None
    if not any(r.resource_id in (None, uuid) for r in found):
        return None
    res = found[0]
    end = res.end if res.start <= now else res.start
    return Request(LEASED, demand, now, max(end, now), None, (),
                   'first boot of lease %s' % lease_id)


def _deferred(demand, reservation_id, uuid, project, snap, now,
              lookup_deferred):
    """The Request of a server named by a ``nova_lease_reservation`` hint.

    Its creation at a deferred lease's start: pinned to the reservation's
    allocated hosts, its own allocations left out, while the lease is
    live, for the reservation's project only, and only if the reservation
    has no other server; anything else is NoValidHost. A later move of
    that server once the lease is over is unleased.
    """
    res = snap.reservations.get(reservation_id)
    hosts = None
    live = res is not None
    if res is None and lookup_deferred is not None:
        res, hosts, live = _ask(lookup_deferred, (None, (), False),
                                'reservation %s' % reservation_id,
                                reservation_id, now)
    if res is not None and uuid and res.resource_id == uuid:
        return Request(UNLEASED, demand, now, None, None, (),
                       'its lease %s is over' % res.lease_id)
    if (res is None or not live or res.resource_type != snapshot.INSTANCE
            or res.project_id != project or res.end <= now or
            res.lease_status in snapshot.DEAD_LEASES or
            res.resource_id is not None):
        return Request(LEASED, demand, now, now, set(), (),
                       'reservation %s is not a live instance reservation '
                       'of the project waiting for its server'
                       % reservation_id)
    if hosts is None:
        hosts = {item.host for item in snap.allocations.get(res.id, ())
                 if item.end > now}
    return Request(LEASED, demand, now, res.end, set(hosts), (res.id,),
                   'reservation %s of lease %s' % (res.id, res.lease_id))


def resolve(spec_obj, snap, now, conf=CONF, lookup=None,
            lookup_reservation=None, lookup_lease=None,
            lookup_deferred=None):
    """The :class:`Request` of ``spec_obj`` (see doc/scheduling.rst).

    A request is leased only through the side database: its server is
    linked to a live instance reservation, or it is the first boot of a
    leased server, which the nova-api filter marks with an internal hint
    (``nova_lease_id``, ``nova_lease_reservation``). ``lease_params`` and
    ``reserved`` are never read here, nor ``[nova_lease] default_lease``.

    The lookups read the side database when the snapshot does not know
    enough: ``lookup(uuid, now)`` -> (Reservation or None, allocated
    hosts) for a server with an internal hint that the snapshot does not
    show linked; ``lookup_lease(lease_id, now)`` -> [Reservation] for a
    first boot of a lease the snapshot does not know;
    ``lookup_deferred(reservation_id, now)`` -> (Reservation or None,
    hosts, live); ``lookup_reservation(id, now)`` -> (Reservation or None,
    hosts) for a host ``reservation`` hint the snapshot does not show
    ACTIVE.
    """
    demand = demand_of(spec_obj)
    uuid = spec_obj.instance_uuid if _is_set(spec_obj, 'instance_uuid') \
        else None
    project = spec_obj.project_id if _is_set(spec_obj, 'project_id') \
        else None
    lease_id = _hint(spec_obj, params.LEASE_ID_HINT)
    deferred_id = _hint(spec_obj, params.RESERVATION_HINT)
    res = snap.servers.get(uuid) if uuid else None
    hosts = None
    if res is None and uuid and (lease_id or deferred_id) and (
            lookup is not None):
        res, hosts = _ask(lookup, (None, None),
                          'the lease of server %s' % uuid, uuid, now)
    if res is not None:
        return _linked(spec_obj, demand, res, hosts, snap, now)
    if deferred_id:
        return _deferred(demand, deferred_id, uuid, project, snap, now,
                         lookup_deferred)
    if lease_id:
        request = _first_boot(demand, lease_id, uuid, project, snap, now,
                              lookup_lease)
        if request is not None:
            return request

    reservation_id = _hint(spec_obj, 'reservation')
    if reservation_id:
        res = snap.reservations.get(reservation_id)
        hosts = None
        if lookup_reservation is not None and (
                res is None or res.lease_status != status.LeaseStatus.ACTIVE):
            res, hosts = _ask(lookup_reservation, (None, None),
                              'reservation %s' % reservation_id,
                              reservation_id, now)
        if (res is None or res.resource_type != snapshot.HOST or
                res.lease_status != status.LeaseStatus.ACTIVE or
                res.project_id != project or res.end <= now):
            return Request(HOST_RESERVATION, demand, now, now, set(), (),
                           'reservation %s is not an active host '
                           'reservation of the project' % reservation_id,
                           reservation_id)
        if hosts is None:
            hosts = {item.host for item in snap.allocations.get(res.id, ())}
        return Request(HOST_RESERVATION, demand, now, res.end, hosts,
                       (res.id,), 'reservation %s' % res.id, res.id)
    if lease_id:
        return Request(UNLEASED, demand, now, None, None, (),
                       'lease %s is over or not this server\'s' % lease_id)
    return Request(UNLEASED, demand, now, None, None, (), 'no lease')


def _reserved(conf):
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


def host_loads(host_states, snap, now, reserved):
    """The :class:`fit.Loads` of HostStates (no I/O).

    Capacities and usage from the HostStates' totals, ratios and usage
    (as consumed by the scheduler so far), and their servers that the
    snapshot knows to be leased.
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


def _resolve(spec_obj, snap, now, conf):
    return resolve(
        spec_obj, snap, now, conf,
        lookup=lambda uuid, when: lookup_server(conf, uuid, when),
        lookup_reservation=lambda rid, when: lookup_reservation(
            conf, rid, when),
        lookup_lease=lambda lid, when: lookup_lease(conf, lid, when),
        lookup_deferred=lambda rid, when: lookup_deferred(conf, rid, when))


def _registered(host_state, registered):
    return bool(registered) and (
        host_state.host in registered or host_key(host_state) in registered)


def _aggregate_rule(req, host_state, freepool, registered=()):
    """Why ``host_state`` cannot take ``req`` whatever the calendar says
    (None if it may): the rules of the free pool (aggregate
    ``freepool``), of the host reservations' aggregates and of the
    registered hosts. No I/O.
    """
    free, held_for = aggregate_marks(host_state, freepool=freepool)
    if (held_for or req.kind == HOST_RESERVATION) and \
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
    if req.kind != HOST_RESERVATION and free:
        # The free pool is for host reservations, whose admission only
        # sees allocations: no server may hide there.
        return 'only host reservations use the free pool'
    if req.kind != HOST_RESERVATION and _registered(host_state,
                                                    registered):
        # A registered host outside both aggregates (an operator moved
        # it, or the engine is between two steps) is still for host
        # reservations only.
        return 'registered for host reservations (os-hosts)'
    return None


class RequestView(object):
    """A request against a snapshot and the HostStates of this request.

    ``request``: the request's :class:`Request` when already known (else
    it is resolved against ``snap``).
    """

    def __init__(self, spec_obj, snap, now, conf=CONF, request=None):
        self.snap = snap
        self.now = now
        self.conf = conf
        self.request = request if request is not None else _resolve(
            spec_obj, snap, now, conf)
        self._reserved = _reserved(conf)
        # The filter's Loads, reused by the weigher of the same request
        # (the host states do not change in between).
        self._cached = None

    def _loads(self, host_states):
        """Loads of host_states; the filter's are reused by the weigher."""
        cached = self._cached
        if cached is not None:
            pos = cached[0]
            try:
                members = [pos[id(hs)] for hs in host_states]
            except KeyError:
                pass
            else:
                if len(members) == len(pos):
                    return cached[1]
                return cached[1].subset(members)
        loads = host_loads(host_states, self.snap, self.now, self._reserved)
        self._cached = ({id(hs): k for k, hs in enumerate(host_states)},
                        loads)
        return loads

    def _run(self, fn, loads, *args):
        """fn(calendar, loads, *args) per group of hosts that share a
        calendar (the request's own allocations left out where they are).
        """
        req = self.request
        cal = self.snap.calendar
        own = set()
        if req.exclude and cal is not None:
            own = {item.host for ref in req.exclude
                   for item in self.snap.allocations.get(ref, ())}
        mine = [k for k, host in enumerate(loads.hosts) if host in own]
        if not mine:
            return fn(cal, loads, *args)
        out = [None] * len(loads)
        rest = [k for k, host in enumerate(loads.hosts) if host not in own]
        groups = [(self.snap.calendar_without(
            req.exclude, {loads.hosts[k] for k in mine}), mine)]
        if rest:
            groups.append((cal, rest))
        for group_cal, members in groups:
            part = fn(group_cal, loads.subset(members), *args)
            for k, value in zip(members, part):
                out[k] = value
        return out

    def passes(self, host_states):
        """[(bool, reason)] per HostState."""
        req = self.request
        result = [None] * len(host_states)
        todo = []
        registered = self.snap.registered
        freepool = self.conf.nova_lease.freepool_aggregate
        for k, hs in enumerate(host_states):
            if req.allowed is not None and not (
                    {host_key(hs), hs.host} & req.allowed):
                result[k] = (False, '%s may only use %s' % (
                    req.why, ', '.join(sorted(req.allowed)) or 'no host'))
                continue
            why = _aggregate_rule(req, hs, freepool, registered)
            if why is not None:
                result[k] = (False, why)
            else:
                todo.append(k)
        if todo:
            loads = self._loads([host_states[k] for k in todo])
            ok = self._run(fit.fits, loads, req.demand, req.start, req.end)
            for k, good in zip(todo, ok):
                result[k] = (good, None if good else
                             'the request (%s) does not fit until %s' % (
                                 req.why, req.end or 'forever'))
        return result

    def weights(self, host_states):
        """Raw weights in [-1, 1]: higher is better (doc/scheduling.rst)."""
        req = self.request
        if req.kind == UNLEASED or req.end is None:
            hosts = [host_key(hs) for hs in host_states]
            seconds = fit.next_promise_seconds(self.snap.calendar, hosts,
                                               self.now)
            return [1.0 if math.isinf(s) else s / (s + _PROMISE_SCALE)
                    for s in seconds]
        slack = self._run(fit.slack_seconds, self._loads(host_states),
                          req.demand, req.start, req.end)
        return [0.0 if s == math.inf else
                (-1.0 if s < 0 else 1.0 / (1.0 + s / _SLACK_SCALE))
                for s in slack]


# -- one view per request, shared by the filter and the weigher ------------

_VIEWS = {}
_VIEWS_LOCK = threading.Lock()
_MAX_VIEWS = 256
#: Seconds a view is kept for the weigher: it runs right after the filter.
_VIEW_LIFE = 10.0


def _remember(spec_obj, view):
    with _VIEWS_LOCK:
        if len(_VIEWS) >= _MAX_VIEWS:
            for key in [k for k, (ref, _v, _t) in _VIEWS.items()
                        if ref() is None]:
                del _VIEWS[key]
            if len(_VIEWS) >= _MAX_VIEWS:
                _VIEWS.clear()
        _VIEWS[id(spec_obj)] = (weakref.ref(spec_obj), view,
                                time.monotonic())


def _forget_finished():
    """Drop the views of requests that are over (their RequestSpec is
    gone, or the view is older than _VIEW_LIFE), and with them the
    snapshots they hold.
    """
    oldest = time.monotonic() - _VIEW_LIFE
    with _VIEWS_LOCK:
        for key in [k for k, (ref, _v, made) in _VIEWS.items()
                    if ref() is None or made < oldest]:
            del _VIEWS[key]


snapshot_cache.CACHE.add_retire_hook(_forget_finished)


def _recall(spec_obj):
    with _VIEWS_LOCK:
        entry = _VIEWS.get(id(spec_obj))
    if entry is not None and entry[0]() is spec_obj:
        return entry[1]
    return None


def get_snapshot(now, conf=CONF, wait=None):
    """The scheduler's snapshot of the lease calendar, current at ``now``.

    None while there is none yet: its first full read runs in the
    background (see ``snapshot_cache.SnapshotCache``) unless ``wait``
    seconds are given to wait for it (tools and tests; the scheduler never
    waits). When the side database cannot be read, the last snapshot.
    """
    db = db_api.get_database(conf)
    return snapshot_cache.CACHE.get(
        db, now, conf.nova_lease.scheduler_snapshot_ttl, wait=wait)


#: Scheduler hints that make a request leased or a host reservation's
#: (the lease middleware's, the lease API's and the engine's): without
#: the side database such a request cannot be checked.
LEASE_HINTS = ('lease_params', 'reservation', 'nova_lease_id',
               'nova_lease_reservation')

#: Most allocations a request reads for itself while the scheduler has no
#: snapshot (cold start): past it, the request is refused until the
#: snapshot is there.
COLD_READ_LIMIT = 2000


def maybe_leased(spec_obj, conf=CONF):
    """Whether a request may be leased, told without the side database.

    True with any lease hint (also ``reserved=True``) or when the default
    lease applies to the request's project: conservative (a server whose
    lease has ended still carries its hints).
    """
    hints = spec_obj.scheduler_hints \
        if _is_set(spec_obj, 'scheduler_hints') else None
    hints = hints or {}
    if any(name in hints for name in LEASE_HINTS):
        return True
    if str(_hint(spec_obj, 'reserved')).lower() == 'true':
        return True
    group = conf.nova_lease
    project = spec_obj.project_id if _is_set(spec_obj, 'project_id') \
        else None
    return bool(group.default_lease) and \
        project not in group.default_lease_exempt_projects


# {database: hosts} whose allocations, all of them, were too many to
# read for a request at cold start (see ColdView).
_COLD_OVERFLOW = {}

#: Seconds between two warnings of one kind (cold start, closed).
WARN_INTERVAL = 60.0
_warned = {}


def _warn(kind, msg, args):
    """LOG.warning at most once per WARN_INTERVAL for each ``kind``."""
    now = time.monotonic()
    last = _warned.get(kind)
    if last is None or now - last >= WARN_INTERVAL:
        _warned[kind] = now
        LOG.warning(msg, args)


def _warn_closed(error):
    _warn('closed', 'nova_lease: the side database cannot be read '
          '(%(error)s) and the scheduler has no snapshot of the lease '
          'calendar: requests that may be leased are refused, the others '
          'kept off the free pool and the host reservations\' aggregates',
          {'error': error})


class ClosedView(object):
    """A request when the lease calendar cannot be read at all (no
    snapshot and no side database): fail closed.

    The aggregate rules hold (they need no database); a request that may
    be leased (:func:`maybe_leased`) passes no host -- nothing can tell
    whether it would break a promise -- and unleased work may use the
    hosts outside the free pool and the host reservations' aggregates.
    Every weight is 0.
    """

    def __init__(self, spec_obj, now, conf=CONF, reason=None):
        self.now = now
        self.conf = conf
        self.reason = reason
        leased = maybe_leased(spec_obj, conf)
        self.request = Request(
            LEASED if leased else UNLEASED, demand_of(spec_obj), now,
            None, set() if leased else None, (),
            'the lease calendar cannot be read')

    def passes(self, host_states):
        """[(bool, reason)] per HostState."""
        req = self.request
        freepool = self.conf.nova_lease.freepool_aggregate
        out = []
        for hs in host_states:
            why = _aggregate_rule(req, hs, freepool)
            if why is None and req.allowed is not None:
                why = ('the lease calendar cannot be read: leased and '
                       'host reservation requests wait for it')
            out.append((why is None, why))
        return out

    def weights(self, host_states):
        return [0.0] * len(host_states)


class ColdView(object):
    """A request while the scheduler has no snapshot yet (its first full
    read runs in the background): answered from what the request reads
    for itself (doc/scheduling.rst, "Cold start").

    At creation, the reservations the request names (its server's, its
    hints') are read with their allocations, and the request is resolved
    against them. For each list of HostStates, the live allocations on
    those hosts are read (indexed by host and time): all of them when
    there are at most :data:`COLD_READ_LIMIT`, else those over the
    request's interval; with more than that, the request passes no host
    (refused until the snapshot is there). Leased servers running on the
    hosts, which a snapshot would know, count as unleased (forever):
    conservative. When the side database cannot be read, a
    :class:`ClosedView` answers.
    """

    def __init__(self, spec_obj, now, conf=CONF):
        self.now = now
        self.conf = conf
        self._closed = ClosedView(spec_obj, now, conf)
        self._view = None
        self._hosts = frozenset()
        self._own = None
        self.request = self._closed.request
        try:
            db = db_api.get_database(conf)
            uuid = spec_obj.instance_uuid \
                if _is_set(spec_obj, 'instance_uuid') else None
            ids = {_hint(spec_obj, name) for name in
                   ('reservation', 'nova_lease_reservation')}
            with db.reader() as session:
                own = snapshot_reads.read_named(
                    session, now, server=uuid, ids={i for i in ids if i})
            self.request = _resolve(spec_obj, own, now, conf)
            self._own = own
        except Exception as e:
            self._closed.reason = str(e)
            _warn_closed(e)

    def _view_for(self, host_states):
        if self._own is None:
            return self._closed
        keys = set()
        for hs in host_states:
            keys.update((hs.host, host_key(hs)))
        if self._view is not None and keys <= self._hosts:
            return self._view
        wanted = frozenset(keys)
        req = self.request
        if req.allowed is not None:
            keys &= set(req.allowed)
        started = time.monotonic()
        try:
            db = db_api.get_database(self.conf)
            with db.reader() as session:
                _version, registered = snapshot_reads.read_registered(
                    session)
                items = None
                overflow = _COLD_OVERFLOW.get(str(db.url))
                if overflow is None or not keys >= overflow:
                    items = snapshot_reads.read_host_items(
                        session, self.now, keys, self.now, None,
                        COLD_READ_LIMIT)
                    if items is None:
                        # More hosts hold even more: not read again
                        # until the snapshot is there.
                        _COLD_OVERFLOW[str(db.url)] = frozenset(keys)
                how = 'all'
                if items is None and req.end is not None:
                    items = snapshot_reads.read_host_items(
                        session, self.now, keys, req.start, req.end,
                        COLD_READ_LIMIT)
                    how = 'over the request\'s interval'
        except Exception as e:
            _warn_closed(e)
            self._own = None
            return self._closed
        if items is None:
            _warn('refused', 'nova_lease: the lease calendar is being '
                  'read; until then requests are refused when their hosts '
                  'hold more than %(limit)d promises over their interval '
                  '(this one: %(why)s, %(n)d hosts)',
                  {'why': req.why, 'limit': COLD_READ_LIMIT,
                   'n': len(keys)})
            self._view = _Refused(req, self.conf, registered)
        else:
            own = self._own
            mine = set(own.allocations)
            items = [item for item in items if item.ref not in mine]
            items.extend(own.items)
            snap = snapshot.Snapshot(items, dict(own.reservations),
                                     registered=registered)
            self._view = RequestView(None, snap, self.now, self.conf,
                                     request=req)
            LOG.debug('nova_lease: no snapshot yet: read %(count)d '
                      'allocations (%(how)s) of %(hosts)d hosts for a '
                      'request in %(ms).1f ms',
                      {'count': len(items), 'how': how,
                       'hosts': len(keys),
                       'ms': (time.monotonic() - started) * 1000})
        self._hosts = wanted
        return self._view

    def passes(self, host_states):
        """[(bool, reason)] per HostState."""
        return self._view_for(host_states).passes(host_states)

    def weights(self, host_states):
        """Raw weights in [-1, 1] (0 where unknown)."""
        return self._view_for(host_states).weights(host_states)


class _Refused(object):
    """A request that cannot be checked: it passes no host."""

    def __init__(self, req, conf, registered):
        self.request = req
        self.conf = conf
        self.registered = registered

    def passes(self, host_states):
        freepool = self.conf.nova_lease.freepool_aggregate
        out = []
        for hs in host_states:
            why = _aggregate_rule(self.request, hs, freepool,
                                  self.registered)
            out.append((False, why or 'too many promises to check without '
                                      'the snapshot, which is being read'))
        return out

    def weights(self, host_states):
        return [0.0] * len(host_states)


def view_for(spec_obj, fresh, conf=CONF):
    """The view of ``spec_obj``: a :class:`RequestView`, or while the
    scheduler has no snapshot a :class:`ColdView` (a :class:`ClosedView`
    when the side database cannot be read either).

    ``fresh``: build a new one (the filter, once per instance of the
    request) rather than reuse the last one built for this RequestSpec
    (the weigher, right after the filter). Never waits for a full read
    of the lease calendar.
    """
    if not fresh:
        view = _recall(spec_obj)
        if view is not None:
            return view
    now = timeutils.utcnow()
    try:
        snap = get_snapshot(now, conf)
        if snap is not None:
            view = RequestView(spec_obj, snap, now, conf)
            if _COLD_OVERFLOW:
                _COLD_OVERFLOW.clear()
        else:
            view = ColdView(spec_obj, now, conf)
    except Exception as e:
        LOG.exception('nova_lease: cannot read the lease calendar; '
                      'failing closed')
        view = ClosedView(spec_obj, now, conf, reason=str(e))
    _remember(spec_obj, view)
    return view
