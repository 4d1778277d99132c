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
"""The promise auditor's checks: pure functions of a :class:`CloudState`.

No I/O and no Nova imports: :mod:`nova_lease.audit.reader` builds the
state from the side database, the compute API and placement. Each check
returns :class:`Finding` objects, each a promise that is broken or in
danger (DESIGN "Guarantees" 1 and 2):

``overcommit``
    At some instant from now on, what a host is promised (instance and
    host allocations of live leases) plus what runs on it (placement's
    usage of servers that no live lease holds, until forever; of leased
    servers, until their lease's end) exceeds its capacity in placement
    (``(total - reserved) * allocation_ratio``).
``bystander``
    A server on a host of a started host reservation that does not belong
    to the reservation (its project, linked to the lease or booted with
    the reservation's hint).
``free_pool_server``
    A server on a registered host that no started host lease holds: the
    free pool takes no work (but the servers of an instance reservation,
    in its slots there).
``aggregate``
    A host of a started host reservation outside the reservation's
    aggregate or still in the free pool; a registered host that is in no
    started reservation and outside the free pool; a reservation's
    aggregate left behind after its lease.
``leased_server``
    A started instance lease whose server is gone; a server whose lease
    metadata names a lease that is gone, or that runs past the end of its
    lease; a live link to a lease that has ended.
``lease_status``
    A lease whose status disagrees with its events (started without its
    start event done, ended without its end event done).
``broken_promise``
    An admitted lease (a host lease, or an instance lease that started in
    the future) in ``ERROR``: its start or end failed; its
    ``status_reason`` says why.
``stuck_event`` / ``overdue_event``
    An event ``IN_PROGRESS`` longer than the engines' claim timeout, or
    ``UNDONE`` past its time (its retry time, and the time the earlier
    events of its lease can have run: a before-end waiting for a start
    that is retried is not late) by more than the grace: no engine acts.
``host_service``
    A host under a started promise (an allocation of an ``ACTIVE`` lease
    that holds now: a host lease's host, an instance reservation's slot
    host, a VM lease's host; the host of a VM lease's running server) or
    an imminent one (an allocation of a live lease that starts within
    ``imminent`` seconds) whose nova-compute service is down, forced
    down, disabled or missing. The idle action's disabling (its reason
    starts with ``idle_reason_prefix``) is by design until just before a
    promise, so a finding only under a started one.
``journal``
    An action of the engine (its gate's journal, ``engine_actions``)
    that touched something outside its lease: a server deleted, shelved,
    unshelved or changed that was not of the lease's project; a server
    migrated off a host that was not one of the reservation's; a
    migration confirmed that the lease never asked for; a flavor that
    was not the reservation's. Refused actions touched nothing and are
    not looked at.
"""

import collections
import dataclasses
import datetime
import typing

from nova_lease import resource_types as types
from nova_lease import status
from nova_lease import wire

RESOURCES = ('VCPU', 'MEMORY_MB', 'DISK_GB')
_SIZE_KEYS = {'VCPU': 'vcpus', 'MEMORY_MB': 'memory_mb', 'DISK_GB': 'disk_gb'}

#: The extra spec of the flavors of Blazar's instance reservations.
FLAVOR_SPEC = wire.FLAVOR_RESERVATION_SPEC
#: Metadata key of a host reservation's aggregate (named after the
#: reservation's id, as in Blazar): the reservation's id.
META_AGGREGATE_RESERVATION = wire.AGGREGATE_RESERVATION_ID
META_LEASE_ID = wire.SERVER_LEASE_ID
META_RESERVATION_ID = wire.SERVER_RESERVATION_ID
#: The reservation property of an instance lease admitted for a future
#: start (its server is shelved-offloaded until the start).
SHELVED_UNTIL_START = wire.PROP_SHELVED_UNTIL_START

_L = status.LeaseStatus
_E = status.EventStatus
_T = status.EventType

#: Leases whose promises are live (their capacity is held).
LIVE = frozenset({_L.PENDING, _L.STARTING, _L.ACTIVE, _L.IN_PROGRESS})
#: Leases that are over: nothing of them may run on or hold a host.
OVER = frozenset({_L.TERMINATED, _L.ERROR, _L.TIMEDOUT})
#: Server statuses that occupy no host.
NOT_ON_HOST = frozenset({'SHELVED_OFFLOADED', 'DELETED', 'SOFT_DELETED'})
_LIVE_RESERVATIONS = frozenset({'pending', 'active'})


