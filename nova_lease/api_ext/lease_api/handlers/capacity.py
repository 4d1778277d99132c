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
"""Handler of ``/capacity``: capacity over time (doc/source/user/api.rst).

The promises come from the scheduler's snapshot of the calendar (kept in
this nova-api process as in nova-scheduler, current through the change
journal); Nova's facts (compute nodes, their usage, the running leased
servers, aggregates and zones) from Nova's databases, as admission
control reads them. The figures are
:mod:`nova_lease.calendar.capacity`'s, through
:func:`nova_lease.scheduler.capacity.report`.
"""

import threading
import time

from nova import context as nova_context
from nova import objects

from nova_lease.api_ext.lease_api import common
from nova_lease.capacity import inventory as nova_inventory
from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import params as lease_params
from nova_lease.policies import capacity as capacity_policies
from nova_lease import policy
from nova_lease.scheduler import capacity as lease_capacity
from nova_lease.scheduler import view

#: Seconds an admin's request waits for the first full read of the
#: calendar (a member's: see MEMBER_WAIT).
SNAPSHOT_WAIT = 60.0
#: Seconds a member's request waits, in all, for the first full read of
#: the calendar and for its turn (members' figures are computed one
#: request at a time in a nova-api process) before a 503.
MEMBER_WAIT = 5.0
#: The Retry-After (seconds) of this resource's 503s.
RETRY_AFTER = 5

# Held while a member's figures are computed (see show_capacity).
_MEMBER_TURN = threading.Lock()


class MemberViewTooNarrow(exception.Forbidden):
    msg_fmt = '%(reason)s'


class CalendarNotReady(exception.NovaLeaseException):
    code = 503
    retry_after = RETRY_AFTER
    msg_fmt = ('the lease calendar is still being read; retry in a '
               'moment')


class CapacityBusy(exception.NovaLeaseException):
    code = 503
    retry_after = RETRY_AFTER
    msg_fmt = ("capacity figures are being computed for another "
               "project's request; retry in a moment")


def _error(field, message):
    return lease_params.LeaseParamError(field, 'value', message)


def parse_query(get, now):
    """(start, end, step, filters) of a query string (a dict of strings).

    ``start``: a date or ``now`` (default now); ``end``: a date (default
    a day after start); ``step``: a duration (default 1h). Errors are
    LeaseParamErrors naming the field.
    """
    start = get.get('start')
    start = now if start in (None, '', 'now') else \
        lease_params.parse_datetime(start, 'start')
    end = get.get('end')
    if end in (None, ''):
        end = lease_params.later(start, lease_capacity.core.DEFAULT_WINDOW,
                                 'start', "the default window (no 'end')")
    else:
        end = lease_params.parse_datetime(end, 'end')
    step = get.get('step') or lease_capacity.core.DEFAULT_STEP
    step = lease_params.parse_duration(step, 'step')
    filters = {key: get[key] for key in ('host', 'aggregate',
                                         'availability_zone')
               if get.get(key)}
    resource = get.get('resource')
    if resource is not None:
        filters['resources'] = [r.strip() for r in resource.split(',')
                                if r.strip()]
    return start, end, step, filters


def _nova_facts(conf):
    """(ComputeFacts, {service host: zone}, {service host: aggregate
    names}, inventory) from Nova's databases.
    """
    inventory = nova_inventory.default_inventory(conf)
    compute, _cached = inventory.compute_hosts()
    computes = [lease_capacity.ComputeFacts(h.name, h.service_host,
                                            h.capacity, h.used)
                for h in compute if h.capacity is not None]
    ctx = nova_context.get_admin_context()
    default_zone = conf.default_availability_zone
    zones = {c.service_host: default_zone for c in computes}
    aggregates = {}
    for agg in objects.AggregateList.get_all(ctx):
        zone = (agg.metadata or {}).get('availability_zone')
        for host in agg.hosts or ():
            aggregates.setdefault(host, []).append(agg.name)
            if zone:
                zones[host] = zone
    return computes, zones, aggregates, inventory


def show_capacity(req, ctx):
    """GET /capacity?start=&end=&step=[&host=&aggregate=
    &availability_zone=&resource=&detail=hosts]: see doc/source/user/api.rst.
    """
    target = {'project_id': ctx.project_id}
    everything = policy.authorize(ctx, capacity_policies.ALL, target,
                                  fatal=False)
    if not everything:
        policy.authorize(ctx, capacity_policies.PROJECT, target)
    now = common.now()
    start, end, step, filters = parse_query(req.GET, now)
    detail = req.GET.get('detail') == 'hosts'
    if not everything:
        for key in ('host', 'aggregate'):
            if key in filters:
                raise policy.PolicyNotAuthorized(
                    action='%s (the %s filter)' % (capacity_policies.ALL,
                                                   key))
        if detail:
            raise policy.PolicyNotAuthorized(
                action='%s (detail=hosts)' % capacity_policies.ALL)
    try:
        # (Checked before any read.)
        lease_capacity.core.check_resources(filters.get('resources'))
        lease_capacity.core.step_bounds(start, end, step)
    except lease_capacity.CapacityError as e:
        raise _error(e.field, e.message)
    conf = common.CONF
    # A member's request holds an API worker at most MEMBER_WAIT seconds
    # for the first full read and for its turn: its cost (Nova's facts,
    # then hosts x steps of figures) is paid for one member at a time.
    deadline = time.monotonic() + MEMBER_WAIT
    snap = view.get_snapshot(now, conf, wait=SNAPSHOT_WAIT if everything
                             else MEMBER_WAIT)
    if snap is None:
        raise CalendarNotReady()
    project_id = None if everything else ctx.project_id
    if everything:
        return 200, _figures(conf, snap, now, start, end, step, detail,
                             project_id, filters)
    if not _MEMBER_TURN.acquire(
            timeout=max(deadline - time.monotonic(), 0.0)):
        raise CapacityBusy()
    try:
        return 200, _figures(conf, snap, now, start, end, step, detail,
                             project_id, filters)
    finally:
        _MEMBER_TURN.release()


def _figures(conf, snap, now, start, end, step, detail, project_id,
             filters):
    """The capacity body of a query against the snapshot ``snap``."""
    computes, zones, aggregates, inventory = _nova_facts(conf)
    running = inventory.leased_servers(set(snap.servers.keys()))
    hosts = lease_capacity.capacity_hosts(snap, computes, running, zones,
                                          aggregates, now)
    db = common.db()
    try:
        return lease_capacity.report(
            snap, hosts, start, end, step, now,
            lease_names=lambda ids: db_api.lease_names(db, ids),
            project_id=project_id, detail=detail,
            member_min_hosts=conf.nova_lease_api.capacity_member_min_hosts,
            **filters)
    except lease_capacity.core.NarrowView as e:
        raise MemberViewTooNarrow(reason=e.message)
    except lease_capacity.CapacityError as e:
        raise _error(e.field, e.message)
