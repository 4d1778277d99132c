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
"""Admission control: does a scheduled lease fit, and where?

Called by whoever records a lease, inside the writer transaction that
records it, so that the chosen hosts' capacity is promised atomically.
It reads only what the lease's window and its candidate hosts need, so
that its cost does not grow with the reservations elsewhere in time
(benchmarks/admission.py):

1. the candidate hosts: Nova's compute nodes (capacity and usage, a copy
   kept for ``[nova_lease] admission_inventory_ttl`` seconds), less every
   host registered for host reservations (the side database's ``hosts``
   table, whether reservable and whether in the free pool right now:
   such a host goes back to the free pool when its host lease ends) and
   every host of the free pool aggregate. Instance leases never get a
   promise on those;
2. the allocations overlapping ``[start, end)`` (index range scans, see
   ``db_api.window_allocation_rows``; from a covering index alone, those
   of reservations that hold nothing any more included, so the plan can
   only see hosts fuller than they are; a plan that finds nothing is made
   again with the live ones only) and the running leased servers
   (the instance reservations linked to a server; where they run comes
   from Nova), whose capacity comes back at their lease's end;
3. a host per instance with the capacity calendar: among the hosts where
   the flavor fits over ``[start, end)``, the one where it fits tightest
   in time (like LeaseWeigher), then the first by name;
4. the chosen hosts are locked (``db_api.lock_hosts``), and then read
   again, fresh: their allocations (what a concurrent admission committed
   before we got the lock), whether they were registered meanwhile, the
   free pool, and their usage *from placement* (``GET
   /resource_providers/{uuid}/usages``, one request per chosen host).
   Placement holds the scheduler's claims as soon as they are made,
   while a compute node's usage follows only when its compute service
   has built the server. If the choice still fits, it is returned (the
   caller inserts the allocations before its transaction commits, so the
   lock covers them); otherwise the hosts that turned out full are seen
   as they are and the choice is made again (a few rounds).

Two admissions that want the same host run one after the other, and the
second sees the first's allocation: no host is promised twice.

What is left: the scheduler takes no lock. A scheduling request whose
LeaseFilter read the calendar before this admission committed, and whose
placement claim lands after this admission read placement, is not seen
by either side. That window is one scheduling pass of one instance
(LeaseFilter, the weighers and the claim: milliseconds) and only matters
when that request and the lease want the last capacity of the same
host; a request that starts after the commit sees the promise (the
scheduler's snapshot follows the change journal at every request).
Closing it would need the scheduler to check the calendar again after
its claim, which Nova gives a filter no way to do. doc/scheduling.rst
says so too.
"""

import collections
import math
import threading
import time

import nova.conf
from nova import context as nova_context
from nova import objects
from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease import calendar
from nova_lease.calendar import fit
from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import status

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

#: Rounds of choose / lock / check before giving up (a round happens
#: again only when a chosen host turned out full, registered or taken by
#: a concurrent admission).
MAX_ROUNDS = 8

#: Reservation and lease statuses that hold nothing any more.
DEAD_RESERVATIONS = (str(status.ReservationStatus.DELETED),
                     str(status.ReservationStatus.ERROR))
LIVE_RESERVATIONS = (str(status.ReservationStatus.PENDING),
                     str(status.ReservationStatus.ACTIVE))
DEAD_LEASES = (str(status.LeaseStatus.TERMINATED),
               str(status.LeaseStatus.ERROR))

_NEW = 'new allocation'
#: Hosts named in a message at most.
_NAMED = 10


class NoCapacity(exception.Conflict):
    msg_fmt = ('No host can hold %(what)s from %(start)s to %(end)s: '
               '%(reason)s')


class ComputeHost(collections.namedtuple(
        'ComputeHost', 'name service_host uuid capacity used freepool',
        defaults=(False,))):
    """One compute node as admission sees it.

    :ivar name: hypervisor hostname (the calendar's host key).
    :ivar service_host: the compute service's host (aggregates use it).
    :ivar uuid: the node's (and its resource provider's) uuid.
    :ivar capacity: :class:`nova_lease.calendar.HostCapacity` or None
        (unknown: never fits).
    :ivar used: (vcpus, memory_mb, disk_gb) used by every server on it.
    :ivar freepool: in the free pool aggregate (never used here).
    """

    __slots__ = ()