@dataclasses.dataclass(frozen=True)
class Finding:
    """One broken or endangered promise."""

    check: str
    subject: str
    message: str
    details: dict = dataclasses.field(default_factory=dict, compare=False)

    def to_dict(self):
        return {'check': self.check, 'subject': self.subject,
                'message': self.message, 'details': self.details}


@dataclasses.dataclass
class Provider:
    """A compute node as placement has it (named by hypervisor hostname).

    ``capacity``: {resource class: usable amount}; ``usages``: {consumer
    uuid: {resource class: amount}}.
    """

    name: str
    capacity: dict
    usages: dict


@dataclasses.dataclass
class CloudState:
    """What the auditor reads; plain dicts as the side database and the
    compute API give them.

    * ``leases``: lease dicts with ``reservations`` and ``events``;
    * ``allocations``: allocation dicts (``reservation_id``, ``host`` the
      hypervisor hostname, dates, sizes, ``whole_host``);
    * ``registered``: registered host dicts (``hypervisor_hostname``,
      ``service_host``);
    * ``servers``: server dicts (``id``, ``tenant_id``, ``status``,
      ``host`` the compute service host, ``node`` the hypervisor
      hostname, ``metadata``; optionally ``reservation_hint``, the
      ``reservation`` boot hint when the reader looked it up);
    * ``aggregates``: aggregate dicts (``name``, ``hosts`` compute service
      hosts, ``metadata``);
    * ``providers``: {hypervisor hostname: :class:`Provider`};
    * ``services``: nova-compute service dicts (``host``, ``status``,
      ``state``, ``forced_down``, ``disabled_reason``), None when not
      read (no ``host_service`` check then);
    * ``hypervisors``: {hypervisor hostname: compute service host}.
    """

    now: datetime.datetime
    leases: list
    allocations: list
    registered: list
    servers: list
    aggregates: list
    providers: dict
    freepool: str = 'freepool'
    claim_timeout: float = 900.0
    overdue_grace: float = 60.0
    services: typing.Optional[list] = None
    hypervisors: dict = dataclasses.field(default_factory=dict)
    #: Seconds ahead within which a promise's host must be up and enabled.
    imminent: float = 3600.0
    #: The start of the disabled reason the engine's idle action writes.
    idle_reason_prefix: typing.Optional[str] = None
    #: Instance reservations' flavors (extra spec :data:`FLAVOR_SPEC`):
    #: ``{'id', 'is_public', 'reservation', 'access'}`` (``access`` the
    #: projects a private flavor is given to); None when not read.
    flavors: typing.Optional[list] = None
    #: The engine's action journal (``engine_actions`` rows), None when
    #: not read (no ``journal`` check then): all of it, or the rows after
    #: a cursor.
    actions: typing.Optional[list] = None
    #: With the rows after a cursor: the journaled migrations before it
    #: of the leases that have a confirmation among ``actions`` (so that
    #: a confirmation is checked against every migration its lease asked
    #: for).
    earlier_moves: list = dataclasses.field(default_factory=list)


# -- helpers -----------------------------------------------------------------

def _sizes(item):
    return {rc: int(item.get(key) or 0) for rc, key in _SIZE_KEYS.items()}


def _add(total, sizes):
    for rc in RESOURCES:
        total[rc] = total.get(rc, 0) + sizes.get(rc, 0)


def _fmt(when):
    return when.strftime('%Y-%m-%d %H:%M:%S') if when else None


