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
"""The resource plugin interface, and how plugins are loaded.

A resource plugin acts on one kind of reserved resource (its
``resource_type``, e.g. ``virtual:instance``). The engine calls it for
every reservation of that type when a lease event fires:

============================  ===========================================
``reserve(lease, res)``       the lease was recorded (optional work)
``on_start(lease, res)``      ``start_lease``: make the resource usable
``before_end(lease, res)``    ``before_end_lease``: warn / prepare
``on_end(lease, res)``        ``end_lease``: reclaim the resource
``cancel(lease, res)``        the lease is deleted: release everything
============================  ===========================================

``lease`` and ``res`` are plain dicts (the database rows). Every method
must be idempotent: it may run again after a time-out, a crash of the
engine, or a retry (unshelving an ACTIVE server, deleting a deleted one is
a success). A method reports failure by raising; the engine retries with
back-off and finally puts the event and the lease in ERROR, with the
exception's message in the lease's status_reason, so make that message say
what failed and on which resource.

A method that succeeds may return a short text (a note) about what it
did not do or found wrong without failing, e.g. the servers it left alone
on a host that did not belong to the lease: the engine logs it, records it
as the lease's ``status_reason`` and the event's ``last_error`` (the event
is still DONE), and sends it with the lease notification. Return None
(what a method without a return statement does) when there is nothing to
say.

A method that has asked Nova for something that takes time (a server to
build or unshelve) returns a :class:`Wait` instead of waiting: it names
the server, the statuses to wait for, and what to do once the server is
there (``then(server)``, which may return a note, None or another Wait).
The engine then frees its worker, watches every waited server with one
batched status poll (``GET /servers/detail?changes-since=...``; a versioned
notification of the server makes it look at that server at once), and
calls ``then`` in a worker when the server is there: a burst of starts
issues all its Nova actions at once instead of one per worker. Outside
the engine, :func:`resolve` waits for a Wait in place.

A call that outlives ``[nova_lease_engine] plugin_call_timeout``, or whose
event's claim was taken over, is abandoned by the engine: its requests to
Nova through ``nova_lease.compute`` are then refused (``nova_lease.guard``
raises ``Cancelled``; let it propagate). A plugin that changes something
by other means should call ``nova_lease.guard.check(what)`` first.

Plugins are found with stevedore in the ``nova_lease.resource_plugins``
entry point namespace; ``[nova_lease_engine] resource_plugins`` lists the
names to load. A plugin class is built as ``cls(conf)``.
"""

import abc

from oslo_log import log as logging
from stevedore import named

from nova_lease import compute as compute_mod
from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import gate

LOG = logging.getLogger(__name__)

NAMESPACE = 'nova_lease.resource_plugins'


class PluginNotFound(exception.NotFound):
    msg_fmt = ('Resource plugin %(name)s is not installed (no entry point '
               'in the %(namespace)s namespace).')


class PluginError(exception.NovaLeaseException):
    """A plugin action failed; the message says what and where."""

    msg_fmt = '%(reason)s'


class ResourceGone(PluginError):
    """The reserved resource no longer exists (its user deleted it, e.g.
    while the engine started its lease): a start has nothing to give.
    The engine records the start as done with a note, then calls the
    plugin's :meth:`ResourcePlugin.resource_gone`.
    """

    def __init__(self, resource_id, **kwargs):
        super().__init__(**kwargs)
        self.resource_id = resource_id


class HuntTimedOut(PluginError):
    """A best-effort lease gave up hunting for hosts: the engine makes it
    TIMEDOUT (the plugin has released what it held).
    """


class Wait(object):
    """What a plugin method returns to have the engine wait for a server.

    :param server_id: the server to watch.
    :param wanted: statuses that end the wait (with no task state).
    :param then: called with the server (a dict) once it is in a wanted
        status; returns a note, None, or another Wait.
    :param fail_statuses: statuses (with no task state) that fail it
        (the plugin method then fails, with the server's fault).
    :param what: what is waited for, for messages.
    """

    def __init__(self, server_id, wanted, then, fail_statuses=('ERROR',),
                 what=None):
        self.server_id = server_id
        self.wanted = tuple(wanted)
        self.then = then
        self.fail_statuses = tuple(fail_statuses)
        self.what = what or 'server %s to be %s' % (
            server_id, '/'.join(self.wanted))

    def __repr__(self):
        return '<Wait for %s>' % self.what

    def outcome(self, server):
        """'done', 'failed' or None (not yet) for the server (a dict, or
        None when it is gone).
        """
        if server is None:
            return 'failed'
        task = server.get('OS-EXT-STS:task_state')
        status = server.get('status')
        if task:
            return None
        if status in self.wanted:
            return 'done'
        if status in self.fail_statuses or status in ('DELETED',
                                                      'SOFT_DELETED'):
            return 'failed'
        return None

    def failure(self, server):
        """The PluginError of a failed wait."""
        if server is None or server.get('status') in ('DELETED',
                                                      'SOFT_DELETED'):
            return PluginError(reason='server %s disappeared while waiting '
                                      'for it to be %s' % (
                                          self.server_id,
                                          '/'.join(self.wanted)))
        fault = (server.get('fault') or {}).get('message')
        return PluginError(reason='server %s is %s instead of %s%s' % (
            self.server_id, server.get('status'), '/'.join(self.wanted),
            ': %s' % fault if fault else ''))


