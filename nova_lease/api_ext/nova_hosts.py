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
"""Host facts and the free pool, from inside nova-api (Nova's own APIs).

The lease API runs in nova-api, so host registration asks Nova directly,
in process, with the caller's (admin) request context, exactly as Nova's
own REST controllers do:

* facts: ``nova.compute.api.HostAPI.compute_node_search_by_hypervisor``
  (the os-hypervisors code path; it visits every cell) gives the compute
  node (vcpus, memory_mb, local_gb, cpu_info, hypervisor type and
  version, service host); ``nova.availability_zones`` gives its zone;
* the free pool: ``nova.compute.api.AggregateAPI`` (the os-aggregates
  code path: it also mirrors the membership to Placement and tells the
  scheduler) creates the ``[nova_lease] freepool_aggregate`` aggregate if
  it is missing and adds or removes the host's compute service;
* the servers a host runs: its cell (``HostMapping``) and the instances
  of that cell whose ``host`` is the compute service, any project, any
  state (a host that runs servers is not registered).

No HTTP round trip, no service credentials in nova-api. The engine, a
separate process, moves hosts between aggregates through the compute
REST API instead (nova_lease.compute).
"""

import threading

from nova.api.openstack import common as api_common
from nova import availability_zones
from nova.compute import api as compute_api
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from nova import servicegroup
from oslo_log import log as logging

from nova_lease import exception
from nova_lease import hunt
from nova_lease import status

LOG = logging.getLogger(__name__)

_LOCK = threading.Lock()
_APIS = {}


class ComputeHostNotFound(exception.NotFound):
    msg_fmt = ("name: no compute node has the hypervisor hostname "
               "%(name)s (see 'openstack hypervisor list')")


class FreePoolError(exception.Conflict):
    msg_fmt = '%(reason)s'


class CellUnavailable(exception.Conflict):
    msg_fmt = ('cannot tell which servers host %(host)s runs: its cell '
               'did not answer (%(reason)s); retry later')


def _api(name):
    api = _APIS.get(name)
    if api is None:
        with _LOCK:
            api = _APIS.get(name)
            if api is None:
                cls = {'host': compute_api.HostAPI,
                       'aggregate': compute_api.AggregateAPI}[name]
                api = _APIS[name] = cls()
    return api


def compute_node_facts(ctx, hypervisor_hostname):
    """The hosts-table columns of a compute node, from Nova.

    :raises ComputeHostNotFound: no node has exactly that name.
    """
    ctx = ctx.elevated()
    nodes = _api('host').compute_node_search_by_hypervisor(
        ctx, hypervisor_hostname)
    nodes = [n for n in nodes
             if n.hypervisor_hostname == hypervisor_hostname]
    if not nodes:
        raise ComputeHostNotFound(name=hypervisor_hostname)
    node = nodes[0]
    return {
        'hypervisor_hostname': node.hypervisor_hostname,
        'service_host': node.host,
        'availability_zone': availability_zones.get_host_availability_zone(
            ctx, node.host),
        'vcpus': node.vcpus,
        'memory_mb': node.memory_mb,
        'local_gb': node.local_gb,
        'cpu_info': node.cpu_info,
        'hypervisor_type': node.hypervisor_type,
        'hypervisor_version': node.hypervisor_version,
    }


def _find_aggregate(ctx, name):
    for aggregate in _api('aggregate').get_aggregate_list(ctx):
        if aggregate.name == name:
            return aggregate
    return None


def ensure_aggregate(ctx, name):
    """The aggregate called ``name``, created (without a zone) if missing."""
    ctx = ctx.elevated()
    aggregate = _find_aggregate(ctx, name)
    if aggregate is not None:
        return aggregate
    try:
        LOG.info('Creating the free pool aggregate %s', name)
        return _api('aggregate').create_aggregate(ctx, name, None)
    except nova_exception.AggregateNameExists:
        # Created concurrently by another request.
        return _find_aggregate(ctx, name)


