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
"""The one module that talks to Nova's compute API (python-novaclient).

Everything else in nova_lease calls :class:`ComputeClient`, which speaks
plain dicts and raises only the exceptions defined here, so that
openstacksdk could replace novaclient without touching the callers.

* Microversion: pinned to :data:`MICROVERSION` (2.96, python-novaclient's
  maximum).
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

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from novaclient import client as nova_client
from novaclient import exceptions as nova_exc
from oslo_log import log as logging

from nova_lease.conf import auth as auth_conf
from nova_lease import exception
from nova_lease import guard

LOG = logging.getLogger(__name__)

MICROVERSION = '2.96'
#: The compute API microversion that shows a server's scheduler hints
#: (python-novaclient stops at 2.96: read through keystoneauth).
HINTS_MICROVERSION = '2.100'
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
    message = getattr(exc, 'message', None) or str(exc) or type(exc).__name__
    return '%s (%s)' % (message, type(exc).__name__)


def _translate(action, reads=False):
    """Decorator: novaclient/keystoneauth exceptions -> ours.

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
            except nova_exc.NotFound as e:
                raise ComputeNotFound(reason='%s: %s' % (what, _describe(e)),
                                      status_code=404) from e
            except nova_exc.Conflict as e:
                raise ComputeConflict(reason='%s: %s' % (what, _describe(e)),
                                      status_code=409) from e
            except (nova_exc.Forbidden, nova_exc.Unauthorized) as e:
                raise ComputeForbidden(
                    reason='%s: %s' % (what, _describe(e)),
                    status_code=getattr(e, 'code', None)) from e
            except nova_exc.ClientException as e:
                code = getattr(e, 'code', None)
                cls = ComputeUnavailable if (
                    isinstance(code, int) and code >= 500) else ComputeError
                raise cls(reason='%s: HTTP %s %s' % (what, code,
                                                     _describe(e)),
                          status_code=code) from e
            except (ks_exc.ConnectTimeout, ks_exc.RequestTimeout) as e:
                raise ComputeTimeout(reason='%s: %s' % (what, _describe(e))
                                     ) from e
            except ks_exc.ConnectionError as e:
                raise ComputeUnavailable(
                    reason='%s: %s' % (what, _describe(e))) from e
            except ks_exc.ClientException as e:
                raise ComputeError(reason='%s: %s' % (what, _describe(e))
                                   ) from e
        return wrapper
    return decorator


def load_session(conf, group=AUTH_GROUP):
    """Return a keystoneauth Session from the ``[group]`` options."""
    auth_conf.register_opts(conf)
    auth = ks_loading.load_auth_from_conf_options(conf, group)
    timeout = conf[group].timeout or DEFAULT_TIMEOUT
    return ks_loading.load_session_from_conf_options(conf, group, auth=auth,
                                                     timeout=timeout)


