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
"""The ``flavor:instance`` resource plugin: Blazar instance reservations.

* ``on_start``: find or create the reservation's aggregate, named after
  the reservation id, with the metadata ``nova_lease_reservation_id``,
  ``nova_lease_lease_id`` and ``nova_lease_project_id`` (LeaseFilter
  reads the first); add the slot hosts to it (they stay in the free pool:
  other requests still may not use them), enabling those the engine's
  idle-host action disabled (nova_lease.periodic.idle); give the lease's
  project access to the reservation's flavor.
* ``before_end``: nothing (the engine sends the notification).
* ``on_end`` and ``cancel``: take the flavor from the project; delete
  the lease's project's servers booted with the reservation's flavor
  and wait until they are gone (another project's server with the
  flavor -- the operator shared it -- is left alone: named in the log,
  counted in the lease's note); delete the aggregate, the flavor and the
  server group.

Every step is idempotent; each waits at most ``[nova_lease_engine]
plugin_call_timeout`` seconds.
"""

from oslo_log import log as logging

from nova_lease import gate as gate_mod
from nova_lease.plugins import base
from nova_lease.plugins.flavor import RESOURCE_TYPE
from nova_lease.plugins.host import aggregates as host_aggregates
from nova_lease.plugins.host import plugin as host_plugin
from nova_lease.plugins import idle_hosts

LOG = logging.getLogger(__name__)


class FlavorPlugin(host_plugin.HostPlugin):
    """Blazar's instance reservations (``virtual:instance`` and
    ``flavor:instance`` of the lease API).

    The host plugin's helpers (the reservation's hosts) are shared, and
    the aggregate steps of :mod:`nova_lease.plugins.host.aggregates`; the
    actions are this plugin's.
    """

    resource_type = RESOURCE_TYPE

    @staticmethod
    def _props(reservation):
        return reservation.get('properties') or {}

    def on_start(self, lease, reservation):
        hosts = self._hosts(reservation)
        if not hosts:
            raise base.PluginError(
                reason='instance reservation %s of lease %s has no slot '
                       'hosts' % (reservation['id'], lease['id']))
        gate = self._gate(lease, reservation)
        name = host_aggregates.aggregate_name(reservation['id'])
        aggregate = host_aggregates.ensure(
            gate, self.compute, host_aggregates.by_name(self.compute), lease,
            reservation)
        for host in hosts:
            # Slot hosts stay in the free pool, where the idle action may
            # have disabled them (no pass since their wake-up time): the
            # promised boots need them enabled.
            idle_hosts.wake_host(gate, host)
            aggregate = host_aggregates.add_host(gate, aggregate, host, name)
        flavor_id = self._props(reservation).get('flavor_id')
        if flavor_id:
            gate.add_flavor_access(flavor_id, lease['project_id'],
                                   why='the lease starts')

    def on_end(self, lease, reservation):
        return self._end(lease, reservation)

    def cancel(self, lease, reservation):
        return self._end(lease, reservation)

    def _end(self, lease, reservation):
        gate = self._gate(lease, reservation)
        props = self._props(reservation)
        flavor_id = props.get('flavor_id')
        others = []
        if flavor_id:
            gate.remove_flavor_access(flavor_id, lease['project_id'],
                                      why='the lease ends')
            listed = self.compute.list_servers(all_projects=True,
                                               flavor=flavor_id)
            servers = []
            for server in listed:
                if server.get('tenant_id') != lease['project_id']:
                    others.append(server)
                    continue
                LOG.info('Deleting server %(server)s of reservation %(res)s '
                         'at the end of lease %(lease)s',
                         {'server': server['id'], 'res': reservation['id'],
                          'lease': lease['id']})
                try:
                    gate.delete_server(server['id'], server=server,
                                       why='the lease ends')
                except gate_mod.Refused:
                    others.append(server)
                    continue
                servers.append(server)
            for server in servers:
                self.compute.wait_for_server(server['id'], (), self._timeout,
                                             gone_ok=True, fail_statuses=())
        aggregate = host_aggregates.own(
            host_aggregates.by_name(self.compute), reservation)
        if aggregate is not None:
            host_aggregates.delete(gate, aggregate, lease, aggregate['name'])
        if flavor_id:
            gate.delete_flavor(flavor_id, why='the lease ends')
        if props.get('server_group_id'):
            gate.delete_server_group(props['server_group_id'],
                                     why='the lease ends')
        return self._others_note(lease, reservation, others)

    @staticmethod
    def _others_note(lease, reservation, others):
        """The note on the servers of other projects left alone (named
        in the log only: the lease's project may read its note).
        """
        if not others:
            return None
        for server in others:
            LOG.warning('Server %(server)s (project %(project)s) has the '
                        'flavor of reservation %(res)s of lease %(lease)s '
                        '(project %(owner)s): not the lease\'s, left alone '
                        'at its end', {'server': server['id'],
                                       'project': server.get('tenant_id'),
                                       'res': reservation['id'],
                                       'lease': lease['id'],
                                       'owner': lease['project_id']})
        return ('%d server(s) of other projects have the flavor of '
                'reservation %s and were left alone (the engine log names '
                'them)'
                % (len(others), reservation['id']))
