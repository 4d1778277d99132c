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
"""The lease API's route table and :func:`handle`, its one entry point.

:data:`ROUTES` declares every resource (placement's
``ROUTE_DECLARATIONS``): a path template below ``/os-reservation`` ->
{method: :class:`Route`}, a handler and the JSON schemas of its body
and query string (:mod:`.schemas`). :func:`handle` finds the route,
refuses what no handler should see (401, 404, 405, control characters
in the ids of the path, a body or query string its schemas refuse),
calls the handler and turns what it returns or raises into a response
in Blazar's shape. It first negotiates the microversion
(:mod:`.microversion`): a route of a later version than asked is not
there (404), and every answer names the version it was served at.
"""

import collections
import re

from nova import exception as nova_exception
from oslo_db import exception as db_exc
from oslo_log import log as logging

from nova_lease.api_ext.lease_api import errors
from nova_lease.api_ext.lease_api.handlers import capacity
from nova_lease.api_ext.lease_api.handlers import hosts
from nova_lease.api_ext.lease_api.handlers import leases
from nova_lease.api_ext.lease_api.handlers import offers
from nova_lease.api_ext.lease_api.handlers import root
from nova_lease.api_ext.lease_api.handlers import usage
from nova_lease.api_ext.lease_api import microversion
from nova_lease.api_ext.lease_api.schemas import capacity as \
    capacity_schemas
from nova_lease.api_ext.lease_api.schemas import hosts as host_schemas
from nova_lease.api_ext.lease_api.schemas import leases as lease_schemas
from nova_lease.api_ext.lease_api.schemas import offers as offer_schemas
from nova_lease.api_ext.lease_api.schemas import usage as usage_schemas
from nova_lease.api_ext.lease_api import validation
from nova_lease import exception
from nova_lease import params as lease_params

LOG = logging.getLogger(__name__)

#: A handler, called as ``handler(req, ctx, **url_params)``, plus
#: ``body=<the validated body>`` when it declares a ``body`` schema (it
#: reads no body otherwise); ``query``: the schema of its query string;
#: ``min_version``: the first microversion that has it (earlier, the
#: route does not exist: 404, or 405 when the path has other methods).
Route = collections.namedtuple(
    'Route', ['handler', 'body', 'query', 'min_version'],
    defaults=(None, None, microversion.MIN_VERSION))

#: Path template (``{name}``: one path segment, passed to the handler as
#: ``name``) -> {method: Route}. The first template that matches the
#: path decides (a 405 if it has no route for the method): literal paths
#: come before the templates they would also match. A template none of
#: whose routes exist at the version asked does not match (so at 1.0
#: ``/os-hosts/idle`` is a host named ``idle``, as in Blazar).
ROUTES = {
    '/capacity': {
        'GET': Route(capacity.show_capacity, query=capacity_schemas.QUERY,
                     min_version=microversion.CAPACITY),
    },
    '/leases': {
        'GET': Route(leases.list_leases, query=lease_schemas.LIST_QUERY),
        'POST': Route(leases.create_lease, body=lease_schemas.CREATE),
    },
    '/leases/{lease_id}': {
        'GET': Route(leases.show_lease),
        'PUT': Route(leases.update_lease, body=lease_schemas.UPDATE),
        'DELETE': Route(leases.delete_lease),
    },
    '/os-hosts': {
        'GET': Route(hosts.list_hosts),
        'POST': Route(hosts.create_host, body=host_schemas.CREATE),
    },
    '/os-hosts/allocations': {
        'GET': Route(hosts.list_host_allocations,
                     query=host_schemas.ALLOCATIONS_QUERY),
    },
    '/os-hosts/idle': {
        'GET': Route(hosts.list_idle_hosts, query=host_schemas.IDLE_QUERY,
                     min_version=microversion.IDLE_HOSTS),
    },
    '/os-hosts/properties': {
        'GET': Route(hosts.list_host_properties,
                     query=host_schemas.PROPERTIES_QUERY),
    },
    '/os-hosts/{host_id}/allocation': {
        'GET': Route(hosts.show_host_allocation,
                     query=host_schemas.ALLOCATIONS_QUERY),
    },
    '/os-hosts/{host_id}': {
        'GET': Route(hosts.show_host),
        'PUT': Route(hosts.update_host, body=host_schemas.UPDATE),
        'DELETE': Route(hosts.delete_host),
    },
    '/offers': {
        'GET': Route(offers.list_offers, query=offer_schemas.QUERY,
                     min_version=microversion.OFFERS),
    },
    '/usage': {
        'GET': Route(usage.get_usage, query=usage_schemas.QUERY,
                     min_version=microversion.USAGE),
    },
}

