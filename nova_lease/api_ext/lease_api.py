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
"""The Blazar-v1-compatible lease API, served inside nova-api.

Mounted by the paste filter under ``/v2.1/os-reservation`` (and
``/v2.1/<project_id>/os-reservation``); see doc/api.rst. Resources, bodies
and field names are Blazar v1's, so python-blazarclient and
``openstack reservation ...`` work unchanged:

======  =================================  ====================  =====
Method  Path (below /os-reservation)       Rule                  OK
======  =================================  ====================  =====
GET     /leases[?all_projects=1]           leases:list[_all]     200
POST    /leases                            leases:create         201
POST    /leases/{id}/reservations/{id}/    leases:create_server  201
        server
GET     /leases/{id}                       leases:show           200
PUT     /leases/{id}                       leases:update         200
DELETE  /leases/{id}                       leases:delete         204
GET     /os-hosts                          os-hosts:list         200
POST    /os-hosts                          os-hosts:create       201
GET     /os-hosts/{id}                     os-hosts:show         200
PUT     /os-hosts/{id}                     os-hosts:update       200
DELETE  /os-hosts/{id}                     os-hosts:delete       204
GET     /os-hosts/allocations              os-hosts:allocations  200
GET     /os-hosts/{id}/allocation          os-hosts:allocations  200
GET     /os-hosts/properties               os-hosts:list         200
======  =================================  ====================  =====

``leases:create_server`` is for admins and services: nova-lease-engine
calls it at the start of a future instance lease booted through ``POST
/servers`` (see nova_lease.api_ext.deferred).

Errors are JSON in Blazar's shape, which python-blazarclient prints
(``{"error_code": 409, "error_name": "NotEnoughHosts", "error_message":
"..."}``): 400 for bad input (the message names the field), 403 when a
policy refuses, 404 for an unknown id -- and for a lease of another
project, so that lease ids of other projects cannot be probed -- 405 for
a wrong method, 409 for conflicts (no free hosts, a lease mid-transition).
Anything unexpected is logged and answered with a 500 in the same shape.

Each handler is a plain function ``handler(req, ctx, **url_params)``
returning ``(status, body)``; :data:`ROUTES` is the declarative route
table (placement's style).
"""

import re

import nova.conf
from nova import exception as nova_exception
from oslo_db import exception as db_exc
from oslo_log import log as logging
from oslo_serialization import jsonutils
from oslo_utils import strutils
from oslo_utils import timeutils
import webob

from nova_lease.api_ext import deferred
from nova_lease.api_ext import nova_hosts
from nova_lease import conf as lease_conf
from nova_lease.db import api as db_api
from nova_lease import enforcement
from nova_lease import exception
from nova_lease import hosts
from nova_lease import params as lease_params
from nova_lease.periodic import events as lease_events
from nova_lease.policies import host as host_policies
from nova_lease.policies import lease as lease_policies
from nova_lease import policy
from nova_lease import status

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
lease_conf.register_opts(CONF)

_L = status.LeaseStatus
_E = status.EventStatus
_T = status.EventType

VERSION_ID = 'v1.0'
DEFAULT_REGION = 'RegionOne'

#: Host columns a registration may not use as extra capability names.
_HOST_FIELDS = frozenset({
    'id', 'name', 'hypervisor_hostname', 'hypervisor_type',
    'hypervisor_version', 'vcpus', 'cpu_info', 'memory_mb', 'local_gb',
    'service_name', 'service_host', 'availability_zone', 'trust_id',
    'reservable', 'created_at', 'updated_at', 'capabilities', 'values'})
_CAPABILITY_RE = re.compile(r'^[A-Za-z0-9_.:\-]{1,255}$')
_LEASE_UPDATE_KEYS = frozenset({'name', 'start_date', 'end_date',
                                'before_end_date', 'reservations'})


# -- errors ------------------------------------------------------------------

class BadRequest(exception.Invalid):
    msg_fmt = '%(reason)s'


class LeaseBusy(exception.Conflict):
    msg_fmt = ('lease %(lease_id)s is %(status)s: %(action)s is not '
               'possible now%(hint)s')


class MethodNotAllowed(exception.NovaLeaseException):
    msg_fmt = 'Method %(method)s is not allowed on %(path)s'
    code = 405


class ResourceNotFound(exception.NotFound):
    msg_fmt = 'Unknown lease API resource: %(path)s'


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


