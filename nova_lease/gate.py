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
"""The engine's one action gate: every change the engine makes to Nova.

The engine (its resource plugins, the best-effort hunt, the idle-host
pass) never holds a :class:`nova_lease.compute.ComputeClient`: it holds a
:class:`Gate`, which lets the reads through (:data:`READS`) and has no
method that changes Nova. A change goes through a binding of the gate to
what it is done for -- :meth:`Gate.lease` (a lease and one of its
reservations) or :meth:`Gate.idle` (the idle-host pass) -- whose methods
have the client's names and arguments (:data:`MUTATING`), plus ``why=``
(the journal's reason) and the target as the caller saw it (``server=``,
``aggregate=``, ``service=``). Right before
each, the binding:

1. reads the lease again from the side database: an action that gives
   the lease something (``start``: unshelve, migrate, add a host to its
   aggregate, give flavor access, enable a host) needs it live (not
   deleted, not ending or ended, its end still to come); one that takes
   something back (``release``: delete, shelve, remove a host, revoke
   access) needs its row;
2. checks that the target belongs to the lease by the side database: a
   server linked to one of its reservations, or of the lease's project on
   one of the reservation's hosts (its allocations) or with its flavor; a
   host among its allocations; an aggregate, flavor or server group
   named by the reservation. A server's metadata (which its owner
   writes) never decides. A migration (the hunt) moves only a server on
   a host the reservation took, linked to no lease, and not locked by
   its owner; a confirmation only finishes a migration the journal shows
   this lease asked for;
3. records the action in the journal (the ``engine_actions`` table):
   ``pending`` before the request (so an engine that dies right after it
   leaves a trace: the hunt confirms such migrations on its next
   attempt), then ``done`` or ``failed``; a refusal is journaled as
   ``refused``, logged, and raised as :class:`Refused` (the caller skips
   the target, or stops).

``nova-lease-manage audit`` checks the journal (nova_lease.audit.checks,
``journal``): no action touched anything outside its lease.
"""

import datetime
import os
import socket

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease import compute
from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import guard
from nova_lease import status
from nova_lease import wire

LOG = logging.getLogger(__name__)

_L = status.LeaseStatus

# Target kinds.
SERVER = 'server'
HOST = 'host'
SERVICE = 'service'
FLAVOR = 'flavor'
AGGREGATE = 'aggregate'
SERVER_GROUP = 'server_group'
RESERVATION = 'reservation'

# What an action needs of its lease.
START = 'start'        # the lease live
RELEASE = 'release'    # the lease's row
MOVE = 'move'          # the lease live; the server a bystander
FINISH = 'finish'      # a migration the lease journaled
IDLE = 'idle'          # no lease: the idle-host pass

# Outcomes.
PENDING = 'pending'
DONE = 'done'
FAILED = 'failed'
REFUSED = 'refused'

#: Actions that move another project's server (the hunt).
MOVES = ('live_migrate', 'migrate')

#: Lease statuses in which a lease may still be given something.
LIVE = (_L.PENDING, _L.STARTING, _L.IN_PROGRESS, _L.ACTIVE)

#: The reads of compute.ComputeClient the engine uses directly.
READS = frozenset((
    'api_version', 'poll_interval', 'get_server', 'list_servers',
    'list_servers_changed_since', 'get_server_scheduler_hints',
    'wait_for_server', 'list_services', 'list_hypervisors',
    'get_compute_service', 'list_aggregates', 'get_aggregate',
    'list_server_tags', 'list_flavors', 'list_flavor_access'))

