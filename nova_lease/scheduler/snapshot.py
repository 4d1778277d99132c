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
"""The lease side of the capacity calendar, as one in-memory snapshot.

A :class:`Snapshot` holds what the side database promises, read in one
transaction:

* every live allocation (capacity a reservation holds on a host over
  ``[start, end)``), as the items of a :class:`nova_lease.calendar.Calendar`
  (``ref`` = reservation id);
* every live reservation with its lease's dates, owner and status, and the
  servers linked to instance reservations (server uuid -> lease).

"Live" means: the allocation or lease has not ended, the reservation is
neither ``deleted`` nor ``error``, the lease is neither ``TERMINATED`` nor
``ERROR``.

What Nova knows (capacities, current usage, which server runs where) is
not in the snapshot: the scheduler takes it from its HostState objects and
admission control from Nova's database, at each request.

:class:`SnapshotCache` keeps one snapshot per database, current through
the change journal (the ``lease_changes`` table, written by every
nova_lease.db.api writer that changes a promise, in its own
transaction). Every request runs a cheap probe (:func:`probe`: one index
range scan over the journal's last :data:`PROBE_MARGIN` ids); when it
moved, the new journal rows are read, the reservations they name are
read again with their lease and allocations, and a new snapshot is made
from the old one (:func:`read_changes`, :meth:`Snapshot.patched`: the
calendar rebuilds only the hosts whose items changed). So every change
-- a lease admitted or deleted, its dates or status changed, a server
linked, a reservation's status -- is seen by the next request. The
snapshot is still read again in full when it is older than ``[nova_lease]
scheduler_snapshot_ttl`` seconds (a safety net), or than half of the
journal's retention (``db_api.CHANGE_RETENTION``).
"""

import collections
import collections.abc
import itertools
import threading
import time

from oslo_log import log as logging
from oslo_serialization import jsonutils

from nova_lease import calendar
from nova_lease.db import api as db_api
from nova_lease import status

LOG = logging.getLogger(__name__)

INSTANCE = 'virtual:instance'
HOST = 'physical:host'

DEAD_RESERVATIONS = (status.ReservationStatus.DELETED.value,
                     status.ReservationStatus.ERROR.value)
DEAD_LEASES = (status.LeaseStatus.TERMINATED.value,
               status.LeaseStatus.ERROR.value)


class Reservation(collections.namedtuple(
        'Reservation', 'id lease_id project_id resource_type resource_id '
                       'start end lease_status size')):
    """A live reservation and its lease's dates.

    ``size`` is a :class:`nova_lease.calendar.Demand` taken from the
    reservation's properties (``vcpus``, ``memory_mb``, ``disk_gb``) or
    from its allocations; None when neither tells.
    """

    __slots__ = ()


_MISSING = object()
_GONE = object()