def error_response(code, message, name=None):
    """A JSON error in Blazar's shape (python-blazarclient reads it)."""
    body = {'error_code': code, 'error_name': name or str(code),
            'error_message': message}
    return _json_response(code, body)


def _json_response(code, body=None, headers=None):
    resp = webob.Response(status=code, headerlist=list(headers or []))
    if body is None:
        resp.content_type = None
        resp.body = b''
    else:
        resp.body = jsonutils.dump_as_bytes(body)
        resp.content_type = 'application/json'
        resp.charset = 'UTF-8'
    return resp


def _json_body(req):
    if not req.body:
        raise BadRequest(reason='the request needs a JSON object body')
    try:
        body = jsonutils.loads(req.body)
    except ValueError as e:
        raise BadRequest(reason='the body is not valid JSON (%s)' % e)
    if not isinstance(body, dict):
        raise BadRequest(reason='the body must be a JSON object')
    return body


# -- formatting --------------------------------------------------------------

def _dt(value):
    if isinstance(value, str) or value is None:
        return value
    return lease_params.format_datetime(value)


_RESERVATION_FIELDS = ('id', 'lease_id', 'resource_id', 'resource_type',
                       'status', 'aggregate_id', 'created_at', 'updated_at')


def format_reservation(reservation):
    """A reservation as Blazar shows it: its request flattened in."""
    out = {}
    for key, value in (reservation.get('properties') or {}).items():
        out[key] = value
    for key in _RESERVATION_FIELDS:
        value = reservation.get(key)
        out[key] = _dt(value) if key.endswith('_at') else value
    return out


def format_event(event):
    return {'id': event['id'], 'lease_id': event['lease_id'],
            'event_type': event['event_type'], 'time': _dt(event['time']),
            'status': event['status'],
            'created_at': _dt(event.get('created_at')),
            'updated_at': _dt(event.get('updated_at'))}


def format_lease(lease):
    """A lease as Blazar v1 shows it."""
    return {
        'id': lease['id'], 'name': lease['name'],
        'project_id': lease['project_id'], 'user_id': lease['user_id'],
        'start_date': _dt(lease['start_date']),
        'end_date': _dt(lease['end_date']),
        'before_end_date': _dt(lease.get('before_end_date')),
        'status': lease['status'],
        'status_reason': lease.get('status_reason'),
        'degraded': False,
        'trust_id': None,
        'on_end': lease.get('on_end'),
        'reservations': [format_reservation(r)
                         for r in lease.get('reservations') or ()],
        'events': [format_event(e) for e in lease.get('events') or ()],
        'created_at': _dt(lease.get('created_at')),
        'updated_at': _dt(lease.get('updated_at')),
    }


def format_host(host):
    """A host as Blazar's os-hosts shows it (capabilities flattened)."""
    out = dict(host.get('capabilities') or {})
    out.update({
        'id': str(host['id']),
        'hypervisor_hostname': host['hypervisor_hostname'],
        'hypervisor_type': host.get('hypervisor_type'),
        'hypervisor_version': host.get('hypervisor_version'),
        'vcpus': host.get('vcpus'),
        'cpu_info': host.get('cpu_info'),
        'memory_mb': host.get('memory_mb'),
        'local_gb': host.get('local_gb'),
        'service_name': host.get('service_host'),
        'availability_zone': host.get('availability_zone'),
        'reservable': bool(host.get('reservable', True)),
        'trust_id': None,
        'created_at': _dt(host.get('created_at')),
        'updated_at': _dt(host.get('updated_at')),
    })
    return out


def _format_allocation(item):
    return {'resource_id': item['resource_id'],
            'reservations': [dict(r, start_date=_dt(r['start_date']),
                                  end_date=_dt(r['end_date']))
                             for r in item['reservations']]}


# -- helpers -----------------------------------------------------------------

def _db():
    return db_api.get_database(CONF)


def _opts():
    return CONF.nova_lease


def region_name():
    """This Nova's region (see ``[nova_lease] region_name``)."""
    name = _opts().region_name
    if name:
        return name
    try:
        name = CONF.placement.region_name
    except Exception:  # noqa: the option group may be absent
        name = None
    return name or DEFAULT_REGION


def _max_duration():
    return lease_params.parse_duration(_opts().max_lease_duration,
                                       '[nova_lease] max_lease_duration',
                                       allow_zero=True)


def _authorize(ctx, rule, target):
    policy.authorize(ctx, rule, target)


