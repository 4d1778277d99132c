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

Until the server exists, the requests under ``/servers/<alias>`` that
Nova answers 404 are answered from the stored request
(:mod:`nova_lease.api_ext.deferred_alias`: ``GET`` shows the reserved
server, ``DELETE`` removes the reservation). At the start, the engine has
the server created as its owner, through the lease API, and linked to
the reservation (:mod:`nova_lease.api_ext.deferred_start`).

This module holds the boot (steps 1 to 3) and the helpers the other two
share.
"""

import copy
import threading

import nova.conf
from oslo_serialization import jsonutils
import webob

from nova_lease.api_ext import boot_hints
from nova_lease.db import api as db_api

CONF = nova.conf.CONF

#: Version of the stored boot request's layout.
REQUEST_VERSION = 1
#: Keys of a create body that belong to the whole request, not a server.
_REQUEST_ONLY = ('min_count', 'max_count', 'return_reservation_id')
_LEASE_HINTS = ('reserved', 'lease_params')

_LOCK = threading.Lock()
_HELPERS = {}


def helper(name):
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


def database():
    """The side database, as nova-api's configuration names it."""
    from nova_lease import conf as lease_conf
    lease_conf.register_opts(CONF)
    return db_api.get_database(CONF)


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
    for key in boot_hints.HINT_KEYS:
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


def version_headers(req, resp):
    version = getattr(req, 'api_version_request', None)
    if version is None or version.is_null():
        return resp
    resp.headers['OpenStack-API-Version'] = 'compute ' + version.get_string()
    resp.headers['X-OpenStack-Nova-API-Version'] = version.get_string()
    resp.headers.add('Vary', 'OpenStack-API-Version')
    resp.headers.add('Vary', 'X-OpenStack-Nova-API-Version')
    return resp


def json_response(req, code, body, headers=()):
    resp = webob.Response(status=code)
    resp.body = jsonutils.dump_as_bytes(body)
    resp.content_type = 'application/json'
    resp.charset = 'UTF-8'
    for key, value in headers:
        resp.headers[key] = value
    return version_headers(req, resp)


def accepted(req, body, lease, password):
    """The 202 of the boot, in Nova's format, the first alias as its id.
    """
    server = body['server']
    if server.get('return_reservation_id'):
        return json_response(req, 202, {'reservation_id': lease['id']})
    alias = sorted(lease['reservations'],
                   key=lambda r: (r['properties'] or {}).get('index', 0)
                   )[0]['id']
    view = helper('views').create(req, body, {
        'uuid': alias,
        'auto_disk_config': server.get('OS-DCF:diskConfig') == 'AUTO'})
    if CONF.api.enable_instance_password:
        view['server']['adminPass'] = password
    location = [link['href'] for link in view['server']['links']
                if link['rel'] == 'self']
    return json_response(req, 202, view,
                         [('Location', location[0])] if location else ())