class Inventory(object):
    """What admission asks Nova (see :class:`NovaInventory`)."""

    def compute_hosts(self, fresh=False):
        """Every compute node, as ComputeHosts.

        May come from a copy of recent reads unless ``fresh``; the
        second item says whether it did: ``(hosts, cached)``.
        """
        raise NotImplementedError()

    def leased_servers(self, uuids):
        """{uuid: (hypervisor hostname, Demand)} of those servers that
        exist and run on a node.
        """
        raise NotImplementedError()

    def placement_usage(self, hosts):
        """{name: (vcpus, memory_mb, disk_gb) or None}: what placement
        says every consumer uses on these ComputeHosts now, the
        scheduler's latest claims included (None: unknown to placement,
        or it did not answer).
        """
        raise NotImplementedError()

    def freepool_members(self, service_hosts):
        """The ones among ``service_hosts`` in the free pool now."""
        raise NotImplementedError()


class NovaInventory(Inventory):
    """Capacities and usage of Nova's compute nodes, and placement's.

    Compute nodes come from Nova's cell databases (one ComputeNode query
    per cell) and the free pool from the API database; both are kept for
    ``[nova_lease] admission_inventory_ttl`` seconds, for the plan only:
    the usage of the hosts a plan chooses is always read again from
    placement (:meth:`placement_usage`), and their aggregates
    (:meth:`freepool_members`), before anything is promised on them.
    Capacities are computed as the scheduler's HostStates and placement
    do, ``(total - reserved) * allocation_ratio``, from the compute
    nodes' totals and ratios and the ``[DEFAULT] reserved_host_*``
    options of nova-api's nova.conf (keep them equal to the computes').
    Thread-safe.
    """

    def __init__(self, conf=CONF, context=None, placement=None):
        self.conf = conf
        self._context = context
        self._placement = placement
        self._lock = threading.Lock()
        self._hosts = None
        self._read_at = None

    @property
    def context(self):
        return self._context or nova_context.get_admin_context()

    @property
    def placement(self):
        if self._placement is not None:
            return self._placement
        from nova.scheduler.client import report
        return report.report_client_singleton()

    def forget(self):
        """Drop the copy of the compute nodes (the next plan reads them)."""
        with self._lock:
            self._hosts = self._read_at = None

    def _ttl(self):
        try:
            return float(self.conf.nova_lease.admission_inventory_ttl)
        except (AttributeError, TypeError, ValueError):
            return 0.0

    def _gather(self, fn, *args, **kwargs):
        results = nova_context.scatter_gather_all_cells(
            self.context, fn, *args, **kwargs)
        out = []
        for cell, result in results.items():
            if nova_context.is_cell_failure_sentinel(result):
                LOG.warning('Cell %s did not answer; its hosts are left '
                            'out of admission control', cell)
                continue
            out.extend(result)
        return out

    def _freepool(self):
        name = self.conf.nova_lease.freepool_aggregate
        hosts = set()
        for agg in objects.AggregateList.get_all(self.context):
            if agg.name == name:
                hosts.update(agg.hosts or ())
        return hosts

    def _read(self):
        # Nova's options (``conf`` may be a ConfigOpts of our own that
        # only holds [nova_lease]).
        rv, rm, rd = (CONF.reserved_host_cpus, CONF.reserved_host_memory_mb,
                      int(math.ceil(CONF.reserved_host_disk_mb / 1024.0)))
        freepool = self._freepool()
        hosts = []
        for cn in self._gather(objects.ComputeNodeList.get_all):
            capacity = calendar.HostCapacity.from_inventory(
                cn.vcpus, cn.memory_mb, cn.local_gb,
                cn.cpu_allocation_ratio or 1.0,
                cn.ram_allocation_ratio or 1.0,
                cn.disk_allocation_ratio or 1.0, rv, rm, rd)
            used = (max((cn.vcpus_used or 0) - rv, 0),
                    max((cn.memory_mb_used or 0) - rm, 0),
                    max(int(math.ceil(cn.local_gb_used or 0)) - rd, 0))
            hosts.append(ComputeHost(cn.hypervisor_hostname, cn.host,
                                     cn.uuid, capacity, used,
                                     cn.host in freepool))
        hosts.sort(key=lambda h: h.name)
        return hosts

    def compute_hosts(self, fresh=False):
        ttl = self._ttl()
        with self._lock:
            if (not fresh and ttl > 0 and self._hosts is not None and
                    time.monotonic() - self._read_at < ttl):
                return self._hosts, True
        hosts = self._read()
        with self._lock:
            self._hosts, self._read_at = hosts, time.monotonic()
        return hosts, False

    def leased_servers(self, uuids):
        if not uuids:
            return {}
        out = {}
        for inst in self._gather(
                objects.InstanceList.get_by_filters,
                {'uuid': sorted(uuids), 'deleted': False},
                expected_attrs=[]):
            if not inst.node:
                continue
            out[inst.uuid] = (inst.node, calendar.Demand(
                inst.vcpus or 0, inst.memory_mb or 0,
                (inst.root_gb or 0) + (inst.ephemeral_gb or 0)))
        return out

    def _get(self, url):
        resp = self.placement.get(url, version='1.0')
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise exception.NovaLeaseException(
                'placement answered %s to GET %s' % (resp.status_code, url))
        return resp.json()

    def placement_usage(self, hosts):
        out = {}
        for host in hosts:
            try:
                usages = self._get('/resource_providers/%s/usages'
                                   % host.uuid)
            except Exception as e:
                LOG.warning('Cannot read the placement usage of host '
                            '%(host)s (%(error)s): it gets no new promise',
                            {'host': host.name, 'error': e})
                usages = None
            if usages is None:
                out[host.name] = None
                continue
            usages = usages.get('usages') or {}
            out[host.name] = tuple(int(usages.get(rc, 0))
                                   for rc in _RESOURCES)
        return out

    def freepool_members(self, service_hosts):
        name = self.conf.nova_lease.freepool_aggregate
        found = set()
        for host in service_hosts:
            if any(agg.name == name for agg in
                   objects.AggregateList.get_by_host(self.context, host)):
                found.add(host)
        return found


