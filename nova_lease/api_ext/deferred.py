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
"""Future instance leases: servers created at their lease's start.

A ``POST /servers`` with lease hints whose start is in the future builds
nothing (so it needs no capacity now, and costs no build, shelve and
snapshot upload). Inside nova-api, in the request's thread:

1. :func:`validate`: the body is checked with Nova's own request schema
   for the request's microversion, and Nova's ``os_compute_api:servers:
   create`` policy, so that a malformed or forbidden boot is refused now
   (400, 403) rather than at the start;
2. the servers.py filter admits and records the PENDING lease, one
   reservation per server (``max_count``), each with its boot request
   (:func:`boot_requests`: the body without the lease hints, named as Nova
   names the servers of a multi-create, the admin password, the owner's
   user, project and roles, the microversion, the flavor);
3. :func:`accepted` answers 202 in Nova's format for that microversion
   (``id``, ``links``, ``OS-DCF:diskConfig``, ``security_groups``,
   ``adminPass`` when Nova returns it; ``{"reservation_id": <lease id>}``
   for ``return_reservation_id``), the server id being the reservation
   id: an *alias*.

Requests under ``/servers/<alias>[/...]`` reach Nova first; only on
Nova's 404 does the paste filter ask :func:`alias_response`: until the
server exists, ``GET`` shows the reserved server built from the stored
request (``SHELVED_OFFLOADED``, metadata ``lease_id`` and
``lease_status=reserved``, tag ``reserved``), ``DELETE`` removes the
reservation (and the lease with its last one), anything else is a 409
that says when it is created; once it exists, the request is replayed on
the real server. Visibility is a server's: its project, and admins.

At the start, the engine calls the lease API action ``POST
/os-reservation/leases/<lease>/reservations/<reservation>/server``
(:func:`create_server`, admin/service only): the server is created as its
owner through Nova's own router (``POST /servers`` with the stored body,
metadata ``lease_id``, ``lease_status``, ``lease_reservation_id`` and the
internal hint ``nova_lease_reservation``, which pins it to the promised
host) and linked to the reservation. It is idempotent: a server already
linked, or created but not linked (found by its metadata), is not
created again; one that ended in ERROR is replaced.
"""

import copy
import re
import threading

import nova.conf
from nova import exception as nova_exception
from oslo_log import log as logging
from oslo_serialization import jsonutils
from oslo_utils import timeutils
from oslo_utils import uuidutils
import webob
import webob.exc

from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import params as lease_params
from nova_lease.plugins.instance import leases
from nova_lease import status

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

_L = status.LeaseStatus
_R = status.ReservationStatus

#: Version of the stored boot request's layout.
REQUEST_VERSION = 1
RESERVED_TAG = 'reserved'
_UUID_RE = re.compile(r'^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?'
                      r'[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$')
#: Keys of a create body that belong to the whole request, not a server.
_REQUEST_ONLY = ('min_count', 'max_count', 'return_reservation_id')
_HINT_KEYS = ('os:scheduler_hints', 'OS-SCH-HNT:scheduler_hints')
_LEASE_HINTS = ('reserved', 'lease_params')

_LOCK = threading.Lock()
_HELPERS = {}


class ServerRefused(exception.NovaLeaseException):
    """Nova refused to create the server; its code and message."""

    msg_fmt = 'Nova refused to create the server: %(reason)s'

    def __init__(self, code, reason):
        self.code = code
        super().__init__(reason=reason)


class NotCreatable(exception.Conflict):
    msg_fmt = ('the server of reservation %(reservation_id)s cannot be '
               'created now: %(reason)s')


def _helper(name):
    """Nova helpers built once per process (thread-safe)."""
    value = _HELPERS.get(name)
    if value is None:
        with _LOCK:
            value = _HELPERS.get(name)
            if value is None:
                if name == 'compute_api':
                    from nova.compute import api as compute_api
                    value = compute_api.API()
                elif name == 'views':
                    from nova.api.openstack.compute.views import servers
                    value = servers.ViewBuilder()
                _HELPERS[name] = value
    return value


