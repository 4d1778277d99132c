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
"""``POST /servers`` with lease hints: the instance reservation boot.

The hints and what they ask for (a lease, the default lease or none, and
the metadata of a host reservation's boot) are read in
:mod:`nova_lease.api_ext.boot_hints`.

For a leased boot, the filter, in the request's thread:

1. validates the hints (400 in Nova's fault format naming the field),
   checks the ``nova_lease:leases:create`` policy (403), looks the flavor
   up in Nova's API database (400 naming ``flavorRef`` if unknown);
2. records a PENDING lease (admission control for a future start, 409 if
   it does not fit) with one reservation per server the request may create
   (``max_count``), see :mod:`nova_lease.plugins.instance.leases`;
3. adds ``lease_id`` and ``lease_status=pending`` to the request's server
   ``metadata``, so that Nova stores them with the server(s) at create
   (no extra call; user-given values of these two keys are replaced), and
   the internal scheduler hint ``nova_lease_id=<lease id>``, by which
   LeaseFilter knows the first boot of a leased server (a boot that sends
   ``nova_lease_id`` or ``nova_lease_reservation`` itself is a 400);
4. passes the request on. A Nova error (any status but 202) removes the
   lease and returns Nova's answer unchanged;
5. finds the created server ids: the 202's ``server.id`` for a single
   server; for multi-create (``max_count`` > 1, with or without
   ``return_reservation_id``) Nova's 202 names one server at most, so
   they are listed inside nova-api, with the request's context, by the
   ``lease_id`` metadata just injected (``compute.api.API.get_all``
   filter ``metadata``, which also covers servers that are still build
   requests), oldest first;
6. links them to the lease (and releases the start hold). If that fails,
   the servers are deleted through Nova's API in-process with the same
   context, the lease is removed, and the answer is a 500 that says so:
   nothing is orphaned. Nova's 202 is returned unchanged otherwise; the
   filter never waits for the build.

A boot with the flavor of a Blazar instance reservation is counted
against the reservation's slots instead (:mod:`.slot_boots`).

For a lease whose start is in the future, step 4 differs: Nova's own
``ServersController.create`` handles the request, but its servers are
created shelved-offloaded, unscheduled, in the promised host's cell
(metadata ``lease_status=reserved``, tag ``reserved``), so that nothing
needs capacity now; the engine unshelves them at the start (see
:mod:`nova_lease.api_ext.shelved`).
"""

import threading
import time

from oslo_log import log as logging
from oslo_serialization import jsonutils
from oslo_utils import timeutils
import webob.exc

from nova_lease.api_ext import boot_hints
from nova_lease.api_ext.lease_api import errors as lease_api_errors
from nova_lease.api_ext import shelved as shelved_servers
from nova_lease.api_ext import slot_boots
from nova_lease.capacity import admission
from nova_lease import conf as lease_conf
from nova_lease.db import api as db_api
from nova_lease import enforcement
from nova_lease import exception
from nova_lease import notifications
from nova_lease import params as lease_params
from nova_lease.plugins.instance import leases
from nova_lease.plugins.instance import rtype as instance_rtype
from nova_lease.policies import lease as lease_policies
from nova_lease import policy

LOG = logging.getLogger(__name__)

#: Seconds a flavor's sizes are reused without asking Nova's database.
FLAVOR_CACHE_SECONDS = 60


class FlavorNotFound(exception.Invalid):
    msg_fmt = ("Invalid flavorRef provided: flavor %(flavor_id)s could not "
               "be found.")


def _book(create, *args, **kwargs):
    """The lease ``create`` books (the booking pipeline), or the fault
    (Nova's format) of its refusal: 403 over a usage limit, 409 when it
    does not fit, 400 for bad input.
    """
    try:
        return create(*args, **kwargs)
    except enforcement.LimitExceeded as e:
        return _fault(webob.exc.HTTPForbidden, str(e))
    except admission.NoCapacity as e:
        return _fault(webob.exc.HTTPConflict, str(e))
    except exception.Invalid as e:
        return _fault(webob.exc.HTTPBadRequest, str(e))


