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
"""The creation, at its lease's start, of a server reserved in advance.

At the start of a future instance lease (see
:mod:`nova_lease.api_ext.deferred`), the engine calls the lease API action
``POST /os-reservation/leases/<lease>/reservations/<reservation>/server``
(:func:`create_server`, admin/service only): the server is created as its
owner through Nova's own router (``POST /servers`` with the stored body,
metadata ``lease_id``, ``lease_status``, ``lease_reservation_id`` and the
internal hint ``nova_lease_reservation``, which pins it to the promised
host) and linked to the reservation. It is idempotent: a server already
linked, or created but not linked (found by its metadata,
:func:`found_servers`), is not created again; one that ended in ERROR is
replaced.
"""

import copy

from nova import exception as nova_exception
from oslo_log import log as logging
from oslo_serialization import jsonutils
from oslo_utils import timeutils

from nova_lease.api_ext import boot_hints
from nova_lease.api_ext import deferred
from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import params as lease_params
from nova_lease.plugins.instance import leases
from nova_lease import status

LOG = logging.getLogger(__name__)

_L = status.LeaseStatus
_R = status.ReservationStatus


class ServerRefused(exception.NovaLeaseException):
    """Nova refused to create the server; its code and message."""

    msg_fmt = 'Nova refused to create the server: %(reason)s'

    def __init__(self, code, reason):
        self.code = code
        super().__init__(reason=reason)


class NotCreatable(exception.Conflict):
    msg_fmt = ('the server of reservation %(reservation_id)s cannot be '
               'created now: %(reason)s')


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


def found_servers(owner, project_id, reservation_id):
    """Servers (not deleted) created for the reservation, oldest first."""
    instances = deferred.helper('compute_api').get_all(
        owner, search_opts={
            'metadata': {leases.META_RESERVATION_ID: reservation_id},
            'project_id': project_id, 'deleted': False},
        sort_keys=['created_at'], sort_dirs=['asc'])
    return list(instances)


def _instance(owner, server_id):
    try:
        return deferred.helper('compute_api').get(owner, server_id)
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
    db = deferred.database()
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
    for instance in found_servers(owner, lease['project_id'], reservation_id):
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
    for key in boot_hints.HINT_KEYS:
        if isinstance(body.get(key), dict):
            hints = body[key]
            break
    if hints is None:
        hints = body[boot_hints.HINT_KEYS[0]] = {}
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
