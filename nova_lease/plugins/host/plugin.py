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
"""The physical:host resource plugin: the engine's side of host leases.

The hosts of a reservation are its allocations in the side database
(chosen by the lease API, nova_lease.plugins.host.allocation). The
plugin moves them between Nova host aggregates through the compute API
(nova_lease.compute):

* ``on_start``: find or create the reservation's aggregate
  (:mod:`.aggregates`: named after the reservation id, as in Blazar, with
  the reservation id, the lease id and the owner project in its
  metadata); add each host to it, then remove it from the free pool
  (``[nova_lease] freepool_aggregate``) -- in that order, so that a
  host is never outside both; record the aggregate id on the
  reservation.
* ``on_end`` / ``cancel``: delete (or, with the lease's ``on_end`` or
  ``[nova_lease_engine] on_end`` = ``shelve``, shelve-offload) the servers of
  the lease still on the hosts, wait until they are gone, add the hosts
  back to the free pool, remove them from the reservation's aggregate and
  delete it.

A server belongs to the lease when it is of the lease's project and was
booted with ``--hint reservation=<reservation id>``: the nova-api filter
records the hint as the server metadata :data:`META_SERVER_RESERVATION`
(``lease_reservation_id``); a server of the project without that key
(booted before the filter recorded it) is asked about once: Nova keeps
the boot hints of every server (shown from compute API 2.100). A server
linked to a reservation of the same lease belongs to it too. Anything
else found on the hosts (another project's server, one an admin forced
onto the host, which bypasses the scheduler's filters) is left alone:
it is logged as a warning, and ``on_end``/``cancel`` return a note naming
it, which the engine records as the lease's ``status_reason`` (and sends
with the ``lease.end`` notification). The lease still ends and its hosts
still go back to the free pool, where later leases were promised them:
the servers left there are the operator's to move (``nova-lease-manage
audit`` reports them).

Every step looks before it acts, so a retried or repeated start or end
does nothing twice and fails on nothing already done.
"""

import collections
import datetime

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease import compute
from nova_lease.db import api as db_api
from nova_lease import gate as gate_mod
from nova_lease import hunt as hunt_core
from nova_lease.plugins import base
from nova_lease.plugins.host import aggregates
from nova_lease.plugins.host import allocation
from nova_lease.plugins import idle_hosts
from nova_lease import resource_types as types
from nova_lease import status
from nova_lease import wire

LOG = logging.getLogger(__name__)

RESOURCE_TYPE = types.HOST
#: Metadata keys of a reservation's aggregate (read by LeaseFilter).
#: Server metadata set by the nova-api filter on a boot with
#: ``--hint reservation=<id>`` (the reservation id).
META_SERVER_RESERVATION = wire.SERVER_RESERVATION_ID
#: The boot hint itself (as Nova keeps it in the server's RequestSpec).
RESERVATION_HINT = wire.HINT_RESERVATION
#: How many servers left alone a note names (the rest are counted).
NOTE_SERVERS = 20

_SHELVED = ('SHELVED', 'SHELVED_OFFLOADED')


#: Migrations of one server tried in one attempt of a hunt before the
#: attempt gives up on it (the next attempt, later, tries again).
MIGRATION_TRIES = 2


class HuntStopped(base.HuntTimedOut):
    """The lease is no longer live (deleted or ended during its hunt):
    the hunt gives up at once (the engine ends its start as a time-out's;
    its end releases what the lease holds).
    """

    msg_fmt = ('best-effort lease %(lease)s: hunt stopped, nothing more is '
               'moved and the lease is not started: %(reason)s')


def hunted_hosts(reservation):
    """{hypervisor hostname: compute service host} of the hosts a
    best-effort reservation took from the cloud ({} for any other).
    """
    props = reservation.get('properties') or {}
    hunt = props.get(allocation.BEST_EFFORT) if isinstance(props, dict) \
        else None
    if not hunt:
        return {}
    services = hunt.get('services') or {}
    return {name: services.get(name, name) for name in hunt.get('hosts')
            or ()}