def _get_visible_lease(ctx, lease_id, rule):
    """The lease, if ctx may act on it with rule; else 404 or 403.

    A lease of another project is reported as not found unless the
    caller may see every project's leases, so that lease ids cannot be
    probed.
    """
    lease = db_api.lease_get(_db(), lease_id)
    target = {'project_id': lease['project_id'],
              'user_id': lease['user_id']}
    if not policy.authorize(ctx, rule, target, fatal=False):
        if lease['project_id'] != ctx.project_id:
            raise db_api.LeaseNotFound(lease_id=lease_id)
        _authorize(ctx, rule, target)  # raises the 403
    return lease


def _wake_engines():
    try:
        from nova_lease.periodic import engine
    except ImportError:  # pragma: no cover
        return
    engine.wake_all()


def _now():
    return timeutils.utcnow()


def _wants_all_projects(req):
    value = req.GET.get('all_projects', req.GET.get('all_tenants'))
    if value is None:
        return False
    try:
        return strutils.bool_from_string(value, strict=True) or value == ''
    except ValueError:
        raise BadRequest(reason="all_projects: must be a boolean such as 1 "
                                "or true, got %r" % value)


# -- leases ------------------------------------------------------------------

def list_leases(req, ctx):
    """GET /leases: the caller's project's leases (all with all_projects)."""
    if _wants_all_projects(req):
        _authorize(ctx, lease_policies.LIST_ALL, {'project_id': '*'})
        project = None
    else:
        _authorize(ctx, lease_policies.LIST, {'project_id': ctx.project_id})
        project = ctx.project_id
    leases = db_api.lease_list(_db(), project_id=project)
    return 200, {'leases': [format_lease(lease) for lease in leases]}


def show_lease(req, ctx, lease_id):
    lease = _get_visible_lease(ctx, lease_id, lease_policies.SHOW)
    return 200, {'lease': format_lease(lease)}


def _host_requests(raw_reservations):
    requests = []
    region = region_name()
    for i, raw in enumerate(raw_reservations):
        field = 'reservations[%d]' % i
        rtype = raw['resource_type']
        if rtype != hosts.RESOURCE_TYPE:
            raise lease_params.LeaseParamError(
                field + '.resource_type', 'choice',
                "'%s.resource_type' (%s) is not supported by the lease API:"
                " use physical:host here; instances are reserved by booting"
                " them with --hint reserved=True --hint lease_params=..."
                % (field, rtype))
        requests.append((field, hosts.parse_host_request(raw, field,
                                                         region)))
    return requests


def create_lease(req, ctx):
    """POST /leases: a Blazar v1 lease body with physical:host reservations.

    Hosts are allocated at once (all or nothing); the events are recorded
    with the lease, in the same transaction.
    """
    _authorize(ctx, lease_policies.CREATE,
               {'project_id': ctx.project_id, 'user_id': ctx.user_id})
    body = _json_body(req)
    if set(body) == {'lease'} and isinstance(body['lease'], dict):
        body = body['lease']
    now = _now()
    params, raw_reservations = lease_params.parse_lease_body(
        body, now, _max_duration())
    requests = _host_requests(raw_reservations)
    # Usage limits ([nova_lease_enforcement]): 403 naming them.
    enforcement.check_host_lease(CONF, _db(), ctx.project_id, params.start,
                                 params.end, sum(r.max for _f, r in requests),
                                 now)
    before_end = params.effective_before_end(
        _opts().minutes_before_end_lease)
    values = {
        'name': params.name, 'project_id': ctx.project_id,
        'user_id': ctx.user_id, 'start_date': params.start,
        'end_date': params.end, 'before_end_date': before_end,
        'status': str(_L.PENDING), 'on_end': params.on_end,
        'retries': params.retries,
    }
    events = lease_events.lease_events(params.start, params.end, before_end)
    lease = hosts.create_host_lease(_db(), values, requests, events,
                                    _opts().cleaning_time)
    LOG.info('Lease %(id)s (%(name)s) created for project %(project)s: '
             '%(start)s to %(end)s',
             {'id': lease['id'], 'name': lease['name'],
              'project': ctx.project_id, 'start': params.start,
              'end': params.end})
    if params.start_now:
        _wake_engines()
    return 201, {'lease': format_lease(lease)}


def _parse_update_date(body, key, now):
    value = body.get(key)
    if value is None:
        return None
    if key == 'start_date' and isinstance(value, str) and (
            value.strip().lower() == 'now'):
        return now
    return lease_params.parse_datetime(value, key)