class _Index(object):
    """Look-ups shared by the checks."""

    def __init__(self, state):
        self.state = state
        self.leases = {lease['id']: lease for lease in state.leases}
        self.reservations = {}
        for lease in state.leases:
            for reservation in lease.get('reservations') or ():
                self.reservations[reservation['id']] = (lease, reservation)
        self.allocations = collections.defaultdict(list)
        for allocation in state.allocations:
            self.allocations[allocation['reservation_id']].append(allocation)
        self.servers = {s['id']: s for s in state.servers}
        # Hypervisor hostname <-> compute service host.
        self.node_of = {}
        for host in state.registered:
            node = host['hypervisor_hostname']
            self.node_of[host.get('service_host') or node] = node
        for server in state.servers:
            if server.get('host') and server.get('node'):
                self.node_of.setdefault(server['host'], server['node'])
        self.aggregates = {a['name']: a for a in state.aggregates}
        # Live links: server id -> (lease, reservation).
        self.links = {}
        for lease, reservation in self.reservations.values():
            if (types.is_one_server(reservation) and
                    reservation.get('resource_id') and
                    lease['status'] in LIVE and
                    reservation['status'] in _LIVE_RESERVATIONS):
                self.links[reservation['resource_id']] = (lease, reservation)
        # Servers booted with a live instance reservation's flavor, on one
        # of its slot hosts, within its slots there: server id ->
        # (lease, reservation).
        self.in_slots = {}
        on_node = collections.defaultdict(list)
        for server in state.servers:
            found = self.reservations.get(server.get('reservation_flavor'))
            if (found is None or not types.is_slots(found[1]) or
                    found[0]['status'] not in LIVE or
                    found[1]['status'] not in _LIVE_RESERVATIONS or
                    server.get('status') in NOT_ON_HOST):
                continue
            node = server.get('node') or self.node(server.get('host'))
            on_node[found[1]['id'], node].append(server['id'])
        for (rid, node), server_ids in on_node.items():
            slots = sum(1 for a in self.allocations[rid] if a['host'] == node)
            for server_id in sorted(server_ids)[:slots]:
                self.in_slots[server_id] = self.reservations[rid]

    def node(self, service_host):
        return self.node_of.get(service_host, service_host)

    def servers_on(self, node):
        return [s for s in self.state.servers
                if s.get('status') not in NOT_ON_HOST and
                (s.get('node') or self.node(s.get('host'))) == node]

    def host_lease_of(self, node, server_id):
        """The started host lease on node that server_id belongs to."""
        server = self.servers.get(server_id)
        if server is None:
            return None
        for lease, reservation, nodes in self.started_host_reservations():
            if node in nodes and _belongs(self, lease, reservation, server):
                return lease
        return None

    def started_host_reservations(self):
        """(lease, reservation, allocated nodes) of started host
        reservations.
        """
        out = []
        for lease, reservation in self.reservations.values():
            if (not types.is_whole_host(reservation) or
                    lease['status'] != _L.ACTIVE or
                    reservation['status'] != 'active'):
                continue
            nodes = sorted({a['host'] for a in
                            self.allocations[reservation['id']]})
            out.append((lease, reservation, nodes))
        return out


# -- the checks --------------------------------------------------------------

class _Piece(object):
    """Capacity held on a host over [start, end) (end None: forever)."""

    __slots__ = ('start', 'end', 'sizes', 'what', 'server', 'whole')

    def __init__(self, start, end, sizes, what, server=None, whole=None):
        self.start, self.end, self.sizes, self.what = start, end, sizes, what
        self.server = server        # the consumer's server id
        self.whole = whole          # (lease, reservation) of a whole host

    def covers(self, instant):
        return self.start <= instant and (self.end is None or
                                          instant < self.end)


def _demand_pieces(index, node, provider):
    """What holds capacity on node from now on: a list of _Piece."""
    state = index.state
    pieces = []
    for consumer, usage in sorted(provider.usages.items()):
        sizes = {rc: int(usage.get(rc, 0)) for rc in RESOURCES}
        if consumer in index.in_slots:
            # It runs in one of its reservation's slots here, which count
            # (below); the engine deletes it at the lease's end.
            continue
        link = index.links.get(consumer)
        if link is None:
            # A server of a started host lease on one of its hosts goes
            # at the lease's end (the engine deletes or shelves it);
            # anything else stays forever.
            holder = index.host_lease_of(node, consumer)
            end = holder['end_date'] if holder is not None else None
            pieces.append(_Piece(state.now, end, sizes,
                                 'server %s' % consumer, server=consumer))
            continue
        lease, reservation = link
        held = [a for a in index.allocations[reservation['id']]
                if a['host'] == node]
        # Until the lease's end; where its own allocation on this host
        # covers it, the allocation counts instead (below).
        cursor = state.now
        for allocation in sorted(held, key=lambda a: a['start_date']):
            if allocation['start_date'] > cursor:
                pieces.append(_Piece(cursor, allocation['start_date'],
                                     sizes, 'server %s' % consumer,
                                     server=consumer))
            cursor = max(cursor, allocation['end_date'])
        if cursor < lease['end_date']:
            pieces.append(_Piece(cursor, lease['end_date'], sizes,
                                 'server %s of lease %s' % (consumer,
                                                            lease['id']),
                                 server=consumer))
    for allocation in state.allocations:
        if allocation['host'] != node or allocation['end_date'] <= state.now:
            continue
        found = index.reservations.get(allocation['reservation_id'])
        if found is None or (found[0]['status'] not in LIVE and
                             found[0]['status'] != _L.TERMINATING):
            continue
        lease = found[0]
        start = max(allocation['start_date'], state.now)
        if allocation.get('whole_host'):
            pieces.append(_Piece(start, allocation['end_date'],
                                 dict(provider.capacity),
                                 'host lease %s' % lease['id'],
                                 whole=found))
        else:
            pieces.append(_Piece(start, allocation['end_date'],
                                 _sizes(allocation),
                                 'lease %s' % lease['id']))
    return pieces