def resolve(result, compute, timeout):
    """Wait in place for what a plugin method returned; return its note.

    For callers outside the engine: each :class:`Wait` is waited for with
    ``compute.wait_for_server`` and its ``then`` called, until a note or
    None comes back.
    """
    while isinstance(result, Wait):
        try:
            server = compute.wait_for_server(
                result.server_id, result.wanted, timeout,
                fail_statuses=result.fail_statuses)
        except compute_mod.ServerNotFound:
            raise result.failure(None) from None
        except compute_mod.ServerInErrorState as e:
            raise PluginError(reason=str(e)) from e
        result = result.then(server)
    return result


class ResourcePlugin(metaclass=abc.ABCMeta):
    """Base class of resource plugins."""

    #: The reservation resource_type this plugin handles.
    resource_type = None

    def __init__(self, conf):
        self.conf = conf

    def reserve(self, lease, reservation):
        """The lease has just been recorded. Nothing by default."""

    @abc.abstractmethod
    def on_start(self, lease, reservation):
        """Make the reserved resource available to the lease's project."""

    def before_end(self, lease, reservation):
        """The lease ends soon. Nothing by default (the engine notifies)."""

    @abc.abstractmethod
    def on_end(self, lease, reservation):
        """Take the resource back at the end of the lease."""

    def cancel(self, lease, reservation):
        """The lease is deleted: release the resource. Same as on_end."""
        return self.on_end(lease, reservation)

    def resource_gone(self, db, resource_id):
        """A start found ``resource_id`` gone (:class:`ResourceGone`) and
        was recorded: do what its deletion by its user does (the side
        database ``db``). Nothing by default.
        """

    def close(self):
        """Release what the plugin holds (sessions, threads)."""


class ComputePlugin(ResourcePlugin):
    """A plugin that acts on Nova through nova_lease.compute.

    ``compute`` is not the compute client itself but the engine's action
    gate around it (nova_lease.gate.Gate): reads go through; every change
    goes through :meth:`_gate` (bound to a lease and a reservation),
    which checks it against the side database and journals it. The
    client is built from [nova_lease_auth] on first use (tests and
    embedders may pass or assign their own: it is wrapped).
    """

    def __init__(self, conf, compute_client=None, db=None):
        super().__init__(conf)
        self._client = compute_client
        self._compute = None
        self._db = db

    @property
    def db(self):
        if self._db is None:
            self._db = db_api.get_database(self.conf)
        return self._db

    @property
    def compute(self):
        if self._compute is None:
            if isinstance(self._client, gate.Gate):
                self._compute = self._client
            else:
                if self._client is None:
                    self._client = compute_mod.ComputeClient.from_conf(
                        self.conf)
                self._compute = gate.Gate(
                    self._client, lambda: self.db,
                    freepool=self.conf.nova_lease.freepool_aggregate)
        return self._compute

    @compute.setter
    def compute(self, client):
        self._client = client
        self._compute = None

    def hook_client(self):
        """The compute client itself, for the compute hook only (which
        acts for a server's owner on its own boot, not for the engine).
        """
        self.compute
        return self._client

    def _gate_hosts(self, reservation):
        """The hosts that are the reservation's, for the gate (None: its
        allocations' hosts).
        """
        return None

    def _gate(self, lease, reservation):
        """The action gate bound to the lease and reservation."""
        hosts_of = None
        if type(self)._gate_hosts is not ComputePlugin._gate_hosts:
            hosts_of = self._gate_hosts
        return self.compute.lease(lease, reservation, hosts_of=hosts_of)


def load_plugins(conf, names=None, strict=False):
    """Load the enabled plugins; return {resource_type: plugin}.

    ``names`` defaults to ``[nova_lease_engine] resource_plugins``. A name
    without an entry point is logged and skipped unless ``strict``: the
    events of leases that need it then fail with a reason that names the
    option.

    :raises PluginNotFound: ``strict`` and a name has no entry point.
    """
    names = list(conf.nova_lease_engine.resource_plugins if names is None
                 else names)
    if not names:
        return {}
    missing = []

    def _missing(entrypoints):
        missing.extend(entrypoints)

    def _failed(manager, entrypoint, exc):
        raise PluginError(reason='resource plugin %s failed to load: %s'
                          % (entrypoint.name, exc)) from exc

    manager = named.NamedExtensionManager(
        NAMESPACE, names, invoke_on_load=True, invoke_args=(conf,),
        name_order=True, on_missing_entrypoints_callback=_missing,
        on_load_failure_callback=_failed)
    if missing:
        if strict:
            raise PluginNotFound(name=', '.join(sorted(missing)),
                                 namespace=NAMESPACE)
        LOG.error('Resource plugins %(names)s listed in [nova_lease_engine] '
                  'resource_plugins are not installed; leases that use '
                  'them will fail', {'names': ', '.join(sorted(missing))})
    plugins = {}
    for ext in manager.extensions:
        rtype = ext.obj.resource_type or ext.name
        plugins[rtype] = ext.obj
        LOG.info('Loaded resource plugin %(name)s for %(type)s',
                 {'name': ext.name, 'type': rtype})
    return plugins
