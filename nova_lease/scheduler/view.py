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
import weakref

import nova.conf
import numpy as np
from oslo_log import log as logging
from oslo_serialization import jsonutils
from oslo_utils import timeutils

from nova_lease import calendar
from nova_lease import conf as lease_conf
from nova_lease.db import api as db_api
from nova_lease import exception as lease_exception
from nova_lease import params
from nova_lease.scheduler import fit
from nova_lease.scheduler import snapshot
from nova_lease import status

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
lease_conf.register_opts(CONF)

UNLEASED = 'unleased'
LEASED = 'leased'
HOST_RESERVATION = 'host reservation'

#: Metadata key of a host reservation's aggregate naming the reservation
#: (nova_lease.plugins.host.META_RESERVATION: the engine sets it at the
#: lease's start and deletes the aggregate at its end).
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
    size = snapshot._size_from(jsonutils.dumps(props), items)
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
        now_us = calendar._to_us(now)
        for k, hs in enumerate(host_states):
            instances = hs.instances
            if not instances:
                continue
            for uuid in [u for u in instances if u in servers]:
                row = rows.get(uuid)
                if row is None:
                    # Size unknown to the lease: the Instance may tell.
                    entry = leased_entry(servers[uuid], keys[k],
                                         _instance_size(instances[uuid]),
                                         snap, now)
                    if entry is not None:
                        end, size = entry
                        l_own.append(k)
                        l_end.append(calendar._to_us(end))
                        l_size.append(size[:3])
                    continue
                start_us, end_us, v, m, d, a_host, a_start, a_end = row
                if end_us <= now_us:
                    continue
                if start_us > now_us:
                    end_us = start_us
                elif a_host == keys[k] and a_start <= now_us < a_end:
                    end_us = now_us
                l_own.append(k)
                l_end.append(end_us)
                l_size.append((v, m, d))
    return fit.Loads.from_arrays(keys, cap, used, np.ones(n, bool), l_own,
                                 l_end, l_size)


def aggregate_marks(host_state, conf=CONF):
    """``(in the free pool?, {reservation ids})`` of a HostState.

    The reservation ids are those of the host reservations whose
    aggregate (metadata :data:`RESERVATION_KEY`) holds the host: from the
    engine's start of the lease to its end. No I/O: Nova keeps the
    HostStates' aggregates up to date.
    """
    name = conf.nova_lease.freepool_aggregate
    free = False
    held_for = set()
    for agg in host_state.aggregates or ():
        if getattr(agg, 'name', None) == name:
            free = True
        rid = (getattr(agg, 'metadata', None) or {}).get(RESERVATION_KEY)
        if rid:
            held_for.add(rid)
    return free, held_for


class RequestView(object):
    """A request against a snapshot and the HostStates of this request."""

    def __init__(self, spec_obj, snap, now, conf=CONF):
        self.snap = snap
        self.now = now
        self.conf = conf
        self.request = resolve(
            spec_obj, snap, now, conf,
            lookup=lambda uuid, when: lookup_server(conf, uuid, when),
            lookup_reservation=lambda rid, when: lookup_reservation(
                conf, rid, when),
            lookup_lease=lambda lid, when: lookup_lease(conf, lid, when),
            lookup_deferred=lambda rid, when: lookup_deferred(
                conf, rid, when))
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
        for k, hs in enumerate(host_states):
            free, held_for = aggregate_marks(hs, self.conf)
            if req.allowed is not None and not (
                    {host_key(hs), hs.host} & req.allowed):
                result[k] = (False, '%s may only use %s' % (
                    req.why, ', '.join(sorted(req.allowed)) or 'no host'))
            elif (held_for or req.kind == HOST_RESERVATION) and \
                    req.reservation not in held_for:
                # A host in a reservation's aggregate is the owner's
                # until the engine ends the lease (then it deletes the
                # servers left there), even past the end of the
                # allocation; a hinted request needs the host in its
                # aggregate (after an early end, a stale snapshot still
                # shows the lease ACTIVE).
                if held_for:
                    why = 'host reservation %s holds it' % ', '.join(
                        sorted(held_for))
                else:
                    why = 'not in the aggregate of reservation %s' % (
                        req.reservation)
                result[k] = (False, why)
            elif req.kind != HOST_RESERVATION and free:
                # The free pool is for host reservations, whose admission
                # only sees allocations: no server may hide there.
                result[k] = (False, 'only host reservations use the free '
                                    'pool')
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


def _remember(spec_obj, view):
    with _VIEWS_LOCK:
        if len(_VIEWS) >= _MAX_VIEWS:
            for key in [k for k, (ref, _v) in _VIEWS.items()
                        if ref() is None]:
                del _VIEWS[key]
            if len(_VIEWS) >= _MAX_VIEWS:
                _VIEWS.clear()
        _VIEWS[id(spec_obj)] = (weakref.ref(spec_obj), view)


def _recall(spec_obj):
    with _VIEWS_LOCK:
        entry = _VIEWS.get(id(spec_obj))
    if entry is not None and entry[0]() is spec_obj:
        return entry[1]
    return None


def get_snapshot(now, conf=CONF):
    db = db_api.get_database(conf)
    return snapshot.CACHE.get(db, now, conf.nova_lease.scheduler_snapshot_ttl)


def view_for(spec_obj, fresh, conf=CONF):
    """The RequestView of ``spec_obj``.

    ``fresh``: build a new one (the filter, once per instance of the
    request) rather than reuse the last one built for this RequestSpec
    (the weigher, right after the filter). None if the side database
    cannot be read (the caller then lets every host pass).
    """
    if not fresh:
        view = _recall(spec_obj)
        if view is not None:
            return view
    now = timeutils.utcnow()
    try:
        snap = get_snapshot(now, conf)
    except Exception:
        LOG.exception('nova_lease: cannot read the lease calendar; '
                      'scheduling without it')
        return None
    view = RequestView(spec_obj, snap, now, conf)
    _remember(spec_obj, view)
    return view