class ComputeClient(object):
    """Nova's compute API at microversion 2.96, as plain dicts.

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
        kwargs = {'session': session, 'service_type': service_type,
                  'region_name': region_name,
                  'endpoint_override': endpoint_override,
                  'service_name': service_name}
        if interface:
            kwargs['endpoint_type'] = interface
        self._nova = nova_client.Client(MICROVERSION, **kwargs)
        # Plain keystoneauth calls to nova-api: the compute API beyond
        # novaclient's microversion, and the lease API actions nova-api
        # serves next to it.
        self._adapter = ks_adapter.Adapter(
            session, service_type=service_type, service_name=service_name,
            interface=interface or 'public', region_name=region_name,
            endpoint_override=endpoint_override)

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
        return self._nova.api_version.get_string()

    # -- servers ----------------------------------------------------------

    @_translate('get server', reads=True)
    def get_server(self, server_id):
        """Return the server as a dict (``status``, ``OS-EXT-STS:...``)."""
        try:
            return self._nova.servers.get(server_id).to_dict()
        except nova_exc.NotFound as e:
            raise ServerNotFound(server_id=server_id, status_code=404) from e

    @_translate('list servers', reads=True)
    def list_servers(self, all_projects=True, **filters):
        search = dict(filters)
        if all_projects:
            search['all_tenants'] = 1
        return [s.to_dict() for s in
                self._nova.servers.list(search_opts=search)]

    @_translate('list changed servers', reads=True)
    def list_servers_changed_since(self, since):
        """{id: server} of every project's servers changed since ``since``
        (a naive UTC datetime), deleted ones included: one request
        (``GET /servers/detail?changes-since=...``) for many waits.
        """
        search = {'all_tenants': 1,
                  'changes-since': since.strftime('%Y-%m-%dT%H:%M:%SZ')}
        return {s.id: s.to_dict() for s in
                self._nova.servers.list(search_opts=search)}

    @_translate('get server scheduler hints')
    def get_server_scheduler_hints(self, server_id):
        """The scheduler hints Nova keeps for the server (from its boot).

        ``{hint: [values]}`` as Nova shows them at compute API
        :data:`HINTS_MICROVERSION`; None when Nova is older than that.
        """
        resp = self._adapter.get('/servers/%s' % server_id,
                                 microversion=HINTS_MICROVERSION,
                                 raise_exc=False)
        if resp.status_code == 404:
            raise ServerNotFound(server_id=server_id, status_code=404)
        if resp.status_code in (400, 406):
            return None     # microversion not supported
        if resp.status_code >= 400:
            cls = ComputeUnavailable if resp.status_code >= 500 else (
                ComputeError)
            raise cls(reason='get server %s at %s: HTTP %s' % (
                server_id, HINTS_MICROVERSION, resp.status_code),
                status_code=resp.status_code)
        return resp.json()['server'].get('scheduler_hints') or {}

    @_translate('unshelve server')
    def unshelve_server(self, server_id):
        self._nova.servers.unshelve(server_id)

    @_translate('shelve server')
    def shelve_server(self, server_id):
        self._nova.servers.shelve(server_id)

    @_translate('shelve-offload server')
    def shelve_offload_server(self, server_id):
        self._nova.servers.shelve_offload(server_id)

    @_translate('delete server')
    def delete_server(self, server_id):
        """Delete the server; True if it existed, False if already gone."""
        try:
            self._nova.servers.delete(server_id)
        except nova_exc.NotFound:
            return False
        return True

    @_translate('reset the state of server')
    def reset_server_state(self, server_id, state='error'):
        """Nova's os-resetState (admin): ``vm_state`` to ``state``, no
        task state.
        """
        self._nova.servers.reset_state(server_id, state)

    @_translate('live-migrate server')
    def live_migrate_server(self, server_id):
        """Live-migrate the server; Nova's scheduler picks the host."""
        self._nova.servers.live_migrate(server_id, None, 'auto')

    @_translate('migrate server')
    def migrate_server(self, server_id):
        """Cold-migrate the server; Nova's scheduler picks the host."""
        self._nova.servers.migrate(server_id)

    @_translate('confirm the migration of server')
    def confirm_migration(self, server_id):
        """Confirm a cold migration (the server is VERIFY_RESIZE)."""
        self._nova.servers.confirm_resize(server_id)

    @_translate('set server metadata')
    def set_server_metadata(self, server_id, metadata):
        self._nova.servers.set_meta(server_id, metadata)

    @_translate('add server tag')
    def add_server_tag(self, server_id, tag):
        self._nova.servers.add_tag(server_id, tag)

    @_translate('delete server tag')
    def delete_server_tag(self, server_id, tag):
        """Remove a tag; True if it was there, False otherwise."""
        try:
            self._nova.servers.delete_tag(server_id, tag)
        except nova_exc.NotFound:
            # Either the tag or the server is missing; a missing server is
            # the caller's business (it has just looked it up).
            return False
        return True

    @_translate('list server tags', reads=True)
    def list_server_tags(self, server_id):
        return list(self._nova.servers.tag_list(server_id))

    def wait_for_server(self, server_id, wanted, timeout, gone_ok=False,
                        fail_statuses=('ERROR',)):
        """Poll until the server's status is in ``wanted``; return it.

        With ``gone_ok``, a server that disappears (404 or DELETED) ends
        the wait and ``None`` is returned.

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
        return [s.to_dict() for s in
                self._nova.services.list(binary=binary)]

    # -- hypervisors ------------------------------------------------------

    @_translate('list hypervisors', reads=True)
    def list_hypervisors(self):
        """Every compute node: ``hypervisor_hostname`` and its compute
        service's ``host`` (as ``{'hypervisor_hostname', 'host'}``).
        """
        out = []
        for hyp in self._nova.hypervisors.list(detailed=True):
            raw = hyp.to_dict()
            service = raw.get('service') or {}
            out.append({'hypervisor_hostname': raw.get('hypervisor_hostname'),
                        'host': service.get('host') or raw.get(
                            'hypervisor_hostname')})
        return out

    # -- services (idle hosts) --------------------------------------------

    @_translate('get compute service', reads=True)
    def get_compute_service(self, host):
        """The nova-compute service of ``host`` (a dict), or None."""
        found = [s.to_dict() for s in self._nova.services.list(
            host=host, binary='nova-compute')]
        return found[0] if found else None

    @_translate('disable service')
    def disable_service(self, service_id, reason):
        """Disable a service (its uuid) with ``reason`` (1 to 255
        characters): the scheduler places nothing more on its host.
        """
        return self._nova.services.disable_log_reason(service_id,
                                                      reason).to_dict()

    @_translate('enable service')
    def enable_service(self, service_id):
        """Enable a service (its uuid); Nova clears its disabled reason."""
        return self._nova.services.enable(service_id).to_dict()

    # -- aggregates (physical:host) ---------------------------------------

    @_translate('list aggregates', reads=True)
    def list_aggregates(self):
        return [a.to_dict() for a in self._nova.aggregates.list()]

    @_translate('get aggregate', reads=True)
    def get_aggregate(self, aggregate_id):
        return self._nova.aggregates.get(aggregate_id).to_dict()

    @_translate('create aggregate')
    def create_aggregate(self, name, availability_zone=None):
        return self._nova.aggregates.create(name,
                                            availability_zone).to_dict()

    @_translate('set aggregate metadata')
    def set_aggregate_metadata(self, aggregate_id, metadata):
        return self._nova.aggregates.set_metadata(aggregate_id,
                                                  metadata).to_dict()

    @_translate('add host to aggregate')
    def add_aggregate_host(self, aggregate_id, host):
        return self._nova.aggregates.add_host(aggregate_id, host).to_dict()

    @_translate('remove host from aggregate')
    def remove_aggregate_host(self, aggregate_id, host):
        return self._nova.aggregates.remove_host(aggregate_id,
                                                 host).to_dict()

    # -- flavors and server groups (instance reservations) ------------------

    @_translate('grant flavor access')
    def add_flavor_access(self, flavor_id, project_id):
        """Give ``project_id`` the private flavor (already: fine)."""
        try:
            self._nova.flavor_access.add_tenant_access(flavor_id,
                                                       project_id)
        except nova_exc.Conflict:
            pass

    @_translate('revoke flavor access')
    def remove_flavor_access(self, flavor_id, project_id):
        """Take the flavor from ``project_id`` (already gone: fine)."""
        try:
            self._nova.flavor_access.remove_tenant_access(flavor_id,
                                                          project_id)
        except nova_exc.NotFound:
            pass

    @_translate('list flavors', reads=True)
    def list_flavors(self):
        """Every flavor, public and private, with its ``extra_specs``
        (as ``{'id', 'name', 'is_public', 'extra_specs'}``).
        """
        return [{'id': f.id, 'name': f.name,
                 'is_public': f.is_public,
                 'extra_specs': dict(getattr(f, 'extra_specs', None) or {})}
                for f in self._nova.flavors.list(is_public=None)]

    @_translate('list the access of flavor', reads=True)
    def list_flavor_access(self, flavor_id):
        """The projects a private flavor is given to."""
        return sorted(a.tenant_id for a in
                      self._nova.flavor_access.list(flavor=flavor_id))

    @_translate('delete flavor')
    def delete_flavor(self, flavor_id):
        """Delete the flavor; False if it was gone already."""
        try:
            self._nova.flavors.delete(flavor_id)
        except nova_exc.NotFound:
            return False
        return True

    @_translate('delete server group')
    def delete_server_group(self, group_id):
        """Delete the server group; False if it was gone already."""
        try:
            self._nova.server_groups.delete(group_id)
        except nova_exc.NotFound:
            return False
        return True

    @_translate('delete aggregate')
    def delete_aggregate(self, aggregate_id):
        try:
            self._nova.aggregates.delete(aggregate_id)
        except nova_exc.NotFound:
            return False
        return True
