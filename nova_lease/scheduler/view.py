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
"""One scheduling request seen against the lease calendar.

:class:`RequestView` answers, for a list of HostStates at once, which
hosts a request fits and how tightly (LeaseFilter and LeaseWeigher share
one view per request, see :func:`view_for`). While the scheduler has no
snapshot yet, a :class:`ColdView` answers from what the request reads for
itself, and a :class:`ClosedView` when the side database cannot be read
at all. What a request needs is :mod:`nova_lease.scheduler.request`;
what its HostStates tell, :mod:`nova_lease.scheduler.hosts`.
doc/source/reference/scheduling.rst explains the rules.
"""

import math
import threading
import time
import weakref

import nova.conf
from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease.calendar import fit
from nova_lease import conf as lease_conf
from nova_lease.db import api as db_api
from nova_lease.scheduler import hosts as lease_hosts
from nova_lease.scheduler import request as lease_request
from nova_lease.scheduler import snapshot
from nova_lease.scheduler import snapshot_cache
from nova_lease.scheduler import snapshot_reads
from nova_lease import wire

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
lease_conf.register_opts(CONF)

# Weigher scales (seconds): slack of an hour, next promise in a day.
_SLACK_SCALE = 3600.0
_PROMISE_SCALE = 86400.0


class RequestView(object):
    """A request against a snapshot and the HostStates of this request.

    ``request``: the request's :class:`Request` when already known (else
    it is resolved against ``snap``).
    """

    def __init__(self, spec_obj, snap, now, conf=CONF, request=None):
        self.snap = snap
        self.now = now
        self.conf = conf
        self.request = request if request is not None else \
            lease_request.resolve_with_lookups(spec_obj, snap, now, conf)
        self._reserved = lease_hosts.reserved_of(conf)
        # The filter's Loads, reused by the weigher of the same request
        # (the host states do not change in between).
        self._cached = None

    def _loads(self, host_states, usage=None):
        """Loads of host_states; the filter's are reused by the weigher.

        ``usage``: what placement says some of them use (see
        :func:`nova_lease.scheduler.hosts.host_loads`).
        """
        cached = self._cached
        if cached is not None:
            pos = cached[0]
            try:
                members = [pos[id(hs)] for hs in host_states]
            except KeyError:
                pass
            else:
                if len(members) == len(pos):
                    return cached[1]
                return cached[1].subset(members)
        loads = lease_hosts.host_loads(host_states, self.snap, self.now,
                                       self._reserved, usage)
        self._cached = ({id(hs): k for k, hs in enumerate(host_states)},
                        loads)
        return loads

    def _run(self, fn, loads, *args):
        """fn(calendar, loads, *args) per group of hosts that share a
        calendar (the request's own allocations left out where they are).
        """
        req = self.request
        cal = self.snap.calendar
        own = set()
        if req.exclude and cal is not None:
            own = {item.host for ref in req.exclude
                   for item in self.snap.allocations.get(ref, ())}
        mine = [k for k, host in enumerate(loads.hosts) if host in own]
        if not mine:
            return fn(cal, loads, *args)
        out = [None] * len(loads)
        rest = [k for k, host in enumerate(loads.hosts) if host not in own]
        groups = [(self.snap.calendar_without(
            req.exclude, {loads.hosts[k] for k in mine}), mine)]
        if rest:
            groups.append((cal, rest))
        for group_cal, members in groups:
            part = fn(group_cal, loads.subset(members), *args)
            for k, value in zip(members, part):
                out[k] = value
        return out

    def passes(self, host_states, usage=None):
        """[(bool, reason)] per HostState.

        ``usage``: ``{host key: (vcpus, memory_mb, disk_gb) or None}``,
        placement's usage of hosts whose record may miss a server that
        arrived (:mod:`nova_lease.scheduler.moves`); None: unknown, the
        host does not pass.
        """
        req = self.request
        result = [None] * len(host_states)
        todo = []
        registered = self.snap.registered
        freepool = self.conf.nova_lease.freepool_aggregate
        usage = usage or {}
        for k, hs in enumerate(host_states):
            key = lease_hosts.host_key(hs)
            if req.allowed is not None and not (
                    {key, hs.host} & req.allowed):
                result[k] = (False, '%s may only use %s' % (
                    req.why, ', '.join(sorted(req.allowed)) or 'no host'))
                continue
            why = lease_hosts.aggregate_rule(req, hs, freepool, registered)
            if why is None and key in usage and usage[key] is None:
                why = 'its usage cannot be read from placement'
            if why is not None:
                result[k] = (False, why)
            else:
                todo.append(k)
        if todo:
            loads = self._loads([host_states[k] for k in todo], usage)
            ok = self._run(fit.fits, loads, req.demand, req.start, req.end)
            for k, good in zip(todo, ok):
                result[k] = (good, None if good else
                             'the request (%s) does not fit until %s' % (
                                 req.why, req.end or 'forever'))
        return result

    def weights(self, host_states):
        """Raw weights in [-1, 1]: higher is better.

        See doc/source/reference/scheduling.rst.
        """
        req = self.request
        if req.kind == lease_request.UNLEASED or req.end is None:
            hosts = [lease_hosts.host_key(hs) for hs in host_states]
            seconds = fit.next_promise_seconds(self.snap.calendar, hosts,
                                               self.now)
            return [1.0 if math.isinf(s) else s / (s + _PROMISE_SCALE)
                    for s in seconds]
        slack = self._run(fit.slack_seconds, self._loads(host_states),
                          req.demand, req.start, req.end)
        return [0.0 if s == math.inf else
                (-1.0 if s < 0 else 1.0 / (1.0 + s / _SLACK_SCALE))
                for s in slack]


