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
"""Handlers of ``/leases`` (Blazar v1's leases; physical:host reservations).

Bodies and query strings are validated against
:mod:`..schemas.leases` by the router before a handler runs; the rules
that need more than their shape (dates, durations, host requests) are
:mod:`nova_lease.params`', :mod:`nova_lease.plugins.host.request`' and
:mod:`..lease_updates`'.
"""

from oslo_log import log as logging
from oslo_utils import strutils
from oslo_utils import uuidutils

from nova_lease.api_ext import best_effort
from nova_lease.api_ext import deferred_start
from nova_lease.api_ext.lease_api import blazar_words
from nova_lease.api_ext.lease_api import common
from nova_lease.api_ext.lease_api import lease_updates
from nova_lease.api_ext.lease_api import reservation_updates
from nova_lease.api_ext.lease_api import views
from nova_lease.api_ext import nova_flavors
from nova_lease.db import api as db_api
from nova_lease import enforcement
from nova_lease import lease_types
from nova_lease import params as lease_params
from nova_lease.periodic import events as lease_events
from nova_lease.plugins import flavor as flavor_plugin
from nova_lease.plugins.flavor import allocation as slot_allocation
from nova_lease.plugins.flavor import request as slot_request
from nova_lease.plugins.host import allocation as host_allocation
from nova_lease.plugins.host import request as host_request
from nova_lease.policies import lease as lease_policies
from nova_lease import policy
from nova_lease import status

LOG = logging.getLogger(__name__)

_L = status.LeaseStatus


def _get_visible_lease(ctx, lease_id, rule):
    """The lease, if ctx may act on it with rule; else 404 or 403.

    A lease of another project is reported as not found unless the
    caller may see every project's leases, so that lease ids cannot be
    probed.
    """
    lease = db_api.lease_get(common.db(), lease_id)
    target = {'project_id': lease['project_id'],
              'user_id': lease['user_id']}
    if not policy.authorize(ctx, rule, target, fatal=False):
        if lease['project_id'] != ctx.project_id:
            raise db_api.LeaseNotFound(lease_id=lease_id)
        policy.authorize(ctx, rule, target)  # raises the 403
    return lease


def _wake_engines():
    try:
        from nova_lease.periodic import engine
    except ImportError:  # pragma: no cover
        return
    engine.wake_all()


def _wants_all_projects(req):
    value = req.GET.get('all_projects', req.GET.get('all_tenants'))
    # (A boolean: checked by the query schema.)
    return value is not None and strutils.bool_from_string(value,
                                                           strict=True)


def list_leases(req, ctx):
    """GET /leases: the caller's project's leases (all with all_projects)."""
    if _wants_all_projects(req):
        policy.authorize(ctx, lease_policies.LIST_ALL, {'project_id': '*'})
        project = None
    else:
        policy.authorize(ctx, lease_policies.LIST,
                         {'project_id': ctx.project_id})
        project = ctx.project_id
    leases = db_api.lease_list(common.db(), project_id=project)
    return 200, {'leases': [views.format_lease(lease) for lease in leases]}


def show_lease(req, ctx, lease_id):
    lease = _get_visible_lease(ctx, lease_id, lease_policies.SHOW)
    return 200, {'lease': views.format_lease(lease)}


def _requests(ctx, raw_reservations):
    """``(host requests, instance slot requests)``: ``[(field, request)]``.
    """
    hosts, slots = [], []
    region = common.region_name()
    for i, raw in enumerate(raw_reservations):
        field = 'reservations[%d]' % i
        rtype = raw['resource_type']
        if rtype == host_allocation.RESOURCE_TYPE:
            hosts.append((field, host_request.parse_host_request(
                raw, field, region)))
        elif rtype in flavor_plugin.API_TYPES:
            slots.append((field, slot_request.parse_slot_request(
                raw, field, lambda fid, name: nova_flavors.find_flavor(
                    ctx, fid, name))))
        else:
            raise lease_params.LeaseParamError(
                field + '.resource_type', 'choice',
                "'%s.resource_type' (%s) is not supported: use "
                "physical:host, virtual:instance or flavor:instance"
                % (field, rtype))
    return hosts, slots


def _make_flavors(ctx, slots):
    """The Nova flavor and server group of each instance reservation:
    ``[(field, request, reservation id, server group id)]``.
    """
    made = []
    try:
        for field, request in slots:
            rid = uuidutils.generate_uuid()
            group_id = nova_flavors.make(ctx, rid, request)
            made.append((field, request, rid, group_id))
    except Exception:
        _discard_flavors(ctx, made)
        raise
    return made


def _discard_flavors(ctx, made):
    for _field, _request, rid, group_id in made:
        try:
            nova_flavors.discard(ctx, rid, group_id)
        except Exception:
            LOG.exception('Could not remove the flavor and server group of '
                          'refused reservation %s', rid)


