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
"""Requests under ``/servers/<alias>`` before the server exists.

A future instance lease's ``POST /servers`` answers with the reservation
id as the server id: an *alias* (see :mod:`nova_lease.api_ext.deferred`).
Requests under ``/servers/<alias>[/...]`` reach Nova first; only on
Nova's 404 does the paste filter ask :func:`alias_response`: until the
server exists, ``GET`` shows the reserved server built from the stored
request (:func:`reserved_view`: ``SHELVED_OFFLOADED``, metadata
``lease_id`` and ``lease_status=reserved``, tag ``reserved``), ``DELETE``
removes the reservation (and the lease with its last one), anything else
is a 409 that says when it is created; once it exists, the request is
replayed on the real server. Visibility is a server's: its project, and
admins.
"""

import re

from nova import exception as nova_exception
from oslo_log import log as logging
from oslo_utils import uuidutils
import webob
import webob.exc

from nova_lease.api_ext import boot_hints
from nova_lease.api_ext import deferred
from nova_lease.api_ext import deferred_start
from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import params as lease_params
from nova_lease.plugins.instance import leases
from nova_lease.plugins import types
from nova_lease import status
from nova_lease import wire

LOG = logging.getLogger(__name__)

_L = status.LeaseStatus
_R = status.ReservationStatus

RESERVED_TAG = wire.TAG_RESERVED
_UUID_RE = re.compile(r'^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?'
                      r'[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$')


def _fault(exc_class, message):
    from nova.api.openstack import wsgi as os_wsgi
    return os_wsgi.Fault(exc_class(explanation=message))


def _isotime(value):
    return value.strftime('%Y-%m-%dT%H:%M:%SZ') if value else None


def _bookmark(links, kind, item_id):
    for link in links:
        if link['rel'] == 'bookmark':
            head = link['href'].rsplit('/servers/', 1)[0]
            return [{'rel': 'bookmark',
                     'href': '%s/%s/%s' % (head, kind, item_id)}]
    return []


def _links(req, alias):
    return deferred.helper('views').create(req, {'server': {}}, {
        'uuid': alias})['server']['links']


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
        for key in boot_hints.HINT_KEYS:
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
        return deferred.version_headers(req, req.get_response(_fault(
            webob.exc.HTTPForbidden, e.format_message())))


def _alias_response(req, ctx, alias, rest, application):
    from nova.policies import servers as server_policies

    if ctx is None or not _UUID_RE.match(alias):
        return None
    db = deferred.database()
    try:
        reservation = db_api.reservation_get(db, alias)
        lease = db_api.lease_get(db, reservation['lease_id'])
    except exception.NotFound:
        return None
    if (not types.is_one_server(reservation) or
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
        deferred.api_version(req)
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
        return deferred.json_response(
            req, 200, reserved_view(req, ctx, alias, lease, stored, state))
    if item and req.method == 'DELETE':
        ctx.can(server_policies.SERVERS % 'delete', target)
        # A start that failed after creating the server but before linking
        # it (retried later, or given up) left it: it goes first.
        for orphan in deferred_start.found_servers(ctx, lease['project_id'],
                                                   alias):
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
            return deferred.version_headers(req, req.get_response(_fault(
                webob.exc.HTTPConflict,
                'Server %s of lease %s cannot be deleted while the lease '
                'is %s; retry in a moment' % (alias, lease['id'],
                                              e.actual))))
        LOG.info('Reserved server %(alias)s deleted by its owner%(lease)s',
                 {'alias': alias, 'lease': ' with its lease %s' % gone
                  if gone else ''})
        return deferred.version_headers(req, webob.Response(status=204))
    return deferred.version_headers(req, req.get_response(_fault(
        webob.exc.HTTPConflict,
        'Server %s is reserved by lease %s and is created at its start '
        '(%s UTC); until then it can only be shown or deleted'
        % (alias, lease['id'],
           lease_params.format_short(lease['start_date'])))))


def is_alias_candidate(server_id):
    """Cheap test: could ``server_id`` be a reservation id?"""
    return bool(_UUID_RE.match(server_id)) and uuidutils.is_uuid_like(
        server_id)
