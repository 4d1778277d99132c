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
"""The one module that talks to Nova's compute API (openstacksdk).

Everything else in nova_lease calls :class:`ComputeClient`, which speaks
plain dicts (Nova's own JSON shapes) and raises only the exceptions
defined here.

* Transport: an openstacksdk ``Connection`` over the service user's
  keystoneauth session; every request goes through its compute proxy
  (``conn.compute``), which finds the endpoint in the catalog.
  openstacksdk's exceptions (and keystoneauth's connection errors) become
  this module's in one place, :func:`_translate`.
* Microversions: per call. Each request names the compute microversion
  it needs (:data:`MICROVERSION` by default, :data:`HINTS_MICROVERSION`
  for a server's scheduler hints), all within Nova 34's range (2.1 to
  2.104); nothing depends on a client library's own maximum.
* Authentication: a keystoneauth session built from the
  ``[nova_lease_auth]`` options (auth plugin, session and adapter options
  of a service user).
* Engine jobs: every request first checks the job's guard
  (nova_lease.guard, installed by the engine for the worker thread): a job
  that timed out or lost its claim sends nothing more to Nova.
* Time-outs: every HTTP request has one (``[nova_lease_auth] timeout``, or
  :data:`DEFAULT_TIMEOUT` seconds when unset); waits for a server to reach
  a status take an explicit deadline.
"""

import functools
import time

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from openstack import connection as os_connection
from openstack import exceptions as os_exc
from oslo_log import log as logging

from nova_lease.conf import auth as auth_conf
from nova_lease import exception
from nova_lease import guard

LOG = logging.getLogger(__name__)

#: The compute microversion of every call that needs nothing newer: the
#: shapes nova_lease reads (flavors with ``extra_specs``, services by
#: uuid, servers with ``OS-EXT-*`` attributes) are all there.
MICROVERSION = '2.96'
#: The compute API microversion that shows a server's scheduler hints.
HINTS_MICROVERSION = '2.100'
#: The newest compute microversion of Nova 34; no call asks for more.
MAX_MICROVERSION = '2.104'
DEFAULT_TIMEOUT = 60.0
AUTH_GROUP = auth_conf.GROUP_NAME


class ComputeError(exception.NovaLeaseException):
    """The compute API failed; ``status_code`` is its HTTP code or None."""

    msg_fmt = 'Compute API error: %(reason)s'

    def __init__(self, message=None, status_code=None, **kwargs):
        self.status_code = status_code
        super().__init__(message, **kwargs)


class ComputeUnavailable(ComputeError):
    """Nova could not be reached or answered 5xx: worth retrying."""

    msg_fmt = 'Compute API unavailable: %(reason)s'


class ComputeTimeout(ComputeUnavailable):
    msg_fmt = 'Compute API timed out: %(reason)s'


class ComputeNotFound(ComputeError, exception.NotFound):
    msg_fmt = 'Not found in the compute API: %(reason)s'


class ServerNotFound(ComputeNotFound):
    msg_fmt = 'Server %(server_id)s not found'


class ComputeConflict(ComputeError, exception.Conflict):
    msg_fmt = 'Compute API conflict: %(reason)s'


class ComputeForbidden(ComputeError, exception.Forbidden):
    msg_fmt = 'Compute API refused: %(reason)s'


class ServerStatusTimeout(ComputeTimeout):
    msg_fmt = ('Server %(server_id)s did not reach %(wanted)s within '
               '%(timeout)s s (status %(status)s, task_state %(task)s)')


class ServerInErrorState(ComputeError):
    msg_fmt = ('Server %(server_id)s went to %(status)s while waiting for '
               '%(wanted)s%(fault)s')


def _describe(exc):
    message = (getattr(exc, 'details', None) or getattr(exc, 'message', None)
               or str(exc) or type(exc).__name__)
    return '%s (%s)' % (message, type(exc).__name__)


