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
"""The reads that build the capacity calendar (nova_lease.calendar)
and the scheduler's snapshot: live allocations and reservations, the
windows admission looks at, and the usage of a project.

Admission control (nova_lease.capacity.admission) reads, inside the writer
transaction that records a lease, only what the lease's window and its
candidate hosts need: the allocations overlapping the window (index range
scans by span_class, see nova_lease.db.models), and the instance
reservations linked to a server (the running leased servers). Neither grows
with the reservations far from the window in time.
"""

import datetime

import sqlalchemy as sa

from nova_lease.db import common
from nova_lease.db import models
from nova_lease.db import transaction

LEASES = models.LEASES
RESERVATIONS = models.RESERVATIONS
ALLOCATIONS = models.ALLOCATIONS
HOSTS = models.HOSTS


def _live(now, dead_reservations, dead_leases):
    return sa.and_(RESERVATIONS.c.status.notin_(dead_reservations),
                   LEASES.c.status.notin_(dead_leases),
                   LEASES.c.end_date > common.naive_utc(now))


def live_allocation_rows(db, now, dead_reservations, dead_leases,
                         ends_after=None, start_before=None, hosts=None):
    """Allocations of live reservations of leases not ended at ``now``.

    Yields (streams, for the scheduler's bulk read) rows ``(id,
    reservation_id, host, start_date, end_date, vcpus, memory_mb, disk_gb,
    whole_host)``, which unpack as tuples. A reservation or lease whose
    status is in ``dead_reservations`` / ``dead_leases`` is not live.
    Optional filters: ``ends_after`` (end_date > it), ``start_before``
    (start_date < it), ``hosts``.
    """
    alloc = ALLOCATIONS
    stmt = (sa.select(alloc.c.id, alloc.c.reservation_id, alloc.c.host,
                      alloc.c.start_date, alloc.c.end_date, alloc.c.vcpus,
                      alloc.c.memory_mb, alloc.c.disk_gb, alloc.c.whole_host)
            .select_from(alloc.join(RESERVATIONS).join(LEASES))
            .where(_live(now, dead_reservations, dead_leases)))
    if ends_after is not None:
        stmt = stmt.where(alloc.c.end_date > common.naive_utc(ends_after))
    if start_before is not None:
        stmt = stmt.where(alloc.c.start_date < common.naive_utc(start_before))
    if hosts is not None:
        stmt = stmt.where(alloc.c.host.in_(sorted(hosts)))
    with transaction.reading(db) as session:
        yield from session.execute(stmt)


def live_reservation_rows(db, now, dead_reservations, dead_leases):
    """Live reservations with their lease (see live_allocation_rows).

    Yields rows ``(id, resource_type, resource_id, properties (JSON text),
    lease_id, project_id, lease start_date, lease end_date, lease
    status)``.
    """
    res = RESERVATIONS
    stmt = (sa.select(res.c.id, res.c.resource_type, res.c.resource_id,
                      res.c.properties, LEASES.c.id, LEASES.c.project_id,
                      LEASES.c.start_date, LEASES.c.end_date,
                      LEASES.c.status)
            .select_from(res.join(LEASES))
            .where(_live(now, dead_reservations, dead_leases)))
    with transaction.reading(db) as session:
        yield from session.execute(stmt)


#: Added to each class's bound: the database rounds lengths to seconds.
_SPAN_MARGIN = datetime.timedelta(minutes=1)


def span_lookback(span_class):
    """How long before a window an allocation of ``span_class`` may
    start and still overlap it; None when unbounded.
    """
    if span_class >= models.SPAN_CLASSES:
        return None
    return datetime.timedelta(hours=2 ** span_class) + _SPAN_MARGIN


def _micros(date, dialect):
    """SQL: ``date`` (a naive UTC DATETIME column) as integer microseconds
    since the epoch. The window reads return dates so: the calendar takes
    them as they are, and a database client decodes an integer several
    times faster than a date (MySQL's, SQLAlchemy's for SQLite's text).
    """
    if dialect == 'mysql':
        return sa.func.timestampdiff(sa.literal_column('MICROSECOND'),
                                     sa.literal_column("'1970-01-01'"),
                                     date)
    if dialect == 'postgresql':
        return sa.cast(sa.func.extract('epoch', date) * 1000000,
                       sa.BigInteger)
    # SQLite: SQLAlchemy stores 'YYYY-MM-DD HH:MM:SS.ffffff'. The whole
    # seconds by strftime of the text without its fraction (with it,
    # SQLite rounds to the millisecond: .999999 would be the next
    # second), plus the fraction's digits ('' -> 0 when absent).
    return (sa.cast(sa.func.strftime('%s', sa.func.substr(date, 1, 19)),
                    sa.BigInteger) * 1000000 +
            sa.cast(sa.func.substr(date, 21, 6), sa.BigInteger))