def _counted(index, piece, wholes):
    """Does piece add to the demand beside the whole-host leases wholes?

    A whole-host lease holds all of the host: the servers that belong to
    it run inside its promise; anything else is in its way.
    """
    if piece.whole is not None or not wholes:
        return True
    if piece.server is None:
        return True
    if any(lease['status'] == _L.IN_PROGRESS for lease, _r in wholes):
        # A best-effort lease hunting: the servers in its way are being
        # migrated off (its status says so; it times out otherwise).
        return False
    server = index.servers.get(piece.server)
    return server is None or not any(
        _belongs(index, lease, reservation, server)
        for lease, reservation in wholes)


def check_overcommit(state, index=None):
    index = index or _Index(state)
    findings = []
    for node, provider in sorted(state.providers.items()):
        pieces = _demand_pieces(index, node, provider)
        instants = sorted({state.now} | {p.start for p in pieces})
        for instant in instants:
            covering = [p for p in pieces if p.covers(instant)]
            wholes = [p.whole for p in covering if p.whole is not None]
            total, why = {}, []
            for piece in covering:
                if _counted(index, piece, wholes):
                    _add(total, piece.sizes)
                    why.append(piece.what)
            over = {rc: (total.get(rc, 0), provider.capacity.get(rc, 0))
                    for rc in RESOURCES
                    if total.get(rc, 0) > provider.capacity.get(rc, 0)}
            if over:
                findings.append(Finding(
                    'overcommit', node,
                    'host %s is promised more than it has at %s: %s (by %s)'
                    % (node, _fmt(instant), ', '.join(
                        '%s %d > %d' % (rc, used, cap)
                        for rc, (used, cap) in sorted(over.items())),
                        ', '.join(why)),
                    {'at': _fmt(instant), 'over': {
                        rc: {'demand': used, 'capacity': cap}
                        for rc, (used, cap) in over.items()},
                     'holders': why}))
                break   # one finding per host: the first instant
    return findings


def _belongs(index, lease, reservation, server):
    if server.get('tenant_id') != lease['project_id']:
        return False
    link = index.links.get(server['id'])
    if link is not None and link[0]['id'] == lease['id']:
        return True
    metadata = server.get('metadata') or {}
    if META_RESERVATION_ID in metadata:
        return metadata[META_RESERVATION_ID] == reservation['id']
    return server.get('reservation_hint') == reservation['id']