_RESOURCES = ('VCPU', 'MEMORY_MB', 'DISK_GB')


_INVENTORIES = {}
_INVENTORIES_LOCK = threading.Lock()


def default_inventory(conf=CONF):
    """The process's NovaInventory (one per ConfigOpts)."""
    with _INVENTORIES_LOCK:
        inventory = _INVENTORIES.get(id(conf))
        if inventory is None or inventory.conf is not conf:
            inventory = _INVENTORIES[id(conf)] = NovaInventory(conf)
        return inventory


def reset():
    """Forget every cached inventory and host registry (tests)."""
    with _INVENTORIES_LOCK:
        _INVENTORIES.clear()
    with _REGISTERED_LOCK:
        _REGISTERED.clear()


# -- the registered hosts, cached -----------------------------------------

_REGISTERED_LOCK = threading.Lock()
_REGISTERED = {}


def _registered(session):
    """{hypervisor hostname: service host} of every registered host.

    Kept per database and checked, in the caller's transaction, against
    the host registry's generation (db_api.host_fingerprint, one primary
    key lookup, moved by every host writer in its transaction).
    """
    key = str(db_api.url_of(session))
    fingerprint = db_api.host_fingerprint(session)
    with _REGISTERED_LOCK:
        cached = _REGISTERED.get(key)
    if cached is not None and cached[0] == fingerprint:
        return dict(cached[1])
    names = db_api.registered_hostnames(session)
    with _REGISTERED_LOCK:
        _REGISTERED[key] = (fingerprint, names)
    return dict(names)


# -- planning ----------------------------------------------------------------

def _item(host, demand, start, end):
    return calendar.Item.for_demand(host, demand, start, end, ref=_NEW)


def _plan(items, loads, demand, count, start, end):
    """Hosts for ``count`` instances (greedy, tightest first) or None."""
    items = list(items)
    hosts = []
    for _n in range(count):
        cal = calendar.Calendar({}, items) if items else None
        ok = fit.fits(cal, loads, demand, start, end)
        candidates = [k for k, good in enumerate(ok) if good]
        if not candidates:
            return None
        slack = fit.slack_seconds(cal, loads.subset(candidates), demand,
                                  start, end)
        best = min(zip(candidates, slack),
                   key=lambda ks: (ks[1], loads.hosts[ks[0]]))[0]
        host = loads.hosts[best]
        hosts.append(host)
        items.append(_item(host, demand, start, end))
    return hosts