def _db():
    from nova_lease import conf as lease_conf
    lease_conf.register_opts(CONF)
    return db_api.get_database(CONF)


def _fault(exc_class, message):
    from nova.api.openstack import wsgi as os_wsgi
    return os_wsgi.Fault(exc_class(explanation=message))


# -- the boot ---------------------------------------------------------------

def api_version(req):
    """The request's microversion (set on ``req``, as Nova's router does).

    :raises nova.exception.InvalidAPIVersionString,
        nova.exception.InvalidGlobalAPIVersion: Nova would refuse it.
    """
    req.set_api_version_request()
    return req.api_version_request


def is_legacy_v2(req):
    """A request of the legacy ``/v2`` pipeline (not ``/v2.1``)."""
    return req.script_name.rstrip('/').endswith('/v2')


def validate(req, ctx, body):
    """Check the create body as Nova will at the start (400/403 now).

    Nova's own request schema of ``POST /servers`` for the request's
    microversion (``ServersController.create.request_body_schemas``,
    applied through :func:`nova.api.validation.schema`), and Nova's
    ``os_compute_api:servers:create`` policy for the caller.

    :raises nova.exception.ValidationError: (400) the body is malformed.
    :raises nova.exception.PolicyNotAuthorized: (403).
    """
    from nova.api.openstack.compute import servers as nova_servers
    from nova.api import validation
    from nova.policies import servers as server_policies

    if is_legacy_v2(req):
        req.set_legacy_v2()
    schema = nova_servers.ServersController.create.request_body_schemas(req)
    if schema is not None:
        validation.schema(schema)(lambda *args, **kwargs: None)(
            None, req, body=body)
    server = body['server']
    ctx.can(server_policies.SERVERS % 'create', {
        'project_id': ctx.project_id, 'user_id': ctx.user_id,
        'availability_zone': server.get('availability_zone')})


def _flavor_view(flavor):
    return {'id': str(flavor.flavorid), 'name': flavor.name,
            'vcpus': flavor.vcpus, 'ram': flavor.memory_mb,
            'disk': flavor.root_gb, 'ephemeral': flavor.ephemeral_gb,
            'swap': flavor.swap,
            'extra_specs': dict(flavor.extra_specs or {})}


def boot_requests(req, ctx, body, count, flavor):
    """The boot request to store for each of ``count`` servers, and the
    admin password.

    The body without the lease hints and without what concerns the whole
    request (``min_count``, ``max_count``, ``return_reservation_id``);
    servers named ``<name>-<n>`` (n from 1) when ``count`` > 1, as Nova
    names them; one admin password for all (the request's, else one
    generated now, as Nova does), so that the 202 can show it.
    """
    from nova import utils as nova_utils

    body = copy.deepcopy(body)
    server = body['server']
    for key in _REQUEST_ONLY:
        server.pop(key, None)
    for key in _HINT_KEYS:
        hints = body.get(key)
        if isinstance(hints, dict):
            for hint in _LEASE_HINTS:
                hints.pop(hint, None)
            if not hints:
                del body[key]
    password = server.get('adminPass') or nova_utils.generate_password()
    server['adminPass'] = password
    context = {
        'user_id': ctx.user_id, 'project_id': ctx.project_id,
        'roles': list(ctx.roles or ()), 'user_name': ctx.user_name,
        'project_name': ctx.project_name,
        'user_domain_id': getattr(ctx, 'user_domain_id', None),
        'project_domain_id': getattr(ctx, 'project_domain_id', None),
        'global_request_id': ctx.global_id,
    }
    base = {'version': REQUEST_VERSION,
            'microversion': req.api_version_request.get_string(),
            'legacy_v2': is_legacy_v2(req), 'context': context,
            'flavor': _flavor_view(flavor)}
    requests = []
    for index in range(count):
        one = copy.deepcopy(body)
        if count > 1:
            name = server.get('name') or ''
            one['server']['name'] = '%s-%d' % (name, index + 1)
        requests.append(dict(base, body=one))
    return requests, password