def _check_update_body(body):
    unknown = sorted(k for k in body if k not in _LEASE_UPDATE_KEYS)
    if unknown:
        raise lease_params.LeaseParamError(
            unknown[0], 'unknown_key', "'%s': unknown key; a lease update "
            "may change %s" % (unknown[0],
                               ', '.join(sorted(_LEASE_UPDATE_KEYS))))
    if body.get('reservations'):
        raise lease_params.LeaseParamError(
            'reservations', 'unsupported', "'reservations' cannot be changed"
            " by an update yet: delete the lease and create another")
    if 'name' in body and body['name'] is not None:
        lease_params._parse_name(body['name'], 'name')


def _new_window(lease, body, now):
    """(start, end, before_end) after the update, validated."""
    start = _parse_update_date(body, 'start_date', now)
    end = _parse_update_date(body, 'end_date', now)
    before_end = _parse_update_date(body, 'before_end_date', now)
    started = lease['status'] != _L.PENDING
    if start is not None and start != lease['start_date']:
        if started:
            raise lease_params.LeaseParamError(
                'start_date', 'unsupported', "'start_date' cannot change: "
                "the lease has started (%s)" % lease['status'])
        if start < now - lease_params.START_GRACE:
            raise lease_params.LeaseParamError(
                'start_date', 'past', "'start_date' (%s) is in the past "
                "(now is %s)" % (lease_params.format_short(start),
                                 lease_params.format_short(now)))
        start = max(start, now)
    else:
        start = lease['start_date']
    if end is None:
        end = lease['end_date']
    elif started and end < now:
        raise lease_params.LeaseParamError(
            'end_date', 'past', "'end_date' (%s) is in the past: a started "
            "lease can be shortened down to now (%s)" % (
                lease_params.format_short(end),
                lease_params.format_short(now)))
    if end <= start:
        raise lease_params.LeaseParamError(
            'end_date', 'order', "'end_date' (%s) must be after "
            "'start_date' (%s)" % (lease_params.format_short(end),
                                   lease_params.format_short(start)))
    limit = _max_duration()
    if limit and end - start > limit:
        raise lease_params.LeaseParamError(
            'end_date', 'too_long', "'end_date' (%s) makes the lease %s "
            "long; the maximum lease duration is %s" % (
                lease_params.format_short(end),
                lease_params.format_duration(end - start),
                lease_params.format_duration(limit)))
    if before_end is not None and not start <= before_end < end:
        raise lease_params.LeaseParamError(
            'before_end_date', 'range', "'before_end_date' (%s) must be at "
            "or after 'start_date' and before 'end_date'"
            % lease_params.format_short(before_end))
    if before_end is not None and before_end < now:
        # (A started lease: its start may be in the past.)
        if before_end < now - lease_params.START_GRACE:
            raise lease_params.LeaseParamError(
                'before_end_date', 'past', "'before_end_date' (%s) is in "
                "the past (now is %s)" % (
                    lease_params.format_short(before_end),
                    lease_params.format_short(now)))
        before_end = now
    if before_end is None and (end != lease['end_date'] or
                               start != lease['start_date']):
        # Re-armed for the new end; when its default time has passed
        # already (a short lease extended late), the warning is due now:
        # before_end_date always names the warning still to come.
        before_end = lease_params.default_before_end(
            start, end, _opts().minutes_before_end_lease)
        if before_end is not None:
            before_end = max(before_end, now)
    elif before_end is None:
        before_end = lease.get('before_end_date')
    return start, end, before_end


def _move_events(session, lease, start, end, before_end, now):
    events = {}
    for event in db_api.event_list(session, lease_id=lease['id']):
        events.setdefault(event['event_type'], []).append(event)
    undone = str(_E.UNDONE)

    def move(etype, when):
        for event in events.get(etype, ()):
            if event['status'] == undone and event['time'] != when:
                db_api.event_update(session, event['id'], {'time': when},
                                    expected_status=undone)

    move(_T.START_LEASE, start)
    move(_T.END_LEASE, end)
    befores = events.get(_T.BEFORE_END_LEASE, [])
    pending = [e for e in befores if e['status'] == undone]
    if before_end is None:
        for event in pending:
            db_api.event_destroy(session, event['id'])
    elif pending:
        move(_T.BEFORE_END_LEASE, before_end)
    elif before_end >= now or not befores:
        # Re-armed: the end moved after the warning had fired.
        db_api.event_create(session, {
            'lease_id': lease['id'], 'event_type': str(_T.BEFORE_END_LEASE),
            'time': max(before_end, now), 'status': undone})


