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
journal's retention (``db_api.CHANGE_RETENTION``): in a background
thread, beside the snapshot in use, so that no request waits for it.
The snapshot also holds the host registry's hostnames (os-hosts).
"""

import collections
import collections.abc
import itertools
import threading
import time
import weakref

from oslo_log import log as logging
from oslo_serialization import jsonutils
from oslo_utils import timeutils

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


# The snapshot holds millions of items and reservations in a big cloud.
# They are kept as plain tuples of plain values (strings, numbers,
# datetimes), which Python's cyclic garbage collector stops tracking
# after one look: a full collection then costs milliseconds instead of
# seconds (it would otherwise walk every one of them, holding the
# interpreter, also while a full read runs in the background). Items and
# Reservations are made from them when asked for (a few per request).

_make_item = calendar.Item._make
_make_demand = calendar.Demand._make


def _raw_reservation(res):
    size = res.size
    return (res.id, res.lease_id, res.project_id, res.resource_type,
            res.resource_id, res.start, res.end, res.lease_status,
            None if size is None else tuple(size))


def _reservation(raw):
    size = raw[8]
    return Reservation._make(
        raw[:8] + (None if size is None else _make_demand(size),))


def _group(value):
    """A raw group: one raw item (or reservation id) stands for itself.

    (A reservation has one allocation and a lease one reservation, most
    of the time: a million fewer tuples to hold, and to free.)
    """
    return (value,) if type(value[0]) is str else value


def _one_or_many(values):
    values = tuple(values)
    return values[0] if len(values) == 1 else values


def _rids(value):
    return (value,) if type(value) is str else value


def _items_of(raw):
    return tuple(map(_make_item, _group(raw)))


class _View(collections.abc.Mapping):
    """A read-only mapping whose values are made from raw ones."""

    __slots__ = ('_raw', '_make')

    def __init__(self, raw, make):
        self._raw = raw
        self._make = make

    def get(self, key, default=None):
        value = self._raw.get(key, _MISSING)
        return default if value is _MISSING else self._make(value)

    def __getitem__(self, key):
        return self._make(self._raw[key])

    def __contains__(self, key):
        return key in self._raw

    def __iter__(self):
        return iter(self._raw)

    def __len__(self):
        return len(self._raw)

    def keys(self):
        # A dict's own view when the raw mapping is a dict: set
        # operations on it run at C speed (LeaseFilter's host pass).
        return self._raw.keys()

    def __repr__(self):
        return '%s(%r)' % (type(self).__name__, dict(self))


class _Family(object):
    """The snapshots made from one full read: they share its mappings."""

    def __init__(self):
        self.versions = weakref.WeakSet()


#: Entries freed at a time when an old snapshot is taken apart.
DISMANTLE_CHUNK = 2048


class Snapshot(object):
    """Immutable view of the side database's promises (thread-safe).

    :ivar calendar: a Calendar of the allocations (no capacities: those
        come from Nova); None when there is no allocation.
    :ivar reservations: {reservation id: :class:`Reservation`} (a
        read-only mapping).
    :ivar servers: {server uuid: :class:`Reservation`} for the instance
        reservations linked to a server (a read-only mapping).
    :ivar server_rows: {server uuid: row} of the servers of known size
        (see :func:`_server_row`).
    :ivar allocations: {reservation id: tuple of calendar Items} (a
        read-only mapping).
    :ivar host_items: {host: tuple of calendar Items} (a read-only
        mapping).
    :ivar items: every calendar Item.
    :ivar version: the :func:`probe` value it is current at.
    :ivar registered: the hostnames of the host registry (``hosts``
        table, os-hosts): they take host reservations' work only.
    :ivar hosts_version: the registry's generation it is current at.
    """

    def __init__(self, items=(), reservations=None, version=None,
                 loaded_at=None, seen=(), registered=(), hosts_version=None):
        by_reservation = collections.defaultdict(list)
        by_host = collections.defaultdict(list)
        for item in items:
            raw = tuple(item)
            by_reservation[raw[7]].append(raw)
            by_host[raw[0]].append(raw)
        raw_reservations = {}
        by_lease = collections.defaultdict(list)
        for r in (reservations or {}).values():
            raw_reservations[r.id] = _raw_reservation(r)
            by_lease[r.lease_id].append(r.id)
        self._assemble(
            {k: _one_or_many(v) for k, v in by_reservation.items()},
            {k: tuple(v) for k, v in by_host.items()}, raw_reservations,
            {k: _one_or_many(v) for k, v in by_lease.items()}, version,
            loaded_at, seen, registered, hosts_version)

    def _assemble(self, allocations, host_items, reservations, by_lease,
                  version, loaded_at=None, seen=(), registered=(),
                  hosts_version=None):
        """Set up from raw parts: {reservation id: raw item(s) (see
        :func:`_group`)}, {host: raw items}, {reservation id: raw
        reservation}, {lease id: reservation id(s)}.
        """
        self._alloc = Layered(allocations)
        self._hosts = host_items
        self.calendar = calendar.Calendar.from_host_items(
            {}, host_items) if host_items else None
        self._by_lease = Layered(by_lease)
        self._res = Layered(reservations)
        self._servers = {r[4]: r for r in reservations.values()
                         if r[3] == INSTANCE and r[4]}
        # The same in integer microseconds, for the scheduler's per-host
        # pass (see _server_row); servers of unknown size are left out
        # (they count as unleased).
        self.server_rows = {}
        for uuid, raw in self._servers.items():
            row = _server_row(raw, self._alloc)
            if row is not None:
                self.server_rows[uuid] = row
        self.version = version
        self.loaded_at = time.monotonic() if loaded_at is None else loaded_at
        # {journal id: (lease id, reservation id)} of the rows above
        # version's low id, already applied.
        self.seen = dict(seen)
        self.registered = frozenset(registered)
        self.hosts_version = hosts_version
        self._family = _Family()
        self._views()

    def _views(self):
        self._family.versions.add(self)
        self.allocations = _View(self._alloc, _items_of)
        self.by_lease = _View(self._by_lease, _rids)
        self.host_items = _View(self._hosts, _items_of)
        self.reservations = _View(self._res, _reservation)
        self.servers = _View(self._servers, _reservation)

    def with_registered(self, registered, hosts_version):
        """This snapshot with another host registry."""
        new = Snapshot.__new__(Snapshot)
        new.__dict__.update(self.__dict__)
        new.registered = frozenset(registered)
        new.hosts_version = hosts_version
        new._views()
        return new

    @property
    def items(self):
        """Every calendar Item (made once, when first asked for:
        admission control; the scheduler does not ask).
        """
        items = self.__dict__.get('_items')
        if items is None:
            items = self._items = tuple(map(
                _make_item, itertools.chain.from_iterable(
                    self._hosts.values())))
        return items

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
        added = [tuple(item) for item in items]
        by_rid = collections.defaultdict(list)
        for raw in added:
            by_rid[raw[7]].append(raw)
        removed = []
        for rid in rids:
            group = self._alloc.get(rid)
            if group is not None:
                removed.extend(_group(group))
        new.calendar = self.calendar
        if removed or added:
            if new.calendar is None:
                new.calendar = calendar.Calendar({}, added)
            else:
                new.calendar = new.calendar.with_changes(add=added,
                                                         remove=removed)
        new._alloc = self._alloc.patched(
            {rid: _one_or_many(by_rid[rid]) if by_rid.get(rid) else _GONE
             for rid in rids
             if by_rid.get(rid) or rid in self._alloc})
        host_items = self._hosts
        hosts = {raw[0] for raw in removed} | {raw[0] for raw in added}
        if hosts:
            host_items = dict(host_items)
            for host in hosts:
                kept = tuple(raw for raw in host_items.get(host, ())
                             if raw[7] not in rids) + tuple(
                    raw for raw in added if raw[0] == host)
                if kept:
                    host_items[host] = kept
                else:
                    host_items.pop(host, None)
        new._hosts = host_items

        fresh = {rid: _raw_reservation(r) for rid, r in reservations.items()}
        old = {rid: self._res.get(rid) for rid in rids}
        new._res = self._res.patched(
            {rid: fresh.get(rid, _GONE) for rid in rids
             if rid in fresh or old[rid] is not None})
        leases = {}
        for rid in rids:
            for raw in (old[rid], fresh.get(rid)):
                if raw is not None and raw[1] not in leases:
                    leases[raw[1]] = set(self.by_lease.get(raw[1], ()))
        for rid in rids:
            if old[rid] is not None:
                leases[old[rid][1]].discard(rid)
        for raw in fresh.values():
            leases[raw[1]].add(raw[0])
        new._by_lease = self._by_lease.patched(
            {lid: _one_or_many(sorted(v)) if v else _GONE
             for lid, v in leases.items()})

        servers, server_rows = self._servers, self.server_rows
        linked = [raw for raw in list(old.values()) + list(fresh.values())
                  if raw is not None and raw[3] == INSTANCE and raw[4]]
        if linked:
            servers, server_rows = dict(servers), dict(server_rows)
            for raw in old.values():
                if raw is not None and servers.get(raw[4]) == raw:
                    del servers[raw[4]]
                    server_rows.pop(raw[4], None)
            for raw in fresh.values():
                if raw[3] != INSTANCE or not raw[4]:
                    continue
                servers[raw[4]] = raw
                row = _server_row(raw, new._alloc)
                if row is None:
                    server_rows.pop(raw[4], None)
                else:
                    server_rows[raw[4]] = row
        new._servers, new.server_rows = servers, server_rows
        new.version = version
        new.loaded_at = self.loaded_at
        new.seen = dict(seen)
        new.registered = self.registered
        new.hosts_version = self.hosts_version
        new._family = self._family
        new._views()
        return new

    def __repr__(self):
        return '<Snapshot %d reservations, version %s>' % (
            len(self._res), self.version)

    def _parts(self):
        """The big mappings of this snapshot (see :func:`_dismantle`)."""
        parts = []
        for layered in (self._alloc, self._res, self._by_lease):
            parts.extend((layered._top, layered._base))
        parts.extend((self._servers, self.server_rows, self._hosts))
        cal = self.calendar
        if cal is not None and cal._by_host is not None:
            parts.append(cal._by_host)
        return parts

    def calendar_without(self, refs, hosts):
        """A Calendar of ``hosts``' allocations, less those of ``refs``.

        For a request whose own reservation must not count against it.
        """
        refs = set(refs)
        items = [raw for host in hosts for raw in self._hosts.get(host, ())
                 if raw[7] not in refs]
        return calendar.Calendar({}, items) if items else None


def _dismantle(parts, pause=time.sleep):
    """Empty the mappings ``parts`` a few entries at a time.

    Freeing a million entries at once would hold the interpreter (every
    scheduling thread) for a good part of a second; between chunks,
    other threads run. Only for the parts of snapshots that nothing uses
    any more (see SnapshotCache._retire).
    """
    for part in parts:
        while part:
            for _n in range(DISMANTLE_CHUNK):
                if not part:
                    break
                part.popitem()
            pause(0)


def _server_row(raw, allocations):
    """A linked server's row for the scheduler, in integer microseconds.

    (start, end, vcpus, memory_mb, disk_gb, host, allocation start,
    allocation end) from its raw reservation and its reservation's
    allocation in ``allocations`` (raw items; host None and times 0 when
    it has none); None when the size is unknown.
    """
    size = raw[8]
    if size is None:
        return None
    to_us = calendar.to_us
    host, a_start, a_end = None, 0, 0
    group = allocations.get(raw[0])
    if group is not None:
        # An instance reservation has one allocation.
        item = _group(group)[0]
        host, a_start, a_end = item[0], to_us(item[1]), to_us(item[2])
    return (to_us(raw[5]), to_us(raw[6]), size[0], size[1], size[2], host,
            a_start, a_end)


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
    """Read a :class:`Snapshot` of the live promises and of the host
    registry (one transaction): the full read.
    """
    with db.reader() as session:
        hosts_version, registered = read_registered(session)
        snap = read(session, now)
    return snap.with_registered(registered, hosts_version)


def read_registered(session):
    """``(generation, hostnames)`` of the host registry (os-hosts), in
    the caller's transaction: every registered host's hypervisor
    hostname and service host.
    """
    version = db_api.host_fingerprint(session)
    names = set()
    for host in db_api.host_list(session):
        names.update(name for name in (host['hypervisor_hostname'],
                                       host.get('service_host')) if name)
    return version, frozenset(names)


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
        return _read_full(session, now, version, seen)
    items = _items(db_api.live_allocation_rows(
        session, now, *_DEAD, ends_after=max(now, start or now),
        start_before=end, hosts=hosts))
    reservations = _reservations(
        db_api.live_reservation_rows(session, now, *_DEAD),
        _by_reservation(items))
    return Snapshot(items, reservations, version, seen=seen)


def _read_full(session, now, version, seen):
    """Every live promise, in one query (see :func:`read`).

    The scheduler holds it in every process: equal values (hosts,
    types, statuses, projects, times, sizes) are shared, the items are
    grouped while the rows stream in, and everything is kept raw (see
    :class:`Snapshot`).
    """
    strings, times, numbers = {}, {}, {}
    share_str, share_time, share_int = (strings.setdefault,
                                        times.setdefault,
                                        numbers.setdefault)
    allocations = {}
    host_items = {}
    rows = {}
    for (rid, rtype, resource_id, properties, lease_id, project_id,
         l_start, l_end, l_status, alloc_id, host, a_start, a_end, vcpus,
         memory_mb, disk_gb, whole) in db_api.live_reservation_allocation_rows(
            session, now, *_DEAD):
        if rid not in rows:
            rows[rid] = (rid, lease_id, share_str(project_id, project_id),
                         share_str(rtype, rtype), resource_id,
                         share_time(l_start, l_start),
                         share_time(l_end, l_end),
                         share_str(l_status, l_status),
                         properties if resource_id else None)
        if alloc_id is None:
            continue
        host = share_str(host, host)
        raw = (host, share_time(a_start, a_start), share_time(a_end, a_end),
               share_int(vcpus, vcpus), share_int(memory_mb, memory_mb),
               share_int(disk_gb, disk_gb), bool(whole), rid)
        group = allocations.get(rid)
        allocations[rid] = raw if group is None else _group(group) + (raw,)
        on_host = host_items.get(host)
        if on_host is None:
            host_items[host] = [raw]
        else:
            on_host.append(raw)
    del strings, times, numbers
    reservations = {}
    by_lease = {}
    while rows:
        # (Popped: each row is freed as soon as it is used.)
        rid, row = rows.popitem()
        # Sizes matter for the servers linked to a reservation only.
        size = None
        if row[4]:
            group = allocations.get(rid)
            size = _size_from(row[8], () if group is None
                              else _items_of(group))
            size = None if size is None else tuple(size)
        reservations[rid] = row[:8] + (size,)
        lease_id = row[1]
        group = by_lease.get(lease_id)
        by_lease[lease_id] = rid if group is None else _rids(group) + (rid,)
    snap = Snapshot.__new__(Snapshot)
    snap._assemble(allocations,
                   {h: tuple(v) for h, v in host_items.items()},
                   reservations, by_lease, version, seen=seen)
    return snap


def read_named(session, now, server=None, ids=()):
    """A :class:`Snapshot` of what one request names (no version): the
    live reservations ``ids`` and the one linked to server ``server``,
    with their allocations. Indexed queries.
    """
    ids = set(ids)
    if server:
        ids.update(row['id'] for row in db_api.reservation_list(
            session, resource_id=server))
    found, allocations = {}, []
    if ids:
        for res_row, alloc_row in db_api.live_reservations_with_allocations(
                session, now, *_DEAD, ids=ids):
            found[res_row[0]] = res_row
            if alloc_row is not None:
                allocations.append(alloc_row)
    items = _items(allocations)
    return Snapshot(items, _reservations(found.values(),
                                         _by_reservation(items)))


#: Hosts per query of read_host_items.
_HOSTS_PER_QUERY = 500


def read_host_items(session, now, hosts, start, end, limit):
    """The calendar Items of the live allocations on ``hosts`` that
    overlap ``[start, end)`` (``end`` None: forever); None when there are
    more than ``limit`` of them. Indexed by host and start.
    """
    hosts = sorted(hosts)
    rows = []
    for k in range(0, len(hosts), _HOSTS_PER_QUERY):
        rows.extend(itertools.islice(db_api.live_allocation_rows(
            session, now, *_DEAD, ends_after=max(now, start),
            start_before=end, hosts=hosts[k:k + _HOSTS_PER_QUERY]),
            limit + 1 - len(rows)))
        if len(rows) > limit:
            return None
    return _items(rows)


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


def probe_all(db, low):
    """``(journal marker, host registry generation)``: :func:`probe`
    and the registry's change marker, in one read transaction.
    """
    with db.reader() as session:
        return (db_api.change_probe(session, low, PROBE_MARGIN),
                db_api.host_fingerprint(session))


def refresh(db, now, snap, marker):
    """``snap`` brought up to date with what ``marker`` (a
    :func:`probe_all` value) says changed; None when it cannot be (see
    :func:`read_changes`).
    """
    changes, hosts_version = marker
    with db.reader() as session:
        if changes != snap.version:
            snap = read_changes(session, now, snap)
            if snap is None:
                return None
        if hosts_version != snap.hosts_version:
            version, registered = read_registered(session)
            snap = snap.with_registered(registered, version)
    return snap


#: Seconds before a failed full read is tried again; doubled after each
#: failure in a row, up to RETRY_MAX.
RETRY_FIRST = 2.0
RETRY_MAX = 120.0
#: A snapshot older than this fraction of the journal's retention is no
#: longer brought up to date (the journal rows it would need may have been
#: pruned): it is only used while the side database cannot be read.
EXPIRY_FRACTION = 0.75
#: Seconds between two warnings that the side database cannot be read.
STALE_LOG_INTERVAL = 60.0


class _Slot(object):
    """The snapshot of one database, and its full read under way."""

    def __init__(self):
        # Serialises the refreshes (journal patches) and the swap of a
        # new full read.
        self.lock = threading.Lock()
        self.snap = None
        # When snap was last found current (monotonic).
        self.current_at = None
        self.reading = None
        self.failures = 0
        self.retry_at = 0.0
        self.stale_logged_at = None


class SnapshotCache(object):
    """One :class:`Snapshot` per database, kept current (see module doc).

    Thread-safe, and no request ever waits for a full read:

    * readers take the current snapshot without a lock, after a probe;
      when the probe moved, one thread patches it from the change journal
      (milliseconds) while the others wait for its result (a stale
      snapshot would miss the change);
    * full reads (the first one, and those due by age) run in a
      background thread, beside the snapshot in use; the new snapshot is
      brought up to date with the journal and replaces the old one. A
      full read that fails keeps the old snapshot (logged; tried again
      with a back-off);
    * :meth:`get` answers None while there is no snapshot yet (the caller
      then reads what it needs for the request itself: see
      ``nova_lease.scheduler.view``);
    * when the side database cannot be read, the last snapshot is used
      as it is (a WARNING tells its age).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._slots = {}
        self._retire_hooks = []

    def add_retire_hook(self, hook):
        """Call ``hook()`` while an old snapshot waits to be taken apart:
        it should drop what it keeps of finished requests.
        """
        self._retire_hooks.append(hook)

    def invalidate(self):
        """Forget every snapshot (a full read starts at the next call)."""
        with self._lock:
            self._slots.clear()

    def reading(self, db):
        """Whether a full read of ``db`` runs now (in the background)."""
        with self._lock:
            slot = self._slots.get(str(db.url))
            return slot is not None and slot.reading is not None

    def _slot(self, key):
        with self._lock:
            slot = self._slots.get(key)
            if slot is None:
                slot = self._slots[key] = _Slot()
            return slot

    def get(self, db, now, ttl, wait=None):
        """The snapshot of ``db``, current at the time of the call, or
        None while there is none yet.

        A full read is started in the background when there is no
        snapshot, or when it is older than ``ttl`` seconds (or than half
        of the journal's retention; ``ttl`` <= 0: as soon as the previous
        full read ended). ``wait``: seconds to wait for the first full
        read when there is no snapshot (tools and tests; the scheduler
        never waits).
        """
        slot = self._slot(str(db.url))
        snap = slot.snap
        if snap is None:
            reading = self._start_full_read(db, slot)
            if wait is None or reading is None:
                return None
            reading.join(wait)
            snap = slot.snap
            if snap is None:
                return None
        retention = db_api.CHANGE_RETENTION.total_seconds()
        age = time.monotonic() - snap.loaded_at
        if ttl <= 0 or age >= min(ttl, retention / 2):
            self._start_full_read(db, slot)
        try:
            marker = probe_all(db, snap.version[0])
        except Exception as e:
            return self._stale(slot, snap, e)
        if age >= retention * EXPIRY_FRACTION:
            return None
        if marker == (snap.version, snap.hosts_version):
            slot.current_at = time.monotonic()
            return snap
        with slot.lock:
            current = slot.snap
            if current is None:
                return None
            if current is not snap:
                # Refreshed (or read in full) meanwhile: current now?
                snap = current
                try:
                    marker = probe_all(db, snap.version[0])
                except Exception as e:
                    return self._stale(slot, snap, e)
                if marker == (snap.version, snap.hosts_version):
                    slot.current_at = time.monotonic()
                    return snap
            started = time.monotonic()
            try:
                updated = refresh(db, now, snap, marker)
            except Exception as e:
                return self._stale(slot, snap, e)
            if updated is None:
                # Not the journal it followed (a database restored or
                # recreated): nothing in it can be trusted.
                LOG.warning('nova_lease: the change journal of the lease '
                            'calendar is not the one the scheduler '
                            'followed (database restored or recreated?): '
                            'reading it in full')
                slot.snap = None
                self._start_full_read(db, slot)
                return None
            slot.snap = updated
            slot.current_at = time.monotonic()
            LOG.debug('Updated %(snap)r in %(ms).1f ms',
                      {'snap': updated,
                       'ms': (time.monotonic() - started) * 1000})
            return updated

    def _stale(self, slot, snap, error):
        """The last snapshot, when the database cannot be read."""
        now = time.monotonic()
        if slot.stale_logged_at is None or \
                now - slot.stale_logged_at >= STALE_LOG_INTERVAL:
            slot.stale_logged_at = now
            current_at = slot.current_at or snap.loaded_at
            LOG.warning('nova_lease: the side database cannot be read '
                        '(%(error)s): scheduling with the last snapshot of '
                        'the lease calendar, read %(age)d s ago, last '
                        'found current %(current)d s ago; changes made '
                        'since are not seen until it can be read again',
                        {'error': error, 'age': now - snap.loaded_at,
                         'current': now - current_at})
        return snap

    def _start_full_read(self, db, slot):
        """Start a full read of ``db`` in the background unless one is
        under way (or failed too recently); the Thread under way or None.
        """
        with self._lock:
            if slot.reading is not None:
                return slot.reading
            if time.monotonic() < slot.retry_at:
                return None
            thread = threading.Thread(
                target=self._full_read, args=(db, slot),
                name='nova_lease-calendar-read', daemon=True)
            slot.reading = thread
        thread.start()
        return thread

    def _full_read(self, db, slot):
        started = time.monotonic()
        old = None
        try:
            snap = load(db, timeutils.utcnow())
            read_ms = (time.monotonic() - started) * 1000
            with slot.lock:
                # Bring it up to date with what was committed during the
                # read (the journal was read first).
                marker = probe_all(db, snap.version[0])
                if marker != (snap.version, snap.hosts_version):
                    snap = refresh(db, timeutils.utcnow(), snap, marker) \
                        or snap
                old = slot.snap
                slot.snap = snap
                slot.current_at = time.monotonic()
            slot.failures = 0
            slot.stale_logged_at = None
            LOG.info('nova_lease: read the lease calendar in full: '
                     '%(snap)r in %(ms).0f ms',
                     {'snap': snap, 'ms': read_ms})
        except Exception:
            slot.failures += 1
            delay = min(RETRY_FIRST * 2 ** (slot.failures - 1), RETRY_MAX)
            slot.retry_at = time.monotonic() + delay
            old = slot.snap
            if old is None:
                kept = ('no snapshot yet: requests are answered from '
                        'per-request reads of their hosts\' promises, '
                        'or refused when the database cannot be read')
            else:
                kept = ('keeping the snapshot read %d s ago' %
                        (time.monotonic() - old.loaded_at))
            LOG.exception('nova_lease: the full read of the lease calendar '
                          'failed (%(failures)d in a row; next try in '
                          '%(delay)d s); %(kept)s',
                          {'failures': slot.failures, 'delay': delay,
                           'kept': kept})
        finally:
            with self._lock:
                slot.reading = None
        if old is not None:
            family, parts = old._family, old._parts()
            del old
            self._retire(family, parts)

    def _retire(self, family, parts):
        """Take a replaced snapshot apart in this (background) thread, a
        bit at a time (see :func:`_dismantle`), once no request uses any
        snapshot of its ``family`` (``parts``: its big mappings). If they
        take longer than RETIRE_WAIT, their last user frees them.
        """
        deadline = time.monotonic() + RETIRE_WAIT
        while True:
            for hook in self._retire_hooks:
                hook()
            if not len(family.versions):
                break
            if time.monotonic() >= deadline:
                return
            time.sleep(RETIRE_POLL)
        _dismantle(parts)


#: Longest wait, in seconds, for the requests that use a replaced
#: snapshot before it is taken apart; polled every RETIRE_POLL seconds.
RETIRE_WAIT = 60.0
RETIRE_POLL = 0.1

CACHE = SnapshotCache()