def _version_headers(req, resp):
    version = getattr(req, 'api_version_request', None)
    if version is None or version.is_null():
        return resp
    resp.headers['OpenStack-API-Version'] = 'compute ' + version.get_string()
    resp.headers['X-OpenStack-Nova-API-Version'] = version.get_string()
    resp.headers.add('Vary', 'OpenStack-API-Version')
    resp.headers.add('Vary', 'X-OpenStack-Nova-API-Version')
    return resp


def _json(req, code, body, headers=()):
    resp = webob.Response(status=code)
    resp.body = jsonutils.dump_as_bytes(body)
    resp.content_type = 'application/json'
    resp.charset = 'UTF-8'
    for key, value in headers:
        resp.headers[key] = value
    return _version_headers(req, resp)


def _links(req, alias):
    return _helper('views').create(req, {'server': {}}, {
        'uuid': alias})['server']['links']


def accepted(req, body, lease, password):
    """The 202 of the boot, in Nova's format, the first alias as its id.
    """
    server = body['server']
    if server.get('return_reservation_id'):
        return _json(req, 202, {'reservation_id': lease['id']})
    alias = sorted(lease['reservations'],
                   key=lambda r: (r['properties'] or {}).get('index', 0)
                   )[0]['id']
    view = _helper('views').create(req, body, {
        'uuid': alias,
        'auto_disk_config': server.get('OS-DCF:diskConfig') == 'AUTO'})
    if CONF.api.enable_instance_password:
        view['server']['adminPass'] = password
    location = [link['href'] for link in view['server']['links']
                if link['rel'] == 'self']
    return _json(req, 202, view,
                 [('Location', location[0])] if location else ())


# -- /servers/<alias> -------------------------------------------------------

def _isotime(value):
    return value.strftime('%Y-%m-%dT%H:%M:%SZ') if value else None


def _bookmark(links, kind, item_id):
    for link in links:
        if link['rel'] == 'bookmark':
            head = link['href'].rsplit('/servers/', 1)[0]
            return [{'rel': 'bookmark',
                     'href': '%s/%s/%s' % (head, kind, item_id)}]
    return []