@db_api.retry_on_deadlock
def _update_lease_tx(db, lease, body, now):
    cleaning = _opts().cleaning_time
    with db.writer() as session:
        current = db_api.lease_get(session, lease['id'])
        values = {}
        if body.get('name') is not None:
            values['name'] = body['name']
        dates = ('start_date', 'end_date', 'before_end_date')
        if any(body.get(k) is not None for k in dates):
            if current['status'] not in (_L.PENDING, _L.ACTIVE):
                raise LeaseBusy(lease_id=current['id'],
                                status=current['status'],
                                action='changing its dates',
                                hint='' if status.is_terminal(
                                    status.LEASE, current['status'])
                                else '; retry in a moment')
            others = sorted({r['resource_type']
                             for r in current['reservations']
                             if r['resource_type'] != hosts.RESOURCE_TYPE})
            if others:
                raise lease_params.LeaseParamError(
                    'end_date' if body.get('end_date') else 'start_date',
                    'unsupported', "the dates of a lease with %s "
                    "reservations cannot be changed yet" % ', '.join(others))
            start, end, before_end = _new_window(current, body, now)
            if start != current['start_date'] or end > current['end_date']:
                # Usage limits ([nova_lease_enforcement]): 403 naming them.
                enforcement.check_host_lease(
                    CONF, session, current['project_id'], start, end,
                    len({a['host'] for a in db_api.allocation_list(
                        session, lease_id=current['id'])}), now,
                    lease_id=current['id'])
            if current['status'] == _L.PENDING:
                hosts.move_host_lease(session, current, start, end,
                                      cleaning)
            elif end != current['end_date']:
                hosts.extend_host_lease(session, current, end, cleaning)
            values.update(start_date=start, end_date=end,
                          before_end_date=before_end)
            _move_events(session, current, start, end, before_end, now)
        if not values:
            return current
        values['updated_at'] = now
        # Compare-and-set: the engine may have started or ended it since.
        return db_api.lease_update(session, current['id'], values,
                                   expected_status=current['status'])


def update_lease(req, ctx, lease_id):
    """PUT /leases/{id}: rename; move/resize the window (Blazar's rules).

    Before the start the window may move (the hosts are kept when free,
    else chosen again, else 409); after the start the start is frozen and
    the end may be shortened down to now or extended while the same hosts
    stay free. An invalid update changes nothing.
    """
    lease = _get_visible_lease(ctx, lease_id, lease_policies.UPDATE)
    body = _json_body(req)
    if set(body) == {'lease'} and isinstance(body['lease'], dict):
        body = body['lease']
    _check_update_body(body)
    try:
        lease = _update_lease_tx(_db(), lease, body, _now())
    except db_api.StatusConflict as e:
        raise LeaseBusy(lease_id=lease_id, status=e.actual,
                        action='this update', hint='; retry in a moment')
    _wake_engines()
    return 200, {'lease': format_lease(lease)}


@db_api.retry_on_deadlock
def _delete_lease_tx(db, lease_id, now):
    """Delete or end a lease; returns what was done."""
    cleaning = _opts().cleaning_time
    with db.writer() as session:
        lease = db_api.lease_get(session, lease_id)
        state = lease['status']
        only_hosts = all(r['resource_type'] == hosts.RESOURCE_TYPE
                         for r in lease['reservations'])
        if state == _L.TERMINATED or (state == _L.PENDING and only_hosts):
            # Nothing was provisioned (or everything was released): the
            # rows go, allocations with them (cascade).
            db_api.lease_update(session, lease_id, {'updated_at': now},
                                expected_status=state)
            db_api.lease_destroy(session, lease_id)
            return 'deleted'
        if state in (_L.STARTING, _L.TERMINATING):
            raise LeaseBusy(lease_id=lease_id, status=state,
                            action='deleting it',
                            hint='; retry in a moment')
        # Started (or failed), or holding Nova resources already: end it
        # now; the engine releases the resources and the lease becomes
        # TERMINATED.
        events = db_api.event_list(session, lease_id=lease_id)
        for event in events:
            if event['status'] != _E.UNDONE:
                continue
            if event['event_type'] == _T.END_LEASE:
                db_api.event_update(session, event['id'], {'time': now},
                                    expected_status=str(_E.UNDONE))
            elif state == _L.PENDING or (
                    event['event_type'] == _T.BEFORE_END_LEASE):
                db_api.event_destroy(session, event['id'])
        if any(r['resource_type'] == hosts.RESOURCE_TYPE
               for r in lease['reservations']):
            hosts.extend_host_lease(session, lease, min(now, lease[
                'end_date']), cleaning)
        # The capacity other reservations (instances) were promised goes
        # with the lease: nothing of it after now.
        db_api.allocation_cut(
            session, [r['id'] for r in lease['reservations']
                      if r['resource_type'] != hosts.RESOURCE_TYPE],
            min(now, lease['end_date']))
        db_api.lease_update(session, lease_id,
                            {'end_date': min(now, lease['end_date']),
                             'updated_at': now},
                            expected_status=state)
        return 'ending'


