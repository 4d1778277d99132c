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
"""SQLAlchemy models of the nova_lease side database.

Every constraint and index has an explicit name (``uniq_<table>0<col>``,
``ix_<table>_<cols>``, ``fk_<table>_<col>``) so that migrations are stable
on MySQL/MariaDB, PostgreSQL and SQLite. Datetimes are naive UTC; MySQL
keeps their microseconds (DATETIME(6)). Strings have explicit lengths
(MySQL needs them). Child rows go with their parent through ``ON DELETE
CASCADE`` in the database (SQLite enforces it because every connection
turns foreign keys on, see nova_lease.db.api).

nova_lease.db.api runs SQL Core statements on ``Model.__table__``; the ORM
classes exist for declarative clarity, autogenerate and tests.
"""

import datetime
import typing

from oslo_utils import timeutils
import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.ext import compiler as sa_compiler
from sqlalchemy import orm
from sqlalchemy.sql import expression as sa_expression

# Naive UTC datetime with microseconds on every backend.
DateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql')

# A 64-bit autoincrement key (SQLite autoincrements INTEGER keys only).
BigInteger = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')

# Text of up to 16 MiB on MySQL (TEXT stops at 64 KiB there).
MediumText = sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mysql')

UUID_LEN = 36
NAME_LEN = 255
STATUS_LEN = 32
MYSQL_TABLE_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


def _utcnow():
    # NOTE: a function rather than timeutils.utcnow itself, so that tests
    # that override the clock (timeutils.set_time_override) are honoured.
    return timeutils.utcnow()


class Base(orm.DeclarativeBase):
    """Declarative base of every nova_lease model."""

    metadata = sa.MetaData()

    def to_dict(self):
        return {c.key: getattr(self, c.key) for c in self.__table__.columns}


class TimestampMixin:
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(
        DateTime, nullable=False, default=_utcnow)
    updated_at: orm.Mapped[typing.Optional[datetime.datetime]] = (
        orm.mapped_column(DateTime, nullable=True, onupdate=_utcnow))


class Lease(TimestampMixin, Base):
    """A lease: a project's contract for resources over [start, end)."""

    __tablename__ = 'leases'
    __table_args__ = (
        sa.Index('ix_leases_project_id', 'project_id'),
        sa.Index('ix_leases_status', 'status'),
        MYSQL_TABLE_ARGS,
    )

    id: orm.Mapped[str] = orm.mapped_column(
        sa.String(UUID_LEN), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(
        sa.String(NAME_LEN), nullable=False)
    project_id: orm.Mapped[str] = orm.mapped_column(
        sa.String(NAME_LEN), nullable=False)
    user_id: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.String(NAME_LEN), nullable=True)
    start_date: orm.Mapped[datetime.datetime] = orm.mapped_column(
        DateTime, nullable=False)
    end_date: orm.Mapped[datetime.datetime] = orm.mapped_column(
        DateTime, nullable=False)
    before_end_date: orm.Mapped[typing.Optional[datetime.datetime]] = (
        orm.mapped_column(DateTime, nullable=True))
    status: orm.Mapped[str] = orm.mapped_column(
        sa.String(STATUS_LEN), nullable=False, default='PENDING')
    status_reason: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.Text, nullable=True)
    on_end: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.String(STATUS_LEN), nullable=True)
    retries: orm.Mapped[typing.Optional[int]] = orm.mapped_column(
        sa.Integer, nullable=True)
    #: immediate, retries or scheduled (NULL: scheduled, a lease made
    #: before the column).
    lease_type: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.String(16), nullable=True)

    reservations: orm.Mapped[typing.List['Reservation']] = orm.relationship(
        back_populates='lease', passive_deletes=True)
    events: orm.Mapped[typing.List['Event']] = orm.relationship(
        back_populates='lease', passive_deletes=True)