def _translated(what, exc):
    """The ComputeError for an openstacksdk or keystoneauth exception."""
    reason = '%s: %s' % (what, _describe(exc))
    if isinstance(exc, os_exc.HttpException) and exc.status_code:
        code = exc.status_code
        if code == 404:
            return ComputeNotFound(reason=reason, status_code=code)
        if code == 409:
            return ComputeConflict(reason=reason, status_code=code)
        if code in (401, 403):
            return ComputeForbidden(reason=reason, status_code=code)
        cls = ComputeUnavailable if code >= 500 else ComputeError
        return cls(reason='%s: HTTP %s %s' % (what, code, _describe(exc)),
                   status_code=code)
    if isinstance(exc, (os_exc.ResourceTimeout, ks_exc.ConnectTimeout,
                        ks_exc.RequestTimeout)):
        return ComputeTimeout(reason=reason)
    if isinstance(exc, ks_exc.ConnectionError):
        return ComputeUnavailable(reason=reason)
    return ComputeError(reason=reason)


def _translate(action, reads=False):
    """Decorator: openstacksdk/keystoneauth exceptions -> ours.

    It also checks the engine job's guard (nova_lease.guard) before the
    request: an abandoned job sends nothing, and a request that changes
    something (``reads`` false, the default) is sent only while the job
    still holds its claim.
    """

    def decorator(func):
        @functools.wraps(func)
        def wrapper(self, *args, **kwargs):
            what = '%s %s' % (action, ' '.join(str(a) for a in args))
            guard.check(what, side_effect=not reads)
            try:
                return func(self, *args, **kwargs)
            except ComputeError:
                raise
            except (os_exc.SDKException, ks_exc.ClientException) as e:
                raise _translated(what, e) from e
        return wrapper
    return decorator


def load_session(conf, group=AUTH_GROUP):
    """Return a keystoneauth Session from the ``[group]`` options."""
    auth_conf.register_opts(conf)
    auth = ks_loading.load_auth_from_conf_options(conf, group)
    timeout = conf[group].timeout or DEFAULT_TIMEOUT
    return ks_loading.load_session_from_conf_options(conf, group, auth=auth,
                                                     timeout=timeout)


def connect(session, interface=None, region_name=None, **service_options):
    """An openstacksdk Connection over a keystoneauth ``session``.

    ``service_options`` are openstacksdk's per-service settings
    (``compute_endpoint_override``, ``placement_service_name``, ...); the
    ones that are None are left out.
    """
    options = {k: v for k, v in service_options.items() if v is not None}
    return os_connection.Connection(
        session=session, region_name=region_name,
        interface=interface or 'public', app_name='nova_lease',
        **options)


def _not_found(exc):
    return isinstance(exc, os_exc.HttpException) and exc.status_code == 404


