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

:class:`SnapshotCache` keeps one snapshot per database. A cheap probe
(:func:`probe`) at every request tells whether allocations were added (a
lease admitted) or recently deleted: those are merged in
(:func:`read_changes`, :meth:`Snapshot.updated`). The snapshot is read
again in full when it is older than ``[nova_lease]
scheduler_snapshot_ttl`` seconds, which bounds how long other changes --
a lease deleted or its end moved, a server linked to its lease -- take to
be seen.
"""

import collections
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


class Snapshot(object):
    """Immutable view of the side database's promises (thread-safe).

    :ivar calendar: a Calendar of the allocations (no capacities: those
        come from Nova); None when there is no allocation.
    :ivar reservations: {reservation id: :class:`Reservation`}.
    :ivar servers: {server uuid: :class:`Reservation`} for the instance
        reservations linked to a server.
    :ivar allocations: {reservation id: tuple of calendar Items}.
    :ivar version: the :func:`probe` value it was loaded at.
    """

    def __init__(self, items=(), reservations=None, version=None,
                 loaded_at=None, recent=None):
        items = tuple(items)
        self.items = items
        self.calendar = calendar.Calendar({}, items) if items else None
        self.reservations = dict(reservations or {})
        by_reservation = collections.defaultdict(list)
        by_host = collections.defaultdict(list)
        for item in items:
            by_reservation[item.ref].append(item)
            by_host[item.host].append(item)
        self.allocations = {k: tuple(v) for k, v in by_reservation.items()}
        self.host_items = {k: tuple(v) for k, v in by_host.items()}
        self.servers = {r.resource_id: r
                        for r in self.reservations.values()
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
        # {allocation id: Item} for the ids the probe watches.
        self.recent = dict(recent or {})

    def updated(self, added, removed, reservations, version, recent):
        """A new Snapshot with allocations added/removed (incremental).

        ``added``: Items; ``removed``: Items of this snapshot (by
        identity); ``reservations``: new or changed Reservations. Only
        the calendar is rebuilt in full; the indexes are patched.
        """
        new = Snapshot.__new__(Snapshot)
        gone = {id(item) for item in removed}
        items = [item for item in self.items if id(item) not in gone] \
            if gone else list(self.items)
        items.extend(added)
        new.items = tuple(items)
        new.calendar = calendar.Calendar({}, new.items) if items else None
        new.reservations = dict(self.reservations)
        new.reservations.update(reservations)
        allocations = dict(self.allocations)
        host_items = dict(self.host_items)
        for item in removed:
            allocations[item.ref] = tuple(
                x for x in allocations.get(item.ref, ()) if x is not item)
            host_items[item.host] = tuple(
                x for x in host_items.get(item.host, ()) if x is not item)
        for item in added:
            allocations[item.ref] = allocations.get(item.ref, ()) + (item,)
            host_items[item.host] = host_items.get(item.host, ()) + (item,)
        new.allocations = allocations
        new.host_items = host_items
        new.servers = dict(self.servers)
        new.server_rows = dict(self.server_rows)
        touched = set(reservations) | {item.ref for item in added} | {
            item.ref for item in removed}
        for rid in touched:
            r = new.reservations.get(rid)
            if r is None or r.resource_type != INSTANCE or \
                    not r.resource_id:
                continue
            new.servers[r.resource_id] = r
            row = _server_row(r, allocations)
            if row is None:
                new.server_rows.pop(r.resource_id, None)
            else:
                new.server_rows[r.resource_id] = row
        new.version = version
        new.loaded_at = self.loaded_at
        new.recent = dict(recent)
        return new

    def __repr__(self):
        return '<Snapshot %d allocations, %d reservations, version %s>' % (
            len(self.items), len(self.reservations), self.version)

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


# The probe counts the allocations whose id is above the snapshot's
# highest id minus this margin: a transaction that took an id before a
# later one committed first (out-of-order commits) is still seen, with an
# index range scan instead of a count of the whole table.
PROBE_MARGIN = 1000


def _probe(session, low=None):
    """(highest allocation id, low, number of allocations above low)."""
    return db_api.allocation_probe(session, low, PROBE_MARGIN)


def probe(db, low=None):
    """The change marker of the promises (see :data:`PROBE_MARGIN`).

    Every new allocation (a lease admitted) changes it, whatever order
    concurrent transactions commit in; so does a recent one deleted.
    """
    with db.reader() as session:
        return _probe(session, low)


def load(db, now):
    """Read a :class:`Snapshot` of the live promises (one transaction)."""
    with db.reader() as session:
        return read(session, now)


def _items(rows):
    """[(allocation id, Item)]."""
    return [(aid, calendar.Item(host, a_start, a_end, vcpus, memory_mb,
                                disk_gb, bool(whole), rid))
            for (aid, rid, host, a_start, a_end, vcpus, memory_mb, disk_gb,
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
    overlapping ``[start, end)`` on those hosts (admission control);
    every live reservation is read either way.
    """
    version = _probe(session)
    pairs = _items(db_api.live_allocation_rows(
        session, now, *_DEAD, ends_after=max(now, start or now),
        start_before=end, hosts=hosts))
    items = [item for _aid, item in pairs]
    reservations = _reservations(
        db_api.live_reservation_rows(session, now, *_DEAD),
        _by_reservation(items))
    recent = {aid: item for aid, item in pairs if aid > version[1]}
    return Snapshot(items, reservations, version, recent=recent)


def read_changes(session, now, snap):
    """``snap`` updated with the allocations changed above its probe
    range's low id (new ones and their reservations; deleted ones).
    """
    low = snap.version[1]
    version = _probe(session, low)
    pairs = _items(db_api.live_allocation_rows(session, now, *_DEAD,
                                               min_id=low))
    current = dict(pairs)
    added = [item for aid, item in pairs if aid not in snap.recent]
    removed = [item for aid, item in snap.recent.items()
               if aid not in current]
    rids = sorted({item.ref for item in added})
    reservations = {}
    if rids:
        reservations = _reservations(
            db_api.live_reservation_rows(session, now, *_DEAD, ids=rids),
            _by_reservation(added))
    return snap.updated(added, removed, reservations, version, current)


class SnapshotCache(object):
    """One :class:`Snapshot` per database, reloaded on change or age.

    Thread-safe: readers take the current snapshot without a lock; one
    thread reloads while the others wait for its result (a reload is only
    needed after a change, and a stale snapshot would miss that change).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._snapshots = {}

    def invalidate(self):
        """Forget every snapshot (the next request reloads)."""
        with self._lock:
            self._snapshots.clear()

    def get(self, db, now, ttl):
        """The snapshot of ``db``; reloaded when stale (see module doc).

        ``ttl`` <= 0 reloads at every call.
        """
        key = str(db.url)
        snap = self._snapshots.get(key)
        young = (ttl > 0 and snap is not None and
                 time.monotonic() - snap.loaded_at < ttl)
        if young and probe(db, snap.version[1]) == snap.version:
            return snap
        with self._lock:
            current = self._snapshots.get(key)
            if current is not snap and current is not None and young:
                # Another thread refreshed it meanwhile.
                return current
            started = time.monotonic()
            if young:
                with db.reader() as session:
                    snap = read_changes(session, now, snap)
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