class HostPlugin(base.ComputePlugin):
    resource_type = RESOURCE_TYPE

    def __init__(self, conf, compute_client=None, db=None):
        super().__init__(conf, compute_client, db=db)

    def _gate_hosts(self, reservation):
        names = {a['host'] for a in db_api.allocation_list(
            self.db, reservation_id=reservation['id'])}
        return names | set(self._hosts(reservation)) | set(
            hunted_hosts(reservation).values())

    @property
    def _timeout(self):
        return self.conf.nova_lease_engine.plugin_call_timeout

    @property
    def _pool_name(self):
        return self.conf.nova_lease.freepool_aggregate

    # -- helpers ------------------------------------------------------------

    def _hosts(self, reservation):
        """Compute service hosts of the reservation, from its allocations."""
        names = sorted({a['host'] for a in db_api.allocation_list(
            self.db, reservation_id=reservation['id'])})
        hunted = hunted_hosts(reservation)
        services = []
        for name in names:
            if name in hunted:
                services.append(hunted[name])
                continue
            try:
                host = db_api.host_get_by_hostname(self.db, name)
                services.append(host.get('service_host') or name)
            except db_api.HostNotFound:
                # Unregistered since: its compute service is named alike
                # on most drivers.
                services.append(name)
        return services

    # -- actions ------------------------------------------------------------

    def on_start(self, lease, reservation):
        if hunted_hosts(reservation) and lease.get('status') == str(
                status.LeaseStatus.IN_PROGRESS):
            return self._hunt(lease, reservation, collections.Counter())
        return self._start(lease, reservation)

    def _start(self, lease, reservation):
        hosts = self._hosts(reservation)
        if not hosts:
            raise base.PluginError(
                reason='host reservation %s of lease %s has no allocated '
                       'hosts' % (reservation['id'], lease['id']))
        gate = self._gate(lease, reservation)
        name = aggregates.aggregate_name(reservation['id'])
        all_aggregates = aggregates.by_name(self.compute)
        aggregate = aggregates.ensure(gate, self.compute, all_aggregates,
                                      lease, reservation)
        if reservation.get('aggregate_id') != aggregate['id']:
            db_api.reservation_update(self.db, reservation['id'],
                                      {'aggregate_id': aggregate['id']})
        pool = aggregates.freepool(gate, self.compute, self._pool_name,
                                   all_aggregates)
        for host in hosts:
            # The idle action may have disabled it (a lease created after
            # its last pass, starting at once), also another engine's when
            # this one has it off: a start always leaves its hosts
            # enabled.
            idle_hosts.wake_host(gate, host)
        for host in hosts:
            aggregate = aggregates.add_host(gate, aggregate, host, name)
            if pool is not None and host in (pool.get('hosts') or []):
                try:
                    pool = gate.remove_aggregate_host(
                        pool['id'], host, aggregate=pool,
                        why='the lease starts on it')
                except compute.ComputeNotFound:
                    LOG.info('Host %s already left the free pool', host)

    def on_end(self, lease, reservation):
        action = lease.get('on_end') or self.conf.nova_lease_engine.on_end
        return self._release(lease, reservation, action)

    def cancel(self, lease, reservation):
        return self._release(lease, reservation, 'delete')

    def _release(self, lease, reservation, action):
        """Clear and free the hosts; a note on what was left alone, or None.
        """
        gate = self._gate(lease, reservation)
        hosts = self._hosts(reservation)
        name = aggregates.aggregate_name(reservation['id'])
        left = []
        for host in hosts:
            left.extend((host, server)
                        for server in self._clear_host(gate, lease,
                                                       reservation, host,
                                                       action))
        all_aggregates = aggregates.by_name(self.compute)
        aggregate = aggregates.own(all_aggregates, reservation)
        pool = aggregates.freepool(gate, self.compute, self._pool_name,
                                   all_aggregates, create=True)
        hunted = set(hunted_hosts(reservation).values())
        for host in hosts:
            if host not in hunted:
                # (A host a best-effort lease took from the cloud goes
                # back to the cloud, not to the free pool.)
                pool = aggregates.add_host(gate, pool, host, pool['name'])
            if aggregate is not None and host in (aggregate.get('hosts')
                                                  or []):
                try:
                    aggregate = gate.remove_aggregate_host(
                        aggregate['id'], host, aggregate=aggregate,
                        why='the lease ends')
                except compute.ComputeNotFound:
                    pass
        if aggregate is not None:
            aggregates.delete(gate, aggregate, lease, name)
        return self._note(lease, reservation, left)

    @staticmethod
    def _note(lease, reservation, left):
        """What the lease's owner reads of the servers left alone: its
        own project's named, other projects' counted (guarantee 6: a
        member never sees another project's ids; the log names them).
        """
        if not left:
            return None
        own = [(host, server) for host, server in left
               if server.get('tenant_id') == lease['project_id']]
        others = len(left) - len(own)
        if others:
            LOG.warning('Lease %(lease)s: servers of other projects left '
                        'alone on the hosts of reservation %(rid)s: '
                        '%(servers)s',
                        {'lease': lease['id'], 'rid': reservation['id'],
                         'servers': ', '.join(
                             '%s on %s (project %s)' % (
                                 server['id'], host, server.get('tenant_id'))
                             for host, server in left
                             if server.get('tenant_id') !=
                             lease['project_id'])})
        named = ', '.join('%s on %s' % (server['id'], host)
                          for host, server in own[:NOTE_SERVERS])
        if len(own) > NOTE_SERVERS:
            named += ' and %d more' % (len(own) - NOTE_SERVERS)
        parts = [named] if named else []
        if others:
            parts.append('%d server(s) of other projects' % others)
        return ('%d server(s) found on the hosts of reservation %s do not '
                'belong to the lease (not booted by project %s with --hint '
                'reservation=%s) and were left alone: %s'
                % (len(left), reservation['id'], lease['project_id'],
                   reservation['id'], '; '.join(parts)))

    def _linked(self, lease):
        """Servers linked to reservations of the lease (resource ids)."""
        return {r.get('resource_id') for r in lease.get('reservations') or ()
                if r.get('resource_id') and r.get('resource_type') !=
                RESOURCE_TYPE}

    def _belongs(self, lease, reservation, server, linked):
        """Is the server the lease's (see the module docstring)?"""
        if server.get('tenant_id') != lease['project_id']:
            return False
        if server['id'] in linked:
            return True
        metadata = server.get('metadata') or {}
        if META_SERVER_RESERVATION in metadata:
            return metadata[META_SERVER_RESERVATION] == reservation['id']
        # Booted before the filter recorded the hint: Nova's own record.
        try:
            hints = self.compute.get_server_scheduler_hints(server['id'])
        except compute.ServerNotFound:
            return False
        except compute.ComputeError as e:
            LOG.warning('Cannot read the boot hints of server %(server)s '
                        '(%(error)s): it is left alone',
                        {'server': server['id'], 'error': e})
            return False
        value = (hints or {}).get(RESERVATION_HINT)
        if isinstance(value, list):
            value = value[0] if len(set(value)) == 1 else None
        return value == reservation['id']

    def _clear_host(self, gate, lease, reservation, host, action):
        """Delete or shelve the lease's servers on host; return the others.
        """
        listed = self.compute.list_servers(all_projects=True, host=host)
        # Nova drops admin-only filters (host, all_tenants) for a user
        # who is not an admin: never act on a server not seen on the host.
        servers = [s for s in listed
                   if s.get('OS-EXT-SRV-ATTR:host') == host]
        if len(servers) != len(listed):
            LOG.warning('%(n)d server(s) listed for host %(host)s are not '
                        'on it (is the engine\'s service user an admin?); '
                        'left alone', {'n': len(listed) - len(servers),
                                       'host': host})
        linked = self._linked(lease)
        others = [s for s in servers
                  if not self._belongs(lease, reservation, s, linked)]
        servers = [s for s in servers if s not in others]
        for server in others:
            LOG.warning('Server %(server)s (project %(project)s) on host '
                        '%(host)s does not belong to lease %(lease)s '
                        '(reservation %(rid)s): left alone at its end',
                        {'server': server['id'],
                         'project': server.get('tenant_id'), 'host': host,
                         'lease': lease['id'], 'rid': reservation['id']})
        acted = []
        for server in servers:
            server_id = server['id']
            status = server.get('status')
            try:
                if action == 'shelve':
                    if status in _SHELVED:
                        if status == 'SHELVED':
                            gate.shelve_offload_server(
                                server_id, server=server,
                                why='the lease ends')
                        continue
                    LOG.info('Shelving server %(server)s on host %(host)s '
                             'at the end of lease %(lease)s',
                             {'server': server_id, 'host': host,
                              'lease': lease['id']})
                    try:
                        gate.shelve_server(server_id, server=server,
                                           why='the lease ends')
                    except compute.ComputeConflict:
                        LOG.info('Server %s is already changing state',
                                 server_id)
                else:
                    LOG.info('Deleting server %(server)s on host %(host)s '
                             'at the end of lease %(lease)s',
                             {'server': server_id, 'host': host,
                              'lease': lease['id']})
                    gate.delete_server(server_id, server=server,
                                       why='the lease ends')
            except gate_mod.Refused:
                others.append(server)
                continue
            acted.append(server)
        for server in acted:
            if action == 'shelve':
                found = self.compute.wait_for_server(
                    server['id'], _SHELVED, self._timeout, gone_ok=True)
                if found is not None and found['status'] == 'SHELVED':
                    gate.shelve_offload_server(server['id'], server=found,
                                               why='the lease ends')
                    self.compute.wait_for_server(
                        server['id'], ('SHELVED_OFFLOADED',), self._timeout,
                        gone_ok=True)
            else:
                self.compute.wait_for_server(server['id'], (),
                                             self._timeout, gone_ok=True,
                                             fail_statuses=())
        return others

    # -- best-effort leases -------------------------------------------------

    def _servers_on(self, service_host):
        return [s for s in self.compute.list_servers(all_projects=True,
                                                     host=service_host)
                if s.get('OS-EXT-SRV-ATTR:host') == service_host]

    def _deadline(self, lease):
        created = lease.get('created_at') or lease['start_date']
        return created + datetime.timedelta(
            minutes=self.conf.nova_lease_engine.best_effort_timeout)

    def _hunt(self, lease, reservation, tried):
        """Migrate the servers off the hosts the lease took from the cloud;
        once they are empty, start the lease (:meth:`_start`).

        Returns a Wait on a server being migrated (the engine calls this
        again once it is done), or what :meth:`_start` returns. Past the
        lease's time-out, gives up (:meth:`_give_up`). ``tried``: the
        migrations of each server asked for in this attempt.
        """
        if timeutils.utcnow() >= self._deadline(lease):
            self._give_up(lease, reservation)
        cold = self.conf.nova_lease.best_effort_cold_migration
        gate = self._gate(lease, reservation)
        # Migrations asked for earlier (this attempt or one before, by
        # this engine or one that died) are confirmed first: a host
        # never counts as empty while a server moved off it may go back.
        moving, refused = self._confirm_pending(gate, lease), []
        for name, service in sorted(hunted_hosts(reservation).items()):
            for server in self._servers_on(service):
                server_id = server['id']
                if db_api.server_links(self.db, server_id):
                    # (Admission left such hosts out; one got there since,
                    # an admin's doing: never moved, the hunt waits.)
                    # The side database says so: a server's metadata is
                    # its owner's to write, and decides nothing here.
                    refused.append('server %s on %s is leased: never moved'
                                   % (server_id, name))
                    continue
                if server.get('locked'):
                    # Its owner locked it: never moved (the engine's
                    # admin credentials would bypass the lock).
                    refused.append('server %s on %s is locked by its '
                                   'owner: never moved' % (server_id, name))
                    continue
                if server.get('OS-EXT-STS:task_state'):
                    moving.append(server_id)
                    continue
                if tried[server_id] >= MIGRATION_TRIES:
                    refused.append('server %s stays on %s (%s)' % (
                        server_id, name, (server.get('fault') or {}).get(
                            'message') or 'its migrations failed'))
                    continue
                tried[server_id] += 1
                try:
                    why = self._migrate(gate, server, name, cold)
                except gate_mod.Refused as e:
                    if not e.lease_gone:
                        raise
                    # Deleted or ended meanwhile: nothing more is moved,
                    # the lease is not started.
                    raise HuntStopped(lease=lease['id'], reason=e.kwargs[
                        'reason']) from e
                if why:
                    refused.append(why)
                else:
                    moving.append(server_id)
        if moving:
            LOG.info('Best-effort lease %(lease)s: waiting for %(n)d '
                     'server(s) to leave its hosts',
                     {'lease': lease['id'], 'n': len(moving)})
            return base.Wait(
                moving[0], hunt_core.LIVE_STATUSES +
                hunt_core.COLD_STATUSES,
                lambda _server: self._hunt(lease, reservation, tried),
                fail_statuses=(),
                what='server %s to be migrated off the hosts of lease %s'
                     % (moving[0], lease['id']))
        if refused:
            raise base.PluginError(reason=(
                'best-effort lease %s: its hosts still run servers: %s; '
                'retrying until %s' % (
                    lease['id'], '; '.join(refused[:NOTE_SERVERS]),
                    self._deadline(lease).strftime('%Y-%m-%d %H:%M:%S'))))
        LOG.info('Best-effort lease %s: its hosts are empty', lease['id'])
        return self._start(lease, reservation)

    def _migrate(self, gate, server, host, cold):
        """Ask Nova to move the server off host; None, or why not."""
        server_id, state = server['id'], server.get('status')
        why = 'the hunt empties host %s' % host
        error = None
        if state in hunt_core.LIVE_STATUSES:
            LOG.info('Live-migrating server %(server)s (project '
                     '%(project)s) off host %(host)s',
                     {'server': server_id, 'host': host,
                      'project': server.get('tenant_id')})
            try:
                gate.live_migrate_server(server_id, why=why)
                return None
            except gate_mod.Refused as e:
                if e.lease_gone:
                    raise
                return str(e)
            except compute.ComputeError as e:
                if isinstance(e, compute.ComputeUnavailable):
                    raise
                error = 'live migration refused: %s' % e
        if not cold:
            return 'server %s (%s) stays on %s: %s' % (
                server_id, state, host, error or
                'only live migration is allowed ([nova_lease] '
                'best_effort_cold_migration)')
        if state not in hunt_core.LIVE_STATUSES + hunt_core.COLD_STATUSES:
            return 'server %s is %s on %s' % (server_id, state, host)
        LOG.info('Cold-migrating server %(server)s off host %(host)s%(why)s',
                 {'server': server_id, 'host': host,
                  'why': ' (%s)' % error if error else ''})
        try:
            gate.migrate_server(server_id, why=why)
        except gate_mod.Refused as e:
            if e.lease_gone:
                raise
            return str(e)
        except compute.ComputeError as e:
            if isinstance(e, compute.ComputeUnavailable):
                raise
            return 'server %s stays on %s: cold migration refused: %s' % (
                server_id, host, e)
        # Confirmed here: a server is never left VERIFY_RESIZE.
        moved = self.compute.wait_for_server(
            server_id, ('VERIFY_RESIZE',) + hunt_core.LIVE_STATUSES +
            hunt_core.COLD_STATUSES, self._timeout, fail_statuses=())
        if moved['status'] == 'VERIFY_RESIZE':
            gate.confirm_migration(server_id, why=why)
        return None

    def _confirm_pending(self, gate, lease):
        """Confirm the cold migrations the lease asked for (the gate's
        journal) that wait for it; return the servers still moving.
        """
        asked = sorted({row['target_id'] for row in db_api.action_list(
            self.db, lease_id=lease['id'], action='migrate')
            if row['outcome'] != gate_mod.REFUSED})
        moving = []
        for server_id in asked:
            try:
                server = self.compute.get_server(server_id)
            except compute.ServerNotFound:
                continue
            if server.get('OS-EXT-STS:task_state'):
                moving.append(server_id)
            elif server.get('status') == 'VERIFY_RESIZE':
                LOG.info('Best-effort lease %(lease)s: confirming the '
                         'migration of server %(server)s',
                         {'lease': lease['id'], 'server': server_id})
                gate.confirm_migration(server_id,
                                       why='a pending migration of the hunt')
                moving.append(server_id)
        return moving

    def _give_up(self, lease, reservation):
        """Past the time-out: let the migrations under way finish, release
        the lease's hosts (the ones from the free pool stay there, the
        ones from the cloud stay in the cloud), and raise base.HuntTimedOut.
        """
        gate = self._gate(lease, reservation)
        hunted = hunted_hosts(reservation)
        left = []
        # No server left VERIFY_RESIZE: confirm what the journal shows.
        for server_id in self._confirm_pending(gate, lease):
            server = self.compute.wait_for_server(
                server_id, hunt_core.LIVE_STATUSES + hunt_core.COLD_STATUSES +
                ('VERIFY_RESIZE',), self._timeout, gone_ok=True,
                fail_statuses=())
            if server is not None and server['status'] == 'VERIFY_RESIZE':
                gate.confirm_migration(server_id, why='the hunt gives up')
        for name, service in sorted(hunted.items()):
            for server in self._servers_on(service):
                if server.get('OS-EXT-STS:task_state'):
                    # No server is left half-migrated.
                    server = self.compute.wait_for_server(
                        server['id'], hunt_core.LIVE_STATUSES +
                        hunt_core.COLD_STATUSES + ('VERIFY_RESIZE',),
                        self._timeout, gone_ok=True, fail_statuses=())
                    if server is None:
                        continue
                    if server['status'] == 'VERIFY_RESIZE':
                        gate.confirm_migration(server['id'],
                                               why='the hunt gives up')
                    if server.get('OS-EXT-SRV-ATTR:host') != service:
                        continue
                left.append('%s on %s' % (server['id'], name))
        all_aggregates = aggregates.by_name(self.compute)
        aggregate = aggregates.own(all_aggregates, reservation)
        if aggregate is not None:
            # A start that failed half-way: undo it.
            pool = aggregates.freepool(gate, self.compute, self._pool_name,
                                       all_aggregates, create=True)
            for host in aggregate.get('hosts') or []:
                if host not in hunted.values():
                    pool = aggregates.add_host(gate, pool, host,
                                               pool['name'])
            aggregates.delete(gate, aggregate, lease,
                              aggregates.aggregate_name(reservation['id']))
        freed = db_api.allocation_destroy_by_reservation(self.db,
                                                         reservation['id'])
        raise base.HuntTimedOut(reason=(
            'best-effort lease %s gave up after %d minutes '
            '([nova_lease_engine] best_effort_timeout): %s; its %d host '
            'allocation(s) are '
            'released, and the servers moved so far stay where they went'
            % (lease['id'], self.conf.nova_lease_engine.best_effort_timeout,
               'servers still on its hosts: %s' % ', '.join(
                   left[:NOTE_SERVERS]) if left else 'its hosts were not '
               'empty in time', freed)))