class ComputeClient(object):
    """Nova's compute API through openstacksdk, as plain dicts.

    Build it with :meth:`from_conf` (service user from
    ``[nova_lease_auth]``) or from an existing keystoneauth ``session``.
    Thread-safe: one instance may serve every engine worker.
    """

    #: Seconds between two looks at a server being waited for.
    poll_interval = 1.0

    def __init__(self, session, interface=None, region_name=None,
                 endpoint_override=None, service_type='compute',
                 service_name=None, timeout=None):
        if timeout is not None and getattr(session, 'timeout', None) is None:
            session.timeout = timeout
        self._conn = connect(
            session, interface=interface, region_name=region_name,
            compute_endpoint_override=endpoint_override,
            compute_service_name=service_name,
            compute_service_type=(service_type if service_type != 'compute'
                                  else None))

    @property
    def _compute(self):
        """The compute proxy: a keystoneauth adapter of the compute
        endpoint that sends each call's microversion header.

        openstacksdk builds it on first use (a catalog look-up and
        version discovery, which may fail like any request: hence only
        inside a call, where :func:`_translate` sees the error).
        """
        return self._conn.compute

    @classmethod
    def from_conf(cls, conf, group=AUTH_GROUP):
        auth_conf.register_opts(conf)
        opts = conf[group]
        interfaces = opts.valid_interfaces or []
        return cls(load_session(conf, group),
                   interface=interfaces[0] if interfaces else None,
                   region_name=opts.region_name,
                   endpoint_override=opts.endpoint_override,
                   service_type=opts.service_type or 'compute',
                   service_name=opts.service_name)

    @property
    def api_version(self):
        """The compute microversion of the calls that need nothing newer."""
        return MICROVERSION

    # -- transport ----------------------------------------------------------

    def _request(self, method, path, microversion=MICROVERSION, **kwargs):
        """One request through the compute proxy at ``microversion``;
        openstacksdk's exception for an HTTP error.
        """
        resp = self._compute.request(path, method, microversion=microversion,
                                     **kwargs)
        os_exc.raise_from_response(resp)
        return resp

    def _get(self, path, key, microversion=MICROVERSION, params=None):
        return self._request('GET', path, microversion,
                             params=params).json()[key]

    def _action(self, server_id, body, microversion=MICROVERSION):
        self._request('POST', '/servers/%s/action' % server_id,
                      microversion, json=body)

    def _list(self, path, key, params=None, microversion=MICROVERSION):
        """Every item of a paged collection (following Nova's ``next``
        links).
        """
        out = []
        while path:
            body = self._request('GET', path, microversion,
                                 params=params).json()
            out.extend(body.get(key) or ())
            path, params = None, None
            for link in body.get('%s_links' % key) or ():
                if link.get('rel') == 'next' and body.get(key):
                    path = link['href']
        return out

    # -- servers ----------------------------------------------------------

    @_translate('get server', reads=True)
    def get_server(self, server_id):
        """Return the server as a dict (``status``, ``OS-EXT-STS:...``)."""
        try:
            return self._get('/servers/%s' % server_id, 'server')
        except os_exc.HttpException as e:
            if _not_found(e):
                raise ServerNotFound(server_id=server_id,
                                     status_code=404) from e
            raise

    @_translate('list servers', reads=True)
    def list_servers(self, all_projects=True, **filters):
        search = dict(filters)
        if all_projects:
            search['all_tenants'] = 1
        return self._list('/servers/detail', 'servers', params=search)

    @_translate('list changed servers', reads=True)
    def list_servers_changed_since(self, since):
        """{id: server} of every project's servers changed since ``since``
        (a naive UTC datetime), deleted ones included: one request
        (``GET /servers/detail?changes-since=...``) for many waits.
        """
        search = {'all_tenants': 1,
                  'changes-since': since.strftime('%Y-%m-%dT%H:%M:%SZ')}
        return {s['id']: s for s in
                self._list('/servers/detail', 'servers', params=search)}

    @_translate('get server scheduler hints')
    def get_server_scheduler_hints(self, server_id):
        """The scheduler hints Nova keeps for the server (from its boot).

        ``{hint: [values]}`` as Nova shows them at compute API
        :data:`HINTS_MICROVERSION`; None when Nova is older than that.
        """
        try:
            server = self._get('/servers/%s' % server_id, 'server',
                               HINTS_MICROVERSION)
        except os_exc.HttpException as e:
            if _not_found(e):
                raise ServerNotFound(server_id=server_id,
                                     status_code=404) from e
            if e.status_code in (400, 406):
                return None     # microversion not supported
            raise
        return server.get('scheduler_hints') or {}

    @_translate('unshelve server')
    def unshelve_server(self, server_id):
        self._action(server_id, {'unshelve': None})

    @_translate('shelve server')
    def shelve_server(self, server_id):
        self._action(server_id, {'shelve': None})

    @_translate('shelve-offload server')
    def shelve_offload_server(self, server_id):
        self._action(server_id, {'shelveOffload': None})

    @_translate('delete server')
    def delete_server(self, server_id):
        """Delete the server; True if it existed, False if already gone."""
        return self._delete('/servers/%s' % server_id)

    def _delete(self, path):
        """DELETE ``path``; False if it was gone already."""
        try:
            self._request('DELETE', path)
        except os_exc.HttpException as e:
            if _not_found(e):
                return False
            raise
        return True

    @_translate('reset the state of server')
    def reset_server_state(self, server_id, state='error'):
        """Nova's os-resetState (admin): ``vm_state`` to ``state``, no
        task state.
        """
        self._action(server_id, {'os-resetState': {'state': state}})

    @_translate('live-migrate server')
    def live_migrate_server(self, server_id):
        """Live-migrate the server; Nova's scheduler picks the host."""
        self._action(server_id, {'os-migrateLive': {
            'host': None, 'block_migration': 'auto'}})

    @_translate('migrate server')
    def migrate_server(self, server_id):
        """Cold-migrate the server; Nova's scheduler picks the host."""
        self._action(server_id, {'migrate': None})

    @_translate('confirm the migration of server')
    def confirm_migration(self, server_id):
        """Confirm a cold migration (the server is VERIFY_RESIZE)."""
        self._action(server_id, {'confirmResize': None})

    @_translate('set server metadata')
    def set_server_metadata(self, server_id, metadata):
        self._request('POST', '/servers/%s/metadata' % server_id,
                      json={'metadata': metadata})

    @_translate('add server tag')
    def add_server_tag(self, server_id, tag):
        self._request('PUT', '/servers/%s/tags/%s' % (server_id, tag))

    @_translate('delete server tag')
    def delete_server_tag(self, server_id, tag):
        """Remove a tag; True if it was there, False otherwise."""
        # Either the tag or the server may be missing; a missing server is
        # the caller's business (it has just looked it up).
        return self._delete('/servers/%s/tags/%s' % (server_id, tag))

    @_translate('list server tags', reads=True)
    def list_server_tags(self, server_id):
        return list(self._get('/servers/%s/tags' % server_id, 'tags'))

    def wait_for_server(self, server_id, wanted, timeout, gone_ok=False,
                        fail_statuses=('ERROR',)):
        """Poll until the server's status is in ``wanted``; return it.

        With ``gone_ok``, a server that disappears (404 or DELETED) ends
        the wait and ``None`` is returned.

        Not openstacksdk's ``wait_for_server``/``wait_for_delete``: they
        wait for one status and ignore the task state (a server shelving
        is still ACTIVE), a soft-deleted server and the engine job's
        guard between two looks; every look here is a guarded
        :meth:`get_server`.

        :raises ServerStatusTimeout: not there after ``timeout`` seconds.
        :raises ServerInErrorState: it went to one of ``fail_statuses``.
        :raises ServerNotFound: it disappeared and not ``gone_ok``.
        """
        wanted = tuple(wanted)
        deadline = time.monotonic() + timeout
        while True:
            try:
                server = self.get_server(server_id)
            except ServerNotFound:
                if gone_ok:
                    return None
                raise
            status = server.get('status')
            task = server.get('OS-EXT-STS:task_state')
            if gone_ok and status in ('DELETED', 'SOFT_DELETED'):
                return None
            if status in wanted and not task:
                return server
            if status in fail_statuses and not task:
                fault = server.get('fault') or {}
                raise ServerInErrorState(
                    server_id=server_id, status=status,
                    wanted='/'.join(wanted),
                    fault=(': %s' % fault.get('message')
                           if fault.get('message') else ''))
            if time.monotonic() >= deadline:
                raise ServerStatusTimeout(server_id=server_id,
                                          wanted='/'.join(wanted),
                                          timeout=timeout, status=status,
                                          task=task)
            time.sleep(min(self.poll_interval,
                           max(0.0, deadline - time.monotonic())))

    # -- services -----------------------------------------------------------

    @_translate('list services', reads=True)
    def list_services(self, binary=None):
        """Nova's compute services (``binary``, ``host``, ``state``,
        ``status``, ...); nova-api services are not listed by Nova.
        """
        params = {'binary': binary} if binary else None
        return self._get('/os-services', 'services', params=params)

    # -- hypervisors ------------------------------------------------------

    @_translate('list hypervisors', reads=True)
    def list_hypervisors(self):
        """Every compute node: ``hypervisor_hostname`` and its compute
        service's ``host`` (as ``{'hypervisor_hostname', 'host'}``).
        """
        out = []
        for raw in self._list('/os-hypervisors/detail', 'hypervisors'):
            service = raw.get('service') or {}
            out.append({'hypervisor_hostname': raw.get('hypervisor_hostname'),
                        'host': service.get('host') or raw.get(
                            'hypervisor_hostname')})
        return out

    # -- services (idle hosts) --------------------------------------------

    @_translate('get compute service', reads=True)
    def get_compute_service(self, host):
        """The nova-compute service of ``host`` (a dict), or None."""
        found = self._get('/os-services', 'services', params={
            'host': host, 'binary': 'nova-compute'})
        return found[0] if found else None

    @_translate('disable service')
    def disable_service(self, service_id, reason):
        """Disable a service (its uuid) with ``reason`` (1 to 255
        characters): the scheduler places nothing more on its host.
        """
        return self._service_update(service_id, {
            'status': 'disabled', 'disabled_reason': reason})

    @_translate('enable service')
    def enable_service(self, service_id):
        """Enable a service (its uuid); Nova clears its disabled reason."""
        return self._service_update(service_id, {'status': 'enabled'})

    def _service_update(self, service_id, body):
        return self._request('PUT', '/os-services/%s' % service_id,
                             json=body).json()['service']

    # -- aggregates (physical:host) ---------------------------------------

    @_translate('list aggregates', reads=True)
    def list_aggregates(self):
        return self._get('/os-aggregates', 'aggregates')

    @_translate('get aggregate', reads=True)
    def get_aggregate(self, aggregate_id):
        return self._get('/os-aggregates/%s' % aggregate_id, 'aggregate')

    @_translate('create aggregate')
    def create_aggregate(self, name, availability_zone=None):
        return self._request('POST', '/os-aggregates', json={'aggregate': {
            'name': name, 'availability_zone': availability_zone}}
        ).json()['aggregate']

    def _aggregate_action(self, aggregate_id, body):
        return self._request('POST', '/os-aggregates/%s/action' %
                             aggregate_id, json=body).json()['aggregate']

    @_translate('set aggregate metadata')
    def set_aggregate_metadata(self, aggregate_id, metadata):
        return self._aggregate_action(aggregate_id, {
            'set_metadata': {'metadata': metadata}})

    @_translate('add host to aggregate')
    def add_aggregate_host(self, aggregate_id, host):
        return self._aggregate_action(aggregate_id,
                                      {'add_host': {'host': host}})

    @_translate('remove host from aggregate')
    def remove_aggregate_host(self, aggregate_id, host):
        return self._aggregate_action(aggregate_id,
                                      {'remove_host': {'host': host}})

    # -- flavors and server groups (instance reservations) ------------------

    @_translate('grant flavor access')
    def add_flavor_access(self, flavor_id, project_id):
        """Give ``project_id`` the private flavor (already: fine)."""
        try:
            self._request('POST', '/flavors/%s/action' % flavor_id, json={
                'addTenantAccess': {'tenant': project_id}})
        except os_exc.ConflictException:
            pass

    @_translate('revoke flavor access')
    def remove_flavor_access(self, flavor_id, project_id):
        """Take the flavor from ``project_id`` (already gone: fine)."""
        try:
            self._request('POST', '/flavors/%s/action' % flavor_id, json={
                'removeTenantAccess': {'tenant': project_id}})
        except os_exc.HttpException as e:
            if not _not_found(e):
                raise

    @_translate('list flavors', reads=True)
    def list_flavors(self):
        """Every flavor, public and private, with its ``extra_specs``
        (as ``{'id', 'name', 'is_public', 'extra_specs'}``).
        """
        return [{'id': f['id'], 'name': f['name'],
                 'is_public': f.get('os-flavor-access:is_public', True),
                 'extra_specs': dict(f.get('extra_specs') or {})}
                for f in self._list('/flavors/detail', 'flavors',
                                    params={'is_public': 'None'})]

    @_translate('list the access of flavor', reads=True)
    def list_flavor_access(self, flavor_id):
        """The projects a private flavor is given to."""
        return sorted(a['tenant_id'] for a in self._get(
            '/flavors/%s/os-flavor-access' % flavor_id, 'flavor_access'))

    @_translate('delete flavor')
    def delete_flavor(self, flavor_id):
        """Delete the flavor; False if it was gone already."""
        return self._delete('/flavors/%s' % flavor_id)

    @_translate('delete server group')
    def delete_server_group(self, group_id):
        """Delete the server group; False if it was gone already."""
        return self._delete('/os-server-groups/%s' % group_id)

    @_translate('delete aggregate')
    def delete_aggregate(self, aggregate_id):
        return self._delete('/os-aggregates/%s' % aggregate_id)