#: Paths of the version document.
_VERSION_PATHS = ('', '/v1', '/v1.0')


def _regex(template):
    pattern = re.sub(r'\\{(\w+)\\}', r'(?P<\1>[^/]+)', re.escape(template))
    return re.compile('^%s/?$' % pattern)


def _schema(schema):
    return None if schema is None else validation.Schema(schema)


# [(regex, {method: Route with validation.Schema objects and a
# comparable min_version})]
_COMPILED = [
    (_regex(template), {
        method: Route(route.handler, _schema(route.body),
                      _schema(route.query),
                      microversion.parse(route.min_version))
        for method, route in methods.items()})
    for template, methods in ROUTES.items()]


def _match(rest, version):
    """({method: Route} at ``version``, url params) of the first template
    that matches ``rest`` and has a route at ``version``; (None, None).
    """
    for regex, methods in _COMPILED:
        match = regex.match(rest)
        if match:
            live = {method: route for method, route in methods.items()
                    if route.min_version <= version}
            if live:
                return live, match.groupdict()
    return None, None


def handle(req, ctx, rest, base_href):
    """Serve one request below /os-reservation; return a webob Response.

    ``rest`` is the path after the mount point ('' or '/leases/...');
    ``base_href`` the URL of the mount point (for the version document).
    The microversion is negotiated first (406 or 400 without the
    version headers, as placement answers them); every other answer
    carries ``OpenStack-API-Version: reservation X.Y`` and ``Vary``.
    """
    try:
        version = microversion.negotiate(req)
    except exception.NovaLeaseException as e:
        return errors.error_response(e.code, str(e), type(e).__name__)
    return microversion.add_headers(
        _serve(req, ctx, rest or '', base_href, version), version)


def _serve(req, ctx, rest, base_href, version):
    try:
        if rest.rstrip('/') in _VERSION_PATHS:
            if req.method not in ('GET', 'HEAD'):
                raise errors.MethodNotAllowed(method=req.method,
                                              path='the version document')
            code, body = root.version_document(req, ctx, base_href)
            return errors.json_response(code, body)
        methods, kwargs = _match(rest, version)
        if methods is None:
            raise errors.ResourceNotFound(path=rest)
        route = methods.get(req.method)
        if route is None:
            allowed = ', '.join(sorted(methods))
            resp = errors.error_response(
                405, 'Method %s is not allowed on %s (allowed: %s)'
                % (req.method, rest, allowed), 'MethodNotAllowed')
            resp.headers['Allow'] = allowed
            return resp
        if ctx is None:
            return errors.error_response(401, 'authentication required',
                                         'Unauthorized')
        for key, value in kwargs.items():
            # Ids come from the URL, percent-decoded: no control
            # characters (PostgreSQL cannot even compare a NUL).
            lease_params.check_text(value, key)
        if route.query is not None:
            route.query.validate(dict(req.GET))
        if route.body is not None:
            kwargs['body'] = route.body.validate(validation.json_body(req))
        code, body = route.handler(req, ctx, **kwargs)
        return errors.json_response(code, body)
    except exception.NovaLeaseException as e:
        if e.code == 503:
            # (A message of our own, never database text.)
            resp = errors.error_response(503, str(e), 'ServiceUnavailable')
            retry = getattr(e, 'retry_after', None)
            if retry:
                resp.headers['Retry-After'] = str(retry)
            return resp
        if e.code >= 500:
            return errors.internal_error(req, rest)
        return errors.error_response(e.code, str(e), type(e).__name__,
                                     getattr(e, 'extra_body', None))
    except nova_exception.PolicyNotAuthorized as e:
        return errors.error_response(403, e.format_message(), 'Forbidden')
    except nova_exception.NovaException as e:
        code = getattr(e, 'code', 500) or 500
        if code >= 500:
            return errors.internal_error(req, rest)
        return errors.error_response(code, e.format_message(),
                                     type(e).__name__)
    except db_exc.DBDeadlock:
        LOG.warning('Lease API %s %s: database contention', req.method,
                    rest)
        return errors.error_response(409, 'the database is busy with '
                                     'conflicting requests; retry',
                                     'Conflict')
    except Exception:
        return errors.internal_error(req, rest)
