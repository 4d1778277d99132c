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
"""The nova-api paste filters: boot-hint handling and the lease API.

Operators add ``nova_lease`` to both v2.1 pipelines of Nova's api-paste.ini,
right after ``keystonecontext`` (so ``environ['nova.context']`` is set), and
``nova_lease_versions`` right before ``authtoken`` (the lease API's version
document is read without a token, as Nova's own are)::

  [filter:nova_lease]
  paste.filter_factory = nova_lease.api_ext.middleware:LeaseMiddleware.factory

  [filter:nova_lease_versions]
  paste.filter_factory =
      nova_lease.api_ext.middleware:VersionsMiddleware.factory

Under Nova's urlmap the filter sees ``PATH_INFO`` without the ``/v2.1`` (or
``/v2``) prefix, optionally with a project id in front: ``/servers``,
``/<project_id>/servers``, ``/os-reservation/leases``.
"""

import re

from nova.api.openstack import wsgi as os_wsgi
from oslo_log import log as logging
import webob
import webob.dec
import webob.exc

from nova_lease.api_ext.lease_api import router as lease_router
from nova_lease.api_ext import servers
from nova_lease import registration

LOG = logging.getLogger(__name__)

#: Where the lease API is mounted, below /v2.1 (and /v2).
API_PREFIX = '/os-reservation'

# Nova's router accepts a project id in the URL only if it is hex with
# dashes (nova.api.openstack.ProjectMapper); match the same.
_PROJECT = r'(?:/[0-9a-f\-]+)?'
_SERVERS_RE = re.compile(r'^%s/servers/?$' % _PROJECT)
# /servers/<id>[/...] with an id that may be a reservation's (a uuid).
# (DOTALL: a percent-encoded newline in an id is the lease API's to refuse.)
_LEASE_API_RE = re.compile(r'^(?P<base>%s%s)(?P<rest>/.*)?$'
                           % (_PROJECT, re.escape(API_PREFIX)), re.DOTALL)

# The version document's paths: the mount point, /v1 and /v1.0.
_VERSIONS_RE = re.compile(r'^(?P<base>%s%s)(?:/v1(?:\.0)?)?/?$'
                          % (_PROJECT, re.escape(API_PREFIX)))


def fault(exc):
    """Return a webob.exc.HTTPException as a response in Nova's format.

    The body is ``{"<faultName>": {"code": <status>, "message": "..."}}``,
    e.g. ``{"itemNotFound": {"code": 404, "message": "..."}}``.
    """
    return os_wsgi.Fault(exc)


class _PasteFilter(object):
    """A paste filter that paste.deploy builds with ``<class>.factory``."""

    @classmethod
    def factory(cls, global_config, **local_config):
        """paste.deploy filter factory (``paste.filter_factory``)."""
        def _factory(app):
            return cls(app, **local_config)
        return _factory


class LeaseMiddleware(_PasteFilter):
    """Paste filter for Nova's /v2.1 and /v2 pipelines.

    Routes (cheaply: a string test and a precompiled regex on PATH_INFO,
    no body parsing, for every request):

    * ``POST [/<project_id>]/servers``: :meth:`_create_server`;
    * ``[/<project_id>]/os-reservation[/...]``: :meth:`_lease_api`;
    * anything else goes to the next application untouched.

    The instance holds no per-request state and is shared by every request
    thread of nova-api.
    """

    def __init__(self, application, **local_conf):
        self.application = application
        # Options from the [filter:nova_lease] section of api-paste.ini;
        # everything else is read from nova.conf ([nova_lease],
        # [nova_lease_api]).
        self.local_conf = dict(local_conf)
        self._server_create = servers.ServerCreate(application)
        # nova-api does not start without the shared side database (an
        # exception here stops paste.deploy); it registers in it.
        registration.register_nova_process(self._server_create.conf,
                                           registration.API)

    def __call__(self, environ, start_response):
        path = environ.get('PATH_INFO', '')
        if API_PREFIX in path:
            match = _LEASE_API_RE.match(path)
            if match:
                return self._lease_api_app(environ, start_response)
        elif (environ.get('REQUEST_METHOD') == 'POST' and
                path.endswith(('/servers', '/servers/')) and
                _SERVERS_RE.match(path)):
            return self._create_server_app(environ, start_response)
        return self.application(environ, start_response)

    # Only the routed requests get a webob Request (Nova's subclass, so
    # faults can be rendered); the others never pay for one.
    @webob.dec.wsgify(RequestClass=os_wsgi.Request)
    def _create_server_app(self, req):
        return self._create_server(req, req.environ.get('nova.context'))

    @webob.dec.wsgify(RequestClass=os_wsgi.Request)
    def _lease_api_app(self, req):
        return self._lease_api(req, req.environ.get('nova.context'))

    def _create_server(self, req, ctx):
        """Handle ``POST /servers`` (boot): see :mod:`.servers`.

        A boot without lease hints (and no default lease) goes to Nova
        untouched; a leased one is validated, recorded, passed on with the
        lease metadata, and linked to the new server(s).
        """
        return self._server_create(req, ctx)

    def _lease_api(self, req, ctx):
        """Serve the lease API under ``/os-reservation``: see
        :mod:`nova_lease.api_ext.lease_api`.
        """
        match = _LEASE_API_RE.match(req.path_info)
        href = req.host_url + req.script_name + match.group('base')
        # The actions that call Nova's own API (sub-requests) need it.
        req.environ['nova_lease.application'] = self.application
        return lease_router.handle(req, ctx, match.group('rest'), href)


class VersionsMiddleware(_PasteFilter):
    """Paste filter before ``authtoken``: the lease API's version document.

    ``GET`` (or ``HEAD``) of ``[/<project_id>]/os-reservation``, ``/v1``
    or ``/v1.0`` is answered here, without a token, as Nova answers its
    own version documents: keystoneauth's version discovery reads it
    unauthenticated first, so a client (python-blazarclient, Horizon)
    does not pay a 401 and a second request for it. Everything else goes
    on to ``authtoken`` untouched (a string test on ``PATH_INFO``).
    """

    def __init__(self, application, **local_conf):
        self.application = application

    def __call__(self, environ, start_response):
        path = environ.get('PATH_INFO', '')
        if (API_PREFIX in path and
                environ.get('REQUEST_METHOD') in ('GET', 'HEAD')):
            match = _VERSIONS_RE.match(path)
            if match:
                return self._versions_app(environ, start_response)
        return self.application(environ, start_response)

    @webob.dec.wsgify(RequestClass=os_wsgi.Request)
    def _versions_app(self, req):
        match = _VERSIONS_RE.match(req.path_info)
        href = req.host_url + req.script_name + match.group('base')
        return lease_router.handle(req, None, req.path_info[
            len(match.group('base')):], href)
