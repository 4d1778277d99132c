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
"""Handlers of ``/os-hosts`` (Blazar v1's hosts, allocations, properties).

A registered host is a compute node leased whole: registering it puts it
in the free pool aggregate (``[nova_lease] freepool_aggregate``) through
Nova, unregistering takes it out. Bodies and query strings are validated
against :mod:`..schemas.hosts` by the router before a handler runs.
"""

import datetime

from oslo_log import log as logging
from oslo_utils import strutils

from nova_lease.api_ext.lease_api import common
from nova_lease.api_ext.lease_api import views
from nova_lease.api_ext import nova_hosts
from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import params as lease_params
from nova_lease.plugins.host import allocation as host_allocation
from nova_lease.plugins.host import registry as host_registry
from nova_lease.policies import host as host_policies
from nova_lease import policy

LOG = logging.getLogger(__name__)


class HostInUse(exception.Conflict):
    msg_fmt = ('host %(host)s is reserved by %(count)d reservation(s) that '
               'have not ended (leases %(leases)s); delete them first')


class HostHavingServers(exception.Conflict):
    msg_fmt = ('host %(host)s runs %(count)d server(s): %(servers)s. A '
               'registered host is leased whole, and the end of a lease '
               'leaves servers outside the lease alone: move them off '
               'the host (live or cold migration) or delete them, then '
               'register it')


#: How many servers a HostHavingServers message names.
_SERVERS_NAMED = 20


def _having_servers(name, servers):
    named = ', '.join('%s (project %s)' % (s['id'], s['project_id'])
                      for s in servers[:_SERVERS_NAMED])
    if len(servers) > _SERVERS_NAMED:
        named += ' and %d more' % (len(servers) - _SERVERS_NAMED)
    return HostHavingServers(host=name, count=len(servers), servers=named)


def _host(host_id):
    try:
        return db_api.host_get(common.db(), host_id)
    except db_api.HostNotFound:
        # blazarclient may pass a hypervisor hostname.
        return db_api.host_get_by_hostname(common.db(), host_id)


def _capabilities(values, field='values'):
    """Extra capabilities as stored: booleans as 'true' or 'false'.

    Their names and the types of their values are checked by the schemas
    (``schemas.hosts``); free text here.
    """
    caps = {}
    for key, value in values.items():
        if isinstance(value, bool):
            value = 'true' if value else 'false'
        if isinstance(value, str):
            lease_params.check_text(value, '%s.%s' % (field, key))
        caps[key] = value
    return caps


def list_hosts(req, ctx):
    policy.authorize(ctx, host_policies.LIST, {'project_id': ctx.project_id})
    return 200, {'hosts': [views.format_host(h)
                           for h in db_api.host_list(common.db())]}


def show_host(req, ctx, host_id):
    policy.authorize(ctx, host_policies.SHOW, {'project_id': ctx.project_id})
    return 200, {'host': views.format_host(_host(host_id))}


def create_host(req, ctx, body):
    """POST /os-hosts: register a compute node as reservable.

    ``name`` is the hypervisor hostname; every other key is an extra
    capability. The facts come from Nova; the host joins the free pool.
    """
    policy.authorize(ctx, host_policies.CREATE,
                     {'project_id': ctx.project_id})
    body = dict(body)
    name = body.pop('name').strip()
    caps = {k: v for k, v in _capabilities(body, 'body').items()
            if v is not None}
    facts = nova_hosts.compute_node_facts(ctx, name)
    service_host = facts['service_host']
    servers = nova_hosts.servers_on_host(ctx, service_host)
    if servers:
        raise _having_servers(name, servers)
    db = common.db()
    host = host_registry.register_host(
        db, dict(facts, capabilities=caps, reservable=True), common.now())
    host_registry.invalidate_host_cache()
    freepool = common.shared_opts().freepool_aggregate
    try:
        nova_hosts.add_to_freepool(ctx, service_host, freepool)
    except Exception:
        db_api.host_destroy(db, host['id'])
        host_registry.invalidate_host_cache()
        raise
    # A server scheduled onto the host while it was joining the free pool
    # (the scheduler keeps unleased work off it from now on): look again.
    servers = nova_hosts.servers_on_host(ctx, service_host)
    if servers:
        if host_registry.unregister_host(db, host, common.now()):
            host_registry.invalidate_host_cache()
            nova_hosts.remove_from_freepool(ctx, service_host, freepool)
            raise _having_servers(name, servers)
        LOG.warning('Host %(name)s was registered while server(s) %(ids)s '
                    'started on it; the end of its leases leaves them '
                    'alone: move them off the host',
                    {'name': name,
                     'ids': ', '.join(s['id'] for s in servers)})
    LOG.info('Host %(name)s registered as reservable (id %(id)s)',
             {'name': name, 'id': host['id']})
    return 201, {'host': views.format_host(host)}