def _window_statement(by_host, live, with_id, dialect):
    """Allocations overlapping [:start, :end): one index range per span
    class (per host of the expanding :hosts with ``by_host``); class k's
    lower bound is :lb<k>. With ``live``, only those of live reservations
    of leases not ended at :now. Columns: the calendar's item fields
    (nova_lease.calendar.Item: host, start, end as microseconds since
    the epoch, vcpus, memory_mb, disk_gb, whole_host, reservation_id),
    then, ``with_id``, the allocation's id. Built once per dialect (see
    window_allocation_items).
    """
    alloc = ALLOCATIONS
    ranges = []
    for k in range(models.SPAN_CLASSES + 1):
        terms = [alloc.c.span_class == k,
                 alloc.c.start_date < sa.bindparam('end')]
        if span_lookback(k) is not None:
            terms.append(alloc.c.start_date > sa.bindparam('lb%d' % k))
        if by_host:
            terms.insert(0, alloc.c.host.in_(
                sa.bindparam('hosts', expanding=True)))
        ranges.append(sa.and_(*terms))
    columns = [alloc.c.host, _micros(alloc.c.start_date, dialect),
               _micros(alloc.c.end_date, dialect), alloc.c.vcpus,
               alloc.c.memory_mb, alloc.c.disk_gb, alloc.c.whole_host,
               alloc.c.reservation_id]
    if with_id:
        columns.append(alloc.c.id)
    stmt = sa.select(*columns)
    where = [sa.or_(*ranges), alloc.c.end_date > sa.bindparam('start')]
    if live:
        stmt = stmt.select_from(alloc.join(RESERVATIONS).join(LEASES))
        where += [
            RESERVATIONS.c.status.not_in(sa.bindparam(
                'dead_reservations', expanding=True)),
            LEASES.c.status.not_in(sa.bindparam('dead_leases',
                                                expanding=True)),
            LEASES.c.end_date > sa.bindparam('now')]
    return stmt.where(*where)


_WINDOW = {(by_host, live, with_id, dialect): _window_statement(
    by_host, live, with_id, dialect)
    for by_host in (False, True) for live in (False, True)
    for with_id in (False, True)
    for dialect in ('sqlite', 'mysql', 'postgresql')}


_EPOCH = datetime.datetime(1970, 1, 1)


def _from_micros(micros):
    return _EPOCH + datetime.timedelta(microseconds=micros)


def window_allocation_items(db, now, dead_reservations, dead_leases, start,
                            end, hosts=None, live=True):
    """Allocations overlapping [start, end) of live reservations of leases
    not ended at ``now`` (see live_allocation_rows), on ``hosts``
    (hypervisor hostnames) or every host, in the caller's transaction.

    Tuples of the calendar's item fields (nova_lease.calendar.Item):
    ``(host, start, end, vcpus, memory_mb, disk_gb, whole_host,
    reservation_id)``, the dates as integer microseconds since the epoch
    (what the calendar computes with). Reads only the allocations that
    start within their class's bound before ``start``: the cost follows
    the allocations near the window, not the table's size. With ``live``
    False, the allocations of reservations and leases that hold nothing
    any more are read too (a superset: what a plan may start from), from
    the covering index alone, without reading their reservation and lease.
    """
    return _window_rows(db, now, dead_reservations, dead_leases, start,
                        end, hosts, live, with_id=False)


def window_allocation_rows(db, now, dead_reservations, dead_leases, start,
                           end, hosts=None, live=True):
    """The allocations window_allocation_items reads, as rows ``(id,
    reservation_id, host, start_date, end_date, vcpus, memory_mb,
    disk_gb, whole_host)`` with naive UTC datetimes.
    """
    return [(aid, rid, host, _from_micros(a_start), _from_micros(a_end),
             vcpus, memory_mb, disk_gb, whole)
            for (host, a_start, a_end, vcpus, memory_mb, disk_gb, whole,
                 rid, aid) in _window_rows(
                db, now, dead_reservations, dead_leases, start, end, hosts,
                live, with_id=True)]