def check_hosts(state, index=None):
    """Bystanders, servers in the free pool and aggregates."""
    index = index or _Index(state)
    findings = []
    pool = index.aggregates.get(state.freepool) or {'hosts': []}
    pool_nodes = {index.node(h) for h in pool.get('hosts') or ()}
    held = {}
    for lease, reservation, nodes in index.started_host_reservations():
        aggregate = index.aggregates.get(reservation['id'])
        agg_nodes = {index.node(h) for h in (aggregate or {}).get(
            'hosts') or ()}
        for node in nodes:
            held[node] = (lease, reservation)
            if node not in agg_nodes:
                findings.append(Finding(
                    'aggregate', node,
                    'host %s of started reservation %s (lease %s) is not '
                    'in its aggregate %s' % (node, reservation['id'],
                                             lease['id'],
                                             reservation['id']),
                    {'lease_id': lease['id'],
                     'reservation_id': reservation['id']}))
            if node in pool_nodes:
                findings.append(Finding(
                    'aggregate', node,
                    'host %s of started reservation %s (lease %s) is still '
                    'in the free pool %s' % (node, reservation['id'],
                                             lease['id'], state.freepool),
                    {'lease_id': lease['id'],
                     'reservation_id': reservation['id']}))
            for server in index.servers_on(node):
                if not _belongs(index, lease, reservation, server):
                    findings.append(Finding(
                        'bystander', server['id'],
                        'server %s (project %s) runs on host %s of '
                        'reservation %s of lease %s (project %s) and does '
                        'not belong to it' % (
                            server['id'], server.get('tenant_id'), node,
                            reservation['id'], lease['id'],
                            lease['project_id']),
                        {'host': node, 'lease_id': lease['id'],
                         'reservation_id': reservation['id']}))
    for host in state.registered:
        node = host['hypervisor_hostname']
        if node in held:
            continue
        if node not in pool_nodes and host.get('reservable', True):
            findings.append(Finding(
                'aggregate', node,
                'registered host %s is held by no started host lease and '
                'is not in the free pool %s' % (node, state.freepool), {}))
        for server in index.servers_on(node):
            if server['id'] in index.in_slots:
                continue
            findings.append(Finding(
                'free_pool_server', server['id'],
                'server %s (project %s) runs on registered host %s, which '
                'no started host lease holds' % (
                    server['id'], server.get('tenant_id'), node),
                {'host': node}))
    for name, aggregate in sorted(index.aggregates.items()):
        rid = (aggregate.get('metadata') or {}).get(
            META_AGGREGATE_RESERVATION)
        if rid is None:
            continue
        found = index.reservations.get(rid)
        if found is None or found[0]['status'] in OVER:
            findings.append(Finding(
                'aggregate', name,
                'aggregate %s (hosts: %s) belongs to no live host '
                'reservation' % (name, ', '.join(
                    aggregate.get('hosts') or ()) or 'none'),
                {'hosts': list(aggregate.get('hosts') or ())}))
    return findings


def check_leased_servers(state, index=None):
    index = index or _Index(state)
    findings = []
    for lease, reservation in index.reservations.values():
        if not types.is_one_server(reservation):
            continue
        server_id = reservation.get('resource_id')
        if not server_id:
            continue
        server = index.servers.get(server_id)
        if (lease['status'] == _L.ACTIVE and
                reservation['status'] == 'active' and server is None):
            findings.append(Finding(
                'leased_server', server_id,
                'server %s of started lease %s is gone'
                % (server_id, lease['id']),
                {'lease_id': lease['id'],
                 'reservation_id': reservation['id']}))
        if (lease['status'] in OVER and
                reservation['status'] in _LIVE_RESERVATIONS):
            findings.append(Finding(
                'leased_server', server_id,
                'reservation %s of lease %s (%s) still holds server %s'
                % (reservation['id'], lease['id'], lease['status'],
                   server_id),
                {'lease_id': lease['id'],
                 'reservation_id': reservation['id']}))
    for server in state.servers:
        lease_id = (server.get('metadata') or {}).get(META_LEASE_ID)
        if not lease_id or server.get('status') in NOT_ON_HOST:
            continue
        if server['id'] in index.links:
            lease = index.links[server['id']][0]
            if lease['end_date'] <= state.now - datetime.timedelta(
                    seconds=state.overdue_grace):
                findings.append(Finding(
                    'leased_server', server['id'],
                    'server %s runs past the end of its lease %s (%s)'
                    % (server['id'], lease['id'], _fmt(lease['end_date'])),
                    {'lease_id': lease['id']}))
            continue
        if lease_id not in index.leases and (
                server.get('metadata') or {}).get('lease_status') in (
                    'pending', 'active', 'reserved'):
            findings.append(Finding(
                'leased_server', server['id'],
                'server %s runs for lease %s, which is gone'
                % (server['id'], lease_id), {'lease_id': lease_id}))
    return findings


def _event(lease, event_type):
    for event in lease.get('events') or ():
        if event['event_type'] == event_type:
            return event
    return None