#: Every method of compute.ComputeClient that changes Nova: its action
#: name, target kind and what it needs of its lease.
MUTATING = {
    'delete_server': ('delete', SERVER, RELEASE),
    'reset_server_state': ('reset_state', SERVER, RELEASE),
    'shelve_server': ('shelve', SERVER, RELEASE),
    'shelve_offload_server': ('shelve_offload', SERVER, RELEASE),
    'unshelve_server': ('unshelve', SERVER, START),
    'live_migrate_server': ('live_migrate', SERVER, MOVE),
    'migrate_server': ('migrate', SERVER, MOVE),
    'confirm_migration': ('confirm', SERVER, FINISH),
    'set_server_metadata': ('set_metadata', SERVER, RELEASE),
    'add_server_tag': ('add_tag', SERVER, RELEASE),
    'delete_server_tag': ('delete_tag', SERVER, RELEASE),
    'disable_service': ('disable', SERVICE, IDLE),
    'enable_service': ('enable', SERVICE, START),
    'create_aggregate': ('create', AGGREGATE, RELEASE),
    'set_aggregate_metadata': ('set_metadata', AGGREGATE, RELEASE),
    'add_aggregate_host': ('add_host', HOST, RELEASE),
    'remove_aggregate_host': ('remove_host', HOST, RELEASE),
    'delete_aggregate': ('delete', AGGREGATE, RELEASE),
    'add_flavor_access': ('add_access', FLAVOR, START),
    'remove_flavor_access': ('remove_access', FLAVOR, RELEASE),
    'delete_flavor': ('delete', FLAVOR, RELEASE),
    'delete_server_group': ('delete', SERVER_GROUP, RELEASE),
}

#: The aggregate metadata key naming a reservation (as the host plugin
#: writes it).
META_RESERVATION = wire.AGGREGATE_RESERVATION_ID


class Refused(exception.NovaLeaseException):
    """The gate refused an action (journaled as ``refused``)."""

    msg_fmt = ('%(action)s of %(kind)s %(target)s for lease %(lease)s '
               'refused: %(reason)s')

    def __init__(self, message=None, lease_gone=False, **kwargs):
        #: True when the lease is no longer live (deleted, ended): the
        #: caller stops what it does for it.
        self.lease_gone = lease_gone
        super().__init__(message, **kwargs)


def engine_name():
    """This process, as the journal names it."""
    job = guard.current()
    name = '%s:%d' % (socket.gethostname(), os.getpid())
    if job is not None:
        name += ' ' + job.describe
    return name[:255]


class Gate(object):
    """What the engine holds in place of a compute client.

    :param client: the compute.ComputeClient (or a stand-in).
    :param db: the side database, or a callable returning it.
    :param freepool: ``[nova_lease] freepool_aggregate``.
    """

    def __init__(self, client, db, freepool=None):
        self._client = client
        self._db = db
        #: The free pool aggregate's name (the one aggregate a lease's
        #: start or end may create besides its own).
        self.freepool = freepool

    @property
    def db(self):
        return self._db() if callable(self._db) else self._db

    def __setattr__(self, name, value):
        if name in READS:
            # (e.g. poll_interval, which the client's waits use)
            setattr(self._client, name, value)
        else:
            super().__setattr__(name, value)

    def __getattr__(self, name):
        if name in READS:
            return getattr(self._client, name)
        if name in MUTATING:
            raise AttributeError(
                '%s changes Nova: the engine calls it only through '
                'Gate.lease() or Gate.idle() (nova_lease.gate)' % name)
        raise AttributeError(name)

    def lease(self, lease, reservation=None, hosts_of=None):
        """The gate bound to ``lease`` and ``reservation`` (dicts).

        :param hosts_of: ``hosts_of(reservation)`` -> the compute
            service hosts and hypervisor hostnames that are the
            reservation's (read from the side database); the default is
            its allocations' hosts.
        """
        return LeaseGate(self, lease, reservation, hosts_of)

    def idle(self, session=None):
        """The gate bound to the idle-host pass; ``session``: a writer
        transaction of the side database to read and journal in (the
        caller's, holding the hosts' locks).
        """
        return IdleGate(self, session)


