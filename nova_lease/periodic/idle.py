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
"""The engine's idle-host action (``[nova_lease_engine] idle_host_action``).

With ``disable``, every ``idle_host_interval`` seconds the engine looks
at the registered hosts of the free pool:

* a host with nothing promised on it now, whose next promise (an
  allocation of any lease, cleaning time included) is far enough away
  that it would stay disabled at least ``idle_host_min_hours`` (until
  that promise minus ``idle_host_wake_minutes``; no promise: for ever),
  and that runs no server at all (asked to Nova, every project), has its
  nova-compute service disabled, with a reason that starts with
  :data:`REASON_PREFIX` (``host.idle.disable``);
* a host the engine disabled is enabled again when its next promise is
  within ``idle_host_wake_minutes``, when something is promised on it
  now, or when it is no longer a registered free-pool host
  (``host.idle.enable``). The host and flavor:instance plugins also
  enable the hosts they start a reservation on, whatever the time of
  the last pass (:func:`nova_lease.plugins.idle_hosts.wake_host`), and
  nova-api those of instance slots booked to start within
  ``idle_host_wake_minutes``.

A nova-compute service that runs several compute nodes (Ironic, vCenter)
is disabled only when every node of it (Nova's hypervisors) is a
registered one that is idle, and enabled when any of them needs it
(:func:`decide_service`): disabling it for one idle node would take the
others away from their leases, or from unleased work.

A service disabled by anyone else (its reason does not start with the
prefix, or it has none) is never touched, neither disabled nor enabled.
With ``none`` (the default) the engine disables nothing, and at its
start enables the hosts it disabled before (the action was turned off).

Several engines may run the pass at once: each looks at the service
again just before it acts and acts only if it is still as the pass saw
it, so a host is disabled (and notified) once, but for a race of a few
milliseconds between two engines. Before it disables a service, the pass
takes the locks of its hosts (nova_lease.db.locks, those every booking
of them takes) and decides again from the side database as it is then:
a lease booked, or booked and started, since the pass read keeps its
host enabled, and one booked after the disable finds it disabled and
wakes it (its start, or the next pass).

:func:`decide` is the rule, pure; :class:`IdleHosts` reads the side
database and Nova and acts.
"""

import datetime

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease.db import api as db_api
from nova_lease import notifications
from nova_lease.periodic import chores as engine_chores
from nova_lease.plugins import base as plugin_base
from nova_lease.plugins import idle_hosts
from nova_lease import wire

LOG = logging.getLogger(__name__)

#: What a nova-compute service disabled by the engine has as its reason.
REASON_PREFIX = wire.IDLE_HOST_REASON

NONE = 'none'
DISABLE = 'disable'
ACTIONS = (NONE, DISABLE)

COMPUTE_BINARY = 'nova-compute'


def _iso(dt):
    return None if dt is None else dt.strftime('%Y-%m-%dT%H:%M:%SZ')


def next_promise(bookings, now):
    """``(busy now, start of the next promise or None)`` of a host's
    bookings (``(start, end)`` pairs).
    """
    busy = any(s <= now < e for s, e in bookings)
    later = [s for s, e in bookings if s > now]
    return busy, (min(later) if later else None)


def group_bookings(allocations):
    """``{host: [(start, end), ...]}`` of allocation rows."""
    bookings = {}
    for a in allocations:
        bookings.setdefault(a['host'], []).append((a['start_date'],
                                                   a['end_date']))
    return bookings


def decide(now, bookings, service, eligible, min_hours, wake_minutes):
    """What the idle action does to one host.

    :param bookings: the host's allocations, ``(start, end)`` pairs.
    :param service: its nova-compute service (``status``,
        ``disabled_reason``).
    :param eligible: the host is registered, reservable and in the free
        pool.
    :returns: ``(action, idle_until, wake_at, why)``: action ``'disable'``
        (a candidate: the caller still checks that no server runs on
        it), ``'enable'`` or None.
    """
    busy, until = next_promise(bookings, now)
    wake = datetime.timedelta(minutes=wake_minutes)
    wake_at = None if until is None else until - wake
    if idle_hosts.ours(service):
        if not eligible:
            return ('enable', until, wake_at,
                    'no longer a registered host of the free pool')
        if busy:
            return 'enable', until, wake_at, 'promised now'
        if wake_at is not None and now >= wake_at:
            return ('enable', until, wake_at,
                    'promised from %s' % _iso(until))
        return None, until, wake_at, 'idle until %s' % _iso(until)
    if service.get('status') != 'enabled' or not eligible or busy:
        return None, until, wake_at, None
    if wake_at is not None and (
            wake_at - now < datetime.timedelta(hours=min_hours) or
            wake_at <= now):
        return None, until, wake_at, None
    why = ('idle until %s' % _iso(until)) if until else 'idle'
    return 'disable', until, wake_at, why