def _ready_times(events, claim):
    """{event id: when it can run}: its time or retry time, and no
    sooner than every earlier event of its lease (the engine runs them in
    life-cycle order, nova_lease.status) can have finished: an unfinished
    earlier one when it is due, a claimed one when its claim times out.
    An event waiting behind a start that is retried is not late; the
    start is, once its own retry is past due.
    """
    ready = {}
    blocked_until = None
    for event in sorted(events, key=lambda e: status.EVENT_LIFECYCLE_ORDER
                        .get(e['event_type'], len(
                            status.EVENT_LIFECYCLE_ORDER))):
        due = max(event['time'], event.get('next_attempt_at') or
                  event['time'])
        if blocked_until is not None:
            due = max(due, blocked_until)
        ready[event['id']] = due
        if event['status'] == _E.UNDONE:
            blocked_until = due
        elif event['status'] == _E.IN_PROGRESS:
            blocked_until = max(due, (event.get('claimed_at') or due) +
                                claim)
    return ready


def check_events(state, index=None):
    findings = []
    now = state.now
    claim = datetime.timedelta(seconds=state.claim_timeout)
    grace = datetime.timedelta(seconds=state.overdue_grace)
    for lease in state.leases:
        ready = _ready_times(lease.get('events') or (), claim)
        for event in lease.get('events') or ():
            if (event['status'] == _E.IN_PROGRESS and
                    event.get('claimed_at') and
                    event['claimed_at'] + claim < now):
                findings.append(Finding(
                    'stuck_event', event['id'],
                    '%s of lease %s is IN_PROGRESS since %s, longer than '
                    'the claim timeout (%d s)' % (
                        event['event_type'], lease['id'],
                        _fmt(event['claimed_at']), state.claim_timeout),
                    {'lease_id': lease['id']}))
            due = ready[event['id']]
            if event['status'] == _E.UNDONE and due + grace < now:
                findings.append(Finding(
                    'overdue_event', event['id'],
                    '%s of lease %s was due at %s and has not run' % (
                        event['event_type'], lease['id'], _fmt(due)),
                    {'lease_id': lease['id']}))
        start = _event(lease, _T.START_LEASE)
        end = _event(lease, _T.END_LEASE)
        if (lease['status'] == _L.ACTIVE and start is not None and
                start['status'] != _E.DONE):
            findings.append(Finding(
                'lease_status', lease['id'],
                'lease %s is ACTIVE but its start event is %s' % (
                    lease['id'], start['status']), {}))
        if (lease['status'] == _L.TERMINATED and end is not None and
                end['status'] not in (_E.DONE,) and
                start is not None and start['status'] == _E.DONE):
            findings.append(Finding(
                'lease_status', lease['id'],
                'lease %s is TERMINATED but its end event is %s' % (
                    lease['id'], end['status']), {}))
    return findings


def _admitted(lease):
    """Was the lease a promise (admitted against the calendar)?"""
    return any(types.is_whole_host(r) or
               (r.get('properties') or {}).get(SHELVED_UNTIL_START)
               for r in lease.get('reservations') or ())


def check_broken(state, index=None):
    return [Finding('broken_promise', lease['id'],
                    'lease %s (project %s) is in ERROR: %s' % (
                        lease['id'], lease['project_id'],
                        lease.get('status_reason') or 'no reason given'),
                    {'status_reason': lease.get('status_reason')})
            for lease in state.leases
            if lease['status'] == _L.ERROR and _admitted(lease)]


def _promised_nodes(index):
    """{node: {lease id: (lease, started, start)}} of the hosts under a
    started or imminent promise (see ``host_service``): an allocation
    of a live lease that holds within ``imminent`` from now (started: of
    an ACTIVE lease, holding now), the host of a live lease's running
    server (started).
    """
    state = index.state
    soon = state.now + datetime.timedelta(seconds=state.imminent)
    out = collections.defaultdict(dict)
    for allocation in state.allocations:
        found = index.reservations.get(allocation['reservation_id'])
        if (found is None or found[0]['status'] not in LIVE or
                found[1]['status'] not in _LIVE_RESERVATIONS or
                allocation['end_date'] <= state.now or
                allocation['start_date'] >= soon):
            continue
        lease = found[0]
        started = (lease['status'] == _L.ACTIVE and
                   allocation['start_date'] <= state.now)
        held = out[allocation['host']].get(lease['id'])
        if held is None or (started and not held[1]):
            out[allocation['host']][lease['id']] = (
                lease, started, allocation['start_date'])
    # A VM lease's running server: its promise holds now (whether the
    # engine has recorded the start yet or not).
    for server_id, (lease, _reservation) in index.links.items():
        server = index.servers.get(server_id)
        if server is None or server.get('status') in NOT_ON_HOST:
            continue
        node = server.get('node') or index.node(server.get('host'))
        if node:
            out[node][lease['id']] = (lease, True, lease['start_date'])
    return out