def reserved_view(req, ctx, alias, lease, stored, state):
    """The server ``GET /servers/<alias>`` shows before it exists.

    ``state``: ``reserved`` (lease PENDING: ``SHELVED_OFFLOADED``),
    ``starting`` (being created: ``BUILD``) or ``error`` (the start
    failed: ``ERROR`` with the lease's status_reason as fault).
    """
    from nova.api.openstack import api_version_request as avr
    from nova.api.openstack import common
    from nova.policies import extended_server_attributes as esa

    def supported(version):
        return avr.is_supported(req, version)

    body = stored['body']
    server = body['server']
    flavor = stored['flavor']
    links = _links(req, alias)
    image_ref = server.get('imageRef')
    image = ''
    if image_ref:
        image_id = common.get_id_from_href(image_ref)
        image = {'id': image_id,
                 'links': _bookmark(links, 'images', image_id)}
    if supported('2.47'):
        flavor_view = {key: flavor[key] for key in
                       ('vcpus', 'ram', 'disk', 'ephemeral', 'swap')}
        flavor_view['original_name'] = flavor['name']
        if ctx.can('os_compute_api:servers:show:flavor-extra-specs',
                   fatal=False, target={'project_id': lease['project_id']}):
            flavor_view['extra_specs'] = dict(flavor['extra_specs'])
    else:
        flavor_view = {'id': flavor['id'],
                       'links': _bookmark(links, 'flavors', flavor['id'])}
    metadata = dict(server.get('metadata') or {})
    metadata[leases.META_LEASE_ID] = lease['id']
    metadata[leases.META_LEASE_STATUS] = leases.META_RESERVED
    status_, vm_state, task = {
        'reserved': ('SHELVED_OFFLOADED', 'shelved_offloaded', None),
        'starting': ('BUILD', 'building', 'scheduling'),
        'error': ('ERROR', 'error', None)}[state]
    out = {
        'id': alias, 'name': server['name'], 'status': status_,
        'tenant_id': lease['project_id'], 'user_id': lease['user_id'],
        'metadata': metadata, 'hostId': '', 'image': image,
        'flavor': flavor_view, 'created': _isotime(lease['created_at']),
        'updated': _isotime(lease.get('updated_at') or
                            lease['created_at']),
        'addresses': {}, 'accessIPv4': server.get('accessIPv4') or '',
        'accessIPv6': server.get('accessIPv6') or '', 'links': links,
        'OS-DCF:diskConfig': server.get('OS-DCF:diskConfig') or 'MANUAL',
        'OS-EXT-AZ:availability_zone': '',
        'config_drive': '' if server.get('config_drive') is None else str(
            server.get('config_drive')),
        'key_name': server.get('key_name'),
        'OS-SRV-USG:launched_at': None, 'OS-SRV-USG:terminated_at': None,
        'security_groups': server.get('security_groups') or [
            {'name': 'default'}],
        'OS-EXT-STS:task_state': task, 'OS-EXT-STS:vm_state': vm_state,
        'OS-EXT-STS:power_state': 0,
        'os-extended-volumes:volumes_attached': [],
    }
    if state == 'error':
        out['fault'] = {'code': 500, 'created': _isotime(
            lease.get('updated_at')), 'message': (
                lease.get('status_reason') or 'the start of lease %s '
                'failed' % lease['id'])[:255]}
    if state == 'starting':
        out['progress'] = 0
    if ctx.can(esa.BASE_POLICY_NAME, fatal=False,
               target={'project_id': lease['project_id']}):
        out.update({'OS-EXT-SRV-ATTR:host': None,
                    'OS-EXT-SRV-ATTR:instance_name': '',
                    'OS-EXT-SRV-ATTR:hypervisor_hostname': None})
        if supported('2.3'):
            out.update({'OS-EXT-SRV-ATTR:hostname': server.get('hostname'),
                        'OS-EXT-SRV-ATTR:kernel_id': '',
                        'OS-EXT-SRV-ATTR:launch_index': 0,
                        'OS-EXT-SRV-ATTR:ramdisk_id': '',
                        'OS-EXT-SRV-ATTR:reservation_id': lease['id'],
                        'OS-EXT-SRV-ATTR:root_device_name': None,
                        'OS-EXT-SRV-ATTR:user_data': server.get(
                            'user_data')})
    elif supported('2.90'):
        out['OS-EXT-SRV-ATTR:hostname'] = server.get('hostname')
    if supported('2.9'):
        out['locked'] = False
    if supported('2.19'):
        out['description'] = server.get('description')
    if supported('2.26'):
        out['tags'] = sorted(set(server.get('tags') or ()) | {RESERVED_TAG})
    if supported('2.63'):
        out['trusted_image_certificates'] = server.get(
            'trusted_image_certificates')
    if supported('2.71'):
        out['server_groups'] = []
    if supported('2.73'):
        out['locked_reason'] = None
    if supported('2.96'):
        out['pinned_availability_zone'] = server.get('availability_zone')
    if supported('2.100'):
        hints = {}
        for key in _HINT_KEYS:
            if isinstance(body.get(key), dict):
                hints = {k: v if isinstance(v, list) else [str(v)]
                         for k, v in body[key].items()}
                break
        out['scheduler_hints'] = hints
    return {'server': out}