class Reservation(TimestampMixin, Base):
    """One resource of a lease: a VM, or a set of hosts."""

    __tablename__ = 'reservations'
    __table_args__ = (
        sa.Index('ix_reservations_lease_id', 'lease_id'),
        sa.Index('ix_reservations_resource_id', 'resource_id'),
        # The instance reservations linked to a server, among the live
        # statuses (admission's running leased servers).
        sa.Index('ix_reservations_status_resource_id', 'status',
                 'resource_id'),
        MYSQL_TABLE_ARGS,
    )

    id: orm.Mapped[str] = orm.mapped_column(
        sa.String(UUID_LEN), primary_key=True)
    lease_id: orm.Mapped[str] = orm.mapped_column(
        sa.String(UUID_LEN),
        sa.ForeignKey('leases.id', name='fk_reservations_lease_id',
                      ondelete='CASCADE'),
        nullable=False)
    # 'virtual:instance' or 'physical:host'
    resource_type: orm.Mapped[str] = orm.mapped_column(
        sa.String(66), nullable=False)
    # The server uuid for virtual:instance; unused for physical:host.
    resource_id: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.String(NAME_LEN), nullable=True)
    status: orm.Mapped[str] = orm.mapped_column(
        sa.String(STATUS_LEN), nullable=False, default='pending')
    # JSON text: the request (flavor sizes, min/max, properties, ...).
    properties: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.Text, nullable=True)
    aggregate_id: orm.Mapped[typing.Optional[int]] = orm.mapped_column(
        sa.Integer, nullable=True)

    lease: orm.Mapped[Lease] = orm.relationship(back_populates='reservations')
    allocations: orm.Mapped[typing.List['Allocation']] = orm.relationship(
        back_populates='reservation', passive_deletes=True)


class Event(TimestampMixin, Base):
    """Something that happens to a lease at a time."""

    __tablename__ = 'events'
    __table_args__ = (
        sa.Index('ix_events_status_time', 'status', 'time'),
        sa.Index('ix_events_lease_id', 'lease_id'),
        MYSQL_TABLE_ARGS,
    )

    id: orm.Mapped[str] = orm.mapped_column(
        sa.String(UUID_LEN), primary_key=True)
    lease_id: orm.Mapped[str] = orm.mapped_column(
        sa.String(UUID_LEN),
        sa.ForeignKey('leases.id', name='fk_events_lease_id',
                      ondelete='CASCADE'),
        nullable=False)
    event_type: orm.Mapped[str] = orm.mapped_column(
        sa.String(66), nullable=False)
    time: orm.Mapped[datetime.datetime] = orm.mapped_column(
        DateTime, nullable=False)
    status: orm.Mapped[str] = orm.mapped_column(
        sa.String(STATUS_LEN), nullable=False, default='UNDONE')
    claimed_by: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.String(NAME_LEN), nullable=True)
    claimed_at: orm.Mapped[typing.Optional[datetime.datetime]] = (
        orm.mapped_column(DateTime, nullable=True))
    attempts: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, nullable=False, default=0)
    next_attempt_at: orm.Mapped[typing.Optional[datetime.datetime]] = (
        orm.mapped_column(DateTime, nullable=True))
    last_error: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.Text, nullable=True)

    lease: orm.Mapped[Lease] = orm.relationship(back_populates='events')


# -- the length class of an allocation ---------------------------------------
#
# An interval query ("every allocation overlapping [start, end)") on an
# index of start dates scans every allocation that starts before ``end``,
# however long ago: the whole history. With a bound on the length of the
# allocations it reads, it needs only those starting after ``start -
# bound``. ``span_class`` is that bound, per row: the smallest k with
# length <= 2**k hours (0 for an hour or less), SPAN_CLASSES for longer
# than 2**(SPAN_CLASSES - 1) hours. A query reads, for each class k, the
# allocations of class k that start in (start - 2**k hours, end): index
# range scans that never reach the allocations far from the window
# (nova_lease.db.api.window_allocation_rows). The database computes it (a
# generated column), so no writer can get it wrong.

#: Classes 0..SPAN_CLASSES - 1 have a bound; class SPAN_CLASSES (over
#: 2**16 hours, 7.5 years) has none.
SPAN_CLASSES = 17


class _Seconds(sa_expression.ColumnElement):
    """Whole seconds from ``start`` to ``end`` (DATETIME columns)."""

    inherit_cache = True
    type = sa.BigInteger()

    def __init__(self, start, end):
        self.start = start
        self.end = end


@sa_compiler.compiles(_Seconds)
def _seconds_sqlite(element, compiler, **kw):
    return ('CAST((julianday(%s) - julianday(%s)) * 86400 AS INTEGER)' % (
        compiler.process(element.end, **kw),
        compiler.process(element.start, **kw)))


@sa_compiler.compiles(_Seconds, 'mysql')
def _seconds_mysql(element, compiler, **kw):
    return 'TIMESTAMPDIFF(SECOND, %s, %s)' % (
        compiler.process(element.start, **kw),
        compiler.process(element.end, **kw))