def _service_problems(service, started, idle_prefix):
    """What is wrong with a promised host's nova-compute ``service``."""
    if service is None:
        return ['without a nova-compute service']
    problems = []
    if service.get('forced_down'):
        problems.append('forced down')
    elif service.get('state') == 'down':
        problems.append('down')
    if service.get('status') == 'disabled':
        reason = service.get('disabled_reason') or ''
        idle = bool(idle_prefix) and reason.startswith(idle_prefix)
        if started or not idle:
            problems.append('disabled (%s)' % (reason or 'no reason'))
    return problems


def check_services(state, index=None):
    """Hosts under a started or imminent promise whose nova-compute is
    down, forced down, disabled or gone (``host_service``).
    """
    if state.services is None:
        return []
    index = index or _Index(state)
    services = {s.get('host'): s for s in state.services}
    service_of = {node: index_host for index_host, node in
                  index.node_of.items()}
    service_of.update(state.hypervisors)
    findings = []
    for node, held in sorted(_promised_nodes(index).items()):
        service_host = service_of.get(node, node)
        service = services.get(service_host)
        started = any(s for _lease, s, _start in held.values())
        problems = _service_problems(service, started,
                                     state.idle_reason_prefix)
        if not problems:
            continue
        promises = sorted(held.values(), key=lambda h: (h[2], h[0]['id']))
        findings.append(Finding(
            'host_service', node,
            'host %s (nova-compute on %s) is %s, under the promise of %s'
            % (node, service_host, ' and '.join(problems), ', '.join(
                'lease %s (%s)' % (lease['id'], 'started' if s else
                                   'from %s' % _fmt(start))
                for lease, s, start in promises)),
            {'service_host': service_host,
             'service': None if service is None else {
                 key: service.get(key) for key in (
                     'status', 'state', 'forced_down', 'disabled_reason')},
             'promises': [{'lease_id': lease['id'],
                           'project_id': lease['project_id'],
                           'started': s, 'start': _fmt(start)}
                          for lease, s, start in promises]}))
    return findings


#: Lease statuses after which an instance reservation's flavor is gone.
_OVER = frozenset({_L.TERMINATED, _L.TIMEDOUT})


def check_flavors(state, index=None):
    """An instance reservation's flavor belongs to its lease's project
    (``flavor_owner``): private, given to no other project, given to the
    project while the lease is ACTIVE, deleted once the lease is over
    (``overdue_grace`` seconds after its end, for the engine's end).
    """
    if state.flavors is None:
        return []
    owners = {r['id']: lease for lease in state.leases
              for r in lease.get('reservations') or ()}
    grace = datetime.timedelta(seconds=state.overdue_grace)
    findings = []
    for flavor in sorted(state.flavors, key=lambda f: f['id']):
        lease = owners.get(flavor['reservation'])
        project = lease['project_id'] if lease else None
        access = set(flavor.get('access') or ())
        problems = []
        if flavor.get('is_public'):
            problems.append('is public')
        strangers = sorted(access - {project})
        if strangers:
            problems.append('is given to project(s) %s' %
                            ', '.join(strangers))
        if lease is not None and lease['status'] == _L.ACTIVE and (
                not flavor.get('is_public') and project not in access):
            problems.append('is not given to the project of its started '
                            'lease')
        if lease is None or (lease['status'] in _OVER and
                             lease['end_date'] + grace < state.now):
            problems.append('outlives its reservation')
        if problems:
            findings.append(Finding(
                'flavor_owner', flavor['id'],
                'flavor %s of reservation %s (lease %s, project %s) %s' % (
                    flavor['id'], flavor['reservation'],
                    lease['id'] if lease else None, project,
                    ' and '.join(problems)),
                {'reservation_id': flavor['reservation'],
                 'lease_id': lease['id'] if lease else None,
                 'project_id': project, 'is_public': flavor.get('is_public'),
                 'access': sorted(access)}))
    return findings


