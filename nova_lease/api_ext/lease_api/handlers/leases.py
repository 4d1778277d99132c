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
:mod:`nova_lease.params`', each reservation type's
(nova_lease.resource_types) and :mod:`..lease_updates`'. Every change of
what a lease holds goes through the booking pipeline
(nova_lease.booking).
"""

import functools

from oslo_log import log as logging
from oslo_utils import strutils

from nova_lease.api_ext import best_effort
from nova_lease.api_ext.lease_api import common
from nova_lease.api_ext.lease_api import flexible
from nova_lease.api_ext.lease_api import lease_updates
from nova_lease.api_ext.lease_api import microversion
from nova_lease.api_ext.lease_api import validation
from nova_lease.api_ext.lease_api import views
from nova_lease.booking import offers as booking_offers
from nova_lease.booking import pipeline
from nova_lease.db import api as db_api
from nova_lease import lease_events
from nova_lease import lease_types
from nova_lease import params as lease_params
from nova_lease.plugins.host import allocation as host_allocation
from nova_lease.policies import lease as lease_policies
from nova_lease import policy
from nova_lease import resource_types as types

LOG = logging.getLogger(__name__)


def _get_visible_lease(ctx, lease_id, rule):
    """The lease, if ctx may act on it with rule; else 404 or 403.

    A lease of another project is reported as not found unless the
    caller may see every project's leases, so that lease ids cannot be
    probed.
    """
    lease = db_api.lease_get(common.db(), lease_id)
    if pipeline.never_started(lease):
        # Deleted before its start: gone (the engine is releasing what
        # it held in Nova, then removes it).
        raise db_api.LeaseNotFound(lease_id=lease_id)
    target = {'project_id': lease['project_id'],
              'user_id': lease['user_id']}
    if not policy.authorize(ctx, rule, target, fatal=False):
        if lease['project_id'] != ctx.project_id:
            raise db_api.LeaseNotFound(lease_id=lease_id)
        policy.authorize(ctx, rule, target)  # raises the 403
    return lease


def _all_projects(req):
    """``all_projects`` (or ``all_tenants``) as asked: True, False, or
    None when not given.
    """
    value = req.GET.get('all_projects', req.GET.get('all_tenants'))
    # (A boolean: checked by the query schema.)
    if value is None:
        return None
    return strutils.bool_from_string(value, strict=True)


def list_leases(req, ctx):
    """GET /leases: as Blazar 18 lists them, every project's leases for a
    caller allowed by ``leases:list_all`` (admins), else the caller's
    project's. ``all_projects=1`` asks for every project (403 without the
    rule), ``all_projects=0`` for the caller's project only.
    """
    every = _all_projects(req)
    if every is None:
        every = policy.authorize(ctx, lease_policies.LIST_ALL,
                                 {'project_id': '*'}, fatal=False)
    if every:
        policy.authorize(ctx, lease_policies.LIST_ALL, {'project_id': '*'})
        project = None
    else:
        policy.authorize(ctx, lease_policies.LIST,
                         {'project_id': ctx.project_id})
        project = ctx.project_id
    leases = db_api.lease_list(common.db(), project_id=project)
    version = microversion.requested(req)
    return 200, {'leases': [views.format_lease(lease, version)
                            for lease in leases
                            if not pipeline.never_started(lease)]}


def show_lease(req, ctx, lease_id):
    lease = _get_visible_lease(ctx, lease_id, lease_policies.SHOW)
    return 200, {'lease': views.format_lease(
        lease, microversion.requested(req))}


#: Keys of a lease body of a later microversion than 1.0 (a
#: reservation's are its type's: ReservationType.api_versions).
LEASE_DETAILS_KEYS = ('on_end', 'retries', 'lease_type')
#: The keys of a flexible window (microversion 1.6), and its start_date.
FLEXIBLE_KEYS = ('duration', 'earliest_start', 'latest_start')
EARLIEST = 'earliest'


def check_version_keys(req, body):
    """400 for a key of ``body`` (a lease, as POSTed) that needs a later
    microversion than ``req`` asked for (null counts as absent).
    """
    microversion.refuse_keys(
        req, [k for k in LEASE_DETAILS_KEYS if body.get(k) is not None],
        microversion.LEASE_DETAILS, '')
    microversion.refuse_keys(
        req, [k for k in FLEXIBLE_KEYS if body.get(k) is not None] +
        (['start_date'] if body.get('start_date') == EARLIEST else []),
        microversion.OFFERS, '')
    for i, raw in enumerate(body.get('reservations') or ()):
        kind = types.for_api(raw.get('resource_type')) if isinstance(
            raw, dict) else None
        later = getattr(kind, 'api_versions', {})
        for version in sorted(later, key=microversion.parse):
            keys = later[version]
            microversion.refuse_keys(
                req, [k for k in keys if raw.get(k) is not None], version,
                'reservations[%d].' % i)


def _items(caller, raw_reservations):
    """The pipeline's items of a lease body's reservations (each parsed
    by its type).
    """
    items = []
    for i, raw in enumerate(raw_reservations):
        field = 'reservations[%d]' % i
        kind = types.for_api(raw['resource_type'])
        if kind is None:
            names = types.api_names()
            raise lease_params.LeaseParamError(
                field + '.resource_type', 'choice',
                "'%s.resource_type' (%s) is not supported: use %s or %s"
                % (field, raw['resource_type'], ', '.join(names[:-1]),
                   names[-1]))
        items.append(pipeline.Item(field, kind,
                                   kind.parse(raw, field, caller)))
    return items


def create_lease(req, ctx, body):
    """POST /leases: a Blazar v1 lease body.

    Through the booking pipeline (nova_lease.booking): host reservations
    get their hosts at once (all or nothing), instance reservations their
    slots, a private flavor and a server group; the usage limits are
    checked; the events are recorded with the lease, in the same
    transaction. A lease that is refused leaves nothing behind.
    """
    check_version_keys(req, body)
    policy.authorize(ctx, lease_policies.CREATE,
                     {'project_id': ctx.project_id, 'user_id': ctx.user_id})
    now = common.now()
    opts = common.opts()
    window = None
    if body.get('start_date') == EARLIEST:
        body, window = flexible.window(body, now)
    params, raw_reservations = validation.parse_lease_body(
        body, now, common.max_duration())
    caller = common.caller(ctx)
    items = _items(caller, raw_reservations)
    before_end = params.effective_before_end(opts.minutes_before_end_lease)
    lease_type, retries = lease_types.effective(params, common.CONF)
    hunt = None
    if lease_type == lease_types.BEST_EFFORT:
        if not opts.best_effort_enabled:
            raise lease_params.LeaseParamError(
                'lease_type', 'unsupported', "'lease_type': best_effort "
                "leases are not enabled on this cloud ([nova_lease_api] "
                "best_effort_enabled)")
        # Other projects' servers are migrated for it: admin-granted.
        policy.authorize(ctx, lease_policies.CREATE_BEST_EFFORT,
                         {'project_id': ctx.project_id,
                          'user_id': ctx.user_id})
        if not items or not all(i.type.best_effort for i in items):
            raise lease_params.LeaseParamError(
                'lease_type', 'unsupported', "'lease_type': best_effort "
                "applies to host reservations (physical:host) only")
        hunt = best_effort.hunter(
            ctx, common.CONF, params.start, host_allocation.booked_end(
                params.end, opts.cleaning_time))
    values = pipeline.lease_values(params, ctx.project_id, ctx.user_id,
                                   before_end, lease_type, retries)
    if window is not None:
        window = flexible.booking_window(window, params, items, before_end)
    try:
        lease = pipeline.create(common.db(), pipeline.Booking(
            conf=common.CONF, values=values, items=items, now=now,
            hunt=hunt, flexible=window,
            events=lease_events.lease_events(params.start, params.end,
                                             before_end)), caller)
    except booking_offers.NoOffer as e:
        raise flexible.conflict(e, ctx) from None
    LOG.info('Lease %(id)s (%(name)s) created for project %(project)s: '
             '%(start)s to %(end)s',
             {'id': lease['id'], 'name': lease['name'],
              'project': ctx.project_id, 'start': lease['start_date'],
              'end': lease['end_date']})
    return 201, {'lease': views.format_lease(
        lease, microversion.requested(req))}


_DATES = ('start_date', 'end_date', 'before_end_date')


def update_lease(req, ctx, lease_id, body):
    """PUT /leases/{id}: rename; move/resize the window; change the
    reservations (Blazar's rules), through the booking pipeline.

    Before the start the window may move (the hosts are kept when free,
    else chosen again, else 409); after the start the start is frozen and
    the end may be shortened down to now or extended while the same hosts
    stay free. Reservations change as their types say
    (nova_lease.resource_types). An invalid update changes nothing.
    """
    _get_visible_lease(ctx, lease_id, lease_policies.UPDATE)
    lease_updates.check_update_body(body)
    now = common.now()
    window = None
    if any(body.get(k) is not None for k in _DATES):
        window = functools.partial(lease_updates.new_window, body=body,
                                   now=now)
    try:
        lease, updates = pipeline.change(
            common.db(), common.CONF, lease_id, now, name=body.get('name'),
            window=window, items=body.get('reservations'))
    except db_api.StatusConflict as e:
        raise pipeline.LeaseBusy(lease_id=lease_id, status=e.actual,
                                 action='this update',
                                 hint='; retry in a moment')
    if updates:
        pipeline.after_change(common.caller(ctx), lease, updates)
    return 200, {'lease': views.format_lease(
        lease, microversion.requested(req))}


def delete_lease(req, ctx, lease_id):
    """DELETE /leases/{id}, through the booking pipeline.

    A lease that has not started (PENDING) is removed, as Blazar removes
    it: 404 from now on; what it holds in Nova (an instance reservation's
    flavor and server group, a VM lease's server) the engine releases at
    once, then removes its rows. A TERMINATED one is removed. A started
    one ends now: the engine releases its resources (hosts back in the
    free pool, servers removed) and it stays visible as TERMINATED.
    """
    _get_visible_lease(ctx, lease_id, lease_policies.DELETE)
    try:
        pipeline.delete(common.db(), common.CONF, lease_id,
                        common.now())
    except db_api.StatusConflict as e:
        raise pipeline.LeaseBusy(lease_id=lease_id, status=e.actual,
                                 action='deleting it',
                                 hint='; retry in a moment')
    return 204, None
