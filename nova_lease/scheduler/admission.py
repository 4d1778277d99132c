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
records it, so that the chosen hosts' capacity is promised atomically:

1. read the live allocations overlapping the lease (side database) and
   what Nova runs now (:class:`NovaInventory`: every compute node's
   capacity and usage, and where the leased servers run);
2. choose a host per instance with the capacity calendar: among the hosts
   where the flavor fits over ``[start, end)``, the one where it fits
   tightest in time (like LeaseWeigher), then the first by name;
3. lock the chosen hosts (``db_api.lock_hosts``) and read their
   allocations again: what a concurrent admission committed before we got
   the lock is now visible. If the choice still fits, return it (the
   caller inserts the allocations before its transaction commits, so the
   lock covers them); otherwise choose again (a few rounds).

Two admissions that want the same host so run one after the other, and the
second sees the first's allocation: no host is promised twice.
"""

import math

import nova.conf
from nova import context as nova_context
from nova import objects
from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease import calendar
from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease.scheduler import fit
from nova_lease.scheduler import snapshot
from nova_lease.scheduler import view as lease_view

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

#: Rounds of choose / lock / check before giving up (each round only
#: happens when a concurrent admission took the capacity just chosen).
MAX_ROUNDS = 5

_NEW = 'new allocation'


class NoCapacity(exception.Conflict):
    msg_fmt = ('No host can hold %(what)s from %(start)s to %(end)s: '
               '%(reason)s')


class NovaInventory(object):
    """Capacities and current usage of Nova's compute nodes.

    Read from Nova's cell databases: one ComputeNode query per cell, one
    Instance query per cell for the servers linked to a live lease, and
    the aggregates (to leave out the free pool). Capacities follow
    placement: ``(total - reserved) * allocation_ratio`` with the
    ``[DEFAULT] reserved_host_*`` options of nova-api's nova.conf (keep
    them equal to the computes').
    """

    def __init__(self, context=None, conf=CONF):
        self.context = context or nova_context.get_admin_context()
        self.conf = conf

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

    def _freepool_hosts(self):
        name = self.conf.nova_lease.freepool_aggregate
        hosts = set()
        for agg in objects.AggregateList.get_all(self.context):
            if agg.name == name:
                hosts.update(agg.hosts or ())
        return hosts

    def host_loads(self, snap, now):
        """HostLoads of every compute node outside the free pool."""
        # Nova's options (``conf`` may be a ConfigOpts of our own that
        # only holds [nova_lease]).
        rv, rm, rd = (CONF.reserved_host_cpus, CONF.reserved_host_memory_mb,
                      int(math.ceil(CONF.reserved_host_disk_mb / 1024.0)))
        freepool = self._freepool_hosts()
        leased = {}
        if snap.servers:
            for inst in self._gather(
                    objects.InstanceList.get_by_filters,
                    {'uuid': sorted(snap.servers), 'deleted': False},
                    expected_attrs=[]):
                if not inst.node:
                    continue
                res = snap.servers[inst.uuid]
                size = calendar.Demand(
                    inst.vcpus or 0, inst.memory_mb or 0,
                    (inst.root_gb or 0) + (inst.ephemeral_gb or 0))
                entry = lease_view.leased_entry(res, inst.node, size, snap,
                                                now)
                if entry is not None:
                    leased.setdefault(inst.node, []).append(entry)
        loads = []
        for cn in self._gather(objects.ComputeNodeList.get_all):
            if cn.host in freepool:
                continue
            capacity = calendar.HostCapacity.from_inventory(
                cn.vcpus, cn.memory_mb, cn.local_gb,
                cn.cpu_allocation_ratio or 1.0,
                cn.ram_allocation_ratio or 1.0,
                cn.disk_allocation_ratio or 1.0, rv, rm, rd)
            used = (max((cn.vcpus_used or 0) - rv, 0),
                    max((cn.memory_mb_used or 0) - rm, 0),
                    max(int(math.ceil(cn.local_gb_used or 0)) - rd, 0))
            host = cn.hypervisor_hostname
            loads.append(fit.HostLoad(host, capacity, used,
                                      tuple(leased.get(host, ()))))
        return loads


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
    planned = list(items) + [_item(h, demand, start, end) for h in hosts]
    cal = calendar.Calendar({}, planned)
    chosen = [k for k, host in enumerate(loads.hosts) if host in set(hosts)]
    return all(fit.fits(cal, loads.subset(chosen), calendar.Demand(),
                        start, end))


def allocate_instances(session, conf, flavor, count, start, end,
                       inventory=None):
    """Choose hosts for count instances of flavor over [start, end).

    :param session: a writer session of the side database (db.writer()).
    :param conf: the ConfigOpts holding [nova_lease].
    :param flavor: dict with vcpus, memory_mb and disk_gb.
    :param count: number of instances (multi-create).
    :param start: naive UTC datetime; :param end: naive UTC datetime.
    :param inventory: what Nova runs (an object with
        ``host_loads(snapshot, now)``); default :class:`NovaInventory`.
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
        inventory = NovaInventory(conf=conf)
    snap = snapshot.read(session, now, start, end)
    loads = fit.Loads.from_host_loads(inventory.host_loads(snap, now))
    locked = set()
    for _round in range(MAX_ROUNDS):
        hosts = _plan(snap.items, loads, demand, count, start, end)
        if hosts is None:
            raise NoCapacity(
                what=what, start=start, end=end,
                reason='every host is fully promised over that period '
                       '(%d hosts considered)' % len(loads))
        new = set(hosts) - locked
        if new:
            db_api.lock_hosts(session, new)
            locked |= new
        # Read again after the locks: allocations committed meanwhile.
        snap = snapshot.read(session, now, start, end)
        if _still_fits(snap.items, loads, demand, hosts, start, end):
            LOG.debug('Admitted %(what)s from %(start)s to %(end)s on '
                      '%(hosts)s', {'what': what, 'start': start,
                                    'end': end, 'hosts': hosts})
            return [{'host': host, 'start_date': start, 'end_date': end,
                     'vcpus': demand.vcpus, 'memory_mb': demand.memory_mb,
                     'disk_gb': demand.disk_gb} for host in hosts]
    raise NoCapacity(what=what, start=start, end=end,
                     reason='concurrent admissions took the capacity')