#: Journaled server actions that only the lease's project's servers
#: may get.
_OWNER_ACTIONS = frozenset({'delete', 'reset_state', 'shelve',
                            'shelve_offload', 'unshelve', 'set_metadata',
                            'add_tag', 'delete_tag'})
MOVES = _MOVES = frozenset({'live_migrate', 'migrate'})
#: The reservation property of a best-effort host reservation's hunt.
BEST_EFFORT = 'best_effort'


def _reservation_hosts(index, state, reservation):
    """Every name (hypervisor hostname, compute service host) of a host
    the reservation holds or held: its allocations and the hosts its
    hunt took.
    """
    names = {a['host'] for a in state.allocations
             if a['reservation_id'] == reservation['id']}
    props = reservation.get('properties') or {}
    hunt = props.get(BEST_EFFORT) if isinstance(props, dict) else None
    if hunt:
        names.update(hunt.get('hosts') or ())
        names.update((hunt.get('services') or {}).values())
    services = {r.get('hypervisor_hostname'): r.get('service_host')
                for r in state.registered}
    services.update(state.hypervisors)
    names.update(services[n] for n in list(names) if services.get(n))
    return names


def check_journal(state, index=None):
    """Journaled engine actions that touched something outside their
    lease (``journal``).
    """
    if not state.actions:
        return []
    index = index or _Index(state)
    leases = {lease['id']: lease for lease in state.leases}
    asked = {(row['lease_id'], row['target_id'])
             for row in list(state.earlier_moves) + list(state.actions)
             if row['action'] in _MOVES and row['outcome'] != 'refused'}
    # Each reservation's hosts once, whatever the number of its rows.
    hosts_of = {}

    def reservation_hosts(reservation):
        if reservation['id'] not in hosts_of:
            hosts_of[reservation['id']] = _reservation_hosts(
                index, state, reservation)
        return hosts_of[reservation['id']]

    findings = []
    for row in state.actions:
        if row['outcome'] == 'refused' or not row.get('lease_id'):
            continue
        lease = leases.get(row['lease_id'])
        reservation = None
        if lease is not None:
            reservation = next((r for r in lease.get('reservations') or ()
                                if r['id'] == row.get('reservation_id')),
                               None)
        project = row.get('project_id') or (lease or {}).get('project_id')
        kind, action = row['target_kind'], row['action']
        why = None
        if lease is not None and row.get('project_id') and (
                row['project_id'] != lease['project_id']):
            why = 'journaled for project %s, the lease is of project %s' % (
                row['project_id'], lease['project_id'])
        elif kind == 'server' and action in _OWNER_ACTIONS and (
                row.get('target_project_id') != project):
            why = 'server of project %s, the lease is of project %s' % (
                row.get('target_project_id'), project)
        elif kind == 'server' and action in _MOVES and (
                reservation is not None and row.get('target_host') not in
                reservation_hosts(reservation)):
            why = ('migrated off host %s, not one of reservation %s\'s'
                   % (row.get('target_host'), reservation['id']))
        elif kind == 'server' and action == 'confirm' and (
                (row['lease_id'], row['target_id']) not in asked):
            why = 'confirmed a migration the lease never asked for'
        elif kind == 'flavor' and reservation is not None and (
                (reservation.get('properties') or {}).get('flavor_id') !=
                row['target_id']):
            why = 'not the flavor of reservation %s' % reservation['id']
        if why is None:
            continue
        findings.append(Finding(
            'journal', '%s %s' % (kind, row['target_id']),
            'engine action %s (%s of %s %s for lease %s, %s): %s'
            % (row.get('id'), action, kind, row['target_id'],
               row['lease_id'], row['outcome'], why),
            {key: (_fmt(row[key]) if key == 'created_at' else row.get(key))
             for key in ('id', 'lease_id', 'reservation_id', 'project_id',
                         'target_kind', 'target_id', 'target_project_id',
                         'target_host', 'action', 'outcome', 'engine',
                         'created_at')}))
    return findings


CHECKS = (check_overcommit, check_hosts, check_leased_servers, check_events,
          check_broken, check_services, check_flavors, check_journal)


def check(state: CloudState) -> typing.List[Finding]:
    """Every finding of every check, in a stable order."""
    index = _Index(state)
    findings = []
    for func in CHECKS:
        findings.extend(func(state, index))
    return findings