def _still_fits(items, loads, demand, hosts, start, end):
    """Do the planned instances fit next to ``items`` (fresh)?"""
    chosen = set(hosts)
    planned = [i for i in items if i.host in chosen] + [
        _item(h, demand, start, end) for h in hosts]
    cal = calendar.Calendar({}, planned)
    members = [k for k, host in enumerate(loads.hosts) if host in chosen]
    return all(fit.fits(cal, loads.subset(members), calendar.Demand(),
                        start, end))


def _items(rows):
    return [calendar.Item(host, a_start, a_end, vcpus, memory_mb, disk_gb,
                          bool(whole), rid)
            for (_aid, rid, host, a_start, a_end, vcpus, memory_mb, disk_gb,
                 whole) in rows]


def _names(names):
    names = sorted(names)
    text = ', '.join(names[:_NAMED])
    if len(names) > _NAMED:
        text += ' and %d more' % (len(names) - _NAMED)
    return text


class _Admission(object):
    """One call of :func:`allocate_instances`."""

    def __init__(self, session, conf, inventory, demand, what, count, start,
                 end, now):
        self.session = session
        self.conf = conf
        self.inventory = inventory
        self.demand = demand
        self.what = what
        self.count = count
        self.start = start
        self.end = end
        self.now = now

    def _fail(self, reason):
        return NoCapacity(what=self.what, start=self.start, end=self.end,
                          reason=reason)

    def _leased(self):
        """{hypervisor hostname: [(end_us, vcpus, memory_mb, disk_gb)]} of
        the running leased servers (their size is in their host's usage;
        they stop counting at the returned end).
        """
        rows = db_api.linked_instance_rows(self.session, self.now,
                                           LIVE_RESERVATIONS, DEAD_LEASES)
        if not rows:
            return {}
        by_server = {}
        for (_rid, uuid, _props, _lid, l_start, l_end, _lstatus,
             holding) in rows:
            entry = by_server.setdefault(uuid, [l_start, l_end, set()])
            if holding is not None:
                entry[2].add(holding)
        out = {}
        for uuid, (node, size) in self.inventory.leased_servers(
                set(by_server)).items():
            l_start, l_end, holding = by_server[uuid]
            if l_end <= self.now:
                continue
            if l_start > self.now:
                # Created before its lease starts (shelved until then).
                until = l_start
            elif node in holding:
                # Its own allocation holds its capacity from now on (the
                # calendar has it).
                until = self.now
            else:
                until = l_end
            out.setdefault(node, []).append(
                (calendar.to_us(until),) + tuple(size[:3]))
        return out

    def _window(self, live):
        """{host: [Item]} of the allocations overlapping the window."""
        items_of = collections.defaultdict(list)
        for item in _items(db_api.window_allocation_rows(
                self.session, self.now, DEAD_RESERVATIONS, DEAD_LEASES,
                self.start, self.end, live=live)):
            items_of[item.host].append(item)
        return items_of

    def _loads(self, hosts, verified, leased):
        loads = fit.Loads()
        for host in hosts:
            capacity, used = host.capacity, host.used
            if host.name in verified:
                used = verified[host.name]
                if used is None:
                    capacity, used = None, (0, 0, 0)
                else:
                    # Placement's claims may run ahead of the node's
                    # report (and the report may count what placement
                    # does not): the larger of the two.
                    used = tuple(map(max, used, host.used))
            loads.add(host.name, capacity, used, leased.get(host.name, ()))
        return loads.done()

    def run(self):
        session, start, end = self.session, self.start, self.end
        registered = _registered(session)
        compute, cached = self.inventory.compute_hosts()
        # The plan starts from every allocation of the window, those of
        # reservations that hold nothing any more included (read from an
        # index alone): it can only find hosts fuller than they are. The
        # chosen hosts are read again exactly below; a plan that finds
        # no host is made again with the exact allocations.
        items_of = self._window(live=False)
        exact = False
        leased = self._leased()
        verified = {}
        excluded = set()
        locked = set()
        for _round in range(MAX_ROUNDS):
            services = set(registered.values())
            candidates = [h for h in compute
                          if h.name not in registered and
                          h.service_host not in services and
                          not h.freepool and h.name not in excluded]
            left_out = {h.name for h in compute} - {
                h.name for h in candidates}
            if not candidates:
                raise self._fail(
                    'no compute host is left for instance leases: every '
                    'one (%s) is registered for host reservations '
                    '(os-hosts) or in the free pool aggregate %r, and '
                    'those only take host leases' % (
                        _names(left_out) or 'none',
                        self.conf.nova_lease.freepool_aggregate))
            loads = self._loads(candidates, verified, leased)
            items = [i for h in candidates for i in items_of.get(h.name, ())]
            hosts = _plan(items, loads, self.demand, self.count, start, end)
            if hosts is None:
                if not exact:
                    items_of, exact = self._window(live=True), True
                    continue
                if cached:
                    # The plan used a copy of Nova's usage: look again
                    # before saying no.
                    compute, cached = self.inventory.compute_hosts(
                        fresh=True)
                    continue
                reason = ('every host is fully promised over that period '
                          '(%d hosts considered)' % len(candidates))
                if left_out:
                    reason += ('; %s: registered for host reservations or '
                               'in the free pool, never used for instance '
                               'leases' % _names(left_out))
                raise self._fail(reason)
            chosen = sorted(set(hosts))
            new = set(chosen) - locked
            if new:
                db_api.lock_hosts(session, new)
                locked |= new
            # Under the locks, fresh: what concurrent writers committed.
            fresh = collections.defaultdict(list)
            for item in _items(db_api.window_allocation_rows(
                    session, self.now, DEAD_RESERVATIONS, DEAD_LEASES,
                    start, end, hosts=chosen)):
                fresh[item.host].append(item)
            for host in chosen:
                items_of[host] = fresh.get(host, [])
            now_registered = db_api.registered_hostnames(session, chosen)
            if now_registered:
                registered.update(now_registered)
                continue
            by_name = {h.name: h for h in compute}
            unverified = [by_name[h] for h in chosen if h not in verified]
            if unverified:
                pool = self.inventory.freepool_members(
                    {h.service_host for h in unverified})
                if pool:
                    excluded |= {h.name for h in unverified
                                 if h.service_host in pool}
                    continue
                verified.update(self.inventory.placement_usage(unverified))
            loads = self._loads([by_name[h] for h in chosen], verified,
                                leased)
            if _still_fits([i for h in chosen for i in items_of[h]], loads,
                           self.demand, hosts, start, end):
                LOG.debug('Admitted %(what)s from %(start)s to %(end)s on '
                          '%(hosts)s', {'what': self.what, 'start': start,
                                        'end': end, 'hosts': hosts})
                return [{'host': host, 'start_date': start,
                         'end_date': end, 'vcpus': self.demand.vcpus,
                         'memory_mb': self.demand.memory_mb,
                         'disk_gb': self.demand.disk_gb} for host in hosts]
            if cached:
                # A chosen host was fuller than the copy said: the copy
                # is stale, read it again.
                compute, cached = self.inventory.compute_hosts(fresh=True)
        raise self._fail('concurrent requests took the capacity; retry')


