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
"""Servers of a future lease: real servers, shelved-offloaded from the boot.

A ``POST /servers`` with lease hints whose start is in the future is
handled by Nova's own ``ServersController.create`` (the same validation,
policy, quota, naming of a multi-create, BuildRequest, RequestSpec and
InstanceMapping, and the same 202), with one difference: its compute
API's conductor call ``schedule_and_build_instances`` is
:class:`ShelvedBuild`, which does what the conductor does after the
scheduler (the Instance in the cell, its block device mappings, tags,
instance action, the mapping to the cell, the BuildRequest removed), but
without the scheduler, without placement allocations and without a
compute: the instance is created ``SHELVED_OFFLOADED`` (power state
``SHUTDOWN``, no host or node), as a shelve-offload leaves a server. Its
ports, if the boot asks for networks, are created unbound, as a
shelve-offload leaves them (the compute binds them at the unshelve).

The cell is the promised host's (the reservation's allocation, read from
the side database by the lease named in the RequestSpec's scheduler hint
``nova_lease_id``, which the boot filter has set): Nova unshelves a
server within its cell only.

So nothing needs capacity now; the server is listed, shown, found by name,
renamed, tagged, given metadata and deleted as any shelved-offloaded
server, and counts against the project's quota as one. At the lease's
start the engine unshelves it (Nova's own path), and the scheduler's
LeaseFilter admits it only on the promised hosts.

Used by :mod:`nova_lease.api_ext.servers` (``_boot`` with
``shelved=True``), inside nova-api, in the request's thread.
"""

import threading

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import params as lease_params
from nova_lease import wire

LOG = logging.getLogger(__name__)

RESERVED_TAG = wire.TAG_RESERVED

_LOCK = threading.Lock()
_RESOURCE = []


def _lease_id(request_spec):
    hints = request_spec.scheduler_hints \
        if request_spec.obj_attr_is_set('scheduler_hints') else None
    value = (hints or {}).get(lease_params.LEASE_ID_HINT)
    if isinstance(value, list):
        value = value[0] if value else None
    return value


def _promised_hosts(conf, lease_id):
    """{server index: promised host} of the lease's reservations."""
    db = db_api.get_database(conf)
    lease = db_api.lease_get(db, lease_id)
    hosts = {}
    for reservation in lease['reservations']:
        index = (reservation.get('properties') or {}).get('index', 0)
        for allocation in db_api.allocation_list(
                db, reservation_id=reservation['id']):
            hosts.setdefault(index, allocation['host'])
    return hosts


