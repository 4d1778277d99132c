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
"""What the auditor reads: the side database, the compute API, placement.

Everything is read through the service user of ``[nova_lease_auth]``
(admin, as the engine): the compute API through
:class:`nova_lease.compute.ComputeClient`, placement through
openstacksdk's placement proxy over the same session (service type
``placement``), each request at :data:`PLACEMENT_MICROVERSION`.
"""

import datetime

from keystoneauth1 import exceptions as ks_exc
from openstack import exceptions as os_exc
from oslo_log import log as logging
from oslo_utils import timeutils

from oslo_db import exception as db_exc
import sqlalchemy.exc

from nova_lease.audit import checks
from nova_lease import compute
from nova_lease.conf import auth as auth_conf
from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease.periodic import idle

LOG = logging.getLogger(__name__)

#: Placement microversion: 1.9 has GET /usages, 1.12 the allocations'
#: dict shape used here; 1.14 nested providers (ignored: one compute node
#: provider per hypervisor).
PLACEMENT_MICROVERSION = '1.14'

#: A promise that starts within this is imminent: its host must be up and
#: enabled (``host_service``). An hour: longer than the engine's idle
#: wake-up (``[nova_lease] idle_host_wake_minutes``, 30 by default), time
#: enough to repair a host before its lease starts.
IMMINENT = datetime.timedelta(hours=1)


class AuditReadError(exception.NovaLeaseException):
    """The auditor could not read what it needs."""

    msg_fmt = '%(reason)s'

    def __init__(self, reason):
        super().__init__(reason=reason)


class PlacementClient(object):
    """The few placement reads the auditor needs, as plain dicts."""

    def __init__(self, session, interface=None, region_name=None,
                 endpoint_override=None):
        self._conn = compute.connect(
            session, interface=interface, region_name=region_name,
            placement_endpoint_override=endpoint_override)

    @classmethod
    def from_conf(cls, conf, group=compute.AUTH_GROUP):
        auth_conf.register_opts(conf)
        opts = conf[group]
        interfaces = opts.valid_interfaces or []
        return cls(compute.load_session(conf, group),
                   interface=interfaces[0] if interfaces else None,
                   region_name=opts.region_name)

    def _get(self, url):
        try:
            resp = self._conn.placement.get(
                url, microversion=PLACEMENT_MICROVERSION, raise_exc=False)
        except (ks_exc.ClientException, os_exc.SDKException) as e:
            # No placement endpoint in the catalog, placement down, ...
            raise AuditReadError('placement GET %s: %s' % (
                url, str(e) or type(e).__name__)) from e
        if resp.status_code >= 400:
            raise AuditReadError('placement GET %s: HTTP %s %s' % (
                url, resp.status_code, resp.text[:200]))
        return resp.json()

    def providers(self):
        """{hypervisor hostname: Provider} of every resource provider with
        compute inventory.
        """
        out = {}
        for rp in self._get('/resource_providers')['resource_providers']:
            inventories = self._get('/resource_providers/%s/inventories'
                                    % rp['uuid'])['inventories']
            capacity = {}
            for rc in checks.RESOURCES:
                inv = inventories.get(rc)
                if inv is not None:
                    capacity[rc] = int((inv['total'] - inv['reserved']) *
                                       inv['allocation_ratio'])
            if not capacity:
                continue
            allocations = self._get('/resource_providers/%s/allocations'
                                    % rp['uuid'])['allocations']
            usages = {consumer: dict(item['resources'])
                      for consumer, item in allocations.items()}
            out[rp['name']] = checks.Provider(rp['name'], capacity, usages)
        return out


def _server(raw):
    return {
        'id': raw['id'],
        'tenant_id': raw.get('tenant_id'),
        'status': raw.get('status'),
        'host': raw.get('OS-EXT-SRV-ATTR:host'),
        'node': raw.get('OS-EXT-SRV-ATTR:hypervisor_hostname'),
        'metadata': raw.get('metadata') or {},
        # The instance reservation whose flavor it was booted with
        # (its flavor's nova_lease:reservation extra spec), if any.
        'reservation_flavor': ((raw.get('flavor') or {}).get(
            'extra_specs') or {}).get(checks.FLAVOR_SPEC),
    }