def create_lease(req, ctx, body):
    """POST /leases: a Blazar v1 lease body.

    Host reservations get their hosts at once (all or nothing), instance
    reservations their slots, a private flavor and a server group; the
    events are recorded with the lease, in the same transaction. A lease
    that is refused leaves nothing behind.
    """
    policy.authorize(ctx, lease_policies.CREATE,
                     {'project_id': ctx.project_id, 'user_id': ctx.user_id})
    now = common.now()
    opts = common.opts()
    try:
        params, raw_reservations = lease_params.parse_lease_body(
            body, now, common.max_duration())
    except lease_params.LeaseParamError as e:
        raise blazar_words.in_blazar_words(e, body) from None
    requests, slots = _requests(ctx, raw_reservations)
    db = common.db()
    # Usage limits ([nova_lease_enforcement]): 403 naming them.
    enforcement.check_host_lease(
        common.CONF, db, ctx.project_id, params.start, params.end,
        sum(r.max for _f, r in requests), now,
        instances={key: sum(getattr(r, key) * r.amount for _f, r in slots)
                   for key in ('vcpus', 'memory_mb', 'disk_gb')})
    before_end = params.effective_before_end(opts.minutes_before_end_lease)
    lease_type, retries = lease_types.effective(params, opts)
    hunt = None
    if lease_type == lease_types.BEST_EFFORT:
        if slots or not requests:
            raise lease_params.LeaseParamError(
                'lease_type', 'unsupported', "'lease_type': best_effort "
                "applies to host reservations (physical:host) only")
        hunt = best_effort.hunter(
            ctx, common.CONF, params.start, host_allocation.booked_end(
                params.end, opts.cleaning_time))
    values = {
        'name': params.name, 'project_id': ctx.project_id,
        'user_id': ctx.user_id, 'start_date': params.start,
        'end_date': params.end, 'before_end_date': before_end,
        'status': str(_L.PENDING), 'on_end': params.on_end,
        'retries': retries, 'lease_type': lease_type,
    }
    events = lease_events.lease_events(params.start, params.end, before_end)
    made = _make_flavors(ctx, slots)

    def book_slots(session, busy_hosts):
        booked = slot_allocation.pick_slots(
            session, [(f, r) for f, r, _rid, _g in made], params.start,
            params.end, now, busy_hosts,
            sizes=slot_allocation.capacities(common.CONF))
        return [{'id': rid, 'resource_type': flavor_plugin.RESOURCE_TYPE,
                 'status': 'pending',
                 'properties': request.properties(rid, group_id),
                 'allocations': allocations}
                for (_f, request, rid, group_id), allocations in zip(
                    made, booked)]

    try:
        lease = host_allocation.create_host_lease(
            db, values, requests, events, opts.cleaning_time,
            more=book_slots if made else None, hunt=hunt)
    except Exception:
        _discard_flavors(ctx, made)
        raise
    LOG.info('Lease %(id)s (%(name)s) created for project %(project)s: '
             '%(start)s to %(end)s',
             {'id': lease['id'], 'name': lease['name'],
              'project': ctx.project_id, 'start': params.start,
              'end': params.end})
    if params.start_now:
        _wake_engines()
    return 201, {'lease': views.format_lease(lease)}


def update_lease(req, ctx, lease_id, body):
    """PUT /leases/{id}: rename; move/resize the window; change the
    reservations (Blazar's rules).

    Before the start the window may move (the hosts are kept when free,
    else chosen again, else 409); after the start the start is frozen and
    the end may be shortened down to now or extended while the same hosts
    stay free. Reservations change as :mod:`..reservation_updates` says.
    An invalid update changes nothing.
    """
    lease = _get_visible_lease(ctx, lease_id, lease_policies.UPDATE)
    lease_updates.check_update_body(body)
    try:
        lease, changes = lease_updates.update_lease(common.db(), lease,
                                                    body, common.now())
    except db_api.StatusConflict as e:
        raise lease_updates.LeaseBusy(lease_id=lease_id, status=e.actual,
                                      action='this update',
                                      hint='; retry in a moment')
    if changes:
        reservation_updates.after_commit(ctx, lease, changes)
    _wake_engines()
    return 200, {'lease': views.format_lease(lease)}


def delete_lease(req, ctx, lease_id):
    """DELETE /leases/{id}.

    A lease that holds nothing yet (pending host lease) or nothing any
    more (TERMINATED) is removed. A started one ends now: the engine
    releases its resources (hosts back in the free pool, servers removed)
    and it stays visible as TERMINATED.
    """
    _get_visible_lease(ctx, lease_id, lease_policies.DELETE)
    try:
        done = lease_updates.delete_lease(common.db(), lease_id,
                                          common.now())
    except db_api.StatusConflict as e:
        raise lease_updates.LeaseBusy(lease_id=lease_id, status=e.actual,
                                      action='deleting it',
                                      hint='; retry in a moment')
    if done == 'ending':
        _wake_engines()
    return 204, None


def create_reserved_server(req, ctx, lease_id, reservation_id):
    """POST /leases/{id}/reservations/{id}/server (admin/service).

    Creates, as the lease's owner, the server of a reservation whose
    server is created at the lease's start, and links it; idempotent
    (see nova_lease.api_ext.deferred_start). 201 when created now, 200 when it
    existed; Nova's refusal keeps Nova's code and message. The request
    body is not read (the engine sends ``{}``).
    """
    _get_visible_lease(ctx, lease_id, lease_policies.CREATE_SERVER)
    created, server_id = deferred_start.create_server(
        req, ctx, lease_id, reservation_id,
        req.environ['nova_lease.application'])
    return (201 if created else 200), {'server': {'id': server_id}}
