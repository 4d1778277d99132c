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
   kept for ``[nova_lease_api] admission_inventory_ttl`` seconds), less every
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
   in time (like LeaseWeigher; as only the allocations that overlap the
   window are read, a host where it fits keeps fitting after ``end`` as
   far as admission knows, and this rarely decides); then the one with
   the largest share of its capacity left over the interval
   (``fit.headroom``: instances spread as Nova's RAM and CPU weighers
   spread them, so that the servers of leases that start together are
   built on many computes at once, not one after the other on one); then
   the first by name;
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

What admission asks Nova (step 1, and placement in step 4) is
:mod:`nova_lease.capacity.inventory`'s.

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
its claim, which Nova gives a filter no way to do.
doc/source/reference/scheduling.rst says so too.
"""

import collections
import datetime
import threading

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease import calendar
from nova_lease.calendar import fit
from nova_lease.capacity import inventory as nova_inventory
from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import resource_types as types
from nova_lease import status

LOG = logging.getLogger(__name__)

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


def reset():
    """Forget every cached inventory and host registry (tests)."""
    nova_inventory.reset()
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
    # Dates in microseconds, as the window reads give them.
    return calendar.Item.for_demand(host, demand, calendar.to_us(start),
                                    calendar.to_us(end), ref=_NEW)


def _plan(items, loads, demand, count, start, end):
    """Hosts for ``count`` instances, or None.

    Greedy: tightest in time first, then the most room left.
    """
    items = list(items)
    hosts = []
    for _n in range(count):
        cal = calendar.Calendar({}, items) if items else None
        ok = fit.fits(cal, loads, demand, start, end)
        candidates = [k for k, good in enumerate(ok) if good]
        if not candidates:
            return None
        subset = loads.subset(candidates)
        slack = fit.slack_seconds(cal, subset, demand, start, end)
        room = fit.headroom(cal, subset, demand, start, end)
        best = min(zip(candidates, slack, room),
                   key=lambda ksr: (ksr[1], -ksr[2],
                                    loads.hosts[ksr[0]]))[0]
        host = loads.hosts[best]
        hosts.append(host)
        items.append(_item(host, demand, start, end))
    return hosts


def _still_fits(items, loads, demand, hosts, start, end):
    """Do the planned instances fit next to ``items`` (fresh)?"""
    chosen = set(hosts)
    planned = [i for i in items if i[0] in chosen] + [
        _item(h, demand, start, end) for h in hosts]
    cal = calendar.Calendar({}, planned)
    members = [k for k, host in enumerate(loads.hosts) if host in chosen]
    return all(fit.fits(cal, loads.subset(members), calendar.Demand(),
                        start, end))


def _names(names):
    names = sorted(names)
    text = ', '.join(names[:_NAMED])
    if len(names) > _NAMED:
        text += ' and %d more' % (len(names) - _NAMED)
    return text


class _Admission(object):
    """One call of :func:`allocate_instances`."""

    def __init__(self, session, conf, inventory, demand, what, count, start,
                 end, now, only=None):
        self.only = None if only is None else set(only)
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
                                           LIVE_RESERVATIONS, DEAD_LEASES,
                                           types.SERVER_TYPES)
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
        for item in db_api.window_allocation_items(
                self.session, self.now, DEAD_RESERVATIONS, DEAD_LEASES,
                self.start, self.end, live=live):
            items_of[item[0]].append(item)
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
                          not h.freepool and h.name not in excluded and
                          (self.only is None or h.name in self.only)]
            left_out = {h.name for h in compute} - {
                h.name for h in candidates}
            if not candidates:
                # The refusal goes to members: it counts the hosts and
                # names none (a host's name is the admin's); the log
                # names them.
                LOG.info('Instance lease refused: every compute host (%s) '
                         'is registered for host reservations or in the '
                         'free pool', _names(left_out) or 'none')
                raise self._fail(
                    'no compute host is left for instance leases: every '
                    'one (%d) is registered for host reservations '
                    '(os-hosts) or in the free pool aggregate %r, and '
                    'those only take host leases' % (
                        len(left_out),
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
                    LOG.info('Instance lease refused: %s registered for '
                             'host reservations or in the free pool',
                             _names(left_out))
                    reason += ('; %d more registered for host reservations '
                               'or in the free pool, never used for '
                               'instance leases' % len(left_out))
                raise self._fail(reason)
            chosen = sorted(set(hosts))
            new = set(chosen) - locked
            if new:
                db_api.lock_hosts(session, new)
                locked |= new
            # Under the locks, fresh: what concurrent writers committed.
            fresh = collections.defaultdict(list)
            for item in db_api.window_allocation_items(
                    session, self.now, DEAD_RESERVATIONS, DEAD_LEASES,
                    start, end, hosts=chosen):
                fresh[item[0]].append(item)
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
                       inventory=None, hosts=None):
    """Choose hosts for count instances of flavor over [start, end).

    :param session: a writer session of the side database (db.writer()).
    :param conf: the ConfigOpts holding [nova_lease] and
        [nova_lease_api].
    :param flavor: dict with vcpus, memory_mb and disk_gb.
    :param count: number of instances (multi-create).
    :param start: naive UTC datetime; :param end: naive UTC datetime.
    :param inventory: what Nova runs (a
        :class:`nova_lease.capacity.inventory.Inventory`); default the
        process's :class:`~nova_lease.capacity.inventory.NovaInventory`.
    :param hosts: the only hypervisor hostnames to consider (None: all).
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
        inventory = nova_inventory.default_inventory(conf)
    return _Admission(session, conf, inventory, demand, what, count, start,
                      end, now, only=hosts).run()