@sa_compiler.compiles(_Seconds, 'postgresql')
def _seconds_postgresql(element, compiler, **kw):
    return 'CAST(EXTRACT(EPOCH FROM (%s - %s)) AS BIGINT)' % (
        compiler.process(element.end, **kw),
        compiler.process(element.start, **kw))


def span_class_expression(start, end):
    """The SQL expression of span_class (see above) of [start, end)."""
    seconds = _Seconds(start, end)
    return sa.case(*[(seconds <= 3600 * 2 ** k, k)
                     for k in range(SPAN_CLASSES)], else_=SPAN_CLASSES)


class Allocation(Base):
    """Capacity a reservation holds on one host over [start, end).

    end_date is stored as booked: for host reservations it includes the
    cleaning time.
    """

    __tablename__ = 'allocations'
    __table_args__ = (
        sa.Index('ix_allocations_host_start_date_end_date',
                 'host', 'start_date', 'end_date'),
        sa.Index('ix_allocations_start_date_end_date',
                 'start_date', 'end_date'),
        sa.Index('ix_allocations_reservation_id', 'reservation_id'),
        # Window queries (see span_class_expression), for every host (a
        # covering index: read from the index alone) and for a few hosts.
        sa.Index('ix_allocations_span_class_covering',
                 'span_class', 'start_date', 'end_date', 'host',
                 'reservation_id', 'vcpus', 'memory_mb', 'disk_gb',
                 'whole_host'),
        sa.Index('ix_allocations_host_span_class_start_date',
                 'host', 'span_class', 'start_date'),
        MYSQL_TABLE_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, primary_key=True, autoincrement=True)
    reservation_id: orm.Mapped[str] = orm.mapped_column(
        sa.String(UUID_LEN),
        sa.ForeignKey('reservations.id', name='fk_allocations_reservation_id',
                      ondelete='CASCADE'),
        nullable=False)
    # Hypervisor hostname.
    host: orm.Mapped[str] = orm.mapped_column(
        sa.String(NAME_LEN), nullable=False)
    start_date: orm.Mapped[datetime.datetime] = orm.mapped_column(
        DateTime, nullable=False)
    end_date: orm.Mapped[datetime.datetime] = orm.mapped_column(
        DateTime, nullable=False)
    vcpus: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, nullable=False, default=0)
    memory_mb: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, nullable=False, default=0)
    disk_gb: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, nullable=False, default=0)
    whole_host: orm.Mapped[bool] = orm.mapped_column(
        sa.Boolean, nullable=False, default=False)
    # Computed by the database from the dates (never written).
    span_class: orm.Mapped[typing.Optional[int]] = orm.mapped_column(
        sa.SmallInteger, sa.Computed(span_class_expression(
            sa.column('start_date'), sa.column('end_date'))),
        nullable=True)

    reservation: orm.Mapped[Reservation] = orm.relationship(
        back_populates='allocations')


class Host(TimestampMixin, Base):
    """A reservable compute host (Blazar's "computehosts")."""

    __tablename__ = 'hosts'
    __table_args__ = (
        sa.UniqueConstraint('hypervisor_hostname',
                            name='uniq_hosts0hypervisor_hostname'),
        MYSQL_TABLE_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, primary_key=True, autoincrement=True)
    hypervisor_hostname: orm.Mapped[str] = orm.mapped_column(
        sa.String(NAME_LEN), nullable=False)
    service_host: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.String(NAME_LEN), nullable=True)
    availability_zone: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.String(NAME_LEN), nullable=True)
    vcpus: orm.Mapped[int] = orm.mapped_column(sa.Integer, nullable=False)
    memory_mb: orm.Mapped[int] = orm.mapped_column(sa.Integer, nullable=False)
    local_gb: orm.Mapped[int] = orm.mapped_column(sa.Integer, nullable=False)
    cpu_info: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.Text, nullable=True)
    hypervisor_type: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.String(NAME_LEN), nullable=True)
    hypervisor_version: orm.Mapped[typing.Optional[int]] = orm.mapped_column(
        sa.Integer, nullable=True)
    reservable: orm.Mapped[bool] = orm.mapped_column(
        sa.Boolean, nullable=False, default=True)

    capabilities: orm.Mapped[typing.List['HostCapability']] = (
        orm.relationship(back_populates='host', passive_deletes=True))