def _replay(req, application, path, real_id, alias):
    """The request, sent on to Nova for the real server."""
    environ = dict(req.environ)
    environ['PATH_INFO'] = path.replace('/servers/%s' % alias,
                                        '/servers/%s' % real_id, 1)
    body = req.body
    sub = webob.Request(environ)
    sub.body = body
    return sub.get_response(application)


def alias_response(req, ctx, alias, rest, application):
    """Answer a request under ``/servers/<alias>`` that Nova answered 404.

    Returns a webob Response, or None when ``alias`` is no alias the
    caller may see (Nova's 404 stands). ``rest`` is the path after the
    id ('' for the server itself).
    """
    try:
        return _alias_response(req, ctx, alias, rest, application)
    except nova_exception.PolicyNotAuthorized as e:
        return _version_headers(req, req.get_response(_fault(
            webob.exc.HTTPForbidden, e.format_message())))


def _alias_response(req, ctx, alias, rest, application):
    from nova.policies import servers as server_policies

    if ctx is None or not _UUID_RE.match(alias):
        return None
    db = _db()
    try:
        reservation = db_api.reservation_get(db, alias)
        lease = db_api.lease_get(db, reservation['lease_id'])
    except exception.NotFound:
        return None
    if (reservation['resource_type'] != leases.RESOURCE_TYPE or
            not leases.created_at_start(reservation)):
        return None
    if lease['project_id'] != ctx.project_id and not ctx.is_admin:
        return None
    path = req.path_info
    if reservation['resource_id']:
        return _replay(req, application, path, reservation['resource_id'],
                       alias)
    if reservation['status'] == _R.DELETED or lease['status'] in (
            _L.TERMINATED, _L.TERMINATING):
        return None
    target = {'project_id': lease['project_id'],
              'user_id': lease['user_id']}
    item = rest in ('', '/')
    try:
        api_version(req)
    except nova_exception.NovaException:
        return None     # Nova's answer (a bad microversion) stands
    if item and req.method == 'GET':
        ctx.can(server_policies.SERVERS % 'show', target)
        try:
            stored = db_api.boot_request_get(db, alias)
        except db_api.BootRequestNotFound:
            return None
        state = {_L.PENDING: 'reserved', _L.ERROR: 'error'}.get(
            lease['status'], 'starting')
        return _json(req, 200, reserved_view(req, ctx, alias, lease, stored,
                                             state))
    if item and req.method == 'DELETE':
        ctx.can(server_policies.SERVERS % 'delete', target)
        # A start that failed after creating the server but before linking
        # it (retried later, or given up) left it: it goes first.
        for orphan in _found(ctx, lease['project_id'], alias):
            LOG.info('Deleting server %(server)s, created for reservation '
                     '%(alias)s but never linked to it',
                     {'server': orphan.uuid, 'alias': alias})
            resp = _replay(req, application, path, orphan.uuid, alias)
            if resp.status_int not in (204, 404):
                return resp
        try:
            gone = leases.remove_deferred(db, alias)
        except db_api.ReservationNotFound:
            return None
        except leases.ServerAlreadyCreated as e:
            return _replay(req, application, path, e.server_id, alias)
        except db_api.StatusConflict as e:
            return _version_headers(req, req.get_response(_fault(
                webob.exc.HTTPConflict,
                'Server %s of lease %s cannot be deleted while the lease '
                'is %s; retry in a moment' % (alias, lease['id'],
                                              e.actual))))
        LOG.info('Reserved server %(alias)s deleted by its owner%(lease)s',
                 {'alias': alias, 'lease': ' with its lease %s' % gone
                  if gone else ''})
        return _version_headers(req, webob.Response(status=204))
    return _version_headers(req, req.get_response(_fault(
        webob.exc.HTTPConflict,
        'Server %s is reserved by lease %s and is created at its start '
        '(%s UTC); until then it can only be shown or deleted'
        % (alias, lease['id'],
           lease_params.format_short(lease['start_date'])))))