class Layered(collections.abc.Mapping):
    """A read-only mapping: a shared base dict under a small overlay.

    A snapshot patched after a change shares its predecessor's big dicts
    (100,000 reservations) and holds only what changed; the overlay is
    merged into a new base when it grows past :data:`COMPACT_SIZE` or an
    eighth of the base.
    """

    __slots__ = ('_base', '_top', '_len')

    def __init__(self, base=None, top=None, length=None):
        self._base = base if base is not None else {}
        self._top = top or {}
        if length is None:
            length = len(self._base) + sum(
                (v is not _GONE) - (k in self._base)
                for k, v in self._top.items())
        self._len = length

    def get(self, key, default=None):
        value = self._top.get(key, _MISSING)
        if value is _MISSING:
            return self._base.get(key, default)
        return default if value is _GONE else value

    def __getitem__(self, key):
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __contains__(self, key):
        return self.get(key, _MISSING) is not _MISSING

    def __iter__(self):
        top = self._top
        for key in self._base:
            if key not in top:
                yield key
        for key, value in top.items():
            if value is not _GONE:
                yield key

    def __len__(self):
        return self._len

    def __repr__(self):
        return 'Layered(%r)' % dict(self)

    def patched(self, changes):
        """A new Layered with ``changes`` {key: value or _GONE} applied."""
        if not changes:
            return self
        top = dict(self._top)
        length = self._len
        for key, value in changes.items():
            was = key in self
            top[key] = value
            length += (value is not _GONE) - was
        if len(top) > max(COMPACT_SIZE, len(self._base) // 8):
            base = dict(self._base)
            for key, value in top.items():
                if value is _GONE:
                    base.pop(key, None)
                else:
                    base[key] = value
            return Layered(base, None, length)
        return Layered(self._base, top, length)


#: Overlay size past which a Layered is merged into a new base dict.
COMPACT_SIZE = 4096


class Snapshot(object):
    """Immutable view of the side database's promises (thread-safe).

    :ivar calendar: a Calendar of the allocations (no capacities: those
        come from Nova); None when there is no allocation.
    :ivar reservations: {reservation id: :class:`Reservation`} (a
        read-only mapping).
    :ivar servers: {server uuid: :class:`Reservation`} for the instance
        reservations linked to a server.
    :ivar server_rows: {server uuid: row} of the servers of known size
        (see :func:`_server_row`).
    :ivar allocations: {reservation id: tuple of calendar Items} (a
        read-only mapping).
    :ivar host_items: {host: tuple of calendar Items}.
    :ivar items: every calendar Item.
    :ivar version: the :func:`probe` value it is current at.
    """

    def __init__(self, items=(), reservations=None, version=None,
                 loaded_at=None, seen=()):
        items = tuple(items)
        self._items = items
        reservations = dict(reservations or {})
        by_reservation = collections.defaultdict(list)
        by_host = collections.defaultdict(list)
        for item in items:
            by_reservation[item.ref].append(item)
            by_host[item.host].append(item)
        self.allocations = Layered(
            {k: tuple(v) for k, v in by_reservation.items()})
        self.host_items = {k: tuple(v) for k, v in by_host.items()}
        self.calendar = calendar.Calendar.from_host_items(
            {}, self.host_items) if items else None
        by_lease = collections.defaultdict(list)
        for r in reservations.values():
            by_lease[r.lease_id].append(r.id)
        self.by_lease = Layered({k: tuple(v) for k, v in by_lease.items()})
        self.reservations = Layered(reservations)
        self.servers = {r.resource_id: r
                        for r in reservations.values()
                        if r.resource_type == INSTANCE and r.resource_id}
        # The same in integer microseconds, for the scheduler's per-host
        # pass (see _server_row); servers of unknown size are left out
        # (they count as unleased).
        self.server_rows = {}
        for uuid, r in self.servers.items():
            row = _server_row(r, self.allocations)
            if row is not None:
                self.server_rows[uuid] = row
        self.version = version
        self.loaded_at = time.monotonic() if loaded_at is None else loaded_at
        # {journal id: (lease id, reservation id)} of the rows above
        # version's low id, already applied.
        self.seen = dict(seen)

    @property
    def items(self):
        if self._items is None:
            self._items = tuple(itertools.chain.from_iterable(
                self.host_items.values()))
        return self._items

    def patched(self, rids, reservations, items, version, seen):
        """A new Snapshot where reservations ``rids`` are as read again.

        ``rids``: every reservation id the changes name (live or not);
        ``reservations``: {id: :class:`Reservation`} of those still live
        (and of new ones); ``items``: their allocations' Items. The
        calendar rebuilds only the hosts whose items change; the big
        mappings are shared with this snapshot (see :class:`Layered`).
        """
        rids = set(rids) | set(reservations)
        new = Snapshot.__new__(Snapshot)
        new._items = None
        by_rid = collections.defaultdict(list)
        for item in items:
            by_rid[item.ref].append(item)
        removed = [item for rid in rids
                   for item in self.allocations.get(rid, ())]
        added = list(items)
        new.calendar = self.calendar
        if removed or added:
            if new.calendar is None:
                new.calendar = calendar.Calendar({}, added)
            else:
                new.calendar = new.calendar.with_changes(add=added,
                                                         remove=removed)
        new.allocations = self.allocations.patched(
            {rid: tuple(by_rid[rid]) if by_rid.get(rid) else _GONE
             for rid in rids
             if by_rid.get(rid) or rid in self.allocations})
        host_items = self.host_items
        hosts = {item.host for item in removed} | {
            item.host for item in added}
        if hosts:
            host_items = dict(host_items)
            for host in hosts:
                kept = tuple(item for item in host_items.get(host, ())
                             if item.ref not in rids) + tuple(
                    item for item in added if item.host == host)
                if kept:
                    host_items[host] = kept
                else:
                    host_items.pop(host, None)
        new.host_items = host_items

        old = {rid: self.reservations.get(rid) for rid in rids}
        new.reservations = self.reservations.patched(
            {rid: reservations.get(rid, _GONE) for rid in rids
             if rid in reservations or old[rid] is not None})
        leases = {}
        for rid in rids:
            for r in (old[rid], reservations.get(rid)):
                if r is not None and r.lease_id not in leases:
                    leases[r.lease_id] = set(self.by_lease.get(r.lease_id,
                                                               ()))
        for rid in rids:
            if old[rid] is not None:
                leases[old[rid].lease_id].discard(rid)
        for r in reservations.values():
            leases[r.lease_id].add(r.id)
        new.by_lease = self.by_lease.patched(
            {lid: tuple(sorted(v)) if v else _GONE
             for lid, v in leases.items()})

        servers, server_rows = self.servers, self.server_rows
        linked = [r for r in list(old.values()) + list(reservations.values())
                  if r is not None and r.resource_type == INSTANCE and
                  r.resource_id]
        if linked:
            servers, server_rows = dict(servers), dict(server_rows)
            for r in old.values():
                if r is not None and servers.get(r.resource_id) == r:
                    del servers[r.resource_id]
                    server_rows.pop(r.resource_id, None)
            for r in reservations.values():
                if r.resource_type != INSTANCE or not r.resource_id:
                    continue
                servers[r.resource_id] = r
                row = _server_row(r, new.allocations)
                if row is None:
                    server_rows.pop(r.resource_id, None)
                else:
                    server_rows[r.resource_id] = row
        new.servers, new.server_rows = servers, server_rows
        new.version = version
        new.loaded_at = self.loaded_at
        new.seen = dict(seen)
        return new

    def __repr__(self):
        return '<Snapshot %d reservations, version %s>' % (
            len(self.reservations), self.version)

    def calendar_without(self, refs, hosts):
        """A Calendar of ``hosts``' allocations, less those of ``refs``.

        For a request whose own reservation must not count against it.
        """
        refs = set(refs)
        items = [item for host in hosts
                 for item in self.host_items.get(host, ())
                 if item.ref not in refs]
        return calendar.Calendar({}, items) if items else None


def _server_row(res, allocations):
    """uuid's row for the scheduler, in integer microseconds.

    (start, end, vcpus, memory_mb, disk_gb, host, allocation start,
    allocation end) of the reservation's allocation (host None when it
    has none); None when the size is unknown.
    """
    if res.size is None:
        return None
    to_us = calendar._to_us
    host = a_start = a_end = None
    for item in allocations.get(res.id, ())[:1]:
        # An instance reservation has one allocation.
        host, a_start, a_end = (item.host, to_us(item.start),
                                to_us(item.end))
    return (to_us(res.start), to_us(res.end), res.size.vcpus,
            res.size.memory_mb, res.size.disk_gb, host, a_start, a_end)


def _size_from(properties, items):
    for item in items:
        if not item.whole_host:
            return calendar.Demand(item.vcpus, item.memory_mb, item.disk_gb)
    props = {}
    if properties:
        try:
            props = jsonutils.loads(properties)
        except ValueError:
            props = {}
    if isinstance(props, dict) and 'vcpus' in props:
        try:
            return calendar.Demand(int(props.get('vcpus') or 0),
                                   int(props.get('memory_mb') or 0),
                                   int(props.get('disk_gb') or 0))
        except (TypeError, ValueError):
            pass
    return None


# The probe looks at the journal rows whose id is above the snapshot's
# highest id minus this margin: a transaction that took an id before a
# later one committed first (out-of-order commits, MariaDB/MySQL and
# PostgreSQL) is still seen, as long as fewer than this many ids were
# taken meanwhile; an index range scan, whatever the journal's size.
PROBE_MARGIN = 1000


def probe(db, low):
    """The change marker of the promises above journal id ``low``.

    ``(low, highest id, lowest id, count)`` of the journal rows with id
    > low: any change committed since (whatever the commit order, within
    :data:`PROBE_MARGIN` ids) or pruned moves it.
    """
    return db_api.change_probe(db, low, PROBE_MARGIN)


def _version(rows, low):
    """(version, seen) from journal rows above ``low``: seen is {id:
    (lease id, reservation id)} of the rows above the new low id.
    """
    top = max((r[0] for r in rows), default=None)
    if top is not None:
        low = max(low, top - PROBE_MARGIN)
    seen = {r[0]: (r[1], r[2]) for r in rows if r[0] > low}
    return (low, max(seen, default=None), min(seen, default=None),
            len(seen)), seen


def load(db, now):
    """Read a :class:`Snapshot` of the live promises (one transaction)."""
    with db.reader() as session:
        return read(session, now)


def _items(rows):
    return [calendar.Item(host, a_start, a_end, vcpus, memory_mb, disk_gb,
                          bool(whole), rid)
            for (_aid, rid, host, a_start, a_end, vcpus, memory_mb, disk_gb,
                 whole) in rows]


def _reservations(rows, by_reservation):
    reservations = {}
    for (rid, rtype, resource_id, properties, lease_id, project_id, l_start,
         l_end, lease_status) in rows:
        # Sizes matter for the servers linked to a reservation only.
        size = _size_from(properties, by_reservation.get(rid, ())) \
            if resource_id else None
        reservations[rid] = Reservation(
            rid, lease_id, project_id, rtype, resource_id, l_start, l_end,
            lease_status, size)
    return reservations


def _by_reservation(items):
    out = collections.defaultdict(list)
    for item in items:
        out[item.ref].append(item)
    return out


_DEAD = (DEAD_RESERVATIONS, DEAD_LEASES)


def read(session, now, start=None, end=None, hosts=None):
    """Read a :class:`Snapshot` in the caller's transaction.

    ``start``/``end``/``hosts`` restrict the allocations to those
    overlapping ``[start, end)`` on those hosts (admission control: such
    a snapshot has no version and cannot be kept current); every live
    reservation is read either way.
    """
    version, seen = None, {}
    if start is None and end is None and hosts is None:
        # The journal first: a change committed while the rest is read
        # is read again at the next refresh (refreshes are idempotent).
        low = db_api.change_probe(session, None, PROBE_MARGIN)[0]
        version, seen = _version(db_api.change_rows(session, low), low)
    items = _items(db_api.live_allocation_rows(
        session, now, *_DEAD, ends_after=max(now, start or now),
        start_before=end, hosts=hosts))
    reservations = _reservations(
        db_api.live_reservation_rows(session, now, *_DEAD),
        _by_reservation(items))
    return Snapshot(items, reservations, version, seen=seen)


def read_changes(session, now, snap):
    """``snap`` brought up to date with the journal (see module doc).

    None when the journal is not the one ``snap`` followed (its rows
    differ, or its highest id went back: a database restored or
    recreated): read it in full.
    """
    low = snap.version[0]
    rows = db_api.change_rows(session, low)
    version, seen = _version(rows, low)
    if snap.version[1] is not None and (
            version[1] is None or version[1] < snap.version[1]):
        return None
    for row in rows:
        known = snap.seen.get(row[0])
        if known is not None and known != (row[1], row[2]):
            return None
    new = [r for r in rows if r[0] not in snap.seen]
    lease_ids = {r[1] for r in new if r[1]}
    rids = {r[2] for r in new if r[2]}
    for lease_id in lease_ids:
        rids.update(snap.by_lease.get(lease_id, ()))
    if not rids and not lease_ids:
        return snap.patched((), {}, (), version, seen)
    found = {}
    allocations = []
    for res_row, alloc_row in db_api.live_reservations_with_allocations(
            session, now, *_DEAD, ids=rids, lease_ids=lease_ids):
        found[res_row[0]] = res_row
        if alloc_row is not None:
            allocations.append(alloc_row)
    items = _items(allocations)
    reservations = _reservations(found.values(), _by_reservation(items))
    return snap.patched(rids | set(found), reservations, items, version,
                        seen)


class SnapshotCache(object):
    """One :class:`Snapshot` per database, kept current (see module doc).

    Thread-safe: readers take the current snapshot without a lock; one
    thread refreshes while the others wait for its result (a refresh is
    only needed after a change, and a stale snapshot would miss it).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._snapshots = {}

    def invalidate(self):
        """Forget every snapshot (the next request reloads)."""
        with self._lock:
            self._snapshots.clear()

    def get(self, db, now, ttl):
        """The snapshot of ``db``, current at the time of the call.

        Read in full when older than ``ttl`` seconds (or than half of
        the journal's retention); ``ttl`` <= 0 reads it at every call.
        """
        key = str(db.url)
        max_age = min(ttl, db_api.CHANGE_RETENTION.total_seconds() / 2)

        def young(snap):
            return (ttl > 0 and snap is not None and
                    time.monotonic() - snap.loaded_at < max_age)

        snap = self._snapshots.get(key)
        if young(snap) and probe(db, snap.version[0]) == snap.version:
            return snap
        with self._lock:
            current = self._snapshots.get(key)
            if current is not snap:
                # Another thread refreshed it meanwhile: current now?
                snap = current
                if young(snap) and \
                        probe(db, snap.version[0]) == snap.version:
                    return snap
            started = time.monotonic()
            updated = None
            if young(snap):
                with db.reader() as session:
                    updated = read_changes(session, now, snap)
            if updated is not None:
                snap = updated
                how = 'Updated'
            else:
                snap = load(db, now)
                how = 'Loaded'
            self._snapshots[key] = snap
            LOG.debug('%(how)s %(snap)r in %(ms).1f ms',
                      {'how': how, 'snap': snap,
                       'ms': (time.monotonic() - started) * 1000})
            return snap


CACHE = SnapshotCache()