def allocate_instances(session, conf, flavor, count, start, end,
                       inventory=None):
    """Choose hosts for count instances of flavor over [start, end).

    :param session: a writer session of the side database (db.writer()).
    :param conf: the ConfigOpts holding [nova_lease].
    :param flavor: dict with vcpus, memory_mb and disk_gb.
    :param count: number of instances (multi-create).
    :param start: naive UTC datetime; :param end: naive UTC datetime.
    :param inventory: what Nova runs (an :class:`Inventory`); default
        the process's :class:`NovaInventory`.
    :returns: one allocation dict per instance, without reservation_id:
        {'host', 'start_date', 'end_date', 'vcpus', 'memory_mb',
        'disk_gb'}; an empty list when nothing is promised.
    :raises NoCapacity: (409) when the instances do not fit.
    """
    demand = calendar.Demand(int(flavor.get('vcpus') or 0),
                             int(flavor.get('memory_mb') or 0),
                             int(flavor.get('disk_gb') or 0))
    what = '%d instance(s) of %d vcpus, %d MB RAM, %d GB disk' % (
        count, demand.vcpus, demand.memory_mb, demand.disk_gb)
    if count <= 0:
        return []
    if end <= start:
        raise NoCapacity(what=what, start=start, end=end,
                         reason='the interval is empty')
    now = timeutils.utcnow()
    if inventory is None:
        inventory = default_inventory(conf)
    return _Admission(session, conf, inventory, demand, what, count, start,
                      end, now).run()