class _Binding(object):

    def __init__(self, gate, session=None):
        self._gate = gate
        self._client = gate._client
        self._session = session

    @property
    def _db(self):
        """Where the binding reads and journals: its caller's
        transaction, or the side database.
        """
        return self._session if self._session is not None else self._gate.db

    def __getattr__(self, name):
        if name in MUTATING:
            def act(*args, why=None, **kwargs):
                return self._act(name, args, kwargs, why)
            act.__name__ = name
            return act
        return getattr(self._gate, name)

    def _record(self, values):
        try:
            return db_api.action_record(self._db, values)
        except Exception as e:
            # No journal, no action.
            raise Refused(action=values['action'],
                          kind=values['target_kind'],
                          target=values['target_id'],
                          lease=values.get('lease_id'),
                          reason='the action journal cannot be written: '
                                 '%s' % e) from e

    def _finish(self, row, outcome):
        try:
            db_api.action_update(self._db, row['id'], outcome)
        except Exception as e:
            LOG.warning('Could not journal the outcome (%(outcome)s) of '
                        'action %(id)s: %(error)s',
                        {'outcome': outcome, 'id': row['id'], 'error': e})

    def _run(self, name, args, kwargs, values):
        row = self._record(dict(values, outcome=PENDING))
        try:
            out = getattr(self._client, name)(*args, **kwargs)
        except BaseException:
            self._finish(row, FAILED)
            raise
        self._finish(row, DONE)
        return out

    def _refuse(self, values, why, lease_gone=False):
        LOG.warning('Refused %(action)s of %(kind)s %(target)s for lease '
                    '%(lease)s: %(why)s',
                    {'action': values['action'],
                     'kind': values['target_kind'],
                     'target': values['target_id'],
                     'lease': values.get('lease_id'), 'why': why})
        try:
            db_api.action_record(self._db, dict(
                values, outcome=REFUSED,
                reason='%s (refused: %s)' % (values.get('reason') or '',
                                             why)))
        except Exception as e:
            LOG.warning('Could not journal a refusal: %s', e)
        raise Refused(action=values['action'], kind=values['target_kind'],
                      target=values['target_id'],
                      lease=values.get('lease_id'), reason=why,
                      lease_gone=lease_gone)


class IdleGate(_Binding):
    """The idle-host pass's changes: enable or disable a compute service
    (``service=`` the service dict is needed to name its host).
    """

    def _act(self, name, args, kwargs, reason):
        action, kind, _need = MUTATING[name]
        if kind != SERVICE:
            raise Refused(action=action, kind=kind, target=args[0],
                          lease=None, reason='the idle-host pass only '
                          'enables and disables services')
        service = kwargs.pop('service', None) or {}
        host = service.get('host')
        values = {'target_kind': kind, 'target_id': str(args[0]),
                  'target_host': host, 'action': action, 'reason': reason,
                  'engine': engine_name()}
        if action == 'disable' and host:
            now = timeutils.utcnow()
            # An allocation that holds now (one starting this instant too).
            held = db_api.allocation_list(
                self._db, hosts=[host], start=now,
                end=now + datetime.timedelta(microseconds=1))
            if held:
                self._refuse(values, 'host %s is held by a lease now'
                             % host)
        return self._run(name, args, kwargs, values)