# -- one view per request, shared by the filter and the weigher ------------

_VIEWS = {}
_VIEWS_LOCK = threading.Lock()
_MAX_VIEWS = 256
#: Seconds a view is kept for the weigher: it runs right after the filter.
_VIEW_LIFE = 10.0


def _remember(spec_obj, view):
    with _VIEWS_LOCK:
        if len(_VIEWS) >= _MAX_VIEWS:
            for key in [k for k, (ref, _v, _t) in _VIEWS.items()
                        if ref() is None]:
                del _VIEWS[key]
            if len(_VIEWS) >= _MAX_VIEWS:
                _VIEWS.clear()
        _VIEWS[id(spec_obj)] = (weakref.ref(spec_obj), view,
                                time.monotonic())


def _forget_finished():
    """Drop the views of requests that are over (their RequestSpec is
    gone, or the view is older than _VIEW_LIFE), and with them the
    snapshots they hold.
    """
    oldest = time.monotonic() - _VIEW_LIFE
    with _VIEWS_LOCK:
        for key in [k for k, (ref, _v, made) in _VIEWS.items()
                    if ref() is None or made < oldest]:
            del _VIEWS[key]


snapshot_cache.CACHE.add_retire_hook(_forget_finished)


def _recall(spec_obj):
    with _VIEWS_LOCK:
        entry = _VIEWS.get(id(spec_obj))
    if entry is not None and entry[0]() is spec_obj:
        return entry[1]
    return None


def get_snapshot(now, conf=CONF, wait=None):
    """The scheduler's snapshot of the lease calendar, current at ``now``.

    None while there is none yet: its first full read runs in the
    background (see ``snapshot_cache.SnapshotCache``) unless ``wait``
    seconds are given to wait for it (tools and tests; the scheduler never
    waits). When the side database cannot be read, the last snapshot.
    """
    db = db_api.get_database(conf)
    return snapshot_cache.CACHE.get(
        db, now, conf.nova_lease.scheduler_snapshot_ttl, wait=wait)


#: Most allocations a request reads for itself while the scheduler has no
#: snapshot (cold start): past it, the request is refused until the
#: snapshot is there.
COLD_READ_LIMIT = 2000


# read for a request at cold start (see ColdView).
_COLD_OVERFLOW = {}