def decide_service(decisions, nodes=None):
    """What the idle action does to one nova-compute service, from what
    :func:`decide` says of each of its registered compute nodes (one,
    but with Ironic or vCenter, whose one service runs several).

    :param decisions: {hypervisor hostname: :func:`decide`'s tuple} of
        its registered nodes.
    :param nodes: the names of every compute node of the service (Nova's
        hypervisors), or None when unknown (its registered ones).
    :returns: :func:`decide`'s tuple for the service: ``'enable'`` when
        any node needs it; ``'disable'`` only when every node of the
        service is registered and idle (``idle until`` the earliest of
        their next promises); None otherwise.
    """
    if not decisions:
        return None, None, None, None
    ordered = sorted(decisions.items(), key=lambda kv: (
        kv[1][1] is None, kv[1][1] or datetime.datetime.min, kv[0]))
    for _name, decision in ordered:
        if decision[0] == 'enable':
            return decision
    first = ordered[0][1]
    unregistered = set(nodes or ()) - set(decisions)
    if unregistered or any(d[0] != 'disable' for d in decisions.values()):
        return None, first[1], first[2], None
    if len(decisions) > 1:
        why = ('idle until %s' % _iso(first[1])) if first[1] else 'idle'
        first = ('disable', first[1], first[2], '%s (nodes %s)' % (
            why, ', '.join(sorted(decisions))))
    return first