class LeaseGate(_Binding):
    """Changes made for one lease (and one of its reservations)."""

    def __init__(self, gate, lease, reservation, hosts_of):
        super().__init__(gate)
        self._lease = lease
        self._reservation = reservation or {}
        self._hosts_of = hosts_of

    # -- what the side database says, now ---------------------------------

    def _current(self):
        """The lease and reservation as the side database has them now
        (None, None when the lease is gone).
        """
        try:
            lease = db_api.lease_get(self._db, self._lease['id'])
        except db_api.LeaseNotFound:
            return None, None
        rid = self._reservation.get('id')
        reservation = next((r for r in lease.get('reservations') or ()
                            if r['id'] == rid), None)
        return lease, reservation

    @staticmethod
    def _not_live(lease, reservation):
        """None if the lease is live, else why not."""
        if lease is None:
            return 'the lease no longer exists'
        if lease['status'] not in LIVE:
            return 'the lease is %s' % lease['status']
        if lease['end_date'] <= timeutils.utcnow():
            return 'the lease has ended (or was deleted)'
        if reservation is not None and reservation.get('status') in (
                'deleted', 'error'):
            return 'the reservation is %s' % reservation['status']
        return None

    def _hosts(self, reservation):
        if reservation is None:
            return set()
        if self._hosts_of is not None:
            return set(self._hosts_of(reservation))
        return {a['host'] for a in db_api.allocation_list(
            self._db, reservation_id=reservation['id'])}

    def _linked(self, lease, server_id):
        """The side-database links of the server: (to this lease?, to
        any lease?).
        """
        links = db_api.server_links(self._db, server_id)
        return (any(link['lease_id'] == lease['id'] for link in links),
                bool(links))

    def _server(self, server_id, server):
        if server is not None:
            return server
        try:
            return self._client.get_server(server_id)
        except compute.ServerNotFound:
            return None

    # -- the checks -----------------------------------------------------------

    def _act(self, name, args, kwargs, reason):
        action, kind, need = MUTATING[name]
        server = kwargs.pop('server', None)
        aggregate = kwargs.pop('aggregate', None)
        service = kwargs.pop('service', None)
        values = {'lease_id': self._lease['id'],
                  'reservation_id': self._reservation.get('id'),
                  'project_id': self._lease.get('project_id'),
                  'target_kind': kind, 'target_id': str(args[0]),
                  'action': action, 'reason': reason,
                  'engine': engine_name()}
        need = self._need(name, need, args, aggregate)
        lease, reservation = self._current()
        if lease is None:
            self._refuse(values, 'the lease no longer exists',
                         lease_gone=True)
        values['project_id'] = lease['project_id']
        if need in (START, MOVE):
            why = self._not_live(lease, reservation)
            if why:
                self._refuse(values, why, lease_gone=True)
        check = getattr(self, '_check_' + kind)
        why = check(name, action, need, args, lease, reservation, values,
                    server=server, aggregate=aggregate, service=service)
        if why:
            self._refuse(values, why)
        return self._run(name, args, kwargs, values)

    def _need(self, name, need, args, aggregate):
        """What an aggregate action needs: giving the lease a host (its
        own aggregate gets it, the free pool loses it) needs the lease
        live; giving it back needs its row only.
        """
        if name not in ('create_aggregate', 'set_aggregate_metadata',
                        'add_aggregate_host', 'remove_aggregate_host'):
            return need
        if name == 'create_aggregate':
            pool = args[0] == self._gate.freepool
        else:
            if aggregate is None:
                try:
                    aggregate = self._client.get_aggregate(args[0])
                except compute.ComputeNotFound:
                    aggregate = {}
            pool = (aggregate.get('name') == self._gate.freepool and
                    self._gate.freepool is not None)
        gives = {'create_aggregate': not pool,
                 'set_aggregate_metadata': True,
                 'add_aggregate_host': not pool,
                 'remove_aggregate_host': pool}[name]
        return START if gives else RELEASE

    def _check_server(self, name, action, need, args, lease, reservation,
                      values, server=None, **_kw):
        server_id = args[0]
        mine, linked = self._linked(lease, server_id)
        if need == FINISH:
            asked = [row for row in db_api.action_list(
                self._db, lease_id=lease['id'], target_id=server_id)
                if row['action'] in MOVES and row['outcome'] != REFUSED]
            if not asked:
                return ('the lease never migrated server %s' % server_id)
            return None
        if need == MOVE:
            if linked:
                return 'server %s is leased: never moved' % server_id
            server = self._server(server_id, None)   # fresh: locked?
            if server is None:
                return 'server %s no longer exists' % server_id
            values['target_project_id'] = server.get('tenant_id')
            host = server.get('OS-EXT-SRV-ATTR:host')
            values['target_host'] = host
            if server.get('locked'):
                return ('server %s is locked by its owner: never moved'
                        % server_id)
            if host not in self._hosts(reservation):
                return ('server %s is on host %s, not one of the '
                        'reservation\'s' % (server_id, host))
            return None
        if mine:
            values['target_project_id'] = lease['project_id']
            return None
        server = self._server(server_id, server)
        if server is None:
            return 'server %s no longer exists' % server_id
        values['target_project_id'] = server.get('tenant_id')
        values['target_host'] = server.get('OS-EXT-SRV-ATTR:host')
        if server.get('tenant_id') != lease['project_id']:
            return ('server %s is of another project than the lease\'s'
                    % server_id)
        if linked:
            return 'server %s is linked to another lease' % server_id
        if self._has_flavor(server, reservation):
            return None
        if values['target_host'] in self._hosts(reservation):
            return None
        if (server.get('metadata') or {}).get(
                wire.SERVER_RESERVATION_ID) == (reservation or {}).get('id'):
            # Its own project's server, created for this reservation and
            # never linked (the pointer only narrows within the project).
            return None
        return ('server %s is neither linked to the lease nor on one of '
                'its hosts' % server_id)

    @staticmethod
    def _has_flavor(server, reservation):
        """Was the server booted with the reservation's own flavor?
        (Nova's copy of the flavor in the server: not the owner's to
        write.)
        """
        flavor_id = ((reservation or {}).get('properties') or {}).get(
            'flavor_id')
        if not flavor_id:
            return False
        flavor = server.get('flavor') or {}
        return (flavor.get('id') == flavor_id or
                flavor.get('original_name') in (
                    flavor_id, 'reservation:%s' % flavor_id) or
                flavor_id in (flavor.get('extra_specs') or {}).values())

    def _check_host(self, name, action, need, args, lease, reservation,
                    values, aggregate=None, **_kw):
        host = args[1]
        values['target_id'] = host
        values['target_host'] = host
        if host in self._hosts(reservation):
            return None
        if aggregate is None:
            try:
                aggregate = self._client.get_aggregate(args[0])
            except compute.ComputeNotFound:
                return 'aggregate %s no longer exists' % args[0]
        if action == 'remove_host' and self._own_aggregate(aggregate,
                                                           reservation):
            # Emptying the reservation's own aggregate.
            return None
        return 'host %s is not one of the reservation\'s' % host

    @staticmethod
    def _own_aggregate(aggregate, reservation):
        if reservation is None or not aggregate:
            return False
        return (aggregate.get('name') == reservation['id'] or
                (aggregate.get('metadata') or {}).get(META_RESERVATION) ==
                reservation['id'])

    def _check_aggregate(self, name, action, need, args, lease,
                         reservation, values, aggregate=None, **_kw):
        if reservation is None:
            return 'the reservation no longer exists'
        if action == 'create':
            if args[0] == reservation['id'] or args[0] == getattr(
                    self._gate, 'freepool', None):
                return None
            return 'aggregate %s is not the reservation\'s' % args[0]
        if aggregate is None:
            try:
                aggregate = self._client.get_aggregate(args[0])
            except compute.ComputeNotFound:
                return None     # gone: the call says so
        values['target_id'] = '%s (%s)' % (args[0], aggregate.get('name'))
        if action == 'set_metadata' and args[0] and (
                aggregate.get('name') == reservation['id']):
            return None
        if self._own_aggregate(aggregate, reservation):
            return None
        return 'aggregate %s is not the reservation\'s' % args[0]

    def _check_flavor(self, name, action, need, args, lease, reservation,
                      values, **_kw):
        props = (reservation or {}).get('properties') or {}
        if props.get('flavor_id') != args[0]:
            return 'flavor %s is not the reservation\'s' % args[0]
        if len(args) > 1 and args[1] != lease['project_id']:
            return 'flavor access is only the lease\'s project\'s'
        return None

    def _check_server_group(self, name, action, need, args, lease,
                            reservation, values, **_kw):
        props = (reservation or {}).get('properties') or {}
        if props.get('server_group_id') != args[0]:
            return 'server group %s is not the reservation\'s' % args[0]
        return None

    def _check_reservation(self, name, action, need, args, lease,
                           reservation, values, **_kw):
        if args[0] != lease['id'] or reservation is None or (
                args[1] != reservation['id']):
            return 'reservation %s is not one of the lease\'s' % args[1]
        values['target_id'] = args[1]
        return None

    def _check_service(self, name, action, need, args, lease, reservation,
                       values, service=None, **_kw):
        host = (service or {}).get('host')
        values['target_host'] = host
        if host is None or host not in self._hosts(reservation):
            return 'service %s is not on one of the reservation\'s hosts' % (
                args[0])
        return None