#: Seconds between two warnings of one kind (cold start, closed).
WARN_INTERVAL = 60.0
_warned = {}


def _warn(kind, msg, args):
    """LOG.warning at most once per WARN_INTERVAL for each ``kind``."""
    now = time.monotonic()
    last = _warned.get(kind)
    if last is None or now - last >= WARN_INTERVAL:
        _warned[kind] = now
        LOG.warning(msg, args)


def _warn_closed(error):
    _warn('closed', 'nova_lease: the side database cannot be read '
          '(%(error)s) and the scheduler has no snapshot of the lease '
          'calendar: requests that may be leased are refused, the others '
          'kept off the free pool and the host reservations\' aggregates',
          {'error': error})


class ClosedView(object):
    """A request when the lease calendar cannot be read at all (no
    snapshot and no side database): fail closed.

    The aggregate rules hold (they need no database); a request that may
    be leased (:func:`maybe_leased`) passes no host -- nothing can tell
    whether it would break a promise -- and unleased work may use the
    hosts outside the free pool and the host reservations' aggregates.
    Every weight is 0.
    """

    def __init__(self, spec_obj, now, conf=CONF, reason=None):
        self.now = now
        self.conf = conf
        self.reason = reason
        leased = lease_request.maybe_leased(spec_obj, conf)
        self.request = lease_request.Request(
            lease_request.LEASED if leased else lease_request.UNLEASED,
            lease_request.demand_of(spec_obj), now, None,
            set() if leased else None, (),
            'the lease calendar cannot be read')

    def passes(self, host_states, usage=None):
        """[(bool, reason)] per HostState.

        ``usage`` is unused: nothing is counted without the calendar.
        """
        req = self.request
        freepool = self.conf.nova_lease.freepool_aggregate
        out = []
        for hs in host_states:
            why = lease_hosts.aggregate_rule(req, hs, freepool)
            if why is None and req.allowed is not None:
                why = ('the lease calendar cannot be read: leased and '
                       'host reservation requests wait for it')
            out.append((why is None, why))
        return out

    def weights(self, host_states):
        return [0.0] * len(host_states)