def update_host(req, ctx, host_id, body):
    """PUT /os-hosts/{id}: set (or, with null, unset) extra capabilities.

    The body is ``{"values": {...}}`` or the capabilities themselves.
    The facts are read again from Nova (the cache is refreshed).
    """
    policy.authorize(ctx, host_policies.UPDATE,
                     {'project_id': ctx.project_id})
    host = _host(host_id)
    caps = _capabilities(body)
    try:
        facts = nova_hosts.compute_node_facts(ctx,
                                              host['hypervisor_hostname'])
        facts.pop('hypervisor_hostname')
    except nova_hosts.ComputeHostNotFound:
        facts = {}
    host = db_api.host_update(common.db(), host['id'],
                              dict(facts, capabilities=caps))
    host_registry.invalidate_host_cache()
    return 200, {'host': views.format_host(host)}


def delete_host(req, ctx, host_id):
    """DELETE /os-hosts/{id}: unregister (refused while reserved)."""
    policy.authorize(ctx, host_policies.DELETE,
                     {'project_id': ctx.project_id})
    host = _host(host_id)
    db = common.db()
    busy = db_api.allocation_list(db, hosts=[host['hypervisor_hostname']],
                                  start=common.now())
    if busy:
        leases = {a['reservation_id'] for a in busy}
        owners = sorted({db_api.reservation_get(db, r)['lease_id']
                         for r in leases})
        raise HostInUse(host=host['hypervisor_hostname'], count=len(leases),
                        leases=', '.join(owners))
    if host.get('service_host'):
        nova_hosts.remove_from_freepool(
            ctx, host['service_host'],
            common.shared_opts().freepool_aggregate)
    db_api.host_destroy(db, host['id'])
    host_registry.invalidate_host_cache()
    return 204, None


def _allocation_filters(req):
    # (Free text: checked by the query schema.)
    return {key: req.GET[key] for key in ('lease_id', 'reservation_id')
            if req.GET.get(key)}


def list_host_allocations(req, ctx):
    """GET /os-hosts/allocations[?lease_id=&reservation_id=]."""
    policy.authorize(ctx, host_policies.ALLOCATIONS,
                     {'project_id': ctx.project_id})
    items = host_allocation.host_allocations(common.db(),
                                             **_allocation_filters(req))
    return 200, {'allocations': [views.format_allocation(i) for i in items]}


def _idle_window(req):
    now = common.now()
    start = req.GET.get('start')
    start = now if start in (None, '', 'now') else max(
        lease_params.parse_datetime(start, 'start'), now)
    end = req.GET.get('end')
    end = lease_params.later(
        start, datetime.timedelta(days=1), 'start',
        "the default window (no 'end')") if end in (None, '') else \
        lease_params.parse_datetime(end, 'end')
    if end <= start:
        raise lease_params.LeaseParamError(
            'end', 'order', "'end' (%s) must be after 'start' (%s)" % (
                lease_params.format_short(end),
                lease_params.format_short(start)))
    hours = req.GET.get('min_hours') or '0'
    try:
        hours = float(hours)
    except ValueError:
        hours = -1.0
    if not 0 <= hours < 1e6:
        raise lease_params.LeaseParamError(
            'min_hours', 'type', "'min_hours' must be a number of hours "
            "(0 or more), got %r" % req.GET.get('min_hours'))
    return start, end, hours


def list_idle_hosts(req, ctx):
    """GET /os-hosts/idle[?start=&end=&min_hours=]: registered hosts that
    nothing is promised on for at least ``min_hours`` within the window
    (default: the next 24 hours), with those periods and until when they
    stay free. A host that runs servers is never idle.
    """
    policy.authorize(ctx, host_policies.ALLOCATIONS,
                     {'project_id': ctx.project_id})
    start, end, hours = _idle_window(req)
    out = []
    for item in host_allocation.idle_hosts(common.db(), start, end, hours):
        host = item['host']
        if nova_hosts.servers_on_host(ctx, host.get('service_host') or
                                      host['hypervisor_hostname']):
            continue
        out.append(views.format_idle_host(item))
    return 200, {'hosts': out, 'start': lease_params.format_datetime(start),
                 'end': lease_params.format_datetime(end),
                 'min_hours': hours}


def show_host_allocation(req, ctx, host_id):
    policy.authorize(ctx, host_policies.ALLOCATIONS,
                     {'project_id': ctx.project_id})
    host = _host(host_id)
    items = host_allocation.host_allocations(common.db(), hosts=[host],
                                             **_allocation_filters(req))
    item = items[0] if items else {'resource_id': str(host['id']),
                                   'reservations': []}
    return 200, {'allocation': views.format_allocation(item)}


def list_host_properties(req, ctx):
    """GET /os-hosts/properties: the extra capability names in use."""
    policy.authorize(ctx, host_policies.LIST, {'project_id': ctx.project_id})
    detail = strutils.bool_from_string(req.GET.get('detail', 'false'))
    values = {}
    for host in db_api.host_list(common.db()):
        for key, value in (host.get('capabilities') or {}).items():
            values.setdefault(key, set()).add(value)
    props = []
    for key in sorted(values):
        item = {'property': key}
        if detail:
            item.update(private=False, values=sorted(values[key]))
        props.append(item)
    return 200, {'resource_properties': props}