def _window_rows(db, now, dead_reservations, dead_leases, start, end, hosts,
                 live, with_id):
    start, end = common.naive_utc(start), common.naive_utc(end)
    params = {'start': start, 'end': end}
    if live:
        params.update(now=common.naive_utc(now),
                      dead_reservations=list(dead_reservations),
                      dead_leases=list(dead_leases))
    for k in range(models.SPAN_CLASSES):
        params['lb%d' % k] = start - span_lookback(k)
    if hosts is not None:
        hosts = sorted(set(hosts))
        if not hosts:
            return []
        params['hosts'] = hosts
    with transaction.reading(db) as session:
        dialect = transaction.connection_of(session).dialect.name
        statement = _WINDOW[hosts is not None, bool(live), with_id, dialect]
        return [tuple(row) for row in session.execute(statement, params)]


def linked_instance_rows(db, now, live_statuses, dead_leases,
                         server_types):
    """The instance reservations linked to a server, of leases not ended
    at ``now``, in the caller's transaction.

    ``server_types``: the reservation types that are one server each
    (nova_lease.resource_types.SERVER_TYPES).

    ``live_statuses``: the reservation statuses that count (pending,
    active). Rows ``(reservation id, server uuid, properties (JSON text),
    lease_id, lease start_date, lease end_date, lease status, host of
    its allocation holding ``now`` or None)``. Their number is that of
    the servers leased now (and of those created before their lease's
    start), whatever the number of future reservations.
    """
    res, alloc = RESERVATIONS, ALLOCATIONS
    now = common.naive_utc(now)
    stmt = (sa.select(res.c.id, res.c.resource_id, res.c.properties,
                      LEASES.c.id, LEASES.c.start_date, LEASES.c.end_date,
                      LEASES.c.status, alloc.c.host)
            .select_from(res.join(LEASES).outerjoin(alloc, sa.and_(
                alloc.c.reservation_id == res.c.id,
                alloc.c.start_date <= now, alloc.c.end_date > now)))
            .where(res.c.status.in_(sorted(live_statuses)),
                   res.c.resource_id.is_not(None),
                   res.c.resource_type.in_(sorted(server_types)),
                   LEASES.c.status.not_in(sorted(dead_leases)),
                   LEASES.c.end_date > now))
    with transaction.reading(db) as session:
        return [tuple(row) for row in session.execute(stmt)]


def registered_hostnames(db, hostnames=None):
    """{hypervisor hostname: service host} of the registered hosts (the
    ``hosts`` table, whatever their reservable flag), or of those among
    ``hostnames``.
    """
    stmt = sa.select(HOSTS.c.hypervisor_hostname, HOSTS.c.service_host)
    if hostnames is not None:
        hostnames = sorted(set(hostnames))
        if not hostnames:
            return {}
        stmt = stmt.where(HOSTS.c.hypervisor_hostname.in_(hostnames))
    with transaction.reading(db) as session:
        return {name: service for name, service in session.execute(stmt)}


def project_live_lease_count(db, project_id, now, dead_leases):
    """How many leases of ``project_id`` have not ended at ``now`` (status
    not in ``dead_leases``, end after now).
    """
    stmt = (sa.select(sa.func.count()).select_from(LEASES)
            .where(LEASES.c.project_id == project_id,
                   LEASES.c.status.not_in(sorted(dead_leases)),
                   LEASES.c.end_date > common.naive_utc(now)))
    with transaction.reading(db) as session:
        return session.execute(stmt).scalar() or 0


def project_instance_rows(db, project_id, now, dead_reservations,
                          dead_leases, start, end, instance_types):
    """The live instance reservations of ``project_id``'s leases that
    overlap [start, end) and have not ended at ``now``: one server each
    (``virtual:instance``, boot hints), or ``amount`` instance slots
    (``flavor:instance``, Blazar's instance reservations).

    Rows ``(lease id, lease start_date, lease end_date, properties (JSON
    text))``.
    """
    res = RESERVATIONS
    stmt = (sa.select(LEASES.c.id, LEASES.c.start_date, LEASES.c.end_date,
                      res.c.properties)
            .select_from(res.join(LEASES))
            .where(LEASES.c.project_id == project_id,
                   res.c.resource_type.in_(sorted(instance_types)),
                   _live(now, dead_reservations, dead_leases),
                   LEASES.c.start_date < common.naive_utc(end),
                   LEASES.c.end_date > common.naive_utc(start)))
    with transaction.reading(db) as session:
        return [tuple(row) for row in session.execute(stmt)]