def add_to_freepool(ctx, service_host, freepool):
    """Add the compute service host to the free pool (idempotent)."""
    ctx = ctx.elevated()
    aggregate = ensure_aggregate(ctx, freepool)
    if service_host in (aggregate.hosts or []):
        return aggregate
    try:
        return _api('aggregate').add_host_to_aggregate(
            ctx, aggregate.id, service_host)
    except nova_exception.AggregateHostExists:
        return aggregate
    except (nova_exception.InvalidAggregateAction,
            nova_exception.ComputeHostNotFound) as e:
        raise FreePoolError(reason='cannot add host %s to the aggregate %s: '
                            '%s' % (service_host, freepool, e)) from e


def move_to_aggregate(ctx, name, service_host, freepool=None):
    """Add the host to the aggregate ``name``, then (if ``freepool``)
    remove it from the free pool: never outside both (idempotent).
    """
    ctx = ctx.elevated()
    aggregate = ensure_aggregate(ctx, name)
    if service_host not in (aggregate.hosts or []):
        try:
            _api('aggregate').add_host_to_aggregate(ctx, aggregate.id,
                                                    service_host)
        except nova_exception.AggregateHostExists:
            pass
    if freepool:
        remove_from_freepool(ctx, service_host, freepool)


def remove_from_freepool(ctx, service_host, freepool):
    """Remove the host from the free pool; False if it was not there."""
    ctx = ctx.elevated()
    aggregate = _find_aggregate(ctx, freepool)
    if aggregate is None or service_host not in (aggregate.hosts or []):
        return False
    try:
        _api('aggregate').remove_host_from_aggregate(ctx, aggregate.id,
                                                     service_host)
    except (nova_exception.AggregateHostNotFound,
            nova_exception.ComputeHostNotFound):
        return False
    return True


def wake(ctx, service_host):
    """Enable the host's nova-compute if the engine's idle-host action
    disabled it (never one disabled by anyone else); True if it did.

    Through Nova's own service update (os-services' code path, which also
    syncs the COMPUTE_STATUS_DISABLED trait in placement).
    """
    ctx = ctx.elevated()
    try:
        mapping = objects.HostMapping.get_by_host(ctx, service_host)
        nova_context.set_target_cell(ctx, mapping.cell_mapping)
        service = objects.Service.get_by_compute_host(ctx, service_host)
    except (nova_exception.HostMappingNotFound,
            nova_exception.ComputeHostNotFound):
        return False
    if not status.idle_disabled(service.disabled, service.disabled_reason):
        return False
    service.disabled = False
    service.disabled_reason = None
    _api('host').service_update(ctx, service)
    LOG.info('Enabled host %s that was idle: a lease needs it',
             service_host)
    return True


def aggregate_hosts(ctx, name):
    """The compute service hosts of the aggregate ``name`` (an empty set
    when ``name`` is empty or no aggregate has it).
    """
    if not name:
        return set()
    aggregate = _find_aggregate(ctx.elevated(), name)
    return set(aggregate.hosts or ()) if aggregate is not None else set()


#: Aggregate metadata that dedicates its hosts to some projects (Nova's
#: AggregateMultiTenancyIsolation and its placement pre-filter; keys
#: ``filter_tenant_id``, ``filter_tenant_id_2``...).
TENANT_KEY = 'filter_tenant_id'

_SERVICEGROUP = []


def _servicegroup():
    if not _SERVICEGROUP:
        with _LOCK:
            if not _SERVICEGROUP:
                _SERVICEGROUP.append(servicegroup.API())
    return _SERVICEGROUP[0]


def working_compute_hosts(ctx):
    """The compute service hosts whose nova-compute is enabled and up
    (not disabled, not forced down, reporting), from every cell; a cell
    that does not answer gives none (its hosts' state is unknown).
    """
    ctx = ctx.elevated()
    results = nova_context.scatter_gather_all_cells(
        ctx, objects.ServiceList.get_by_binary, 'nova-compute',
        include_disabled=True)
    group = _servicegroup()
    out = set()
    for cell, services in results.items():
        if nova_context.is_cell_failure_sentinel(services):
            LOG.warning('Cell %s did not answer: its compute hosts are '
                        'left out of best-effort hunts', cell)
            continue
        for service in services:
            if (not service.disabled and not service.forced_down and
                    group.service_is_up(service)):
                out.add(service.host)
    return out