def delete_lease(req, ctx, lease_id):
    """DELETE /leases/{id}.

    A lease that holds nothing yet (pending host lease) or nothing any
    more (TERMINATED) is removed. A started one ends now: the engine
    releases its resources (hosts back in the free pool, servers removed)
    and it stays visible as TERMINATED.
    """
    _get_visible_lease(ctx, lease_id, lease_policies.DELETE)
    try:
        done = _delete_lease_tx(_db(), lease_id, _now())
    except db_api.StatusConflict as e:
        raise LeaseBusy(lease_id=lease_id, status=e.actual,
                        action='deleting it', hint='; retry in a moment')
    if done == 'ending':
        _wake_engines()
    return 204, None


def create_reserved_server(req, ctx, lease_id, reservation_id):
    """POST /leases/{id}/reservations/{id}/server (admin/service).

    Creates, as the lease's owner, the server of a reservation whose
    server is created at the lease's start, and links it; idempotent
    (see nova_lease.api_ext.deferred). 201 when created now, 200 when it
    existed; Nova's refusal keeps Nova's code and message.
    """
    _get_visible_lease(ctx, lease_id, lease_policies.CREATE_SERVER)
    created, server_id = deferred.create_server(
        req, ctx, lease_id, reservation_id,
        req.environ['nova_lease.application'])
    return (201 if created else 200), {'server': {'id': server_id}}


# -- hosts -------------------------------------------------------------------

def _host(host_id):
    try:
        return db_api.host_get(_db(), host_id)
    except db_api.HostNotFound:
        # blazarclient may pass a hypervisor hostname.
        return db_api.host_get_by_hostname(_db(), host_id)


def _capabilities(values, field='values'):
    caps = {}
    for key, value in values.items():
        if key in _HOST_FIELDS:
            raise BadRequest(reason="%s: '%s' is a host field, not an extra "
                                    "capability" % (field, key))
        if not isinstance(key, str) or not _CAPABILITY_RE.match(key):
            raise BadRequest(reason="%s: extra capability names are 1 to "
                                    "255 letters, digits, '_', '-', '.' or "
                                    "':', got %r" % (field, key))
        scalar = (str, int, float, bool)
        if value is not None and not isinstance(value, scalar):
            raise BadRequest(reason="%s.%s: an extra capability value is a "
                                    "string or number" % (field, key))
        if isinstance(value, bool):
            value = 'true' if value else 'false'
        if isinstance(value, str):
            lease_params.check_text(value, '%s.%s' % (field, key))
        caps[key] = value
    return caps


def list_hosts(req, ctx):
    _authorize(ctx, host_policies.LIST, {'project_id': ctx.project_id})
    return 200, {'hosts': [format_host(h)
                           for h in db_api.host_list(_db())]}


def show_host(req, ctx, host_id):
    _authorize(ctx, host_policies.SHOW, {'project_id': ctx.project_id})
    return 200, {'host': format_host(_host(host_id))}


