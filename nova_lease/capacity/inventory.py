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
"""What admission control asks Nova: its compute nodes and their usage.

:class:`Inventory` is the interface (tests give admission one of their
own); :class:`NovaInventory` reads Nova's cell databases (the compute
nodes, the servers of leases), its API database (the free pool
aggregate) and placement (the usage of the chosen hosts, the
scheduler's latest claims included). :func:`default_inventory` is the
process's, one per configuration object. Admission itself is
:mod:`nova_lease.capacity.admission`.
"""

import collections
import math
import threading
import time

import nova.conf
from nova import context as nova_context
from nova import objects
from oslo_log import log as logging

from nova_lease import calendar
from nova_lease import exception

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF


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
    ``[nova_lease_api] admission_inventory_ttl`` seconds (then read again in
    the background while the old copy still answers), for the plan only:
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
        self._refresher = None

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
            return float(self.conf.nova_lease_api.admission_inventory_ttl)
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
        """``(hosts, cached)``; ``fresh``: read now, whatever the copy.

        A copy older than the TTL is still answered while one thread
        reads the next in the background: no request waits for the read
        of every compute node (tens of milliseconds at 1,000 hosts), only
        the first of the process, and those that ask for ``fresh``.
        """
        ttl = self._ttl()
        with self._lock:
            if not fresh and ttl > 0 and self._hosts is not None:
                if (time.monotonic() - self._read_at >= ttl and
                        self._refresher is None):
                    self._refresher = threading.Thread(
                        target=self._refresh, daemon=True,
                        name='lease-inventory-refresh')
                    self._refresher.start()
                return self._hosts, True
        hosts = self._read()
        self._keep(hosts)
        return hosts, False

    def _keep(self, hosts):
        with self._lock:
            self._hosts, self._read_at = hosts, time.monotonic()

    def _refresh(self):
        try:
            self._keep(self._read())
        except Exception:
            LOG.exception('Reading the compute nodes for admission failed; '
                          'the next plan reads them again')
            self.forget()
        finally:
            with self._lock:
                self._refresher = None

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
    """Forget every cached inventory (tests)."""
    with _INVENTORIES_LOCK:
        _INVENTORIES.clear()