# -- the start: POST .../reservations/<id>/server ---------------------------

def _owner_context(stored, caller):
    """The lease owner's RequestContext, as at the boot.

    The identity (user, project, roles) is the one stored with the boot
    request; the token and service catalog are the caller's (the
    engine's service user): the owner's token has expired by now.
    """
    from nova import context as nova_context

    owner = stored['context']
    return nova_context.RequestContext(
        user_id=owner['user_id'], project_id=owner['project_id'],
        roles=list(owner.get('roles') or ()),
        user_name=owner.get('user_name'),
        project_name=owner.get('project_name'),
        user_domain_id=owner.get('user_domain_id'),
        project_domain_id=owner.get('project_domain_id'),
        auth_token=caller.auth_token,
        service_catalog=caller.service_catalog,
        user_auth_plugin=getattr(caller, 'user_auth_plugin', None),
        remote_address=caller.remote_address,
        global_request_id=owner.get('global_request_id'))


def _sub_request(req, application, owner, method, path, stored,
                 body=None):
    from nova.api.openstack import wsgi as os_wsgi

    sub = os_wsgi.Request.blank(path, method=method)
    sub.script_name = req.script_name
    if body is not None:
        sub.body = jsonutils.dump_as_bytes(body)
        sub.content_type = 'application/json'
    version = stored['microversion']
    sub.headers['OpenStack-API-Version'] = 'compute ' + version
    sub.headers['X-OpenStack-Nova-API-Version'] = version
    sub.environ['nova.context'] = owner
    if 'HTTP_X_OPENSTACK_REQUEST_ID' in req.environ:
        sub.environ['HTTP_X_OPENSTACK_REQUEST_ID'] = req.environ[
            'HTTP_X_OPENSTACK_REQUEST_ID']
    return sub.get_response(application)


def _nova_message(resp):
    try:
        data = jsonutils.loads(resp.body)
        fault = list(data.values())[0]
        return fault.get('message') or resp.status
    except (ValueError, AttributeError, IndexError, TypeError):
        return resp.status


def _delete(req, application, owner, stored, server_id):
    resp = _sub_request(req, application, owner, 'DELETE',
                        '/servers/%s' % server_id, stored)
    if resp.status_int not in (204, 404):
        raise ServerRefused(resp.status_int, 'deleting server %s: %s'
                            % (server_id, _nova_message(resp)))


def _found(owner, project_id, reservation_id):
    """Servers (not deleted) created for the reservation, oldest first."""
    instances = _helper('compute_api').get_all(
        owner, search_opts={
            'metadata': {leases.META_RESERVATION_ID: reservation_id},
            'project_id': project_id, 'deleted': False},
        sort_keys=['created_at'], sort_dirs=['asc'])
    return list(instances)


def _instance(owner, server_id):
    try:
        return _helper('compute_api').get(owner, server_id)
    except nova_exception.InstanceNotFound:
        return None