class HostCapability(Base):
    """One extra capability of a host (e.g. gpu=true)."""

    __tablename__ = 'host_capabilities'
    __table_args__ = (
        sa.UniqueConstraint('host_id', 'capability_name',
                            name='uniq_host_capabilities0host_id0'
                                 'capability_name'),
        MYSQL_TABLE_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, primary_key=True, autoincrement=True)
    host_id: orm.Mapped[int] = orm.mapped_column(
        sa.Integer,
        sa.ForeignKey('hosts.id', name='fk_host_capabilities_host_id',
                      ondelete='CASCADE'),
        nullable=False)
    capability_name: orm.Mapped[str] = orm.mapped_column(
        sa.String(NAME_LEN), nullable=False)
    capability_value: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.Text, nullable=True)

    host: orm.Mapped[Host] = orm.relationship(back_populates='capabilities')


class Lock(Base):
    """A named row that writers lock (SELECT ... FOR UPDATE) to serialise.

    Rows are created on demand by nova_lease.db.api.lock(); names look like
    ``host:<hypervisor hostname>``.
    """

    __tablename__ = 'locks'
    __table_args__ = (MYSQL_TABLE_ARGS,)

    name: orm.Mapped[str] = orm.mapped_column(
        sa.String(NAME_LEN), primary_key=True)


class Generation(Base):
    """A counter that writers bump when they change what processes cache.

    ``hosts``: bumped (value + 1, updated_at now) by every host_create,
    host_update and host_destroy of nova_lease.db.api, in its transaction.
    Each nova-api process keeps a copy of the host registry
    (nova_lease.plugins.host.registry) and checks it against this row, one
    primary key lookup, at every allocation. The row is created by the
    first bump.
    """

    __tablename__ = 'generations'
    __table_args__ = (MYSQL_TABLE_ARGS,)

    name: orm.Mapped[str] = orm.mapped_column(
        sa.String(64), primary_key=True)
    value: orm.Mapped[int] = orm.mapped_column(
        BigInteger, nullable=False, default=0)
    updated_at: orm.Mapped[datetime.datetime] = orm.mapped_column(
        DateTime, nullable=False)


class LeaseChange(Base):
    """The change journal of the promises the scheduler caches.

    Every writer of nova_lease.db.api that changes a lease's dates or
    status, a reservation (status, server link, creation, deletion) or an
    allocation adds, in the same transaction, one row naming the lease
    and/or the reservation. The scheduler's snapshot
    (nova_lease.scheduler.snapshot_reads) reads the rows above the last id
    it saw and reads those reservations again. Rows are pruned after
    nova_lease.db.api.CHANGE_RETENTION. No foreign keys: the row of a
    deleted lease must stay.
    """

    __tablename__ = 'lease_changes'
    __table_args__ = (
        sa.Index('ix_lease_changes_created_at', 'created_at'),
        MYSQL_TABLE_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(
        BigInteger, primary_key=True, autoincrement=True)
    lease_id: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.String(UUID_LEN), nullable=True)
    reservation_id: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.String(UUID_LEN), nullable=True)
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(
        DateTime, nullable=False, default=_utcnow)


class BootRequest(Base):
    """The boot request of a server created at its lease's start (no
    longer written: a future lease's server is now created
    shelved-offloaded at its boot, nova_lease.api_ext.shelved).

    Rows written by earlier releases, one per ``virtual:instance``
    reservation of a future lease made by ``POST /servers``: JSON text
    with the request body (lease hints removed), the microversion and the
    owner's identity. Goes with its reservation; a later migration may
    drop the table.
    """

    __tablename__ = 'boot_requests'
    __table_args__ = (MYSQL_TABLE_ARGS,)

    reservation_id: orm.Mapped[str] = orm.mapped_column(
        sa.String(UUID_LEN),
        sa.ForeignKey('reservations.id',
                      name='fk_boot_requests_reservation_id',
                      ondelete='CASCADE'),
        primary_key=True)
    # MEDIUMTEXT on MySQL: Nova's user_data alone may be 64 KiB.
    request: orm.Mapped[str] = orm.mapped_column(MediumText, nullable=False)
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(
        DateTime, nullable=False, default=_utcnow)


class DatabaseIdentity(Base):
    """The identity of this side database: one row, made by db sync.

    Its random ``id`` is created with the schema (the migration that adds
    this table inserts it), so two databases never share it. Every process
    that uses the database logs it when it starts, which tells an operator
    whether nova-api, nova-scheduler and nova-lease-engine share one
    database (see nova_lease.registration).
    """

    __tablename__ = 'database_identity'
    __table_args__ = (MYSQL_TABLE_ARGS,)

    id: orm.Mapped[str] = orm.mapped_column(
        sa.String(UUID_LEN), primary_key=True)
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(
        DateTime, nullable=False, default=_utcnow)


