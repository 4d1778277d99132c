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
"""The servers that hold an instance reservation's slots, read from Nova.

Read in nova-api (the count of a boot, :mod:`nova_lease.api_ext.
slot_boots`) and in nova-scheduler (LeaseFilter), in process, with Nova's
objects and an admin context (every project):

1. the build requests with the reservation's flavor (Nova's API
   database: servers nova-api accepted and no cell has yet), read first:
   Nova creates a server in its cell before it removes its build request,
   so a server is seen by one of the two reads at least;
2. in each cell but cell0 (where Nova buries the servers it could not
   schedule; they hold nothing): the servers with the flavor that are
   not deleted, and the moves in progress (migrations not yet confirmed,
   reverted, done or failed): a server of the reservation being moved
   holds a slot on both ends; a server being resized away from the flavor
   holds its slot on the source until the resize is confirmed (Nova does
   not schedule a revert).

Costs: the build requests are read whole and filtered in Python (Nova
has no other way; they are short-lived), one indexed query per cell for
the servers, and one query per cell for the migrations in progress
(Nova has no index on their status: keep the table short with ``nova-
manage db archive_deleted_rows``). Only boots and moves of servers with
an instance reservation's flavor pay them.

With ``locate``, the hosts of the servers not on a host yet come from
placement: a build request the scheduler has placed (the instances of a
multi-create placed before this one, a boot placed by another scheduler
worker) or a server just created in its cell.
"""

from nova_lease import exception
from nova_lease.plugins.flavor import slots as slot_rules

#: Nova's migration statuses of a move still in progress (the statuses
#: Nova's own "in progress" queries leave out are over: confirmed,
#: reverted, error, failed, completed, cancelled, done).
MOVING = ('queued', 'preparing', 'running', 'pre-migrating', 'migrating',
          'post-migrating', 'finished', 'accepted', 'confirming',
          'reverting')
#: A resize (or cold migration) waiting for its confirmation.
FINISHED = 'finished'


def _in_cell(cctxt, flavor_id):
    """[(uuid, hosts, vm_state)] of the holders in one cell."""
    from nova import objects

    found = {}
    for instance in objects.InstanceList.get_by_filters(
            cctxt, {'instance_type_id': flavor_id, 'deleted': False},
            expected_attrs=[]):
        found[instance.uuid] = ({instance.node} if instance.node else set(),
                                instance.vm_state)
    for migration in objects.MigrationList.get_by_filters(
            cctxt, {'status': list(MOVING)}):
        ends = {migration.source_node, migration.dest_node} - {None}
        if migration.instance_uuid in found:
            found[migration.instance_uuid][0].update(ends)
        elif (migration.status == FINISHED and
                migration.obj_attr_is_set('old_instance_type_id') and
                migration.old_instance_type_id == flavor_id and
                migration.source_node):
            found[migration.instance_uuid] = ({migration.source_node},
                                              'resized')
    return [(uuid, frozenset(hosts), vm_state)
            for uuid, (hosts, vm_state) in found.items()]


def read(ctx, flavor_id, locate=None):
    """The :class:`~.slots.Holder` list of the reservation whose flavor's
    internal id (``Flavor.id``) is ``flavor_id``.

    :param ctx: an admin RequestContext.
    :param locate: None, or ``locate(uuid)`` -> the hosts where placement
        has the server's allocations (for the servers on no host yet).
    :raises NovaLeaseException: a cell did not answer.
    """
    from nova.compute import vm_states
    from nova import context as nova_context
    from nova import objects

    building = {}
    for build in objects.BuildRequestList.get_by_filters(
            ctx, {'instance_type_id': flavor_id}):
        building[build.instance_uuid] = build.id
    holders = {}
    results = nova_context.scatter_gather_skip_cell0(
        ctx, _in_cell, flavor_id)
    for result in results.values():
        if nova_context.is_cell_failure_sentinel(result):
            raise exception.NovaLeaseException(
                'cannot count the servers of an instance reservation: a '
                'cell did not answer')
        for uuid, hosts, vm_state in result:
            if (not hosts and locate is not None and
                    vm_state != vm_states.SHELVED_OFFLOADED):
                hosts = frozenset(locate(uuid))
            holders[uuid] = slot_rules.Holder(uuid, hosts, False, None)
    for uuid, order in building.items():
        if uuid in holders:
            continue
        hosts = frozenset(locate(uuid)) if locate is not None \
            else frozenset()
        holders[uuid] = slot_rules.Holder(uuid, hosts, True, order)
    return list(holders.values())


def placement_locator(ctx, names):
    """``locate(uuid)``: the hosts among ``names`` (hypervisor hostnames:
    compute nodes' resource providers are named after them) where
    placement has allocations of consumer ``uuid``.
    """
    from nova.scheduler.client import report

    client = report.report_client_singleton()
    names = set(names)

    def locate(uuid):
        allocations = client.get_allocs_for_consumer(ctx, uuid).get(
            'allocations') or {}
        hosts = set()
        for provider in allocations:
            name = client.get_resource_provider_name(ctx, provider)
            if name in names:
                hosts.add(name)
        return hosts

    return locate