def create_host(req, ctx):
    """POST /os-hosts: register a compute node as reservable.

    ``name`` is the hypervisor hostname; every other key is an extra
    capability. The facts come from Nova; the host joins the free pool.
    """
    _authorize(ctx, host_policies.CREATE, {'project_id': ctx.project_id})
    body = _json_body(req)
    name = body.pop('name', None)
    if not isinstance(name, str) or not name.strip():
        raise BadRequest(reason="name: the hypervisor hostname of a compute "
                                "node is required")
    lease_params.check_text(name, 'name')
    caps = {k: v for k, v in _capabilities(body, 'body').items()
            if v is not None}
    name = name.strip()
    facts = nova_hosts.compute_node_facts(ctx, name)
    service_host = facts['service_host']
    servers = nova_hosts.servers_on_host(ctx, service_host)
    if servers:
        raise _having_servers(name, servers)
    db = _db()
    host = hosts.register_host(db, dict(facts, capabilities=caps,
                                        reservable=True), _now())
    hosts.invalidate_host_cache()
    freepool = _opts().freepool_aggregate
    try:
        nova_hosts.add_to_freepool(ctx, service_host, freepool)
    except Exception:
        db_api.host_destroy(db, host['id'])
        hosts.invalidate_host_cache()
        raise
    # A server scheduled onto the host while it was joining the free pool
    # (the scheduler keeps unleased work off it from now on): look again.
    servers = nova_hosts.servers_on_host(ctx, service_host)
    if servers:
        if hosts.unregister_host(db, host, _now()):
            hosts.invalidate_host_cache()
            nova_hosts.remove_from_freepool(ctx, service_host, freepool)
            raise _having_servers(name, servers)
        LOG.warning('Host %(name)s was registered while server(s) %(ids)s '
                    'started on it; the end of its leases leaves them '
                    'alone: move them off the host',
                    {'name': name,
                     'ids': ', '.join(s['id'] for s in servers)})
    LOG.info('Host %(name)s registered as reservable (id %(id)s)',
             {'name': name, 'id': host['id']})
    return 201, {'host': format_host(host)}


def update_host(req, ctx, host_id):
    """PUT /os-hosts/{id}: set (or, with null, unset) extra capabilities.

    The facts are read again from Nova (the cache is refreshed).
    """
    _authorize(ctx, host_policies.UPDATE, {'project_id': ctx.project_id})
    host = _host(host_id)
    body = _json_body(req)
    values = body.get('values', body) if set(body) <= {'values'} else body
    if not isinstance(values, dict):
        raise BadRequest(reason="values: must be an object of extra "
                                "capabilities")
    caps = _capabilities(values)
    try:
        facts = nova_hosts.compute_node_facts(ctx,
                                              host['hypervisor_hostname'])
        facts.pop('hypervisor_hostname')
    except nova_hosts.ComputeHostNotFound:
        facts = {}
    host = db_api.host_update(_db(), host['id'],
                              dict(facts, capabilities=caps))
    hosts.invalidate_host_cache()
    return 200, {'host': format_host(host)}


def delete_host(req, ctx, host_id):
    """DELETE /os-hosts/{id}: unregister (refused while reserved)."""
    _authorize(ctx, host_policies.DELETE, {'project_id': ctx.project_id})
    host = _host(host_id)
    db = _db()
    busy = db_api.allocation_list(db, hosts=[host['hypervisor_hostname']],
                                  start=_now())
    if busy:
        leases = {a['reservation_id'] for a in busy}
        owners = sorted({db_api.reservation_get(db, r)['lease_id']
                         for r in leases})
        raise HostInUse(host=host['hypervisor_hostname'], count=len(leases),
                        leases=', '.join(owners))
    if host.get('service_host'):
        nova_hosts.remove_from_freepool(ctx, host['service_host'],
                                        _opts().freepool_aggregate)
    db_api.host_destroy(db, host['id'])
    hosts.invalidate_host_cache()
    return 204, None


def _allocation_filters(req):
    filters = {}
    for key in ('lease_id', 'reservation_id'):
        if req.GET.get(key):
            filters[key] = lease_params.check_text(req.GET[key], key)
    return filters


def list_host_allocations(req, ctx):
    """GET /os-hosts/allocations[?lease_id=&reservation_id=]."""
    _authorize(ctx, host_policies.ALLOCATIONS, {'project_id': ctx.project_id})
    items = hosts.host_allocations(_db(), **_allocation_filters(req))
    return 200, {'allocations': [_format_allocation(i) for i in items]}


def show_host_allocation(req, ctx, host_id):
    _authorize(ctx, host_policies.ALLOCATIONS, {'project_id': ctx.project_id})
    host = _host(host_id)
    items = hosts.host_allocations(_db(), hosts=[host],
                                   **_allocation_filters(req))
    item = items[0] if items else {'resource_id': str(host['id']),
                                   'reservations': []}
    return 200, {'allocation': _format_allocation(item)}


def list_host_properties(req, ctx):
    """GET /os-hosts/properties: the extra capability names in use."""
    _authorize(ctx, host_policies.LIST, {'project_id': ctx.project_id})
    detail = strutils.bool_from_string(req.GET.get('detail', 'false'))
    values = {}
    for host in db_api.host_list(_db()):
        for key, value in (host.get('capabilities') or {}).items():
            values.setdefault(key, set()).add(value)
    props = []
    for key in sorted(values):
        item = {'property': key}
        if detail:
            item.update(private=False, values=sorted(values[key]))
        props.append(item)
    return 200, {'resource_properties': props}