#: The end of "from now on" in a query that needs a date.
_FOREVER = datetime.datetime(9000, 1, 1)


class MovePlan(object):
    """Can the cloud take servers moved off some hosts?

    For a best-effort host lease (nova_lease.hunt): each server is
    unleased, so it must fit its new host from now on, next to what runs
    there and every promise the calendar holds there. Hosts for instance
    leases only are looked at (not the registered ones, nor the free
    pool: they take no unleased server), largest servers first, each on
    the host where it fits with the most room left. Nothing is promised:
    Nova's scheduler (and LeaseFilter) places the servers when they move.

    What it looks at is read once, when it is made (Nova's compute nodes,
    fresh unless given as ``compute``, the running leased servers, every
    promise from now on on those hosts); :meth:`check` then answers each
    trial of a hunt in memory. ``only``: the hypervisor hostnames that
    may take servers (enabled, up, shared), None for all.

    :ivar compute: Nova's compute nodes (ComputeHosts) as read.
    """

    def __init__(self, session, conf, inventory=None, compute=None,
                 only=None):
        self.now = timeutils.utcnow()
        if inventory is None:
            inventory = nova_inventory.default_inventory(conf)
        registered = _registered(session)
        services = set(registered.values())
        if compute is None:
            compute, _cached = inventory.compute_hosts(fresh=True)
        self.compute = compute
        self.hosts = [h for h in self.compute
                      if h.name not in registered and
                      h.service_host not in services and not h.freepool
                      and (only is None or h.name in only)]
        self.loads, self.items = None, []
        if self.hosts:
            admission = _Admission(session, conf, inventory,
                                   calendar.Demand(), 'moved servers', 0,
                                   self.now, _FOREVER, self.now)
            self.loads = admission._loads(self.hosts, {},
                                          admission._leased())
            self.items = db_api.window_allocation_items(
                session, self.now, DEAD_RESERVATIONS, DEAD_LEASES,
                self.now, _FOREVER, hosts=[h.name for h in self.hosts])

    def check(self, servers, exclude):
        """None when ``servers`` (``[(server id, Demand)]``, or
        ``[(server id, Demand, destinations, spread)]``: the hostnames it
        may go to, None for any, and a key no two servers placed on one
        host may share, None for none) all fit on hosts other than
        ``exclude`` (hypervisor hostnames), else a text naming one that
        fits nowhere.
        """
        if not servers:
            return None
        keep = [k for k, h in enumerate(self.hosts)
                if h.name not in exclude]
        if not keep:
            return 'no other compute host takes servers'
        loads = self.loads.subset(keep)
        names = set(loads.hosts)
        items = [i for i in self.items if i[0] in names]
        now = self.now
        spread = {}
        for server in sorted(
                servers, key=lambda sd: (-sd[1].memory_mb, -sd[1].vcpus,
                                         sd[0])):
            server_id, demand = server[0], server[1]
            allowed, key = (tuple(server[2:4]) + (None, None))[:2]
            cal = calendar.Calendar({}, items) if items else None
            ok = fit.fits(cal, loads, demand, now, None)
            candidates = [k for k, good in enumerate(ok) if good and (
                allowed is None or loads.hosts[k] in allowed) and (
                key is None or loads.hosts[k] not in spread.get(key, ()))]
            if not candidates:
                return ('server %s (%d vcpus, %d MB RAM, %d GB disk) fits on '
                        'no other compute host from now on (%d looked at)'
                        % (server_id, demand.vcpus, demand.memory_mb,
                           demand.disk_gb, len(keep)))
            room = fit.headroom(cal, loads.subset(candidates), demand, now,
                                None)
            best = max(zip(candidates, room),
                       key=lambda kr: (kr[1], loads.hosts[kr[0]]))[0]
            if key is not None:
                spread.setdefault(key, set()).add(loads.hosts[best])
            items.append(calendar.Item(loads.hosts[best],
                                       calendar.to_us(now), None,
                                       demand.vcpus, demand.memory_mb,
                                       demand.disk_gb, False, server_id))
        return None