def project_host_rows(db, project_id, now, dead_reservations, dead_leases,
                      start, end):
    """The host allocations of ``project_id``'s live host reservations
    that overlap [start, end).

    Rows ``(lease id, host, start_date, end_date)`` (as booked, cleaning
    time included).
    """
    alloc = ALLOCATIONS
    stmt = (sa.select(LEASES.c.id, alloc.c.host, alloc.c.start_date,
                      alloc.c.end_date)
            .select_from(alloc.join(RESERVATIONS).join(LEASES))
            .where(LEASES.c.project_id == project_id,
                   alloc.c.whole_host.is_(True),
                   _live(now, dead_reservations, dead_leases),
                   alloc.c.start_date < common.naive_utc(end),
                   alloc.c.end_date > common.naive_utc(start)))
    with transaction.reading(db) as session:
        return [tuple(row) for row in session.execute(stmt)]


def _live_joined_statement(changed):
    """Live reservations, their lease and their allocations not ended at
    ``now``; with ``changed``, only reservations ``ids`` and those of
    leases ``lease_ids``.
    """
    res, alloc = RESERVATIONS, ALLOCATIONS
    now = sa.bindparam('now')
    stmt = (
        sa.select(res.c.id, res.c.resource_type, res.c.resource_id,
                  res.c.properties, LEASES.c.id, LEASES.c.project_id,
                  LEASES.c.start_date, LEASES.c.end_date, LEASES.c.status,
                  alloc.c.id, alloc.c.host, alloc.c.start_date,
                  alloc.c.end_date, alloc.c.vcpus, alloc.c.memory_mb,
                  alloc.c.disk_gb, alloc.c.whole_host)
        .select_from(res.join(LEASES).outerjoin(alloc, sa.and_(
            alloc.c.reservation_id == res.c.id, alloc.c.end_date > now)))
        .where(res.c.status.not_in(sa.bindparam('dead_reservations',
                                                expanding=True)),
               LEASES.c.status.not_in(sa.bindparam('dead_leases',
                                                   expanding=True)),
               LEASES.c.end_date > now))
    if changed:
        stmt = stmt.where(sa.or_(
            res.c.id.in_(sa.bindparam('ids', expanding=True)),
            res.c.lease_id.in_(sa.bindparam('lease_ids', expanding=True))))
    return stmt


_LIVE_JOINED = _live_joined_statement(changed=False)
_LIVE_CHANGED = _live_joined_statement(changed=True)


def live_reservations_with_allocations(db, now, dead_reservations,
                                       dead_leases, ids=(), lease_ids=()):
    """The live reservations ``ids`` and those of leases ``lease_ids``,
    with their allocations not ended at ``now``, in one query.

    Rows ``(reservation row as live_reservation_rows, allocation row as
    live_allocation_rows or None)``.
    """
    params = {'now': common.naive_utc(now),
              'dead_reservations': list(dead_reservations),
              'dead_leases': list(dead_leases), 'ids': sorted(ids),
              'lease_ids': sorted(lease_ids)}
    with transaction.reading(db) as session:
        out = []
        for row in session.execute(_LIVE_CHANGED, params):
            row = tuple(row)
            alloc = None
            if row[9] is not None:
                alloc = (row[9], row[0]) + row[10:]
            out.append((row[:9], alloc))
        return out


def live_reservation_allocation_rows(db, now, dead_reservations,
                                     dead_leases):
    """Every live reservation with its lease and its allocations not
    ended at ``now``, in one query (the scheduler's full read).

    Yields (streams) flat rows: the columns of live_reservation_rows,
    then the allocation's ``(id, host, start_date, end_date, vcpus,
    memory_mb, disk_gb, whole_host)`` (all None for a reservation without
    one); a reservation with several allocations comes once per
    allocation.
    """
    params = {'now': common.naive_utc(now),
              'dead_reservations': list(dead_reservations),
              'dead_leases': list(dead_leases)}
    with transaction.reading(db) as session:
        yield from session.execute(_LIVE_JOINED, params)