class ColdView(object):
    """A request while the scheduler has no snapshot yet (its first full
    read runs in the background): answered from what the request reads
    for itself (doc/source/reference/scheduling.rst, "Cold start").

    At creation, the reservations the request names (its server's, its
    hints') are read with their allocations, and the request is resolved
    against them. For each list of HostStates, the live allocations on
    those hosts are read (indexed by host and time): all of them when
    there are at most :data:`COLD_READ_LIMIT`, else those over the
    request's interval; with more than that, the request passes no host
    (refused until the snapshot is there). Leased servers running on the
    hosts, which a snapshot would know, count as unleased (forever):
    conservative. When the side database cannot be read, a
    :class:`ClosedView` answers.
    """

    def __init__(self, spec_obj, now, conf=CONF):
        self.now = now
        self.conf = conf
        self._closed = ClosedView(spec_obj, now, conf)
        self._view = None
        self._hosts = frozenset()
        self._own = None
        self.request = self._closed.request
        try:
            db = db_api.get_database(conf)
            uuid = spec_obj.instance_uuid \
                if lease_request.is_set(spec_obj, 'instance_uuid') else None
            ids = {lease_request.hint(spec_obj, name) for name in
                   (wire.HINT_RESERVATION, wire.HINT_INTERNAL_RESERVATION)}
            with db.reader() as session:
                own = snapshot_reads.read_named(
                    session, now, server=uuid, ids={i for i in ids if i})
            self.request = lease_request.resolve_with_lookups(
                spec_obj, own, now, conf)
            self._own = own
        except Exception as e:
            self._closed.reason = str(e)
            _warn_closed(e)

    def _view_for(self, host_states):
        if self._own is None:
            return self._closed
        keys = set()
        for hs in host_states:
            keys.update((hs.host, lease_hosts.host_key(hs)))
        if self._view is not None and keys <= self._hosts:
            return self._view
        wanted = frozenset(keys)
        req = self.request
        if req.allowed is not None:
            keys &= set(req.allowed)
        started = time.monotonic()
        try:
            db = db_api.get_database(self.conf)
            with db.reader() as session:
                _version, registered = snapshot_reads.read_registered(
                    session)
                items = None
                overflow = _COLD_OVERFLOW.get(str(db.url))
                if overflow is None or not keys >= overflow:
                    items = snapshot_reads.read_host_items(
                        session, self.now, keys, self.now, None,
                        COLD_READ_LIMIT)
                    if items is None:
                        # More hosts hold even more: not read again
                        # until the snapshot is there.
                        _COLD_OVERFLOW[str(db.url)] = frozenset(keys)
                how = 'all'
                if items is None and req.end is not None:
                    items = snapshot_reads.read_host_items(
                        session, self.now, keys, req.start, req.end,
                        COLD_READ_LIMIT)
                    how = 'over the request\'s interval'
        except Exception as e:
            _warn_closed(e)
            self._own = None
            return self._closed
        if items is None:
            _warn('refused', 'nova_lease: the lease calendar is being '
                  'read; until then requests are refused when their hosts '
                  'hold more than %(limit)d promises over their interval '
                  '(this one: %(why)s, %(n)d hosts)',
                  {'why': req.why, 'limit': COLD_READ_LIMIT,
                   'n': len(keys)})
            self._view = _Refused(req, self.conf, registered)
        else:
            own = self._own
            mine = set(own.allocations)
            items = [item for item in items if item.ref not in mine]
            items.extend(own.items)
            snap = snapshot.Snapshot(items, dict(own.reservations),
                                     registered=registered)
            self._view = RequestView(None, snap, self.now, self.conf,
                                     request=req)
            LOG.debug('nova_lease: no snapshot yet: read %(count)d '
                      'allocations (%(how)s) of %(hosts)d hosts for a '
                      'request in %(ms).1f ms',
                      {'count': len(items), 'how': how,
                       'hosts': len(keys),
                       'ms': (time.monotonic() - started) * 1000})
        self._hosts = wanted
        return self._view

    def passes(self, host_states, usage=None):
        """[(bool, reason)] per HostState (see RequestView.passes)."""
        return self._view_for(host_states).passes(host_states, usage)

    def weights(self, host_states):
        """Raw weights in [-1, 1] (0 where unknown)."""
        return self._view_for(host_states).weights(host_states)


class _Refused(object):
    """A request that cannot be checked: it passes no host."""

    def __init__(self, req, conf, registered):
        self.request = req
        self.conf = conf
        self.registered = registered

    def passes(self, host_states, usage=None):
        freepool = self.conf.nova_lease.freepool_aggregate
        out = []
        for hs in host_states:
            why = lease_hosts.aggregate_rule(self.request, hs, freepool,
                                             self.registered)
            out.append((False, why or 'too many promises to check without '
                                      'the snapshot, which is being read'))
        return out

    def weights(self, host_states):
        return [0.0] * len(host_states)


def view_for(spec_obj, fresh, conf=CONF):
    """The view of ``spec_obj``: a :class:`RequestView`, or while the
    scheduler has no snapshot a :class:`ColdView` (a :class:`ClosedView`
    when the side database cannot be read either).

    ``fresh``: build a new one (the filter, once per instance of the
    request) rather than reuse the last one built for this RequestSpec
    (the weigher, right after the filter). Never waits for a full read
    of the lease calendar.
    """
    if not fresh:
        view = _recall(spec_obj)
        if view is not None:
            return view
    now = timeutils.utcnow()
    try:
        snap = get_snapshot(now, conf)
        if snap is not None:
            view = RequestView(spec_obj, snap, now, conf)
            if _COLD_OVERFLOW:
                _COLD_OVERFLOW.clear()
        else:
            view = ColdView(spec_obj, now, conf)
    except Exception as e:
        LOG.exception('nova_lease: cannot read the lease calendar; '
                      'failing closed')
        view = ClosedView(spec_obj, now, conf, reason=str(e))
    _remember(spec_obj, view)
    return view