# -- routing -----------------------------------------------------------------

def version_document(req, ctx, base_href):
    return 200, {'versions': [{
        'id': VERSION_ID, 'status': 'CURRENT',
        'links': [{'rel': 'self', 'href': base_href}]}]}


_ID = r'(?P<%s>[^/]+)'

#: (path regex below /os-reservation, {method: handler}); first match wins.
ROUTES = [
    (r'/leases', {'GET': list_leases, 'POST': create_lease}),
    (r'/leases/' + _ID % 'lease_id',
     {'GET': show_lease, 'PUT': update_lease, 'DELETE': delete_lease}),
    (r'/leases/' + _ID % 'lease_id' + r'/reservations/' +
     _ID % 'reservation_id' + r'/server', {'POST': create_reserved_server}),
    (r'/os-hosts', {'GET': list_hosts, 'POST': create_host}),
    (r'/os-hosts/allocations', {'GET': list_host_allocations}),
    (r'/os-hosts/properties', {'GET': list_host_properties}),
    (r'/os-hosts/' + _ID % 'host_id' + r'/allocation',
     {'GET': show_host_allocation}),
    (r'/os-hosts/' + _ID % 'host_id',
     {'GET': show_host, 'PUT': update_host, 'DELETE': delete_host}),
]
_COMPILED = [(re.compile('^%s/?$' % path), methods)
             for path, methods in ROUTES]


def _route(rest):
    for regex, methods in _COMPILED:
        match = regex.match(rest)
        if match:
            return methods, match.groupdict()
    return None, None


def handle(req, ctx, rest, base_href):
    """Serve one request below /os-reservation; return a webob Response.

    ``rest`` is the path after the mount point ('' or '/leases/...');
    ``base_href`` the URL of the mount point (for the version document).
    """
    rest = rest or ''
    try:
        if rest.rstrip('/') in ('', '/v1', '/v1.0'):
            if req.method not in ('GET', 'HEAD'):
                raise MethodNotAllowed(method=req.method,
                                       path='the version document')
            code, body = version_document(req, ctx, base_href)
            return _json_response(code, body)
        methods, kwargs = _route(rest)
        if methods is None:
            raise ResourceNotFound(path=rest)
        handler = methods.get(req.method)
        if handler is None:
            allowed = ', '.join(sorted(methods))
            resp = error_response(405, 'Method %s is not allowed on %s '
                                  '(allowed: %s)' % (req.method, rest,
                                                     allowed),
                                  'MethodNotAllowed')
            resp.headers['Allow'] = allowed
            return resp
        if ctx is None:
            return error_response(401, 'authentication required',
                                  'Unauthorized')
        for key, value in kwargs.items():
            # Ids come from the URL, percent-decoded: no control
            # characters (PostgreSQL cannot even compare a NUL).
            lease_params.check_text(value, key)
        code, body = handler(req, ctx, **kwargs)
        return _json_response(code, body)
    except exception.NovaLeaseException as e:
        if e.code >= 500:
            return _internal_error(req, rest)
        return error_response(e.code, str(e), type(e).__name__)
    except nova_exception.PolicyNotAuthorized as e:
        return error_response(403, e.format_message(), 'Forbidden')
    except nova_exception.NovaException as e:
        code = getattr(e, 'code', 500) or 500
        if code >= 500:
            return _internal_error(req, rest)
        return error_response(code, e.format_message(), type(e).__name__)
    except db_exc.DBDeadlock:
        LOG.warning('Lease API %s %s: database contention', req.method,
                    rest)
        return error_response(409, 'the database is busy with conflicting '
                              'requests; retry', 'Conflict')
    except Exception:
        return _internal_error(req, rest)


def internal_error_message(req, what):
    """What a user is told about a 500: no detail, the request id.

    The details (database errors included) are in the nova-api log,
    found by the request id.
    """
    request_id = req.environ.get('openstack.request_id') or 'unknown'
    return ('%s failed on an internal error (request %s); the nova-api '
            'log has the details' % (what, request_id))


def _internal_error(req, rest):
    """Log the exception being handled; a 500 that tells nothing of it."""
    LOG.exception('Lease API %s %s failed', req.method, rest)
    return error_response(500, internal_error_message(
        req, 'the lease API request'), 'InternalError')