class IdleHosts(object):
    """The idle-host pass of one engine (see the module doc).

    :param engine: its ``conf``, ``opts``, ``db``, ``plugins`` (for a
        compute client) and ``notifier`` are used.
    """

    def __init__(self, engine):
        self._engine = engine
        self.opts = engine.opts
        self.shared = engine.shared
        self.db = engine.db
        self.stats = {'passes': 0, 'disabled': 0, 'enabled': 0}

    def _compute(self):
        for plugin in self._engine.plugins.values():
            if isinstance(plugin, plugin_base.ComputePlugin):
                return plugin.compute
        return None

    def add_chores(self, chores):
        """Add the ``idle-hosts`` chore to ``chores``
        (nova_lease.periodic.chores): a pass every ``idle_host_interval``
        seconds; with ``none``, one pass (it enables the hosts disabled
        before). Nothing without a compute plugin.
        """
        if self._compute() is None:
            if self.opts.idle_host_action != NONE:
                LOG.warning('[nova_lease_engine] idle_host_action = %s '
                            'needs a resource plugin that calls the compute '
                            'API (physical:host): idle hosts are left alone',
                            self.opts.idle_host_action)
            return
        if (self.opts.idle_host_action == DISABLE and
                self.opts.idle_host_interval >=
                60 * self.shared.idle_host_wake_minutes):
            LOG.warning('[nova_lease_engine] idle_host_interval '
                        '(%(interval)s s) is not shorter than [nova_lease] '
                        'idle_host_wake_minutes '
                        '(%(wake)s min): idle hosts may be enabled after '
                        'their wake-up time (at the latest when a host '
                        'lease starts on them)',
                        {'interval': self.opts.idle_host_interval,
                         'wake': self.shared.idle_host_wake_minutes})
        chores.add('idle-hosts', self._chore,
                   lambda: self.opts.idle_host_interval)

    def _chore(self):
        """One pass; with ``none``, the last one (once it succeeded)."""
        self.run_pass()
        if self.opts.idle_host_action == NONE:
            return engine_chores.DONE
        return None

    def run_pass(self, now=None):
        """One look at every registered host; returns ``{hostname:
        'disabled' | 'enabled'}`` of what this pass did.
        """
        client = self._compute()
        if client is None:
            return {}
        now = now or timeutils.utcnow()
        action = self.opts.idle_host_action
        self.stats['passes'] += 1
        if action == NONE:
            # Turned off: only undo what the engine did (one request).
            return self._enable_all(client)
        with self.db.reader() as session:
            hosts = db_api.host_list(session)
            allocations = db_api.allocation_list(session, start=now)
        bookings = group_bookings(allocations)
        services = {s.get('host'): s for s in client.list_services(
            binary=COMPUTE_BINARY)}
        pool = {a.get('name'): a for a in client.list_aggregates()}.get(
            self.shared.freepool_aggregate) or {}
        in_pool = set(pool.get('hosts') or ())
        # Every compute node of each service (one request): a service
        # runs several with Ironic or vCenter.
        nodes = {}
        for hyp in client.list_hypervisors():
            nodes.setdefault(hyp['host'], set()).add(
                hyp['hypervisor_hostname'])
        done = {}
        seen = set()
        per_service = {}
        for host in hosts:
            name = host['hypervisor_hostname']
            service_host = host.get('service_host') or name
            seen.add(service_host)
            service = services.get(service_host)
            if service is None:
                continue
            per_service.setdefault(service_host, {})[name] = (
                host, self._decide(now, bookings, name, host, service,
                                   service_host, in_pool))
        for service_host, decided in sorted(per_service.items()):
            what, until, wake_at, why = decide_service(
                {name: d for name, (_h, d) in decided.items()},
                nodes.get(service_host))
            host = decided[min(decided)][0]
            if what == 'disable':
                if self._disable(client, host, service_host, until,
                                 wake_at, why, now=now, names=sorted(decided),
                                 in_pool=in_pool,
                                 nodes=nodes.get(service_host)):
                    done.update((name, 'disabled') for name in decided)
            elif what == 'enable':
                if self._enable(client, host, service_host, until,
                                wake_at, why):
                    done.update((name, 'enabled') for name in decided)
        # Hosts the engine disabled that are not registered any more.
        for service_host, service in services.items():
            if service_host not in seen and idle_hosts.ours(service):
                host = {'hypervisor_hostname': service_host,
                        'service_host': service_host}
                if self._enable(client, host, service_host, None, None,
                                'no longer a registered host'):
                    done[service_host] = 'enabled'
        return done

    def _enable_all(self, client):
        done = {}
        for service in client.list_services(binary=COMPUTE_BINARY):
            if idle_hosts.ours(service):
                name = service.get('host')
                host = {'hypervisor_hostname': name, 'service_host': name}
                if self._enable(client, host, name, None, None,
                                'idle_host_action is none'):
                    done[name] = 'enabled'
        return done

    def _notify(self, event_type, host, reason, until, wake_at):
        notifier = self._engine.notifier
        send = getattr(notifier, 'notify_host', None)
        if send is not None:
            send(event_type, host, reason, idle_until=until,
                 wake_at=wake_at)

    def _disable(self, client, host, service_host, until, wake_at, why,
                 now=None, names=None, in_pool=None, nodes=None):
        servers = client.list_servers(all_projects=True, host=service_host)
        if servers:
            LOG.debug('Host %(host)s is idle but runs %(n)d server(s): '
                      'left enabled', {'host': service_host,
                                       'n': len(servers)})
            return False
        names = names or [host['hypervisor_hostname']]
        with self.db.writer() as session:
            # Decide again under the hosts' locks, the ones every booking
            # of them takes (nova_lease.db.locks): a lease booked (and
            # maybe started) since the pass read the calendar is seen, and
            # none can be booked on them until the service is disabled
            # (one booked after finds it disabled: its start wakes it).
            db_api.lock_hosts(session, names)
            # Another engine, or an operator, may have changed the
            # service since the list.
            service = client.get_compute_service(service_host)
            if service is None or service.get('status') != 'enabled':
                return False
            what, until, wake_at, why = self._decide_again(
                session, service, now or timeutils.utcnow(), names,
                service_host, in_pool, nodes)
            if what != 'disable':
                LOG.info('Host %(host)s is no longer idle (booked since '
                         'the pass looked): left enabled',
                         {'host': service_host})
                return False
            reason = '%s: %s' % (REASON_PREFIX, why)
            if wake_at is not None:
                reason += ', enabled again at %s' % _iso(wake_at)
            # Through the gate, its journal row in this transaction (an
            # independent one would wait for these locks on SQLite).
            client.idle(session=session).disable_service(
                service['id'], reason[:255], service=service, why=reason)
        self.stats['disabled'] += 1
        LOG.info('Disabled idle host %(host)s (%(reason)s)',
                 {'host': service_host, 'reason': reason})
        self._notify(notifications.HOST_IDLE_DISABLE, host, reason, until,
                     wake_at)
        return True

    def _decide_again(self, session, service, now, names, service_host,
                      in_pool, nodes):
        """:func:`decide_service` for the nodes ``names`` of one service,
        from the side database as ``session`` (holding their locks) sees
        it now.
        """
        registered = {h['hypervisor_hostname']: h
                      for h in db_api.host_list(session, hostnames=names)}
        bookings = group_bookings(
            db_api.allocation_list(session, hosts=names, start=now))
        decisions = {
            name: self._decide(now, bookings, name, registered.get(name),
                               service, service_host, in_pool)
            for name in names}
        return decide_service(decisions, nodes)

    def _decide(self, now, bookings, name, host, service, service_host,
                in_pool):
        """:func:`decide` for the node ``name`` of ``service_host`` with
        the pass's options; ``host`` is its registration (``None``: no
        longer registered, so not eligible), ``in_pool`` the free pool's
        members (``None``: not known, not checked).
        """
        eligible = (host is not None and host.get('reservable', True) and
                    (in_pool is None or service_host in in_pool))
        return decide(now, bookings.get(name, ()), service, eligible,
                      self.opts.idle_host_min_hours,
                      self.shared.idle_host_wake_minutes)

    def _enable(self, client, host, service_host, until, wake_at, why):
        if not idle_hosts.enable_ours(client.idle(), service_host):
            return False
        self.stats['enabled'] += 1
        LOG.info('Enabled host %(host)s that was idle: %(why)s',
                 {'host': service_host, 'why': why})
        self._notify(notifications.HOST_IDLE_ENABLE, host, why, until,
                     wake_at)
        return True
