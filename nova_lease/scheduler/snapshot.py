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
  servers linked to instance reservations (server uuid -> lease);
* the host registry's hostnames (os-hosts).

"Live" means: the allocation or lease has not ended, the reservation is
neither ``deleted`` nor ``error``, the lease is neither ``TERMINATED`` nor
``ERROR``.

What Nova knows (capacities, current usage, which server runs where) is
not in the snapshot: the scheduler takes it from its HostState objects and
admission control from Nova's database, at each request.

This module holds the data structure: immutable, patched into a new
snapshot after a change (:meth:`Snapshot.patched`) that shares its big
mappings with the old one (``mappings.Layered``). Reading it from the
side database and following the change journal is
:mod:`nova_lease.scheduler.snapshot_reads`; keeping one current per
database, with its full reads in a background thread, is
:mod:`nova_lease.scheduler.snapshot_cache`.
"""

import collections
import itertools
import time
import weakref

from oslo_serialization import jsonutils

from nova_lease import calendar
from nova_lease import resource_types as types
from nova_lease.scheduler import mappings
from nova_lease import status

#: The types whose reservations are one server each (VM leases).
SERVER_TYPES = frozenset(n for n, f in types.FACTS.items() if f.one_server)

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


class _Family(object):
    """The snapshots made from one full read: they share its mappings."""

    def __init__(self):
        self.versions = weakref.WeakSet()


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
    :ivar version: the ``snapshot_reads.probe`` value it is current at.
    :ivar family: the snapshots patched from the same full read.
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

    @classmethod
    def from_rows(cls, rows, version=None, seen=()):
        """A Snapshot of every live promise, from the rows of one query:
        ``(reservation id, type, resource id, properties, lease id,
        project id, lease start, lease end, lease status, allocation id,
        host, start, end, vcpus, memory_mb, disk_gb, whole host)`` per
        allocation (allocation columns None for a reservation without
        one).

        The scheduler holds it in every process: equal values (hosts,
        types, statuses, projects, times, sizes) are shared, the items are
        grouped while the rows stream in, and everything is kept raw (see
        the comment above :func:`_raw_reservation`).
        """
        strings, times, numbers = {}, {}, {}
        share_str, share_time, share_int = (strings.setdefault,
                                            times.setdefault,
                                            numbers.setdefault)
        allocations = {}
        host_items = {}
        by_rid = {}
        for (rid, rtype, resource_id, properties, lease_id, project_id,
             l_start, l_end, l_status, alloc_id, host, a_start, a_end, vcpus,
             memory_mb, disk_gb, whole) in rows:
            if rid not in by_rid:
                by_rid[rid] = (
                    rid, lease_id, share_str(project_id, project_id),
                    share_str(rtype, rtype), resource_id,
                    share_time(l_start, l_start), share_time(l_end, l_end),
                    share_str(l_status, l_status),
                    properties if resource_id else None)
            if alloc_id is None:
                continue
            host = share_str(host, host)
            raw = (host, share_time(a_start, a_start),
                   share_time(a_end, a_end), share_int(vcpus, vcpus),
                   share_int(memory_mb, memory_mb),
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
        while by_rid:
            # (Popped: each row is freed as soon as it is used.)
            rid, row = by_rid.popitem()
            # Sizes matter for the servers linked to a reservation only.
            size = None
            if row[4]:
                group = allocations.get(rid)
                size = size_from(row[8], () if group is None
                                 else _items_of(group))
                size = None if size is None else tuple(size)
            reservations[rid] = row[:8] + (size,)
            lease_id = row[1]
            group = by_lease.get(lease_id)
            by_lease[lease_id] = (rid if group is None
                                  else _rids(group) + (rid,))
        snap = cls.__new__(cls)
        snap._assemble(allocations,
                       {h: tuple(v) for h, v in host_items.items()},
                       reservations, by_lease, version, seen=seen)
        return snap

    def _assemble(self, allocations, host_items, reservations, by_lease,
                  version, loaded_at=None, seen=(), registered=(),
                  hosts_version=None):
        """Set up from raw parts: {reservation id: raw item(s) (see
        :func:`_group`)}, {host: raw items}, {reservation id: raw
        reservation}, {lease id: reservation id(s)}.
        """
        self._alloc = mappings.Layered(allocations)
        self._hosts = host_items
        self.calendar = calendar.Calendar.from_host_items(
            {}, host_items) if host_items else None
        self._by_lease = mappings.Layered(by_lease)
        self._res = mappings.Layered(reservations)
        self._servers = {r[4]: r for r in reservations.values()
                         if r[3] in SERVER_TYPES and r[4]}
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
        self.family = _Family()
        self._views()

    def _views(self):
        self.family.versions.add(self)
        self.allocations = mappings.ValueView(self._alloc, _items_of)
        self.by_lease = mappings.ValueView(self._by_lease, _rids)
        self.host_items = mappings.ValueView(self._hosts, _items_of)
        self.reservations = mappings.ValueView(self._res, _reservation)
        self.servers = mappings.ValueView(self._servers, _reservation)

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
        mappings are shared with this snapshot (see
        :class:`nova_lease.scheduler.mappings.Layered`).
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
            {rid: (_one_or_many(by_rid[rid]) if by_rid.get(rid)
                   else mappings.GONE)
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
            {rid: fresh.get(rid, mappings.GONE) for rid in rids
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
            {lid: _one_or_many(sorted(v)) if v else mappings.GONE
             for lid, v in leases.items()})

        servers, server_rows = self._servers, self.server_rows
        linked = [raw for raw in list(old.values()) + list(fresh.values())
                  if raw is not None and raw[3] in SERVER_TYPES and raw[4]]
        if linked:
            servers, server_rows = dict(servers), dict(server_rows)
            for raw in old.values():
                if raw is not None and servers.get(raw[4]) == raw:
                    del servers[raw[4]]
                    server_rows.pop(raw[4], None)
            for raw in fresh.values():
                if raw[3] not in SERVER_TYPES or not raw[4]:
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
        new.family = self.family
        new._views()
        return new

    def __repr__(self):
        return '<Snapshot %d reservations, version %s>' % (
            len(self._res), self.version)

    def parts(self):
        """The big mappings of this snapshot (the cache takes a replaced
        snapshot apart: see ``snapshot_cache.SnapshotCache``).
        """
        parts = []
        for layered in (self._alloc, self._res, self._by_lease):
            parts.extend((layered._top, layered._base))
        parts.extend((self._servers, self.server_rows, self._hosts))
        cal = self.calendar
        if cal is not None and cal._by_host is not None:
            parts.append(cal._by_host)
        return parts

    def project_items(self, project_id):
        """The calendar Items of project ``project_id``'s allocations.

        The index of reservations by project is made at the first call
        (one pass over the reservations) and kept with this snapshot.
        """
        index = self.__dict__.get('_by_project')
        if index is None:
            index = collections.defaultdict(list)
            for rid, raw in self._res.fast_items():
                index[raw[2]].append(rid)
            self._by_project = index
        items = []
        for rid in index.get(project_id, ()):
            group = self._alloc.get(rid)
            if group is not None:
                items.extend(_items_of(group))
        return items

    def server_reservation_id(self, uuid):
        """The id of the instance reservation linked to server ``uuid``
        (None: none).
        """
        raw = self._servers.get(uuid)
        return None if raw is None else raw[0]

    def calendar_without(self, refs, hosts):
        """A Calendar of ``hosts``' allocations, less those of ``refs``.

        For a request whose own reservation must not count against it.
        """
        refs = set(refs)
        items = [raw for host in hosts for raw in self._hosts.get(host, ())
                 if raw[7] not in refs]
        return calendar.Calendar({}, items) if items else None


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


def size_from(properties, items):
    """The Demand of a reservation: its first allocation that is not a
    whole host, else its ``properties`` (JSON: ``vcpus``, ``memory_mb``,
    ``disk_gb``); None when neither tells.
    """
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