def _fault(exc_class, message):
    from nova.api.openstack import wsgi as os_wsgi
    return os_wsgi.Fault(exc_class(explanation=message))


class ServerCreate(object):
    """Handles ``POST /servers``; one instance per filter, thread-safe."""

    def __init__(self, application, conf=None):
        self.application = application
        self._conf = conf
        self._lock = threading.Lock()
        self._compute_api = None
        self._notifier = None
        self._notify_pool = None
        # {flavor id: (expiry, sizes)}; dict operations are atomic.
        self._flavors = {}
        self._slot_boots = slot_boots.SlotBoots(lambda: self.conf)

    # -- lazily built, process-wide helpers --------------------------------

    @property
    def conf(self):
        if self._conf is None:
            import nova.conf
            conf = nova.conf.CONF
            lease_conf.register_opts(conf)
            self._conf = conf
        return self._conf

    @property
    def db(self):
        return db_api.get_database(self.conf)

    @property
    def compute_api(self):
        if self._compute_api is None:
            with self._lock:
                if self._compute_api is None:
                    from nova.compute import api as nova_compute_api
                    self._compute_api = nova_compute_api.API()
        return self._compute_api

    def _notify(self, event_type, lease):
        """Send a lease notification from a background thread."""
        try:
            if self._notifier is None:
                with self._lock:
                    if self._notifier is None:
                        import concurrent.futures

                        from nova import rpc
                        # Nova's own notification transport (one
                        # connection per nova-api process), when set up.
                        transport = getattr(rpc, 'NOTIFICATION_TRANSPORT',
                                            None)
                        self._notifier = notifications.LeaseNotifier(
                            self.conf, publisher_id='nova-api',
                            transport=transport)
                        self._notify_pool = (
                            concurrent.futures.ThreadPoolExecutor(
                                1, thread_name_prefix='lease-notify'))
            if self._notifier.enabled:
                self._notify_pool.submit(self._notifier.notify, event_type,
                                         lease)
        except Exception:
            LOG.exception('Could not send %s', event_type)

    # -- the request ------------------------------------------------------

    def __call__(self, req, ctx):
        try:
            body = jsonutils.loads(req.body)
        except (ValueError, TypeError, UnicodeDecodeError):
            return req.get_response(self.application)  # Nova answers 400
        server = body.get('server') if isinstance(body, dict) else None
        if not isinstance(server, dict):
            return req.get_response(self.application)
        hints = {}
        for key in boot_hints.HINT_KEYS:
            if key in body:
                hints = body[key]
                break
        if not isinstance(hints, dict):
            return req.get_response(self.application)
        for key in lease_params.INTERNAL_HINTS:
            if key in hints:
                return _fault(webob.exc.HTTPBadRequest,
                              "'%s' is an internal scheduler hint of "
                              "nova_lease: it cannot be given in a boot"
                              % key)
        if boot_hints.add_reservation_metadata(server, hints):
            req.body = jsonutils.dump_as_bytes(body)
        if ctx is None:
            if (boot_hints.RESERVED in hints or
                    boot_hints.LEASE_PARAMS in hints):
                LOG.error('nova_lease: no nova.context: the filter must '
                          'come after keystonecontext in api-paste.ini')
                return _fault(webob.exc.HTTPInternalServerError,
                              'nova_lease is misconfigured: no request '
                              'context')
            return req.get_response(self.application)
        resp = self._slot_boot(req, ctx, body, server, hints)
        if resp is not None:
            return resp
        now = timeutils.utcnow()
        try:
            request = boot_hints.lease_request(
                self.conf, hints, ctx.project_id, server.get('name'), now)
        except exception.Invalid as e:
            return _fault(webob.exc.HTTPBadRequest, str(e))
        except boot_hints.BadOption as e:
            LOG.error('%s', e)
            return _fault(webob.exc.HTTPInternalServerError, str(e))
        if request is None:
            return req.get_response(self.application)
        count = boot_hints.server_count(server)
        if count is None:
            return req.get_response(self.application)   # Nova answers 400
        if not request.default:
            try:
                policy.authorize(ctx, lease_policies.CREATE,
                                 {'project_id': ctx.project_id,
                                  'user_id': ctx.user_id})
            except policy.PolicyNotAuthorized as e:
                return _fault(webob.exc.HTTPForbidden, e.format_message())
        try:
            flavor_id, flavor = self._flavor(ctx, server.get('flavorRef'))
        except exception.Invalid as e:
            return _fault(webob.exc.HTTPBadRequest, str(e))
        return self._boot(req, ctx, body, server, request, flavor_id,
                          flavor, count, now,
                          shelved=not request.params.start_now)

    def _slot_boot(self, req, ctx, body, server, hints):
        """The answer to a boot with an instance reservation's flavor
        (counted against its slots, never leased otherwise: see
        :mod:`.slot_boots`), or None for any other boot.
        """
        rid = self._slot_boots.reservation_of(ctx, server.get('flavorRef'))
        if rid is None:
            return None
        refused, changed = self._slot_boots.check(ctx, rid, server, hints)
        if refused is not None:
            return refused
        if changed:
            req.body = jsonutils.dump_as_bytes(body)
        return req.get_response(self.application)

    def _flavor(self, ctx, flavor_ref):
        """(flavor id, sizes) of the request's flavor, from Nova's API DB.

        Sizes are cached for :data:`FLAVOR_CACHE_SECONDS`: a Nova flavor's
        vcpus, RAM and disk never change (a flavor can only be deleted and
        created again); Nova itself still checks the flavor (existence,
        access) when it handles the request.
        """
        from nova.api.openstack import common
        from nova import exception as nova_exception
        from nova import objects
        if not isinstance(flavor_ref, (str, int)) or isinstance(
                flavor_ref, bool) or str(flavor_ref) == '':
            raise FlavorNotFound(flavor_id=repr(flavor_ref))
        flavor_id = common.get_id_from_href(flavor_ref)
        now = time.monotonic()
        cached = self._flavors.get(flavor_id)
        if cached is not None and cached[0] > now:
            return flavor_id, dict(cached[1])
        try:
            flavor = objects.Flavor.get_by_flavor_id(ctx, flavor_id)
        except nova_exception.FlavorNotFound:
            raise FlavorNotFound(flavor_id=flavor_id) from None
        sizes = leases.flavor_sizes(flavor)
        if len(self._flavors) > 1000:
            self._flavors.clear()
        self._flavors[flavor_id] = (now + FLAVOR_CACHE_SECONDS, sizes)
        return flavor_id, dict(sizes)

    def _boot(self, req, ctx, body, server, request, flavor_id, flavor,
              count, now, shelved=False):
        lease = _book(instance_rtype.create_instance_lease, self.db,
                      self.conf, request.params, ctx.project_id, ctx.user_id,
                      flavor, count, flavor_id=flavor_id,
                      default=request.default, shelved=shelved, now=now)
        if not isinstance(lease, dict):     # refused: its fault
            return lease
        lease_id = lease['id']
        metadata = server.get('metadata')
        if not isinstance(metadata, dict):
            metadata = {} if metadata is None else metadata
        if isinstance(metadata, dict):
            metadata = dict(metadata)
            metadata[leases.META_LEASE_ID] = lease_id
            metadata[leases.META_LEASE_STATUS] = (
                leases.META_RESERVED if shelved else leases.META_PENDING)
            server['metadata'] = metadata
        # else: Nova refuses the malformed metadata and the lease goes.
        # The scheduler knows a first boot of a leased server by this hint
        # (Nova keeps the hints; the scheduler never reads lease_params).
        boot_hints.set_hint(body, lease_params.LEASE_ID_HINT, lease_id)
        req.body = jsonutils.dump_as_bytes(body)
        try:
            if shelved:
                resp = shelved_servers.create(req)
            else:
                resp = req.get_response(self.application)
        except Exception:
            self._undo(lease_id)
            raise
        if resp.status_int != 202:
            LOG.info('Nova refused the boot of lease %(lease)s (%(status)s)'
                     ': removing the lease',
                     {'lease': lease_id, 'status': resp.status})
            self._undo(lease_id)
            return resp
        server_ids = []
        try:
            server_ids = self._created_servers(ctx, resp, lease_id, count)
            lease = leases.link_instances(self.db, lease, server_ids)
        except Exception as e:
            LOG.exception('Could not link the servers of lease %s',
                          lease_id)
            return self._rollback(req, ctx, resp, lease_id, server_ids, e)
        LOG.info('Lease %(lease)s (%(name)s) of project %(project)s, '
                 '%(start)s to %(end)s: server(s) %(servers)s linked',
                 {'lease': lease_id, 'name': lease['name'],
                  'project': lease['project_id'],
                  'start': lease['start_date'], 'end': lease['end_date'],
                  'servers': ', '.join(server_ids)})
        self._notify(notifications.CREATE, lease)
        return resp

    def _undo(self, lease_id):
        try:
            leases.destroy_lease(self.db, lease_id)
        except Exception:
            LOG.exception('Could not remove lease %s', lease_id)

    def _created_servers(self, ctx, resp, lease_id, count):
        """The ids of the servers Nova just created, oldest first."""
        first = None
        try:
            data = jsonutils.loads(resp.body)
            first = (data.get('server') or {}).get('id')
        except (ValueError, AttributeError):
            pass
        if count == 1 and first:
            return [first]
        instances = self.compute_api.get_all(
            ctx, search_opts={'metadata': {leases.META_LEASE_ID: lease_id},
                              'project_id': ctx.project_id,
                              'deleted': False})
        # Multi-create numbers its servers: launch_index 0, 1, ...
        ids = [inst.uuid for inst in sorted(
            instances, key=lambda i: (
                i.launch_index if i.obj_attr_is_set('launch_index') and
                i.launch_index is not None else 0, i.uuid))]
        if first:
            # The one Nova's 202 names comes first, as in the response.
            ids = [first] + [i for i in ids if i != first]
        if not ids:
            raise leases.LinkError(lease_id=lease_id,
                                   reason='no server found')
        return ids

    def _find_for_cleanup(self, ctx, resp, lease_id, known):
        ids = list(known)
        try:
            data = jsonutils.loads(resp.body)
            first = (data.get('server') or {}).get('id')
            if first and first not in ids:
                ids.append(first)
        except (ValueError, AttributeError):
            pass
        try:
            for inst in self.compute_api.get_all(
                    ctx, search_opts={
                        'metadata': {leases.META_LEASE_ID: lease_id},
                        'project_id': ctx.project_id, 'deleted': False}):
                if inst.uuid not in ids:
                    ids.append(inst.uuid)
        except Exception:
            LOG.exception('Could not list the servers of lease %s',
                          lease_id)
        return ids

    def _delete_server(self, req, server_id):
        """DELETE the server through Nova's API with the request's context.
        """
        from nova.api.openstack import wsgi as os_wsgi
        base = req.path_info.rstrip('/')
        path = base + '/' + server_id
        sub = os_wsgi.Request.blank(path, method='DELETE')
        sub.script_name = req.script_name
        for key in ('nova.context', 'HTTP_X_OPENSTACK_REQUEST_ID'):
            if key in req.environ:
                sub.environ[key] = req.environ[key]
        resp = sub.get_response(self.application)
        if resp.status_int not in (204, 404):
            raise exception.NovaLeaseException(
                'DELETE %s answered %s' % (path, resp.status))

    def _rollback(self, req, ctx, resp, lease_id, server_ids, error):
        ids = self._find_for_cleanup(ctx, resp, lease_id, server_ids)
        left = []
        for server_id in ids:
            try:
                self._delete_server(req, server_id)
            except Exception:
                LOG.exception('Could not delete server %s', server_id)
                left.append(server_id)
        self._undo(lease_id)
        # (The error itself, which may quote the database, is logged by
        # the caller; the user gets the request id to find it.)
        message = lease_api_errors.internal_error_message(
            req, 'recording the lease of the new server(s)') + '; '
        if left:
            message += ('these servers could not be deleted: %s'
                        % ', '.join(left))
        else:
            message += 'the server(s) were deleted: %s' % (
                ', '.join(ids) or 'none')
        return _fault(webob.exc.HTTPInternalServerError, message)