def read_state(conf, db=None, compute_client=None, placement=None,
               now=None, cursor=None):
    """A :class:`~nova_lease.audit.checks.CloudState` of the cloud now.

    ``cursor`` (a :class:`nova_lease.audit.JournalCursor`): only the
    journal rows after ``cursor.since`` (and the earlier migrations that
    their confirmations finish); boot hints already in ``cursor.hints``
    are not read again.
    """
    since = cursor.since if cursor is not None else None
    db = db or db_api.get_database(conf)
    compute_client = compute_client or compute.ComputeClient.from_conf(conf)
    placement = placement or PlacementClient.from_conf(conf)
    opts = conf.nova_lease
    try:
        # Nova and placement first, the side database last: a lease
        # created meanwhile is then seen with whatever it already holds.
        servers = [_server(s) for s in compute_client.list_servers(
            all_projects=True)]
        aggregates = compute_client.list_aggregates()
        # The compute services (one request) and which service runs each
        # compute node (one request: several nodes per service with
        # Ironic or vCenter, a node named apart from its host elsewhere).
        services = compute_client.list_services(binary=idle.COMPUTE_BINARY)
        hypervisors = {h['hypervisor_hostname']: h['host']
                       for h in compute_client.list_hypervisors()}
        providers = placement.providers()
        flavors = _reservation_flavors(compute_client)
        # The journal before the leases: the lease of every row read is
        # then seen (a row is checked once when a cursor is given).
        actions = db_api.action_list(db, since=since)
        earlier_moves = _earlier_moves(db, actions, since)
        leases = db_api.lease_list(db)
        allocations = db_api.allocation_list(db)
        registered = db_api.host_list(db)
    except (exception.NovaLeaseException, ks_exc.ClientException,
            db_exc.DBError, sqlalchemy.exc.SQLAlchemyError) as e:
        raise AuditReadError(str(e)) from e
    state = checks.CloudState(
        now=now or timeutils.utcnow(), leases=leases,
        allocations=allocations, registered=registered, servers=servers,
        aggregates=aggregates, providers=providers,
        freepool=opts.freepool_aggregate,
        claim_timeout=opts.engine_claim_timeout, services=services,
        hypervisors=hypervisors, imminent=IMMINENT.total_seconds(),
        idle_reason_prefix=idle.REASON_PREFIX, flavors=flavors,
        actions=actions, earlier_moves=earlier_moves)
    _add_hints(state, compute_client,
               cursor.hints if cursor is not None else None)
    return state


def _earlier_moves(db, actions, since):
    """The journaled migrations up to ``since`` of the leases with a
    confirmation among ``actions`` (what the ``journal`` check needs of
    the rows before a cursor).
    """
    if since is None:
        return []
    leases = {row['lease_id'] for row in actions
              if row['action'] == 'confirm' and row.get('lease_id')}
    if not leases:
        return []
    return db_api.action_list(db, through=since, lease_ids=leases,
                              actions=checks.MOVES)


def _reservation_flavors(compute_client):
    """The flavors of instance reservations, with who may use them (one
    request for the flavors, one per private reservation flavor).
    """
    found = []
    for flavor in compute_client.list_flavors():
        reservation = flavor['extra_specs'].get(checks.FLAVOR_SPEC)
        if reservation is None:
            continue
        access = None if flavor['is_public'] else \
            compute_client.list_flavor_access(flavor['id'])
        found.append({'id': flavor['id'], 'is_public': flavor['is_public'],
                      'reservation': reservation, 'access': access})
    return found


def _add_hints(state, compute_client, known=None):
    """Look up the boot hint of servers of a host lease's project that
    run on its hosts without the reservation metadata (booted before
    nova-api recorded it), as the host plugin does. ``known``: {server
    id: hint} already read (a server's boot hints never change), updated
    with the hints read here.
    """
    index = checks._Index(state)
    for lease, reservation, nodes in index.started_host_reservations():
        for node in nodes:
            for server in index.servers_on(node):
                if (server.get('tenant_id') != lease['project_id'] or
                        checks.META_RESERVATION_ID in server['metadata']):
                    continue
                if known is not None and server['id'] in known:
                    server['reservation_hint'] = known[server['id']]
                    continue
                try:
                    hints = compute_client.get_server_scheduler_hints(
                        server['id']) or {}
                except compute.ComputeError as e:
                    LOG.warning('Cannot read the boot hints of server %s: '
                                '%s', server['id'], e)
                    continue
                value = hints.get('reservation')
                if isinstance(value, list):
                    value = value[0] if len(set(value)) == 1 else None
                server['reservation_hint'] = value
                if known is not None:
                    known[server['id']] = value
