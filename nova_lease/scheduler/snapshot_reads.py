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
"""Reading the snapshot of the lease calendar from the side database.

* the full read (:func:`load`, :func:`read`): every live promise and the
  host registry, in one transaction;
* the reads of what one request names while there is no snapshot yet
  (:func:`read_named`, :func:`read_host_items`: indexed queries);
* the change journal (the ``lease_changes`` table, written by every
  nova_lease.db.api writer that changes a promise, in its own
  transaction): a cheap :func:`probe` (one index range scan over the
  journal's last :data:`PROBE_MARGIN` ids) tells whether anything
  changed; :func:`read_changes` reads the new journal rows and the
  reservations they name again, with their lease and allocations, and
  patches the snapshot (``Snapshot.patched``: the calendar rebuilds only
  the hosts whose items changed); :func:`refresh` does both, and
  follows the host registry.

The data structure is :mod:`nova_lease.scheduler.snapshot`; the cache
that keeps one current per database,
:mod:`nova_lease.scheduler.snapshot_cache`.
"""

import collections
import itertools

from nova_lease import calendar
from nova_lease.db import api as db_api
from nova_lease.scheduler import snapshot


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
        size = snapshot.size_from(properties, by_reservation.get(rid, ())) \
            if resource_id else None
        reservations[rid] = snapshot.Reservation(
            rid, lease_id, project_id, rtype, resource_id, l_start, l_end,
            lease_status, size)
    return reservations


def _by_reservation(items):
    out = collections.defaultdict(list)
    for item in items:
        out[item.ref].append(item)
    return out


_DEAD = (snapshot.DEAD_RESERVATIONS, snapshot.DEAD_LEASES)


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
    return snapshot.Snapshot(items, reservations, version, seen=seen)


def _read_full(session, now, version, seen):
    """Every live promise, in one query (see :func:`read`), streamed into
    :meth:`Snapshot.from_rows <nova_lease.scheduler.snapshot.Snapshot>`.
    """
    return snapshot.Snapshot.from_rows(
        db_api.live_reservation_allocation_rows(session, now, *_DEAD),
        version, seen)


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
    return snapshot.Snapshot(items, _reservations(found.values(),
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