class Process(Base):
    """A process that uses this side database (one row per process start).

    nova-api (the paste filter), nova-scheduler (LeaseFilter/LeaseWeigher)
    and nova-lease-engine insert their row when they start and beat
    (``heartbeats`` + 1, ``heartbeat_at``) while they run; a clean stop
    sets ``stopped_at``. For an engine, ``name`` is its engine id (the
    ``claimed_by`` of its events): other engines release the claims of an
    engine whose ``heartbeats`` stop moving (see nova_lease.periodic.
    engine). ``nova-lease-manage process list`` shows them.
    """

    __tablename__ = 'processes'
    __table_args__ = (
        sa.Index('ix_processes_binary_stopped_at', 'binary', 'stopped_at'),
        MYSQL_TABLE_ARGS,
    )

    id: orm.Mapped[str] = orm.mapped_column(
        sa.String(UUID_LEN), primary_key=True)
    binary: orm.Mapped[str] = orm.mapped_column(
        sa.String(64), nullable=False)
    name: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.String(NAME_LEN), nullable=True)
    host: orm.Mapped[str] = orm.mapped_column(
        sa.String(NAME_LEN), nullable=False)
    pid: orm.Mapped[int] = orm.mapped_column(sa.Integer, nullable=False)
    started_at: orm.Mapped[datetime.datetime] = orm.mapped_column(
        DateTime, nullable=False)
    heartbeat_at: orm.Mapped[datetime.datetime] = orm.mapped_column(
        DateTime, nullable=False)
    heartbeats: orm.Mapped[int] = orm.mapped_column(
        BigInteger, nullable=False, default=0)
    stopped_at: orm.Mapped[typing.Optional[datetime.datetime]] = (
        orm.mapped_column(DateTime, nullable=True))
    stop_reason: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.Text, nullable=True)


class EngineAction(Base):
    """The action journal of the engine's gate (nova_lease.gate).

    One row per change the engine asked of Nova, or was refused by the
    gate: the lease and reservation it was for (``lease_id`` None for
    the idle-host pass), the lease's project, the target (``server``,
    ``host``, ``service``, ``flavor``, ``aggregate``, ``server_group``,
    ``reservation``), the target's project and host when known, the
    action (``delete``, ``live_migrate``, ...), why, and its
    ``outcome``: ``done``, ``failed`` or ``refused``. ``engine`` names
    the process and job. No foreign keys: the rows of a deleted lease
    stay, for the auditor.
    """

    __tablename__ = 'engine_actions'
    __table_args__ = (
        sa.Index('ix_engine_actions_lease_id', 'lease_id'),
        sa.Index('ix_engine_actions_target', 'target_kind', 'target_id'),
        MYSQL_TABLE_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(
        BigInteger, primary_key=True, autoincrement=True)
    lease_id: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.String(UUID_LEN), nullable=True)
    reservation_id: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.String(UUID_LEN), nullable=True)
    project_id: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.String(NAME_LEN), nullable=True)
    target_kind: orm.Mapped[str] = orm.mapped_column(
        sa.String(16), nullable=False)
    target_id: orm.Mapped[str] = orm.mapped_column(
        sa.String(NAME_LEN), nullable=False)
    target_project_id: orm.Mapped[typing.Optional[str]] = (
        orm.mapped_column(sa.String(NAME_LEN), nullable=True))
    target_host: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.String(NAME_LEN), nullable=True)
    action: orm.Mapped[str] = orm.mapped_column(
        sa.String(64), nullable=False)
    reason: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.Text, nullable=True)
    outcome: orm.Mapped[str] = orm.mapped_column(
        sa.String(16), nullable=False)
    engine: orm.Mapped[typing.Optional[str]] = orm.mapped_column(
        sa.String(NAME_LEN), nullable=True)
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(
        DateTime, nullable=False, default=_utcnow)


LEASES = Lease.__table__
RESERVATIONS = Reservation.__table__
EVENTS = Event.__table__
ALLOCATIONS = Allocation.__table__
HOSTS = Host.__table__
HOST_CAPABILITIES = HostCapability.__table__
LOCKS = Lock.__table__
LEASE_CHANGES = LeaseChange.__table__
GENERATIONS = Generation.__table__
BOOT_REQUESTS = BootRequest.__table__
DATABASE_IDENTITY = DatabaseIdentity.__table__
PROCESSES = Process.__table__
ENGINE_ACTIONS = EngineAction.__table__