def create_server(req, ctx, lease_id, reservation_id, application):
    """Create (once) the server of a reservation created at its start.

    Returns ``(created, server id)``. Runs inside nova-api for the lease
    API action; ``ctx`` is the caller's (the engine). See the module's
    documentation.

    :raises nova_lease.db.api.ReservationNotFound: (404) unknown, or not
        of this lease.
    :raises NotCreatable: (409) not a reservation created at its start,
        or its lease is not starting.
    :raises ServerRefused: Nova refused (its code and message).
    """
    db = _db()
    reservation = db_api.reservation_get(db, reservation_id)
    if reservation['lease_id'] != lease_id:
        raise db_api.ReservationNotFound(reservation_id=reservation_id)
    lease = db_api.lease_get(db, lease_id)
    if not leases.created_at_start(reservation):
        raise NotCreatable(reservation_id=reservation_id,
                           reason='its server is not created at the start')
    linked = reservation['resource_id']
    if lease['status'] != _L.STARTING:
        if linked and lease['status'] == _L.ACTIVE:
            return False, linked
        raise NotCreatable(reservation_id=reservation_id,
                           reason='lease %s is %s, not STARTING'
                           % (lease_id, lease['status']))
    if reservation['status'] in (_R.DELETED, _R.ERROR):
        raise NotCreatable(reservation_id=reservation_id,
                           reason='the reservation is %s'
                           % reservation['status'])
    stored = db_api.boot_request_get(db, reservation_id)
    owner = _owner_context(stored, ctx)
    if linked:
        instance = _instance(owner, linked)
        if instance is not None and instance.vm_state != 'error':
            return False, linked
        # It failed (NoValidHost...) or was deleted: replaced, below.
        LOG.warning('Server %(server)s of reservation %(res)s is %(state)s: '
                    'creating it again', {
                        'server': linked, 'res': reservation_id,
                        'state': instance.vm_state if instance else 'gone'})
        db_api.reservation_update(db, reservation_id, {'resource_id': None},
                                  expected={'resource_id': linked},
                                  fetch=False)
        if instance is not None:
            _delete(req, application, owner, stored, linked)
    for instance in _found(owner, lease['project_id'], reservation_id):
        if instance.vm_state == 'error':
            _delete(req, application, owner, stored, instance.uuid)
            continue
        # Created by an attempt that could not link it.
        return _link(req, application, owner, stored, db, reservation_id,
                     instance.uuid, created=False)
    body = copy.deepcopy(stored['body'])
    server = body['server']
    metadata = dict(server.get('metadata') or {})
    metadata.update({leases.META_LEASE_ID: lease_id,
                     leases.META_LEASE_STATUS: leases.META_PENDING,
                     leases.META_RESERVATION_ID: reservation_id})
    server['metadata'] = metadata
    hints = None
    for key in _HINT_KEYS:
        if isinstance(body.get(key), dict):
            hints = body[key]
            break
    if hints is None:
        hints = body[_HINT_KEYS[0]] = {}
    hints[lease_params.RESERVATION_HINT] = reservation_id
    resp = _sub_request(req, application, owner, 'POST', '/servers',
                        stored, body)
    if resp.status_int != 202:
        message = _nova_message(resp)
        LOG.warning('Nova refused to create the server of reservation '
                    '%(res)s of lease %(lease)s: %(status)s %(message)s',
                    {'res': reservation_id, 'lease': lease_id,
                     'status': resp.status, 'message': message})
        raise ServerRefused(resp.status_int, message)
    server_id = jsonutils.loads(resp.body)['server']['id']
    return _link(req, application, owner, stored, db, reservation_id,
                 server_id, created=True)


def _link(req, application, owner, stored, db, reservation_id, server_id,
          created):
    try:
        db_api.reservations_link(db, [(reservation_id, server_id)],
                                 now=timeutils.utcnow())
    except db_api.StatusConflict:
        # Linked meanwhile (a concurrent attempt): keep that one.
        current = db_api.reservation_get(db, reservation_id)['resource_id']
        if current and current != server_id:
            LOG.warning('Reservation %(res)s got server %(other)s '
                        'meanwhile: deleting %(server)s',
                        {'res': reservation_id, 'other': current,
                         'server': server_id})
            _delete(req, application, owner, stored, server_id)
            return False, current
        if current != server_id:
            raise
    LOG.info('Server %(server)s %(how)s for reservation %(res)s (created '
             'at its lease\'s start, as user %(user)s of project '
             '%(project)s)', {'server': server_id,
                              'how': 'created' if created else 'found',
                              'res': reservation_id,
                              'user': owner.user_id,
                              'project': owner.project_id})
    return created, server_id


def is_alias_candidate(server_id):
    """Cheap test: could ``server_id`` be a reservation id?"""
    return bool(_UUID_RE.match(server_id)) and uuidutils.is_uuid_like(
        server_id)