class ShelvedBuild(object):
    """The conductor's ``schedule_and_build_instances`` for a future
    lease: the instances are created shelved-offloaded, nothing is
    scheduled or built (see the module's documentation).
    """

    def __init__(self, network_api):
        self.network_api = network_api

    def _cell(self, context, host, cache):
        from nova import objects

        if host not in cache:
            cell = None
            if host is not None:
                try:
                    cell = objects.HostMapping.get_by_host(
                        context, host).cell_mapping
                except Exception:
                    LOG.warning('No cell mapping for host %s: the server '
                                'goes to the first cell', host)
            if cell is None:
                cells = [c for c in objects.CellMappingList.get_all(context)
                         if not c.is_cell0()]
                if not cells:
                    raise exception.NovaLeaseException(
                        'no cell to create the server in')
                cell = cells[0]
            cache[host] = cell
        return cache[host]

    def schedule_and_build_instances(self, context, build_requests,
                                     request_spec, image, admin_password,
                                     injected_files, requested_networks,
                                     block_device_mapping, tags=None):
        from nova.compute import instance_actions
        from nova.compute import power_state
        from nova.compute import vm_states
        from nova.conductor import manager as conductor_manager
        import nova.conf
        from nova import exception as nova_exception
        from nova import objects

        conf = nova.conf.CONF
        specs = request_spec
        lease_id = _lease_id(specs[0])
        hosts = _promised_hosts(conf, lease_id) if lease_id else {}
        cells = {}
        tag_names = [t.tag for t in tags or ()]
        if RESERVED_TAG not in tag_names:
            tag_names.append(RESERVED_TAG)
        now = timeutils.utcnow()
        created = []
        try:
            for build_request, spec in zip(build_requests, specs):
                instance = build_request.get_new_instance(context)
                index = instance.launch_index or 0
                cell = self._cell(context, hosts.get(index), cells)
                instance.vm_state = vm_states.SHELVED_OFFLOADED
                instance.task_state = None
                instance.power_state = power_state.SHUTDOWN
                instance.host = None
                instance.node = None
                with conductor_manager.obj_target_cell(
                        instance, cell) as cctxt:
                    instance.create()
                    created.append((instance, cell))
                    # Marked shelved as a shelve-offload does (a save:
                    # the server has an updated_at, which Nova's
                    # changes-since filter reads).
                    instance.system_metadata['shelved_at'] = now.isoformat()
                    # Nova acts on a shelved server (unshelve, ...) only
                    # once it has been launched: it is, as a record.
                    instance.launched_at = now
                    instance.save()
                    objects.InstanceAction.action_start(
                        cctxt, instance.uuid, instance_actions.CREATE,
                        want_result=False)
                    # Nova's own helper (it uses no manager state).
                    conductor_manager.ComputeTaskManager.\
                        _create_block_device_mapping(
                            conductor_manager.ComputeTaskManager, cell,
                            instance.flavor, instance.uuid,
                            block_device_mapping)
                    instance.tags = objects.TagList.create(
                        cctxt, instance.uuid, tag_names)
                    if requested_networks and not (
                            requested_networks.no_allocate):
                        # Unbound ports, as a shelve-offload leaves them.
                        self.network_api.allocate_for_instance(
                            cctxt, instance, requested_networks,
                            security_groups=[
                                s.identifier for s in spec.security_groups],
                            bind_host_id=None)
                    objects.InstanceAction.action_finish(
                        cctxt, instance.uuid, want_result=False)
                conductor_manager.ComputeTaskManager._map_instance_to_cell(
                    context, instance, cell)
                try:
                    build_request.destroy()
                except nova_exception.BuildRequestNotFound:
                    # Deleted by its owner meanwhile: no server.
                    with conductor_manager.obj_target_cell(instance, cell):
                        instance.destroy()
                    created.remove((instance, cell))
                LOG.info('Server %(server)s of lease %(lease)s created '
                         'shelved-offloaded in cell %(cell)s, to be '
                         'unshelved at the start on %(host)s',
                         {'server': instance.uuid, 'lease': lease_id,
                          'cell': cell.identity,
                          'host': hosts.get(index)})
        except Exception:
            LOG.exception('Creating the shelved servers of lease %s failed',
                          lease_id)
            for instance, cell in created:
                try:
                    with conductor_manager.obj_target_cell(instance, cell):
                        instance.destroy()
                except Exception:
                    LOG.exception('Could not remove instance %s',
                                  instance.uuid)
            raise


def _resource():
    """Nova's servers resource whose compute API builds shelved servers
    (built once per process).
    """
    if not _RESOURCE:
        with _LOCK:
            if not _RESOURCE:
                from nova.api.openstack.compute import routes
                from nova.api.openstack.compute import servers
                from nova.compute import api as compute_api

                api = compute_api.API()
                api.compute_task_api = ShelvedBuild(api.network_api)
                resource = routes.server_controller()
                controller = resource.controller
                assert isinstance(controller, servers.ServersController)
                controller.compute_api = api
                _RESOURCE.append(resource)
    return _RESOURCE[0]


def create(req):
    """Nova's answer to the boot ``req`` (``POST /servers``, its body as
    the filter prepared it), its servers created shelved-offloaded.
    """
    req.environ['wsgiorg.routing_args'] = ((), {'action': 'create'})
    return req.get_response(_resource())