def dedicated_hosts(ctx, allowed=None):
    """The compute service hosts of aggregates that dedicate their
    hosts to some projects (:data:`TENANT_KEY` metadata), but ``allowed``
    (an aggregate name).
    """
    out = set()
    for aggregate in _api('aggregate').get_aggregate_list(ctx.elevated()):
        if allowed and aggregate.name == allowed:
            continue
        metadata = aggregate.metadata or {}
        if any(key.startswith(TENANT_KEY) for key in metadata):
            out.update(aggregate.hosts or ())
    return out


def host_zone(ctx, service_host):
    """The availability zone of a compute service host."""
    return availability_zones.get_host_availability_zone(ctx.elevated(),
                                                         service_host)


def placement_rules(ctx, server_id):
    """What Nova keeps a server to when it moves it: ``(zone, group)``,
    the availability zone its boot asked for (None: any) and its server
    group as ``(uuid, policy, [service hosts of its other members])``
    (None: none), from its RequestSpec.
    """
    ctx = ctx.elevated()
    try:
        spec = objects.RequestSpec.get_by_instance_uuid(ctx, server_id)
    except nova_exception.RequestSpecNotFound:
        return None, None
    zone = getattr(spec, 'availability_zone', None) or None
    group = None
    if spec.obj_attr_is_set('instance_group') and spec.instance_group:
        try:
            found = objects.InstanceGroup.get_by_uuid(
                ctx, spec.instance_group.uuid)
        except nova_exception.InstanceGroupNotFound:
            found = None
        if found is not None:
            group = (found.uuid, found.policy,
                     found.get_hosts(exclude=[server_id]))
    return zone, group


def aggregates_of(ctx, service_host):
    """Names of the aggregates that hold the host."""
    return sorted(a.name for a in _api('aggregate').get_aggregates_by_host(
        ctx.elevated(), service_host))


def _instances_on_host(ctx, service_host, expected_attrs=()):
    """The Instances (not deleted) of a compute service host, from its
    cell database (``HostMapping``); a host without a mapping (never
    discovered) runs none.

    :raises CellUnavailable: (409) the cell database did not answer.
    """
    ctx = ctx.elevated()
    try:
        mapping = objects.HostMapping.get_by_host(ctx, service_host)
    except nova_exception.HostMappingNotFound:
        return []
    try:
        with nova_context.target_cell(ctx, mapping.cell_mapping) as cctx:
            return objects.InstanceList.get_by_filters(
                cctx, {'host': service_host, 'deleted': False},
                expected_attrs=list(expected_attrs))
    except Exception as e:
        LOG.exception('Could not list the servers of host %s',
                      service_host)
        raise CellUnavailable(host=service_host,
                              reason=type(e).__name__) from e


def servers_on_host(ctx, service_host):
    """The servers (not deleted) of any project on a compute service host.

    Returns ``[{'id', 'project_id', 'name', 'vm_state'}]`` ordered by id.

    :raises CellUnavailable: (409) the cell database did not answer.
    """
    return sorted(({'id': inst.uuid, 'project_id': inst.project_id,
                    'name': inst.display_name, 'vm_state': inst.vm_state}
                   for inst in _instances_on_host(ctx, service_host)),
                  key=lambda s: s['id'])


def servers_to_move(ctx, service_host, node=None):
    """The servers of a compute service host, as :class:`hunt.Server` s
    (with their Nova status, task state and flavor's size), by id.

    ``node``: only those of that compute node (hypervisor hostname): a
    service runs several with Ironic or vCenter, and a hunt that takes
    one has only that one's servers to move.

    :raises CellUnavailable: (409) the cell database did not answer.
    """
    return sorted((hunt.Server(
        inst.uuid, inst.project_id,
        api_common.status_from_state(inst.vm_state, inst.task_state),
        inst.task_state, inst.flavor.vcpus, inst.flavor.memory_mb,
        inst.flavor.root_gb + inst.flavor.ephemeral_gb,
        bool(inst.locked))
        for inst in _instances_on_host(ctx, service_host, ['flavor'])
        if node is None or inst.node == node),
        key=lambda s: s.id)
