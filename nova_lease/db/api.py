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
"""Transactional functions of the nova_lease side database.

This is the only module that runs SQL. It has no business rules: which
status may follow which lives in nova_lease.status; here a status is a
string and ``expected_status`` is a compare-and-set guard.

Conventions:

* Every function takes ``db`` first: a :class:`Database`, or a Session
  yielded by ``Database.reader()``/``Database.writer()`` to run inside the
  caller's transaction (e.g. ``lock_hosts`` + ``allocation_list`` +
  ``lease_create`` as one admission-control transaction). A function that
  writes refuses a reader session.
* Functions return plain dicts (detached, JSON-friendly except that
  datetimes stay naive UTC ``datetime``), or lists of them.
* Missing rows raise a ``*NotFound`` (404); a failed compare-and-set raises
  :class:`StatusConflict` (409); a duplicate id/name raises a
  ``*Exists`` (409); an unknown field raises :class:`InvalidField` (400).
  Database failures surface as oslo_db exceptions (``DBConnectionError``,
  ``DBDeadlock``, ...). Callers that open their own transactions may wrap
  them with :func:`retry_on_deadlock`.
"""

import contextlib
import datetime
import os
import sqlite3
import threading
import types

from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import exc_filters
from oslo_log import log as logging
from oslo_serialization import jsonutils
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy import event as sa_event
from sqlalchemy import orm
from sqlalchemy import pool as sa_pool

from nova_lease import conf as lease_conf
from nova_lease.db import models
from nova_lease import exception

LOG = logging.getLogger(__name__)

LEASES = models.LEASES
RESERVATIONS = models.RESERVATIONS
EVENTS = models.EVENTS
ALLOCATIONS = models.ALLOCATIONS
HOSTS = models.HOSTS
HOST_CAPABILITIES = models.HOST_CAPABILITIES
LOCKS = models.LOCKS
LEASE_CHANGES = models.LEASE_CHANGES
GENERATIONS = models.GENERATIONS
BOOT_REQUESTS = models.BOOT_REQUESTS
DATABASE_IDENTITY = models.DATABASE_IDENTITY
PROCESSES = models.PROCESSES

# Events due at the same time run in this order: a lease that ends at T
# frees its resources before a lease that starts at T takes them, and the
# before-end action runs before the end. Unknown types run last.
EVENT_TYPE_ORDER = {
    'before_end_lease': 0,
    'end_lease': 1,
    'start_lease': 2,
}

# Seconds an SQLite writer waits for the write lock before giving up with
# DBDeadlock.
SQLITE_BUSY_TIMEOUT = 30

_WRITER = 'nova_lease_writer'
_SQLITE_IMMEDIATE = 'nova_lease_sqlite_immediate'


# -- exceptions -------------------------------------------------------------

class LeaseNotFound(exception.NotFound):
    msg_fmt = 'Lease %(lease_id)s could not be found.'


class ReservationNotFound(exception.NotFound):
    msg_fmt = 'Reservation %(reservation_id)s could not be found.'


class EventNotFound(exception.NotFound):
    msg_fmt = 'Event %(event_id)s could not be found.'


class AllocationNotFound(exception.NotFound):
    msg_fmt = 'Allocation %(allocation_id)s could not be found.'


class HostNotFound(exception.NotFound):
    msg_fmt = 'Host %(host)s could not be found.'


class BootRequestNotFound(exception.NotFound):
    msg_fmt = 'No boot request is stored for reservation %(reservation_id)s.'


class StatusConflict(exception.Conflict):
    """A compare-and-set update found the row in another state.

    Attributes: ``kind`` ('lease', 'reservation' or 'event'), ``id``,
    ``actual`` (the row's current status), ``expected`` (the list of
    expected statuses, or None) and ``conditions`` (the ``expected`` dict
    of other columns, or None).
    """

    msg_fmt = ('%(kind)s %(id)s is %(actual)s, expected %(expected)s '
               '(it was changed concurrently).')

    def __init__(self, kind, id, actual, expected, conditions=None):
        self.kind = kind
        self.id = id
        self.actual = actual
        self.expected = expected
        self.conditions = conditions
        wanted = ' and '.join(
            str(w) for w in (expected, conditions) if w is not None)
        super().__init__(kind=kind.capitalize(), id=id, actual=actual,
                         expected=wanted)


class LeaseExists(exception.Conflict):
    msg_fmt = 'Lease %(lease_id)s already exists.'


class ReservationExists(exception.Conflict):
    msg_fmt = 'Reservation %(reservation_id)s already exists.'


class EventExists(exception.Conflict):
    msg_fmt = 'Event %(event_id)s already exists.'


class HostExists(exception.Conflict):
    msg_fmt = 'Host %(host)s already exists.'


class InvalidField(exception.Invalid):
    msg_fmt = 'Invalid %(kind)s field(s): %(fields)s.'


class TransactionError(exception.NovaLeaseException):
    msg_fmt = '%(reason)s'


# -- engine, sessions -------------------------------------------------------

# NOTE: the engine is built with plain SQLAlchemy rather than
# oslo_db.sqlalchemy.engines.create_engine because oslo.db's SQLite setup
# emits its own plain BEGIN on every transaction and uses a NullPool, and
# we need BEGIN IMMEDIATE for writers (so that concurrent SQLite writers
# queue on the write lock instead of failing to upgrade a read lock) and
# WAL. We still register oslo.db's exception filters, so callers see the
# same DBDuplicateEntry / DBReferenceError / DBDeadlock / DBConnectionError
# as with oslo.db, and we apply the care oslo.db takes: pre-ping and
# recycling of pooled connections, a strict sql_mode and utf8mb4 on MySQL.
def _create_engine(url):
    backend = url.get_backend_name()
    kwargs = {}
    memory = False
    if backend == 'sqlite':
        memory = url.database in (None, '', ':memory:')
        kwargs['connect_args'] = {'check_same_thread': False,
                                  'timeout': SQLITE_BUSY_TIMEOUT}
        if memory:
            # One connection shared by every thread; Database serialises
            # its use with a lock.
            kwargs['poolclass'] = sa_pool.StaticPool
        else:
            kwargs.update(poolclass=sa_pool.QueuePool, pool_size=5,
                          max_overflow=50)
            directory = os.path.dirname(os.path.abspath(url.database))
            os.makedirs(directory, exist_ok=True)
    else:
        # READ COMMITTED (PostgreSQL's default; MySQL's is REPEATABLE
        # READ): a statement that follows lock_hosts() sees what the
        # previous lock holder committed, and InnoDB takes no gap locks.
        # (MySQL then needs binlog_format ROW or MIXED, the defaults.)
        # No ROLLBACK when a connection goes back to the pool (a round
        # trip per transaction): every transaction of this module ends in
        # a COMMIT or a ROLLBACK of its own (Database's context managers),
        # and a Connection closed with its transaction open rolls it back.
        kwargs.update(pool_pre_ping=True, pool_recycle=3600, pool_size=5,
                      max_overflow=50, isolation_level='READ COMMITTED',
                      pool_reset_on_return=None)
        if backend == 'mysql' and 'charset' not in url.query:
            kwargs['connect_args'] = {'charset': 'utf8mb4'}
    engine = sa.create_engine(url, **kwargs)
    if backend == 'sqlite':
        _setup_sqlite(engine, memory)
    elif backend == 'mysql':
        sa_event.listen(engine, 'connect', _mysql_on_connect)
    exc_filters.register_engine(engine)
    return engine, memory


def _mysql_on_connect(dbapi_con, connection_record):
    cursor = dbapi_con.cursor()
    cursor.execute("SET SESSION sql_mode = 'TRADITIONAL'")
    cursor.close()


def _is_lock_timeout(error):
    """An SQLite writer waited SQLITE_BUSY_TIMEOUT for the write lock."""
    return 'database is locked' in str(error)


def _setup_sqlite(engine, memory):
    @sa_event.listens_for(engine, 'connect')
    def _on_connect(dbapi_con, connection_record):
        # We emit BEGIN ourselves (see _on_begin): the sqlite3 module's own
        # transaction handling would start a deferred transaction.
        dbapi_con.isolation_level = None
        cursor = dbapi_con.cursor()
        cursor.execute('PRAGMA foreign_keys = ON')
        cursor.execute('PRAGMA busy_timeout = %d'
                       % (SQLITE_BUSY_TIMEOUT * 1000))
        if not memory:
            # Readers do not block the writer, nor the writer readers.
            cursor.execute('PRAGMA journal_mode = WAL')
            cursor.execute('PRAGMA synchronous = NORMAL')
        cursor.close()

    @sa_event.listens_for(engine, 'begin')
    def _on_begin(conn):
        sql = ('BEGIN IMMEDIATE'
               if conn.get_execution_options().get(_SQLITE_IMMEDIATE)
               else 'BEGIN')
        # Straight on the DBAPI connection: through exec_driver_sql, this
        # statement cost as much as the transaction's own work on
        # nova-api's boot path. Errors are mapped as SQLAlchemy would
        # have them mapped (by running it again through SQLAlchemy),
        # except the lock wait that timed out, mapped at once.
        try:
            conn.connection.dbapi_connection.execute(sql)
            return
        except sqlite3.Error as e:
            if _is_lock_timeout(e):
                raise db_exc.DBDeadlock(e)
        except AttributeError:
            pass
        conn.exec_driver_sql(sql)

    # Registered before oslo.db's filters so that it runs first: a writer
    # that waited SQLITE_BUSY_TIMEOUT for the lock gets a retryable error.
    @sa_event.listens_for(engine, 'handle_error')
    def _on_error(context):
        error = context.original_exception
        if _is_lock_timeout(error):
            raise db_exc.DBDeadlock(context.sqlalchemy_exception or error)


class Database(object):
    """A side database: an engine and its reader/writer transactions.

    Thread-safe: every reader()/writer() gets its own Session and
    connection. On SQLite, writers take the write lock up front (BEGIN
    IMMEDIATE) so that concurrent writers queue instead of deadlocking;
    an in-memory database ('sqlite://') shares one connection, so all of
    its transactions are serialised.
    """

    def __init__(self, url):
        self.url = sa.engine.make_url(url)
        self.backend = self.url.get_backend_name()
        self.engine, memory = _create_engine(self.url)
        self._serial = threading.RLock() if memory else None
        self._sessionmaker = orm.sessionmaker(
            bind=self.engine, expire_on_commit=False, autoflush=False)

    def __repr__(self):
        return '<Database %s>' % self.url.render_as_string(
            hide_password=True)

    @contextlib.contextmanager
    def _serialised(self):
        if self._serial is None:
            yield
        else:
            with self._serial:
                yield

    @contextlib.contextmanager
    def _transaction(self, writer):
        with self._serialised(), self._sessionmaker() as session:
            session.info[_WRITER] = writer
            with session.begin():
                if writer and self.backend == 'sqlite':
                    session.connection(
                        execution_options={_SQLITE_IMMEDIATE: True})
                yield session

    def reader(self):
        """Context manager: a Session in a read transaction."""
        return self._transaction(False)

    def writer(self):
        """Context manager: a Session in a write transaction.

        It commits when the block ends and rolls back on an exception.
        There are no automatic retries: see :func:`retry_on_deadlock`.
        Do not open another transaction on the same database from the
        same thread while this one is open: pass the session instead.
        """
        return self._transaction(True)

    @contextlib.contextmanager
    def connection(self, writer=True):
        """Context manager: a Core Connection in a transaction.

        For DDL and migrations, and for the writers of nova-api's boot
        path (lease_create, reservations_link), which skip the ORM
        Session's overhead; like writer() on SQLite when writer is true
        (the write lock is taken up front). With writer true, the
        functions of this module that only run Core statements
        (lease_create, reservations_link, the change journal) accept it in
        place of a writer Session.
        """
        with self._serialised(), self.engine.connect() as conn:
            # (Connection.info lives as long as the pooled connection: set
            # on every checkout.)
            conn.info[_WRITER] = writer
            if writer and self.backend == 'sqlite':
                conn.execution_options(**{_SQLITE_IMMEDIATE: True})
            with conn.begin():
                yield conn

    def dispose(self):
        self.engine.dispose()


_DATABASES = {}
_DATABASES_LOCK = threading.Lock()


def get_database(conf):
    """The process-wide Database for conf's [nova_lease] connection.

    The nova_lease options must be registered on conf. One Database (and
    pool) per URL; thread-safe.
    """
    url = lease_conf.connection_url(conf)
    with _DATABASES_LOCK:
        db = _DATABASES.get(url)
        if db is None:
            db = _DATABASES[url] = Database(url)
        return db


def cached_database(url):
    """The Database get_database() gives for ``url`` now, or None."""
    with _DATABASES_LOCK:
        return _DATABASES.get(url)


def reset_databases():
    """Forget (and dispose of) every cached Database. For tests."""
    with _DATABASES_LOCK:
        databases = list(_DATABASES.values())
        _DATABASES.clear()
    for db in databases:
        db.dispose()


def _after_fork_in_child():
    # Pooled connections must not be shared with a forked child.
    for db in list(_DATABASES.values()):
        db.engine.dispose(close=False)


os.register_at_fork(after_in_child=_after_fork_in_child)

# Decorator for a function that opens its own transaction(s) (it takes a
# Database, not a Session): retried with back-off and jitter on DBDeadlock
# (and, on SQLite, on a lock wait that timed out).
retry_on_deadlock = oslo_db_api.wrap_db_retry(
    max_retries=5, retry_interval=0.1, inc_retry_interval=True,
    max_retry_interval=2, retry_on_deadlock=True, jitter=True)


@contextlib.contextmanager
def _reading(db):
    if isinstance(db, (orm.Session, sa.engine.Connection)):
        yield db
    else:
        with db.reader() as session:
            yield session


@contextlib.contextmanager
def _writing(db):
    if isinstance(db, (orm.Session, sa.engine.Connection)):
        _require_writer(db)
        yield db
    else:
        with db.writer() as session:
            yield session


@contextlib.contextmanager
def _writing_core(db):
    """As _writing, but a Database gives a Core Connection, not a Session.

    For the few writers on nova-api's boot path that only run Core
    statements: a Session costs about a third of a millisecond more per
    transaction.
    """
    if isinstance(db, Database):
        with db.connection(writer=True) as conn:
            yield conn
    else:
        with _writing(db) as session:
            yield session


@contextlib.contextmanager
def _reading_core(db):
    """As _reading, but a Database gives a Core Connection.

    For reads on the engine's hot path (a Session costs more than the
    query).
    """
    if isinstance(db, Database):
        with db.connection(writer=False) as conn:
            yield conn
    else:
        with _reading(db) as session:
            yield session


def _require_writer(session):
    if not session.info.get(_WRITER):
        raise TransactionError(
            reason='this operation needs a Database.writer() session')


# -- helpers ----------------------------------------------------------------

def _as_list(value):
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    return list(value)


def _naive_utc(value):
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return timeutils.normalize_time(value)
    return value


def _clean(table, kind, values, read_only=('id',)):
    """Check values' keys against table's columns; normalise datetimes."""
    values = dict(values)
    unknown = sorted(k for k in values
                     if k not in table.c or k in read_only)
    if unknown:
        raise InvalidField(kind=kind, fields=', '.join(unknown))
    return {k: _naive_utc(v) for k, v in values.items()}


def _new_row(table, kind, values):
    """A row to insert in a uuid-keyed table: an id is generated if none."""
    values = dict(values)
    row_id = values.pop('id', None)
    row = _clean(table, kind, values)
    row['id'] = row_id or uuidutils.generate_uuid()
    return row


def _written(table):
    """The columns of ``table`` that writers set (not the computed ones).
    """
    return [column for column in table.c if column.computed is None]


def _complete(table, row, now):
    """``row`` with every column: absent ones get their default.

    Lets a function return what it inserted without reading it back: the
    models' defaults are Python-side scalars, or _utcnow for created_at.
    """
    full = {}
    for column in _written(table):
        key = column.key
        if key in row:
            full[key] = row[key]
        elif column.default is not None and column.default.is_scalar:
            full[key] = column.default.arg
        elif column.default is not None and column.default.is_callable:
            full[key] = now
        else:
            full[key] = None
    return full


def _insert_many(session, table, rows):
    # executemany needs one key set per statement.
    groups = {}
    for row in rows:
        groups.setdefault(frozenset(row), []).append(row)
    for group in groups.values():
        session.execute(sa.insert(table), group)


def _compare_and_set(session, table, kind, row_id, values, expected_status,
                     expected, not_found):
    values = _clean(table, kind, values)
    if not values:
        values = {'updated_at': timeutils.utcnow()}
    stmt = sa.update(table).where(table.c.id == row_id).values(**values)
    statuses = _as_list(expected_status)
    if statuses is not None:
        stmt = stmt.where(table.c.status.in_(statuses))
    for key, value in _clean(table, kind, expected or {}, ()).items():
        column = table.c[key]
        stmt = stmt.where(column.is_(None) if value is None
                          else column == value)
    if session.execute(stmt).rowcount == 1:
        return
    _cas_failed(session, table, kind, row_id, statuses, expected, not_found)


def _cas_failed(session, table, kind, row_id, statuses, expected,
                not_found):
    """Raise not_found, or StatusConflict, for a failed compare-and-set.
    """
    actual = session.execute(
        sa.select(table.c.status).where(table.c.id == row_id)).first()
    if actual is None:
        raise not_found
    raise StatusConflict(kind, row_id, actual.status, statuses,
                         dict(expected) if expected else None)


def _dicts(result):
    # (zip with the keys: a RowMapping per row costs more than the row.)
    keys = list(result.keys())
    return [dict(zip(keys, row)) for row in result]


def _reservation_dict(row):
    reservation = dict(row)
    reservation['properties'] = (jsonutils.loads(reservation['properties'])
                                 if reservation['properties'] else {})
    return reservation


def _event_order():
    return sa.case(EVENT_TYPE_ORDER, value=EVENTS.c.event_type,
                   else_=len(EVENT_TYPE_ORDER))


# -- leases -----------------------------------------------------------------

def _prepare_reservation(values, lease_id):
    values = dict(values)
    values['lease_id'] = lease_id
    values['properties'] = jsonutils.dumps(values.get('properties') or {})
    return _new_row(RESERVATIONS, 'reservation', values)


def _prepare_allocation(values, reservation_id=None):
    values = dict(values)
    if reservation_id is not None:
        values['reservation_id'] = reservation_id
    return _clean(ALLOCATIONS, 'allocation', values,
                  read_only=_ALLOCATION_READ_ONLY)


#: Allocation columns no writer sets: the key, and what the database
#: computes (span_class, see nova_lease.db.models).
_ALLOCATION_READ_ONLY = ('id',) + tuple(
    column.key for column in ALLOCATIONS.c if column.computed is not None)
#: What an allocation dict holds (span_class is for queries only).
_ALLOCATION_COLUMNS = tuple(column for column in ALLOCATIONS.c
                            if column.computed is None)


# -- statements on the DBAPI cursor -------------------------------------------
#
# SQLAlchemy's execution layer costs about 0.1 ms a statement, more than
# SQLite's own work for a small insert. The hot writers (nova-api's boot
# path: lease_create and reservations_link; host allocation; the change
# journal the engine writes for hundreds of leases at once) compile their
# statements once per dialect and run them on the DBAPI cursor of the
# transaction's connection (SQLAlchemy still checks the connection out,
# begins and commits). DBAPI errors are mapped as SQLAlchemy and oslo.db
# map them for every other writer (see _cursor).

class _Prepared(object):
    """A Core statement compiled once per dialect, run on a DBAPI cursor.

    Parameters are processed with the columns' bind processors (SQLite's
    datetimes become strings, as SQLAlchemy stores them) and passed in
    the dialect's paramstyle.
    """

    def __init__(self, stmt):
        self.stmt = stmt
        self._compiled = {}

    def _for(self, dialect):
        key = (dialect.name, dialect.paramstyle)
        found = self._compiled.get(key)
        if found is None:
            compiled = self.stmt.compile(dialect=dialect)
            binds = []
            for name in (compiled.positiontup if compiled.positional
                         else compiled.binds):
                bind = compiled.binds[name]
                processor = bind.type.dialect_impl(dialect).bind_processor(
                    dialect)
                default = None if bind.required else bind.value
                binds.append((name, bind.key, processor, default))
            found = (compiled.string, compiled.positional, binds)
            # (Two threads may compile it both: the same result.)
            self._compiled[key] = found
        return found

    def params(self, dialect, values):
        """values (a dict, keyed as the statement's bind keys), processed."""
        _sql, positional, binds = self._for(dialect)
        out = {}
        for name, key, processor, default in binds:
            value = values.get(key, default)
            if processor is not None and value is not None:
                value = processor(value)
            out[name] = value
        return list(out.values()) if positional else out

    def execute(self, cursor, dialect, values):
        """Run once with values (a dict); the cursor's rowcount."""
        sql = self._for(dialect)[0]
        cursor.execute(sql, self.params(dialect, values))
        return cursor.rowcount

    def executemany(self, cursor, dialect, rows):
        if not rows:
            return
        sql = self._for(dialect)[0]
        params = [self.params(dialect, row) for row in rows]
        if len(params) > 1 and dialect.driver == 'psycopg2':
            # psycopg2's executemany is a round trip per row; PyMySQL's
            # sends one multi-row INSERT, sqlite3 has no round trips.
            from psycopg2 import extras
            extras.execute_batch(cursor, sql, params, page_size=500)
        else:
            cursor.executemany(sql, params)


class _PreparedIn(object):
    """_Prepared statements with an IN list of bound parameters.

    ``build(binds)`` makes the statement from a list of bindparams; one
    statement is compiled per list length, rounded up to a power of two
    (the list is padded with NULLs, which match nothing), so that no call
    compiles or expands anything.
    """

    def __init__(self, build):
        self._build = build
        self._by_size = {}

    def prepared(self, values, params=None):
        """(_Prepared, its parameters) for the IN list values."""
        size = 1
        while size < len(values):
            size *= 2
        found = self._by_size.get(size)
        if found is None:
            found = _Prepared(self._build(
                [sa.bindparam('in_%d' % i) for i in range(size)]))
            self._by_size[size] = found
        params = dict(params or {})
        for i in range(size):
            params['in_%d' % i] = values[i] if i < len(values) else None
        return found, params


def _connection_of(session):
    """The Core Connection of a Session's transaction (or the Connection).
    """
    if isinstance(session, orm.Session):
        return session.connection()
    return session


@contextlib.contextmanager
def _cursor(session):
    """(DBAPI cursor, dialect) of the transaction of session (a Session or
    a Connection); DBAPI errors are mapped as SQLAlchemy and oslo.db map
    them (DBDeadlock, DBDuplicateEntry, DBConnectionError, DBError...).
    """
    conn = _connection_of(session)
    dialect = conn.dialect
    cursor = conn.connection.dbapi_connection.cursor()
    try:
        yield cursor, dialect
    except dialect.loaded_dbapi.Error as e:
        _raise_mapped(e, dialect)
    finally:
        cursor.close()


def _raise_mapped(error, dialect):
    """Raise what oslo.db's filters make of a raw DBAPI error."""
    wrapped = sa.exc.DBAPIError.instance(
        None, None, error, dialect.loaded_dbapi.Error, dialect=dialect)
    context = types.SimpleNamespace(
        original_exception=error, sqlalchemy_exception=wrapped,
        dialect=dialect, connection=None,
        is_disconnect=dialect.is_disconnect(error, None, None))
    if isinstance(error, sqlite3.OperationalError) and _is_lock_timeout(
            error):
        raise db_exc.DBDeadlock(wrapped)
    # (A handle_error listener: it returns the exception to raise.)
    mapped = exc_filters.handler(context)
    raise mapped if mapped is not None else db_exc.DBError(wrapped)


# Complete rows (see _complete) all have the same keys: one INSERT each.
_FAST_INSERTS = {table: _Prepared(sa.insert(table))
                 for table in (LEASES, RESERVATIONS, EVENTS)}
# (Without the id column: PostgreSQL refuses a NULL for its sequence.)
_FAST_ALLOCATION_INSERT = _Prepared(sa.insert(ALLOCATIONS).values({
    column.key: sa.bindparam('b_' + column.key)
    for column in _ALLOCATION_COLUMNS if column.key != 'id'}))


def lease_create(db, lease_values, reservations=(), events=(),
                 allocations=()):
    """Create a lease with its reservations, events and allocations.

    All in one transaction. ``id`` fields are optional (uuids are
    generated). ``lease_id`` of reservations and events is set here.
    Allocations come either nested in their reservation, as a list under
    the reservation's ``'allocations'`` key (their ``reservation_id`` is
    set here), or in ``allocations``, each with the ``reservation_id`` of
    one of these reservations (the caller then chooses reservation ids).

    Returns the lease dict, as :func:`lease_get`.
    """
    lease = _new_row(LEASES, 'lease', lease_values)
    lease_id = lease['id']
    reservation_rows = []
    allocation_rows = []
    for values in reservations:
        values = dict(values)
        nested = values.pop('allocations', ())
        row = _prepare_reservation(values, lease_id)
        reservation_rows.append(row)
        allocation_rows.extend(_prepare_allocation(a, row['id'])
                               for a in nested)
    reservation_ids = {row['id'] for row in reservation_rows}
    for values in allocations:
        row = _prepare_allocation(values)
        if row.get('reservation_id') not in reservation_ids:
            raise InvalidField(kind='allocation', fields='reservation_id')
        allocation_rows.append(row)
    event_rows = [_new_row(EVENTS, 'event', dict(e, lease_id=lease_id))
                  for e in events]
    # Every row is inserted complete (created_at included) so that the
    # result is built from them: no read-back on the boot path.
    now = _naive_utc(timeutils.utcnow())
    lease = _complete(LEASES, lease, now)
    reservation_rows = [_complete(RESERVATIONS, r, now)
                        for r in reservation_rows]
    event_rows = [_complete(EVENTS, e, now) for e in event_rows]
    changes = ([(lease_id, r['id']) for r in reservation_rows]
               or [(lease_id, None)])
    step = [None]

    def insert(cursor, dialect):
        step[0] = LEASES
        _FAST_INSERTS[LEASES].execute(cursor, dialect, lease)
        step[0] = RESERVATIONS
        _FAST_INSERTS[RESERVATIONS].executemany(cursor, dialect,
                                                reservation_rows)
        step[0] = EVENTS
        _FAST_INSERTS[EVENTS].executemany(cursor, dialect, event_rows)
        step[0] = None
        _FAST_ALLOCATION_INSERT.executemany(cursor, dialect, [
            {'b_' + k: v for k, v in _complete(ALLOCATIONS, a, now).items()}
            for a in allocation_rows])
        _journal_fast(cursor, dialect, changes)

    try:
        with _writing_core(db) as conn, _cursor(conn) as (cursor, dialect):
            insert(cursor, dialect)
    except db_exc.DBDuplicateEntry as e:
        if step[0] is LEASES:
            raise LeaseExists(lease_id=lease_id)
        if step[0] is RESERVATIONS:
            raise ReservationExists(reservation_id=e.value)
        if step[0] is EVENTS:
            raise EventExists(event_id=e.value)
        raise
    result = dict(lease)
    result['reservations'] = [
        _reservation_dict(r) for r in
        sorted(reservation_rows, key=lambda r: (r['created_at'], r['id']))]
    order = len(EVENT_TYPE_ORDER)
    result['events'] = [dict(e) for e in sorted(
        event_rows, key=lambda e: (e['time'],
                                   EVENT_TYPE_ORDER.get(e['event_type'],
                                                        order),
                                   e['id']))]
    return result


def _lease_get(session, lease_id):
    row = session.execute(
        sa.select(LEASES).where(LEASES.c.id == lease_id)).mappings().first()
    if row is None:
        raise LeaseNotFound(lease_id=lease_id)
    lease = dict(row)
    lease['reservations'] = [_reservation_dict(r) for r in session.execute(
        sa.select(RESERVATIONS).where(RESERVATIONS.c.lease_id == lease_id)
        .order_by(RESERVATIONS.c.created_at, RESERVATIONS.c.id)).mappings()]
    lease['events'] = _dicts(session.execute(
        sa.select(EVENTS).where(EVENTS.c.lease_id == lease_id)
        .order_by(EVENTS.c.time, _event_order(), EVENTS.c.id)))
    return lease


def lease_get(db, lease_id):
    """The lease dict: its columns plus 'reservations' and 'events'.

    Raises LeaseNotFound.
    """
    with _reading(db) as session:
        return _lease_get(session, lease_id)


def lease_list(db, project_id=None, statuses=None):
    """Leases (dicts as lease_get), ordered by start_date, in 3 queries."""
    ids = sa.select(LEASES.c.id)
    if project_id is not None:
        ids = ids.where(LEASES.c.project_id == project_id)
    statuses = _as_list(statuses)
    if statuses is not None:
        ids = ids.where(LEASES.c.status.in_(statuses))
    with _reading(db) as session:
        leases = _dicts(session.execute(
            sa.select(LEASES).where(LEASES.c.id.in_(ids))
            .order_by(LEASES.c.start_date, LEASES.c.created_at,
                      LEASES.c.id)))
        by_id = {}
        for lease in leases:
            lease['reservations'] = []
            lease['events'] = []
            by_id[lease['id']] = lease
        if not leases:
            return leases
        for row in session.execute(
                sa.select(RESERVATIONS)
                .where(RESERVATIONS.c.lease_id.in_(ids))
                .order_by(RESERVATIONS.c.created_at,
                          RESERVATIONS.c.id)).mappings():
            lease = by_id.get(row['lease_id'])
            if lease is not None:
                lease['reservations'].append(_reservation_dict(row))
        for row in session.execute(
                sa.select(EVENTS).where(EVENTS.c.lease_id.in_(ids))
                .order_by(EVENTS.c.time, _event_order(),
                          EVENTS.c.id)).mappings():
            lease = by_id.get(row['lease_id'])
            if lease is not None:
                lease['events'].append(dict(row))
        return leases


def lease_update(db, lease_id, values, expected_status=None, expected=None):
    """Update a lease's columns and return the lease dict (as lease_get).

    With ``expected_status`` (a status or a list of statuses) the update
    happens only if the lease is in one of them; ``expected`` (a dict of
    column: value) adds more such conditions. Otherwise raises
    StatusConflict. Raises LeaseNotFound.
    """
    with _writing(db) as session:
        _compare_and_set(session, LEASES, 'lease', lease_id, values,
                         expected_status, expected,
                         LeaseNotFound(lease_id=lease_id))
        if _JOURNALED_LEASE_FIELDS.intersection(values):
            _journal(session, [(lease_id, None)])
        return _lease_get(session, lease_id)


def lease_destroy(db, lease_id):
    """Delete a lease and (cascade) its reservations, events, allocations.

    Raises LeaseNotFound.
    """
    with _writing(db) as session:
        result = session.execute(
            sa.delete(LEASES).where(LEASES.c.id == lease_id))
        if result.rowcount != 1:
            raise LeaseNotFound(lease_id=lease_id)
        _journal(session, [(lease_id, None)])


# -- reservations -----------------------------------------------------------

def reservation_create(db, values):
    """Create a reservation of lease values['lease_id'].

    values may carry 'allocations' (a list, as in lease_create). Returns
    the reservation dict. Raises LeaseNotFound.
    """
    values = dict(values)
    nested = values.pop('allocations', ())
    lease_id = values.get('lease_id')
    if lease_id is None:
        raise InvalidField(kind='reservation', fields='lease_id (missing)')
    row = _prepare_reservation(values, lease_id)
    allocation_rows = [_prepare_allocation(a, row['id']) for a in nested]
    with _writing(db) as session:
        try:
            session.execute(sa.insert(RESERVATIONS).values(**row))
        except db_exc.DBReferenceError:
            raise LeaseNotFound(lease_id=lease_id)
        except db_exc.DBDuplicateEntry:
            raise ReservationExists(reservation_id=row['id'])
        _insert_many(session, ALLOCATIONS, allocation_rows)
        _journal(session, [(lease_id, row['id'])])
        return _reservation_get(session, row['id'])


def _reservation_get(session, reservation_id):
    row = session.execute(
        sa.select(RESERVATIONS).where(RESERVATIONS.c.id == reservation_id)
    ).mappings().first()
    if row is None:
        raise ReservationNotFound(reservation_id=reservation_id)
    return _reservation_dict(row)


def reservation_get(db, reservation_id):
    """The reservation dict ('properties' decoded). ReservationNotFound."""
    with _reading(db) as session:
        return _reservation_get(session, reservation_id)


def reservation_list(db, lease_id=None, resource_id=None,
                     resource_type=None, statuses=None):
    """Reservation dicts matching every given filter."""
    stmt = sa.select(RESERVATIONS)
    if lease_id is not None:
        stmt = stmt.where(RESERVATIONS.c.lease_id == lease_id)
    if resource_id is not None:
        stmt = stmt.where(RESERVATIONS.c.resource_id == resource_id)
    if resource_type is not None:
        stmt = stmt.where(RESERVATIONS.c.resource_type == resource_type)
    statuses = _as_list(statuses)
    if statuses is not None:
        stmt = stmt.where(RESERVATIONS.c.status.in_(statuses))
    stmt = stmt.order_by(RESERVATIONS.c.created_at, RESERVATIONS.c.id)
    with _reading(db) as session:
        return [_reservation_dict(r)
                for r in session.execute(stmt).mappings()]


def reservation_update(db, reservation_id, values, expected_status=None,
                       expected=None, fetch=True):
    """Update a reservation (compare-and-set as lease_update).

    'properties', if given, replaces the whole dict. Returns the
    reservation dict (None with ``fetch=False``, which saves reading the
    row back). Raises ReservationNotFound or StatusConflict.
    """
    values = dict(values)
    if 'properties' in values:
        values['properties'] = jsonutils.dumps(values['properties'] or {})
    with _writing(db) as session:
        _compare_and_set(session, RESERVATIONS, 'reservation',
                         reservation_id, values, expected_status, expected,
                         ReservationNotFound(reservation_id=reservation_id))
        if _JOURNALED_RESERVATION_FIELDS.intersection(values):
            _journal(session, [(None, reservation_id)])
        return _reservation_get(session, reservation_id) if fetch else None


def reservation_destroy(db, reservation_id):
    """Delete a reservation and its allocations. ReservationNotFound."""
    with _writing(db) as session:
        result = session.execute(sa.delete(RESERVATIONS).where(
            RESERVATIONS.c.id == reservation_id))
        if result.rowcount != 1:
            raise ReservationNotFound(reservation_id=reservation_id)
        _journal(session, [(None, reservation_id)])


_LINK_RESERVATION = _Prepared(
    sa.update(RESERVATIONS)
    .where(RESERVATIONS.c.id == sa.bindparam('b_id'),
           RESERVATIONS.c.resource_id.is_(None))
    .values(resource_id=sa.bindparam('b_resource_id'),
            updated_at=sa.bindparam('b_now')))
_DELETE_RESERVATION = _Prepared(sa.delete(RESERVATIONS).where(
    RESERVATIONS.c.id == sa.bindparam('b_id')))
_RELEASE_EVENT = _Prepared(
    sa.update(EVENTS)
    .where(EVENTS.c.id == sa.bindparam('b_id'),
           EVENTS.c.status == sa.bindparam('b_status'))
    .values(next_attempt_at=None, updated_at=sa.bindparam('b_now')))


def reservations_link(db, links, drop=(), release_events=(),
                      event_status='UNDONE', now=None):
    """Link reservations to their resources, in one transaction.

    ``links``: ``(reservation id, resource id)`` pairs; each reservation
    must not be linked yet (``resource_id`` NULL), else StatusConflict
    (ReservationNotFound if it is gone). ``drop``: reservation ids deleted
    with their allocations (ReservationNotFound if one is gone).
    ``release_events``: event ids whose ``next_attempt_at`` is cleared;
    each must be in ``event_status`` (StatusConflict, EventNotFound).
    Rows updated get ``updated_at = now``. Nothing is read back.
    """
    now = _naive_utc(now or timeutils.utcnow())
    changed = [rid for rid, _ in links] + list(drop)
    with _writing_core(db) as conn, _cursor(conn) as (cursor, dialect):
        for reservation_id, resource_id in links:
            if _LINK_RESERVATION.execute(cursor, dialect, {
                    'b_id': reservation_id, 'b_resource_id': resource_id,
                    'b_now': now}) != 1:
                _cas_failed(conn, RESERVATIONS, 'reservation',
                            reservation_id, None, {'resource_id': None},
                            ReservationNotFound(
                                reservation_id=reservation_id))
        for reservation_id in drop:
            if _DELETE_RESERVATION.execute(
                    cursor, dialect, {'b_id': reservation_id}) != 1:
                raise ReservationNotFound(reservation_id=reservation_id)
        for event_id in release_events:
            if _RELEASE_EVENT.execute(cursor, dialect, {
                    'b_id': event_id, 'b_status': event_status,
                    'b_now': now}) != 1:
                _cas_failed(conn, EVENTS, 'event', event_id,
                            [event_status], None,
                            EventNotFound(event_id=event_id))
        if changed:
            _journal_fast(cursor, dialect, [(None, rid) for rid in changed])


# -- boot requests (servers created at their lease's start) ----------------

def boot_requests_create(db, requests):
    """Store boot requests: ``{reservation id: request}``.

    A request is a JSON-serialisable dict. In the caller's writer
    transaction (a Session) or one of its own. No journal row: the
    scheduler does not read them.
    """
    now = _naive_utc(timeutils.utcnow())
    rows = [{'reservation_id': reservation_id,
             'request': jsonutils.dumps(request), 'created_at': now}
            for reservation_id, request in requests.items()]
    if not rows:
        return
    with _writing(db) as session:
        try:
            _insert_many(session, BOOT_REQUESTS, rows)
        except db_exc.DBReferenceError:
            raise ReservationNotFound(
                reservation_id=', '.join(sorted(requests)))


def boot_request_get(db, reservation_id):
    """The stored boot request (a dict) of a reservation.

    Raises BootRequestNotFound.
    """
    with _reading(db) as session:
        row = session.execute(
            sa.select(BOOT_REQUESTS.c.request).where(
                BOOT_REQUESTS.c.reservation_id == reservation_id)).first()
    if row is None:
        raise BootRequestNotFound(reservation_id=reservation_id)
    return jsonutils.loads(row.request)


# -- events -----------------------------------------------------------------

def event_create(db, values):
    """Create an event of lease values['lease_id']; return its dict."""
    row = _new_row(EVENTS, 'event', values)
    if row.get('lease_id') is None:
        raise InvalidField(kind='event', fields='lease_id (missing)')
    with _writing(db) as session:
        try:
            session.execute(sa.insert(EVENTS).values(**row))
        except db_exc.DBReferenceError:
            raise LeaseNotFound(lease_id=row['lease_id'])
        except db_exc.DBDuplicateEntry:
            raise EventExists(event_id=row['id'])
        return _event_get(session, row['id'])


def _event_get(session, event_id):
    row = session.execute(
        sa.select(EVENTS).where(EVENTS.c.id == event_id)).mappings().first()
    if row is None:
        raise EventNotFound(event_id=event_id)
    return dict(row)


def event_get(db, event_id):
    """The event dict. Raises EventNotFound."""
    with _reading(db) as session:
        return _event_get(session, event_id)


def event_list(db, lease_id=None, statuses=None, due_before=None,
               claimed_before=None, limit=None, skip_locked=False):
    """Event dicts, ordered by time, then EVENT_TYPE_ORDER, then id.

    due_before: only events whose time, and next_attempt_at when set, are
    at or before it. claimed_before: only events claimed at or before it
    (to find claims abandoned by a dead engine). limit: at most that many.
    skip_locked (db must be a Database.writer() session): lock the rows
    returned until the transaction ends and skip the rows that other
    transactions hold (SELECT ... FOR UPDATE SKIP LOCKED), so that
    engines claiming due events concurrently do not collide. On SQLite
    the writer already excludes every other writer.
    """
    where = []
    if lease_id is not None:
        where.append(EVENTS.c.lease_id == lease_id)
    statuses = _as_list(statuses)
    if statuses is not None:
        where.append(EVENTS.c.status.in_(statuses))
    if due_before is not None:
        due_before = _naive_utc(due_before)
        where.append(EVENTS.c.time <= due_before)
        where.append(sa.or_(EVENTS.c.next_attempt_at.is_(None),
                            EVENTS.c.next_attempt_at <= due_before))
    if claimed_before is not None:
        where.append(EVENTS.c.claimed_at <= _naive_utc(claimed_before))
    order = (EVENTS.c.time, _event_order(), EVENTS.c.id)
    stmt = sa.select(EVENTS).where(*where).order_by(*order)
    if limit is not None:
        stmt = stmt.limit(limit)
    if not skip_locked:
        with _reading(db) as session:
            return _dicts(session.execute(stmt))
    if not isinstance(db, orm.Session):
        raise TransactionError(
            reason='skip_locked needs a Database.writer() session')
    _require_writer(db)
    backend = db.get_bind().dialect.name
    if backend == 'mysql':
        # InnoDB locks every row the sort reads, not only those under the
        # LIMIT: pick the candidates first, then lock them by primary key
        # (checking the conditions again on the latest committed rows).
        ids = list(db.execute(
            stmt.with_only_columns(EVENTS.c.id)).scalars())
        if not ids:
            return []
        stmt = (sa.select(EVENTS).where(EVENTS.c.id.in_(ids), *where)
                .order_by(*order).with_for_update(skip_locked=True))
    elif backend != 'sqlite':
        stmt = stmt.with_for_update(skip_locked=True)
    return _dicts(db.execute(stmt))


def event_next_time(db, statuses=('UNDONE',)):
    """The earliest time an event in statuses becomes due, or None.

    That is the smallest next_attempt_at, or time when next_attempt_at is
    not set (a retry is never scheduled before the event's time).
    """
    stmt = sa.select(sa.func.min(
        sa.func.coalesce(EVENTS.c.next_attempt_at, EVENTS.c.time)))
    statuses = _as_list(statuses)
    if statuses is not None:
        stmt = stmt.where(EVENTS.c.status.in_(statuses))
    with _reading(db) as session:
        return session.execute(stmt).scalar()


def event_update(db, event_id, values, expected_status=None, expected=None,
                 fetch=True):
    """Update an event (compare-and-set as lease_update); its dict.

    With ``fetch=False`` the row is not read back and None is returned.

    Claiming a due event: ``event_update(db, id, {'status': 'IN_PROGRESS',
    'claimed_by': me, 'claimed_at': now}, expected_status='UNDONE')``;
    reclaiming an abandoned one also passes ``expected={'claimed_by':
    old, 'claimed_at': old_at}``. Raises EventNotFound or StatusConflict.
    """
    with _writing(db) as session:
        _compare_and_set(session, EVENTS, 'event', event_id, values,
                         expected_status, expected,
                         EventNotFound(event_id=event_id))
        return _event_get(session, event_id) if fetch else None


def event_destroy(db, event_id):
    """Delete an event. Raises EventNotFound."""
    with _writing(db) as session:
        result = session.execute(
            sa.delete(EVENTS).where(EVENTS.c.id == event_id))
        if result.rowcount != 1:
            raise EventNotFound(event_id=event_id)


# -- allocations ------------------------------------------------------------

def allocation_create(db, values):
    """Create an allocation (values['reservation_id'] required); its dict.

    Raises ReservationNotFound.
    """
    row = _prepare_allocation(values)
    if row.get('reservation_id') is None:
        raise InvalidField(kind='allocation',
                           fields='reservation_id (missing)')
    with _writing(db) as session:
        try:
            result = session.execute(sa.insert(ALLOCATIONS).values(**row))
        except db_exc.DBReferenceError:
            raise ReservationNotFound(
                reservation_id=row.get('reservation_id'))
        _journal(session, [(None, row['reservation_id'])])
        return _allocation_get(session, result.inserted_primary_key[0])


def _allocation_get(session, allocation_id):
    row = session.execute(sa.select(*_ALLOCATION_COLUMNS).where(
        ALLOCATIONS.c.id == allocation_id)).mappings().first()
    if row is None:
        raise AllocationNotFound(allocation_id=allocation_id)
    return dict(row)


def _live(now, dead_reservations, dead_leases):
    return sa.and_(RESERVATIONS.c.status.notin_(dead_reservations),
                   LEASES.c.status.notin_(dead_leases),
                   LEASES.c.end_date > _naive_utc(now))


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
        stmt = stmt.where(alloc.c.end_date > _naive_utc(ends_after))
    if start_before is not None:
        stmt = stmt.where(alloc.c.start_date < _naive_utc(start_before))
    if hosts is not None:
        stmt = stmt.where(alloc.c.host.in_(sorted(hosts)))
    with _reading(db) as session:
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
    with _reading(db) as session:
        yield from session.execute(stmt)


# -- admission's windowed reads ----------------------------------------------
#
# Admission control (nova_lease.scheduler.admission) reads, inside the
# writer transaction that records a lease, only what the lease's window
# and its candidate hosts need: the allocations overlapping the window
# (index range scans by span_class, see nova_lease.db.models), and the
# instance reservations linked to a server (the running leased servers).
# Neither grows with the reservations far from the window in time.

#: Added to each class's bound: the database rounds lengths to seconds.
_SPAN_MARGIN = datetime.timedelta(minutes=1)


def span_lookback(span_class):
    """How long before a window an allocation of ``span_class`` may
    start and still overlap it; None when unbounded.
    """
    if span_class >= models.SPAN_CLASSES:
        return None
    return datetime.timedelta(hours=2 ** span_class) + _SPAN_MARGIN


def _window_statement(by_host, live, micros=False):
    """Allocations overlapping [:start, :end): one index range per span
    class (per host of the expanding :hosts with ``by_host``); class k's
    lower bound is :lb<k>. With ``live``, only those of live reservations
    of leases not ended at :now. With ``micros``, the dates come as
    microseconds since the epoch (MySQL: its client decodes a DATETIME
    several times slower than an integer). Built once (see
    window_allocation_rows).
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
    dates = [alloc.c.start_date, alloc.c.end_date]
    if micros:
        dates = [sa.func.timestampdiff(sa.literal_column('MICROSECOND'),
                                       sa.literal_column("'1970-01-01'"),
                                       date) for date in dates]
    stmt = sa.select(alloc.c.id, alloc.c.reservation_id, alloc.c.host,
                     *dates, alloc.c.vcpus, alloc.c.memory_mb,
                     alloc.c.disk_gb, alloc.c.whole_host)
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


_WINDOW = {(by_host, live, micros): _window_statement(by_host, live, micros)
           for by_host in (False, True) for live in (False, True)
           for micros in (False, True)}
_EPOCH = datetime.datetime(1970, 1, 1)


def _from_micros(row):
    return row[:3] + (
        _EPOCH + datetime.timedelta(microseconds=row[3]),
        _EPOCH + datetime.timedelta(microseconds=row[4])) + row[5:]


def window_allocation_rows(db, now, dead_reservations, dead_leases, start,
                           end, hosts=None, live=True):
    """Allocations overlapping [start, end) of live reservations of leases
    not ended at ``now`` (see live_allocation_rows), on ``hosts``
    (hypervisor hostnames) or every host, in the caller's transaction.

    Rows ``(id, reservation_id, host, start_date, end_date, vcpus,
    memory_mb, disk_gb, whole_host)``. Reads only the allocations that
    start within their class's bound before ``start``: the cost follows
    the allocations near the window, not the table's size. With ``live``
    False, the allocations of reservations and leases that hold nothing
    any more are read too (a superset: what a plan may start from), from
    the covering index alone, without reading their reservation and lease.
    """
    start, end = _naive_utc(start), _naive_utc(end)
    params = {'start': start, 'end': end}
    if live:
        params.update(now=_naive_utc(now),
                      dead_reservations=list(dead_reservations),
                      dead_leases=list(dead_leases))
    for k in range(models.SPAN_CLASSES):
        params['lb%d' % k] = start - span_lookback(k)
    if hosts is not None:
        hosts = sorted(set(hosts))
        if not hosts:
            return []
        params['hosts'] = hosts
    with _reading(db) as session:
        micros = _connection_of(session).dialect.name == 'mysql'
        statement = _WINDOW[hosts is not None, bool(live), micros]
        rows = [tuple(row) for row in session.execute(statement, params)]
    if micros:
        rows = [_from_micros(row) for row in rows]
    return rows


def linked_instance_rows(db, now, live_statuses, dead_leases):
    """The instance reservations linked to a server, of leases not ended
    at ``now``, in the caller's transaction.

    ``live_statuses``: the reservation statuses that count (pending,
    active). Rows ``(reservation id, server uuid, properties (JSON text),
    lease_id, lease start_date, lease end_date, lease status, host of
    its allocation holding ``now`` or None)``. Their number is that of
    the servers leased now (and of those created before their lease's
    start), whatever the number of future reservations.
    """
    res, alloc = RESERVATIONS, ALLOCATIONS
    now = _naive_utc(now)
    stmt = (sa.select(res.c.id, res.c.resource_id, res.c.properties,
                      LEASES.c.id, LEASES.c.start_date, LEASES.c.end_date,
                      LEASES.c.status, alloc.c.host)
            .select_from(res.join(LEASES).outerjoin(alloc, sa.and_(
                alloc.c.reservation_id == res.c.id,
                alloc.c.start_date <= now, alloc.c.end_date > now)))
            .where(res.c.status.in_(sorted(live_statuses)),
                   res.c.resource_id.is_not(None),
                   res.c.resource_type == 'virtual:instance',
                   LEASES.c.status.not_in(sorted(dead_leases)),
                   LEASES.c.end_date > now))
    with _reading(db) as session:
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
    with _reading(db) as session:
        return {name: service for name, service in session.execute(stmt)}


# -- usage enforcement's reads ----------------------------------------------

def project_live_lease_count(db, project_id, now, dead_leases):
    """How many leases of ``project_id`` have not ended at ``now`` (status
    not in ``dead_leases``, end after now).
    """
    stmt = (sa.select(sa.func.count()).select_from(LEASES)
            .where(LEASES.c.project_id == project_id,
                   LEASES.c.status.not_in(sorted(dead_leases)),
                   LEASES.c.end_date > _naive_utc(now)))
    with _reading(db) as session:
        return session.execute(stmt).scalar() or 0


def project_instance_rows(db, project_id, now, dead_reservations,
                          dead_leases, start, end):
    """The live instance reservations of ``project_id``'s leases that
    overlap [start, end) and have not ended at ``now``.

    Rows ``(lease id, lease start_date, lease end_date, properties (JSON
    text))``.
    """
    res = RESERVATIONS
    stmt = (sa.select(LEASES.c.id, LEASES.c.start_date, LEASES.c.end_date,
                      res.c.properties)
            .select_from(res.join(LEASES))
            .where(LEASES.c.project_id == project_id,
                   res.c.resource_type == 'virtual:instance',
                   _live(now, dead_reservations, dead_leases),
                   LEASES.c.start_date < _naive_utc(end),
                   LEASES.c.end_date > _naive_utc(start)))
    with _reading(db) as session:
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
                   alloc.c.start_date < _naive_utc(end),
                   alloc.c.end_date > _naive_utc(start)))
    with _reading(db) as session:
        return [tuple(row) for row in session.execute(stmt)]


def _allocation_reservation(session, allocation_id):
    rid = session.execute(sa.select(ALLOCATIONS.c.reservation_id).where(
        ALLOCATIONS.c.id == allocation_id)).scalar()
    if rid is None:
        raise AllocationNotFound(allocation_id=allocation_id)
    return rid


# -- change journal ---------------------------------------------------------
#
# lease_changes tells the scheduler's snapshot (nova_lease.scheduler.
# snapshot) which leases and reservations changed: every writer above that
# changes what the snapshot holds adds its rows in its own transaction.

#: Journal rows older than this are deleted (by the writers, see
#: _journal). A snapshot older than half of it is read again in full.
CHANGE_RETENTION = datetime.timedelta(hours=24)
#: One journaling transaction in this many (per process) also prunes.
CHANGE_PRUNE_EVERY = 256
_JOURNALED_LEASE_FIELDS = frozenset(
    ('start_date', 'end_date', 'status', 'project_id'))
_JOURNALED_RESERVATION_FIELDS = frozenset(
    ('lease_id', 'resource_type', 'resource_id', 'status', 'properties'))
_journal_count = [0]
_journal_lock = threading.Lock()


def _journal_prune_due():
    """Count a journal write; True for one in CHANGE_PRUNE_EVERY."""
    with _journal_lock:
        _journal_count[0] += 1
        return _journal_count[0] % CHANGE_PRUNE_EVERY == 0


def _journal(session, pairs):
    """Record (lease id, reservation id) pairs (either may be None), in the
    caller's transaction (a Session or a Connection).

    On its DBAPI cursor (see _Prepared): the engine journals every lease
    it claims or completes, hundreds of rows a transaction.
    """
    with _cursor(session) as (cursor, dialect):
        _journal_fast(cursor, dialect, pairs)


_FAST_JOURNAL_INSERT = _Prepared(sa.insert(LEASE_CHANGES).values(
    lease_id=sa.bindparam('b_lease_id'),
    reservation_id=sa.bindparam('b_reservation_id'),
    created_at=sa.bindparam('b_created_at')))
_FAST_JOURNAL_PRUNE = _Prepared(sa.delete(LEASE_CHANGES).where(
    LEASE_CHANGES.c.created_at < sa.bindparam('b_before')))


def _journal_fast(cursor, dialect, pairs):
    """_journal on a DBAPI cursor (see _Prepared)."""
    now = _naive_utc(timeutils.utcnow())
    _FAST_JOURNAL_INSERT.executemany(cursor, dialect, [
        {'b_lease_id': lease_id, 'b_reservation_id': rid,
         'b_created_at': now} for lease_id, rid in pairs])
    if _journal_prune_due():
        _FAST_JOURNAL_PRUNE.execute(cursor, dialect,
                                    {'b_before': now - CHANGE_RETENTION})


def change_prune(db, before):
    """Delete the journal rows created before ``before``; how many."""
    with _writing(db) as session:
        return session.execute(sa.delete(LEASE_CHANGES).where(
            LEASE_CHANGES.c.created_at < _naive_utc(before))).rowcount


# The scheduler runs these at every request (or change): built once, with
# bound parameters (building a statement costs more than running it).
_CHANGE_TOP = sa.select(sa.func.max(LEASE_CHANGES.c.id))
_CHANGE_PROBE = (
    sa.select(sa.func.max(LEASE_CHANGES.c.id),
              sa.func.min(LEASE_CHANGES.c.id), sa.func.count())
    .where(LEASE_CHANGES.c.id > sa.bindparam('low')))
_CHANGE_ROWS = (
    sa.select(LEASE_CHANGES.c.id, LEASE_CHANGES.c.lease_id,
              LEASE_CHANGES.c.reservation_id)
    .where(LEASE_CHANGES.c.id > sa.bindparam('low'))
    .order_by(LEASE_CHANGES.c.id))


def change_probe(db, low=None, margin=1000):
    """(low, highest id, lowest id, count) of the journal rows above low.

    ``low`` defaults to the highest id minus ``margin``. One index range
    scan: a cheap marker of the changes, that also moves when a
    transaction that took a lower id commits after a higher one (within
    ``margin`` ids), or when old rows are pruned.
    """
    with _reading(db) as session:
        if low is None:
            top = session.execute(_CHANGE_TOP).scalar()
            low = (top or 0) - margin
        top, bottom, count = session.execute(_CHANGE_PROBE,
                                             {'low': low}).one()
    return (low, top, bottom, count)


def change_rows(db, low):
    """Journal rows ``(id, lease_id, reservation_id)`` with id > low."""
    with _reading(db) as session:
        return [tuple(row) for row in session.execute(_CHANGE_ROWS,
                                                      {'low': low})]


def _live_changed_statement():
    res, alloc = RESERVATIONS, ALLOCATIONS
    now = sa.bindparam('now')
    return (
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
               LEASES.c.end_date > now,
               sa.or_(res.c.id.in_(sa.bindparam('ids', expanding=True)),
                      res.c.lease_id.in_(sa.bindparam('lease_ids',
                                                      expanding=True)))))


_LIVE_CHANGED = _live_changed_statement()


def live_reservations_with_allocations(db, now, dead_reservations,
                                       dead_leases, ids=(), lease_ids=()):
    """The live reservations ``ids`` and those of leases ``lease_ids``,
    with their allocations not ended at ``now``, in one query.

    Rows ``(reservation row as live_reservation_rows, allocation row as
    live_allocation_rows or None)``.
    """
    params = {'now': _naive_utc(now),
              'dead_reservations': list(dead_reservations),
              'dead_leases': list(dead_leases), 'ids': sorted(ids),
              'lease_ids': sorted(lease_ids)}
    with _reading(db) as session:
        out = []
        for row in session.execute(_LIVE_CHANGED, params):
            row = tuple(row)
            alloc = None
            if row[9] is not None:
                alloc = (row[9], row[0]) + row[10:]
            out.append((row[:9], alloc))
        return out


def _live_joined_statement():
    res, alloc = RESERVATIONS, ALLOCATIONS
    now = sa.bindparam('now')
    return (
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


_LIVE_JOINED = _live_joined_statement()


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
    params = {'now': _naive_utc(now),
              'dead_reservations': list(dead_reservations),
              'dead_leases': list(dead_leases)}
    with _reading(db) as session:
        yield from session.execute(_LIVE_JOINED, params)


def allocation_list(db, hosts=None, start=None, end=None,
                    reservation_id=None, lease_id=None):
    """Allocation dicts overlapping [start, end), ordered by host, start.

    An allocation [s, e) overlaps when s < end and e > start; a missing
    bound is unbounded. hosts: a list of hypervisor hostnames.
    """
    stmt = sa.select(*_ALLOCATION_COLUMNS)
    hosts = _as_list(hosts)
    if hosts is not None:
        stmt = stmt.where(ALLOCATIONS.c.host.in_(hosts))
    if end is not None:
        stmt = stmt.where(ALLOCATIONS.c.start_date < _naive_utc(end))
    if start is not None:
        stmt = stmt.where(ALLOCATIONS.c.end_date > _naive_utc(start))
    if reservation_id is not None:
        stmt = stmt.where(ALLOCATIONS.c.reservation_id == reservation_id)
    if lease_id is not None:
        stmt = stmt.where(ALLOCATIONS.c.reservation_id.in_(
            sa.select(RESERVATIONS.c.id)
            .where(RESERVATIONS.c.lease_id == lease_id)))
    stmt = stmt.order_by(ALLOCATIONS.c.host, ALLOCATIONS.c.start_date,
                         ALLOCATIONS.c.id)
    with _reading(db) as session:
        return _dicts(session.execute(stmt))


def _busy(binds):
    """Allocations on hosts ``binds`` overlapping [b_start, b_end)."""
    return sa.and_(ALLOCATIONS.c.host.in_(binds),
                   ALLOCATIONS.c.start_date < sa.bindparam('b_end'),
                   ALLOCATIONS.c.end_date > sa.bindparam('b_start'))


_BUSY = _PreparedIn(lambda binds: sa.select(
    ALLOCATIONS.c.host, ALLOCATIONS.c.reservation_id).where(
        _busy(binds)).distinct())


def _busy_and_fingerprint(binds):
    marker = _host_fingerprint_select().subquery('fingerprint')
    return sa.select(*marker.c, ALLOCATIONS.c.host,
                     ALLOCATIONS.c.reservation_id).select_from(
        marker.outerjoin(ALLOCATIONS, _busy(binds)))


_BUSY_AND_FINGERPRINT = _PreparedIn(_busy_and_fingerprint)


def allocation_busy(session, hosts, start, end, fingerprint=False):
    """``(host, reservation id)`` of the allocations overlapping [start,
    end) on hosts (hypervisor hostnames), in the caller's transaction.

    What host allocation asks at every step: one indexed query, no
    statement built or compiled (see _PreparedIn). With ``fingerprint``,
    the same query also reads :func:`host_fingerprint`: returns (that
    set, the fingerprint).
    """
    hosts = list(hosts)
    if not hosts and not fingerprint:
        return set()
    times = {'b_start': _naive_utc(start), 'b_end': _naive_utc(end)}
    statement = _BUSY_AND_FINGERPRINT if fingerprint else _BUSY
    prepared, params = statement.prepared(hosts, times)
    with _cursor(session) as (cursor, dialect):
        prepared.execute(cursor, dialect, params)
        rows = cursor.fetchall()
    if not fingerprint:
        return {tuple(row) for row in rows}
    width = len(rows[0]) - 2
    return ({tuple(row[width:]) for row in rows if row[width] is not None},
            tuple(str(v) for v in rows[0][:width]))


def allocation_update(db, allocation_id, values):
    """Update an allocation; its dict. Raises AllocationNotFound."""
    values = _clean(ALLOCATIONS, 'allocation', values,
                    read_only=_ALLOCATION_READ_ONLY)
    with _writing(db) as session:
        if values:
            old = _allocation_reservation(session, allocation_id)
            result = session.execute(sa.update(ALLOCATIONS).where(
                ALLOCATIONS.c.id == allocation_id).values(**values))
            if result.rowcount != 1:
                raise AllocationNotFound(allocation_id=allocation_id)
            _journal(session, [(None, rid) for rid in sorted(
                {old, values.get('reservation_id', old)})])
        return _allocation_get(session, allocation_id)


def allocation_destroy(db, allocation_id):
    """Delete an allocation. Raises AllocationNotFound."""
    with _writing(db) as session:
        old = _allocation_reservation(session, allocation_id)
        result = session.execute(sa.delete(ALLOCATIONS).where(
            ALLOCATIONS.c.id == allocation_id))
        if result.rowcount != 1:
            raise AllocationNotFound(allocation_id=allocation_id)
        _journal(session, [(None, old)])


def allocation_destroy_by_reservation(db, reservation_id):
    """Delete every allocation of a reservation; return how many."""
    with _writing(db) as session:
        count = session.execute(sa.delete(ALLOCATIONS).where(
            ALLOCATIONS.c.reservation_id == reservation_id)).rowcount
        if count:
            _journal(session, [(None, reservation_id)])
        return count


def allocation_cut(db, reservation_ids, at):
    """End the allocations of reservations at ``at`` (an early end).

    Allocations that start at or after ``at`` are deleted, those that
    run past it end there; earlier ones are kept. Returns how many rows
    changed.
    """
    reservation_ids = sorted(set(reservation_ids))
    if not reservation_ids:
        return 0
    at = _naive_utc(at)
    with _writing(db) as session:
        mine = ALLOCATIONS.c.reservation_id.in_(reservation_ids)
        count = session.execute(sa.delete(ALLOCATIONS).where(
            mine, ALLOCATIONS.c.start_date >= at)).rowcount
        count += session.execute(sa.update(ALLOCATIONS).where(
            mine, ALLOCATIONS.c.end_date > at).values(end_date=at)).rowcount
        if count:
            _journal(session, [(None, rid) for rid in reservation_ids])
        return count


def reservation_lease_ids(db, reservation_ids):
    """{reservation id: lease id} for the given reservation ids."""
    reservation_ids = sorted(set(reservation_ids))
    result = {}
    with _reading(db) as session:
        for i in range(0, len(reservation_ids), 500):
            part = reservation_ids[i:i + 500]
            result.update(session.execute(
                sa.select(RESERVATIONS.c.id, RESERVATIONS.c.lease_id)
                .where(RESERVATIONS.c.id.in_(part))).all())
    return result


# -- hosts ------------------------------------------------------------------

def _host_id(host_id):
    try:
        return int(host_id)
    except (TypeError, ValueError):
        raise HostNotFound(host=host_id)


def _with_capabilities(session, hosts):
    by_id = {}
    for host in hosts:
        host['capabilities'] = {}
        by_id[host['id']] = host
    if not hosts:
        return hosts
    stmt = sa.select(HOST_CAPABILITIES).where(
        HOST_CAPABILITIES.c.host_id.in_(list(by_id))).order_by(
            HOST_CAPABILITIES.c.capability_name)
    for row in session.execute(stmt):
        host = by_id.get(row.host_id)
        if host is not None:
            host['capabilities'][row.capability_name] = row.capability_value
    return hosts


def _capability_value(value):
    return value if isinstance(value, str) else str(value)


def _set_capabilities(session, host_id, capabilities):
    """Set (or, with a None value, delete) the given capabilities."""
    if not capabilities:
        return
    existing = set(session.execute(
        sa.select(HOST_CAPABILITIES.c.capability_name)
        .where(HOST_CAPABILITIES.c.host_id == host_id)).scalars())
    deleted = [name for name, value in capabilities.items()
               if value is None]
    if deleted:
        session.execute(sa.delete(HOST_CAPABILITIES).where(
            HOST_CAPABILITIES.c.host_id == host_id,
            HOST_CAPABILITIES.c.capability_name.in_(deleted)))
    new = []
    for name, value in sorted(capabilities.items()):
        if value is None:
            continue
        if name in existing:
            session.execute(sa.update(HOST_CAPABILITIES).where(
                HOST_CAPABILITIES.c.host_id == host_id,
                HOST_CAPABILITIES.c.capability_name == name).values(
                    capability_value=_capability_value(value)))
        else:
            new.append({'host_id': host_id, 'capability_name': name,
                        'capability_value': _capability_value(value)})
    if new:
        session.execute(sa.insert(HOST_CAPABILITIES), new)


def _host_get(session, where, host):
    row = session.execute(sa.select(HOSTS).where(where)).mappings().first()
    if row is None:
        raise HostNotFound(host=host)
    return _with_capabilities(session, [dict(row)])[0]


HOSTS_GENERATION = 'hosts'


def _host_fingerprint_select():
    # (max(): one row, NULLs before the first host write.)
    return sa.select(
        sa.func.max(GENERATIONS.c.value).label('generation'),
        sa.func.max(GENERATIONS.c.updated_at).label('generation_at')).where(
            GENERATIONS.c.name == HOSTS_GENERATION)


_HOST_FINGERPRINT = _Prepared(_host_fingerprint_select())


def _bump_generation(session, name):
    """Count one more change of what ``name`` names (see Generation)."""
    backend = _connection_of(session).dialect.name
    values = {'name': name, 'value': 1,
              'updated_at': _naive_utc(timeutils.utcnow())}
    bumped = {'value': GENERATIONS.c.value + 1,
              'updated_at': values['updated_at']}
    if backend == 'mysql':
        stmt = mysql.insert(GENERATIONS).values(**values)
        stmt = stmt.on_duplicate_key_update(**bumped)
    else:
        module = postgresql if backend == 'postgresql' else sqlite_dialect
        stmt = module.insert(GENERATIONS).values(**values)
        stmt = stmt.on_conflict_do_update(index_elements=['name'],
                                          set_=bumped)
    session.execute(stmt)


def host_fingerprint(session):
    """A change marker of the host registry (the ``hosts`` generation:
    its value and time), in the caller's transaction (a Session or a
    Connection). Every host writer of this module moves it.
    """
    with _cursor(session) as (cursor, dialect):
        _HOST_FINGERPRINT.execute(cursor, dialect, {})
        return tuple(str(v) for v in cursor.fetchone())


def host_create(db, values):
    """Create a host; values may carry 'capabilities' {name: value}.

    Capability values are stored as strings. Returns the host dict (its
    columns plus 'capabilities'). Raises HostExists.
    """
    values = dict(values)
    capabilities = values.pop('capabilities', None) or {}
    row = _clean(HOSTS, 'host', values)
    with _writing(db) as session:
        try:
            result = session.execute(sa.insert(HOSTS).values(**row))
        except db_exc.DBDuplicateEntry:
            raise HostExists(host=row.get('hypervisor_hostname'))
        host_id = result.inserted_primary_key[0]
        _set_capabilities(session, host_id, capabilities)
        _bump_generation(session, HOSTS_GENERATION)
        return _host_get(session, HOSTS.c.id == host_id, host_id)


def host_get(db, host_id):
    """The host dict with 'capabilities'. Raises HostNotFound."""
    host_id = _host_id(host_id)
    with _reading(db) as session:
        return _host_get(session, HOSTS.c.id == host_id, host_id)


def host_get_by_hostname(db, hypervisor_hostname):
    """The host dict with 'capabilities'. Raises HostNotFound."""
    with _reading(db) as session:
        return _host_get(
            session, HOSTS.c.hypervisor_hostname == hypervisor_hostname,
            hypervisor_hostname)


def host_list(db, hostnames=None, reservable=None):
    """Host dicts with 'capabilities', ordered by hypervisor_hostname."""
    stmt = sa.select(HOSTS)
    hostnames = _as_list(hostnames)
    if hostnames is not None:
        stmt = stmt.where(HOSTS.c.hypervisor_hostname.in_(hostnames))
    if reservable is not None:
        stmt = stmt.where(HOSTS.c.reservable == bool(reservable))
    stmt = stmt.order_by(HOSTS.c.hypervisor_hostname)
    with _reading(db) as session:
        return _with_capabilities(session, _dicts(session.execute(stmt)))


def host_update(db, host_id, values):
    """Update a host; its dict. Raises HostNotFound or HostExists.

    values may carry 'capabilities': the given names are set, a None
    value deletes that capability, other capabilities are kept.
    """
    host_id = _host_id(host_id)
    values = dict(values)
    capabilities = values.pop('capabilities', None) or {}
    values = _clean(HOSTS, 'host', values)
    values['updated_at'] = timeutils.utcnow()
    with _writing(db) as session:
        try:
            result = session.execute(sa.update(HOSTS).where(
                HOSTS.c.id == host_id).values(**values))
        except db_exc.DBDuplicateEntry:
            raise HostExists(host=values.get('hypervisor_hostname'))
        if result.rowcount != 1:
            raise HostNotFound(host=host_id)
        _set_capabilities(session, host_id, capabilities)
        _bump_generation(session, HOSTS_GENERATION)
        return _host_get(session, HOSTS.c.id == host_id, host_id)


def host_destroy(db, host_id):
    """Delete a host and its capabilities. Raises HostNotFound."""
    host_id = _host_id(host_id)
    with _writing(db) as session:
        result = session.execute(
            sa.delete(HOSTS).where(HOSTS.c.id == host_id))
        if result.rowcount != 1:
            raise HostNotFound(host=host_id)
        _bump_generation(session, HOSTS_GENERATION)


# -- locks ------------------------------------------------------------------

_LOCK_ROWS = _PreparedIn(lambda binds: sa.select(LOCKS.c.name).where(
    LOCKS.c.name.in_(binds)).order_by(LOCKS.c.name).with_for_update())


def url_of(session):
    """The database URL of a Session or Connection."""
    return _connection_of(session).engine.url


def lock(session, names):
    """Take exclusive named locks until session's transaction ends.

    session must come from Database.writer(). Two writers that lock a
    common name run one after the other; locks are taken in sorted order.
    MySQL/PostgreSQL: rows of the ``locks`` table, locked with SELECT ...
    FOR UPDATE, or created on first use by an upsert that locks the row
    it inserts or finds (DBDeadlock is still possible in corner cases:
    use retry_on_deadlock). SQLite: nothing to do, since the writer
    already holds the database's write lock (BEGIN IMMEDIATE).
    Take locks first in the transaction, before reading what they guard.
    """
    _require_writer(session)
    names = sorted(set(names))
    backend = _connection_of(session).dialect.name
    if not names or backend == 'sqlite':
        return
    prepared, params = _LOCK_ROWS.prepared(names)
    with _cursor(session) as (cursor, dialect):
        prepared.execute(cursor, dialect, params)
        found = {row[0] for row in cursor.fetchall()}
    missing = [{'name': name} for name in names if name not in found]
    if not missing:
        return
    # An INSERT IGNORE / ON CONFLICT DO NOTHING would take a shared lock
    # on a row inserted concurrently, and two such writers upgrading to
    # exclusive would deadlock; an upsert takes the exclusive lock at once.
    if backend == 'postgresql':
        stmt = postgresql.insert(LOCKS)
        stmt = stmt.on_conflict_do_update(
            index_elements=[LOCKS.c.name], set_={'name': stmt.excluded.name})
    elif backend == 'mysql':
        stmt = mysql.insert(LOCKS)
        stmt = stmt.on_duplicate_key_update(name=stmt.inserted.name)
    else:
        stmt = sa.insert(LOCKS)
    for row in missing:
        session.execute(stmt, row)


def lock_hosts(session, hostnames):
    """lock() the names 'host:<hypervisor hostname>' (see lock())."""
    lock(session, ['host:%s' % name for name in hostnames])


# -- Engine: event claiming -------------------------------------------------
#
# What nova_lease.periodic.engine runs. Several engines may share one
# database: MySQL/MariaDB and PostgreSQL claim with SELECT ... FOR UPDATE
# SKIP LOCKED (an engine never waits for, nor takes, rows another engine is
# claiming); SQLite's writer holds the database's write lock (BEGIN
# IMMEDIATE), so its claims are serialised. Either way the UPDATEs are
# conditional (status IN_PROGRESS and claimed_by), so a claim is never
# completed by an engine that lost it.

# Within one lease, an event is claimable only when every event earlier in
# this order has finished (DONE or ERROR): an end never runs before its
# start finished, even while the start is being retried.
EVENT_LIFECYCLE_ORDER = {
    'start_lease': 0,
    'before_end_lease': 1,
    'end_lease': 2,
}
_UNFINISHED = ('UNDONE', 'IN_PROGRESS')
_START_LEASE = 'start_lease'
_END_LEASE = 'end_lease'


# Candidates are read a page at a time (without locks), the blocked ones
# (see EVENT_LIFECYCLE_ORDER) dropped with one indexed look-up per page,
# and only then are the chosen rows locked by primary key. A correlated
# NOT EXISTS in the locking query would make InnoDB lock every row it
# scans, and PostgreSQL choose nested loops over fresh, unanalysed tables
# (seconds for 10,000 due events).
_PAGES = 10


def _lifecycle_rank(event_type):
    return EVENT_LIFECYCLE_ORDER.get(event_type, len(EVENT_LIFECYCLE_ORDER))


#: How long before a start an unfinished end on the same host is looked
#: for (see _ends_in_the_way).
END_LOOKBACK = datetime.timedelta(days=1)


def _ends_in_the_way(session, candidates):
    """{lease id: earliest time} of unfinished ends on the starts' hosts.

    A lease that starts at T on a host where another lease's end is due
    at or before T waits until that end is done (or has failed): run side
    by side, the end could clear the host or return it to the free pool
    after the start took it. Hosts come from the allocations (host leases
    and instance leases admitted for a future start); ends of allocations
    that ended more than END_LOOKBACK before the start are not looked at.
    """
    starts = sorted({c.lease_id for c in candidates
                     if c.event_type == _START_LEASE})
    if not starts:
        return {}
    mine = ALLOCATIONS.alias('mine')
    mine_res = RESERVATIONS.alias('mine_res')
    theirs = ALLOCATIONS.alias('theirs')
    theirs_res = RESERVATIONS.alias('theirs_res')
    end = EVENTS.alias('end_event')
    stmt = (sa.select(mine_res.c.lease_id, sa.func.min(end.c.time))
            .select_from(
                mine.join(mine_res, mine_res.c.id == mine.c.reservation_id)
                .join(theirs, theirs.c.host == mine.c.host)
                .join(theirs_res,
                      theirs_res.c.id == theirs.c.reservation_id)
                .join(end, end.c.lease_id == theirs_res.c.lease_id))
            .where(mine_res.c.lease_id.in_(starts),
                   theirs_res.c.lease_id != mine_res.c.lease_id,
                   theirs.c.end_date >= mine.c.start_date - END_LOOKBACK,
                   theirs.c.start_date < mine.c.start_date,
                   end.c.event_type == _END_LEASE,
                   end.c.status.in_(_UNFINISHED))
            .group_by(mine_res.c.lease_id))
    return {lease_id: _datetime(when)
            for lease_id, when in session.execute(stmt)}


def _drop_blocked(session, candidates):
    """The candidates (rows with id, lease_id, event_type, time) not
    blocked: by an unfinished earlier event of their lease, or a start by
    an unfinished end on its hosts (:func:`_ends_in_the_way`).
    """
    first = min(EVENT_LIFECYCLE_ORDER.values())
    in_the_way = _ends_in_the_way(session, candidates)
    if in_the_way:
        candidates = [c for c in candidates
                      if c.event_type != _START_LEASE or
                      in_the_way.get(c.lease_id) is None or
                      in_the_way[c.lease_id] > _datetime(c.time)]
    # The first event of a lease's life (its start) is never blocked by
    # its own lease.
    lease_ids = sorted({c.lease_id for c in candidates
                        if _lifecycle_rank(c.event_type) > first})
    if not lease_ids:
        return list(candidates)
    unfinished = {}
    for row in session.execute(
            sa.select(EVENTS.c.lease_id, EVENTS.c.event_type)
            .where(EVENTS.c.lease_id.in_(lease_ids),
                   EVENTS.c.status.in_(_UNFINISHED))):
        rank = _lifecycle_rank(row.event_type)
        unfinished[row.lease_id] = min(rank, unfinished.get(row.lease_id,
                                                            rank))
    return [c for c in candidates
            if unfinished.get(c.lease_id, len(EVENT_LIFECYCLE_ORDER) + 1)
            >= _lifecycle_rank(c.event_type)]


_CLAIM_KEYS = (EVENTS.c.id, EVENTS.c.lease_id, EVENTS.c.event_type,
               EVENTS.c.time)


def _claimable(session, where, limit, columns=(EVENTS,)):
    """Up to limit unblocked events matching where, in due order (rows
    of ``columns``: at least id, lease_id and event_type).
    """
    found = []
    page = max(limit + limit // 4, 50)
    base = (sa.select(*columns)
            .where(*where)
            .order_by(EVENTS.c.time, _event_order(), EVENTS.c.id))
    # The due order sorts on an expression (the event type's rank): every
    # matching row would be sorted for each page (a filesort of the whole
    # backlog on MySQL, tens of milliseconds per claim with 10,000 due).
    # The time of the last row of the page, read in index order, bounds
    # the rows to sort: the first rows in due order all come no later.
    times = sa.select(EVENTS.c.time).where(*where).order_by(EVENTS.c.time)
    for number in range(_PAGES):
        stmt = base
        bound = session.execute(
            times.offset((number + 1) * page - 1).limit(1)).scalar()
        if bound is not None:
            stmt = stmt.where(EVENTS.c.time <= bound)
        rows = session.execute(stmt.offset(number * page)
                               .limit(page)).all()
        found.extend(_drop_blocked(session, rows))
        if len(found) >= limit or len(rows) < page:
            break
    return found[:limit]


def _locking(stmt, session):
    if session.get_bind().dialect.name in ('mysql', 'postgresql'):
        return stmt.with_for_update(skip_locked=True)
    return stmt


def _datetime(value):
    if isinstance(value, str):
        # SQLite returns the stored text of an aggregate on a datetime.
        return datetime.datetime.fromisoformat(value)
    return value


def _leases_with_reservations(session, lease_ids):
    leases = {row['id']: row for row in _dicts(session.execute(
        sa.select(LEASES).where(LEASES.c.id.in_(lease_ids))))}
    for lease in leases.values():
        lease['reservations'] = []
    for row in _dicts(session.execute(
            sa.select(RESERVATIONS)
            .where(RESERVATIONS.c.lease_id.in_(lease_ids))
            .order_by(RESERVATIONS.c.created_at, RESERVATIONS.c.id))):
        leases[row['lease_id']]['reservations'].append(
            _reservation_dict(row))
    return leases


@retry_on_deadlock
def engine_claim_events(db, engine_id, now, limit, on_claim=None):
    """Claim up to ``limit`` due events for ``engine_id``, atomically.

    Due: UNDONE, ``time`` and ``next_attempt_at`` (when set) at or before
    ``now``, no unfinished earlier event of the same lease (see
    EVENT_LIFECYCLE_ORDER) and, for a start, no unfinished end of another
    lease due at or before it on the same hosts (see _ends_in_the_way).
    Claimed events become IN_PROGRESS with ``claimed_by=engine_id``,
    ``claimed_at=now`` and ``attempts`` + 1.

    ``on_claim(event, lease)``, if given, is called in the transaction
    for each claimed event and returns the lease's new status or None
    (the lease is updated compare-and-set on the status on_claim saw; if
    it changed meanwhile, the event is still claimed and its ``'lease'``
    shows the current status).

    Returns the claimed event dicts, in due order, each with ``'lease'``:
    the lease dict (after on_claim) with its ``'reservations'``.
    """
    now = _naive_utc(now)
    with _writing(db) as session:
        due = (EVENTS.c.status == 'UNDONE', EVENTS.c.time <= now,
               sa.or_(EVENTS.c.next_attempt_at.is_(None),
                      EVENTS.c.next_attempt_at <= now))
        locking = session.get_bind().dialect.name in ('mysql', 'postgresql')
        # (Where they are read again, locked, their keys are enough.)
        candidates = _claimable(session, due, limit,
                                _CLAIM_KEYS if locking else (EVENTS,))
        if not candidates:
            return []
        if locking:
            # Lock them, skipping those another engine is claiming, and
            # read them again: one may have been claimed (or retried and
            # put off) since the candidates were read.
            events = _dicts(session.execute(
                sa.select(EVENTS)
                .where(EVENTS.c.id.in_([c.id for c in candidates]), *due)
                .order_by(EVENTS.c.time, _event_order(), EVENTS.c.id)
                .with_for_update(skip_locked=True)))
        else:
            # SQLite: this writer holds the database's write lock since
            # before the candidates were read.
            events = [dict(c._mapping) for c in candidates]
        if not events:
            return []
        ids = [e['id'] for e in events]
        claimed = session.execute(
            sa.update(EVENTS)
            .where(EVENTS.c.id.in_(ids), EVENTS.c.status == 'UNDONE')
            .values(status='IN_PROGRESS', claimed_by=engine_id,
                    claimed_at=now, attempts=EVENTS.c.attempts + 1,
                    updated_at=now)).rowcount
        if claimed != len(ids):
            raise TransactionError(
                reason='claimed %d of %d locked events' % (claimed,
                                                           len(ids)))
        for event in events:
            event.update(status='IN_PROGRESS', claimed_by=engine_id,
                         claimed_at=now, attempts=event['attempts'] + 1,
                         updated_at=now)
        leases = _leases_with_reservations(
            session, sorted({e['lease_id'] for e in events}))
        moves = {}
        for event in events:
            lease = leases[event['lease_id']]
            new = on_claim(event, lease) if on_claim else None
            if new is not None and new != lease['status']:
                moves.setdefault((lease['status'], new), []).append(lease)
            event['lease'] = lease
        for (old, new), moving in moves.items():
            ids = [lease['id'] for lease in moving]
            moved = session.execute(
                sa.update(LEASES)
                .where(LEASES.c.id.in_(ids), LEASES.c.status == old)
                .values(status=new, updated_at=now)).rowcount
            current = {}
            if moved != len(ids):
                # Read back: a lease changed concurrently keeps its status.
                current = dict(session.execute(
                    sa.select(LEASES.c.id, LEASES.c.status)
                    .where(LEASES.c.id.in_(ids))).all())
            for lease in moving:
                lease['status'] = current.get(lease['id'], new)
                if lease['status'] == new:
                    lease['updated_at'] = now
            _journal(session, [(lease_id, None) for lease_id in ids])
        return events


def _still_claimed(event_ids, engine_id):
    """The condition: events ``event_ids`` still IN_PROGRESS, claimed by
    ``engine_id`` (a claim that expired and was taken over is not).
    """
    return sa.and_(EVENTS.c.id.in_(list(event_ids)),
                   EVENTS.c.status == 'IN_PROGRESS',
                   EVENTS.c.claimed_by == engine_id)


@retry_on_deadlock
def engine_complete_events(db, engine_id, results, now=None):
    """Record what the engine's actions did, in one transaction.

    ``results``: dicts with ``event_id``, ``lease_id``, ``status`` (the
    event's new status: DONE, ERROR, or UNDONE to retry it later) and
    optionally ``last_error``, ``next_attempt_at``, ``lease_status`` with
    ``lease_expected`` (compare-and-set: the lease moves only from one of
    these statuses), ``status_reason`` (set on the lease whatever its
    status when the key is present; None clears it) and
    ``reservation_status`` with ``reservation_expected`` (every
    reservation of the lease in one of those statuses moves).

    Only events still IN_PROGRESS and claimed by ``engine_id`` are
    touched (a claim that expired and was taken over is skipped, with its
    lease). UNDONE releases the claim. Returns the list of event ids
    recorded.
    """
    now = _naive_utc(now or timeutils.utcnow())
    by_id = {r['event_id']: r for r in results}
    if not by_id:
        return []
    with _writing(db) as session:
        owned = set(session.execute(
            sa.select(EVENTS.c.id)
            .where(_still_claimed(by_id, engine_id))
            .with_for_update()).scalars())
        groups = {}
        for event_id in owned:
            r = by_id[event_id]
            key = (r['status'], r.get('last_error'),
                   r.get('next_attempt_at'))
            groups.setdefault(key, []).append(event_id)
        for (new, error, next_at), ids in groups.items():
            values = {'status': new, 'last_error': error,
                      'next_attempt_at': _naive_utc(next_at),
                      'updated_at': now}
            if new == 'UNDONE':
                values.update(claimed_by=None, claimed_at=None)
            session.execute(sa.update(EVENTS)
                            .where(EVENTS.c.id.in_(ids)).values(**values))
        lease_groups, reservation_groups = {}, {}
        for event_id in owned:
            r = by_id[event_id]
            if r.get('lease_status') is not None:
                key = (r['lease_status'],
                       tuple(sorted(r.get('lease_expected') or ())),
                       'status_reason' in r, r.get('status_reason'))
                lease_groups.setdefault(key, []).append(r['lease_id'])
            elif 'status_reason' in r:
                key = (None, (), True, r['status_reason'])
                lease_groups.setdefault(key, []).append(r['lease_id'])
            if r.get('reservation_status') is not None:
                key = (r['reservation_status'],
                       tuple(sorted(r.get('reservation_expected') or ())))
                reservation_groups.setdefault(key, []).append(r['lease_id'])
        for (new, expected, has_reason, reason), ids in lease_groups.items():
            values = {'updated_at': now}
            if has_reason:
                values['status_reason'] = reason
            if new is None:
                session.execute(sa.update(LEASES)
                                .where(LEASES.c.id.in_(ids))
                                .values(**values))
                continue
            moved = session.execute(
                sa.update(LEASES)
                .where(LEASES.c.id.in_(ids), LEASES.c.status.in_(expected))
                .values(status=new, **values)).rowcount
            if moved:
                _journal(session, [(lease_id, None) for lease_id in ids])
            if has_reason and moved != len(ids):
                # The reason is set whatever the status.
                session.execute(
                    sa.update(LEASES)
                    .where(LEASES.c.id.in_(ids),
                           LEASES.c.status.not_in(expected))
                    .values(**values))
        for (new, expected), ids in reservation_groups.items():
            moved = session.execute(
                sa.update(RESERVATIONS)
                .where(RESERVATIONS.c.lease_id.in_(ids),
                       RESERVATIONS.c.status.in_(expected))
                .values(status=new, updated_at=now)).rowcount
            if moved:
                _journal(session, [(lease_id, None) for lease_id in ids])
    return sorted(owned)


@retry_on_deadlock
def engine_refresh_claims(db, engine_id, event_ids, now):
    """Renew ``claimed_at`` of events engine_id still runs; their count."""
    if not event_ids:
        return 0
    with _writing(db) as session:
        return session.execute(
            sa.update(EVENTS)
            .where(_still_claimed(event_ids, engine_id))
            .values(claimed_at=_naive_utc(now))).rowcount


@retry_on_deadlock
def engine_release_events(db, engine_id, event_ids, reason, now=None):
    """Give back claims engine_id could not finish (it is stopping).

    The events become UNDONE and unclaimed, with the attempt not counted
    and ``last_error=reason``. Returns the ids released.
    """
    if not event_ids:
        return []
    now = _naive_utc(now or timeutils.utcnow())
    with _writing(db) as session:
        ids = list(session.execute(
            sa.select(EVENTS.c.id)
            .where(_still_claimed(event_ids, engine_id))
            .with_for_update()).scalars())
        if ids:
            session.execute(
                sa.update(EVENTS).where(EVENTS.c.id.in_(ids))
                .values(status='UNDONE', claimed_by=None, claimed_at=None,
                        attempts=sa.case((EVENTS.c.attempts > 0,
                                          EVENTS.c.attempts - 1),
                                         else_=0),
                        last_error=reason, updated_at=now))
        return sorted(ids)


@retry_on_deadlock
def engine_recover_events(db, now, claim_timeout):
    """Release claims older than ``claim_timeout`` seconds (dead engines).

    They become UNDONE and unclaimed, due at once; the attempt counts.
    Returns dicts ``{'id', 'lease_id', 'event_type', 'claimed_by',
    'claimed_at', 'attempts'}`` of the events released.
    """
    now = _naive_utc(now)
    cutoff = now - datetime.timedelta(seconds=claim_timeout)
    with _writing(db) as session:
        stmt = (sa.select(EVENTS.c.id, EVENTS.c.lease_id,
                          EVENTS.c.event_type, EVENTS.c.claimed_by,
                          EVENTS.c.claimed_at, EVENTS.c.attempts)
                .where(EVENTS.c.status == 'IN_PROGRESS',
                       EVENTS.c.claimed_at < cutoff))
        stale = _dicts(session.execute(_locking(stmt, session)))
        for event in stale:
            session.execute(
                sa.update(EVENTS)
                .where(EVENTS.c.id == event['id'],
                       EVENTS.c.status == 'IN_PROGRESS',
                       EVENTS.c.claimed_by == event['claimed_by'])
                .values(status='UNDONE', claimed_by=None, claimed_at=None,
                        next_attempt_at=None, updated_at=now,
                        last_error='claim by %s at %s expired (the engine '
                                   'died or hung); released at %s'
                                   % (event['claimed_by'],
                                      event['claimed_at'], now)))
        return stale


def engine_next_event_time(db):
    """When the next claimable event is due (may be past), or None.

    Like event_next_time, but events waiting for an earlier event of
    their lease do not count.
    """
    with _reading(db) as session:
        first = _claimable(session, (EVENTS.c.status == 'UNDONE',
                                     EVENTS.c.next_attempt_at.is_(None)), 1)
        # A retried event has run: nothing earlier of its lease is left.
        retry = session.execute(
            sa.select(sa.func.min(EVENTS.c.next_attempt_at))
            .where(EVENTS.c.status == 'UNDONE',
                   EVENTS.c.next_attempt_at.is_not(None))).scalar()
    times = [_datetime(t) for t in ([first[0].time] if first else [])
             + [retry] if t is not None]
    return min(times) if times else None


# Built once (building a statement costs more than running it, and an
# expanding IN is rendered again at every run): the engine's workers run
# it before the side effects of every action, for up to _CLAIMS_CHUNK
# events at a time (the list is padded with its first id).
_CLAIMS_CHUNK = 16
_CLAIMS_HELD = sa.select(EVENTS.c.id, EVENTS.c.attempts).where(
    EVENTS.c.id.in_([sa.bindparam('e%d' % i)
                     for i in range(_CLAIMS_CHUNK)]),
    EVENTS.c.status == 'IN_PROGRESS',
    EVENTS.c.claimed_by == sa.bindparam('engine_id'))


def engine_claims_held(db, engine_id, claims):
    """Which of ``claims``, (event id, attempts) pairs, ``engine_id``
    still holds: the event is IN_PROGRESS, claimed by it, and not claimed
    again since (a released and re-claimed event has more attempts).

    One primary key look-up per event, in one statement on a Core
    connection. Returns a set of pairs.
    """
    claims = set(claims)
    if not claims:
        return set()
    ids = sorted({event_id for event_id, _ in claims})
    held = set()
    for first in range(0, len(ids), _CLAIMS_CHUNK):
        chunk = ids[first:first + _CLAIMS_CHUNK]
        params = {'e%d' % i: chunk[i] if i < len(chunk) else chunk[0]
                  for i in range(_CLAIMS_CHUNK)}
        params['engine_id'] = engine_id
        held.update((row.id, row.attempts)
                    for row in _autocommit_read(db, _CLAIMS_HELD, params))
    return held & claims


class _AutocommitReader(object):
    """One connection in autocommit mode, for the single-statement reads
    of a hot path: no pool checkout (and its ping), BEGIN or COMMIT round
    trips. Thread-safe (its users are serialised); a statement that
    fails on a kept connection is tried once more on a new one.
    """

    def __init__(self, db):
        self.db = db
        self._conn = None
        self._lock = threading.Lock()

    def read(self, stmt, params):
        with self._lock:
            # A connection kept since an earlier read may have been closed
            # by the server (restart, idle time-out): one more try with a
            # new one, as the pool's ping would have done.
            for fresh in (self._conn is None, True):
                try:
                    if self._conn is None:
                        self._conn = self.db.engine.connect(
                        ).execution_options(isolation_level='AUTOCOMMIT')
                    return self._conn.execute(stmt, params).all()
                except Exception:
                    self._drop()
                    if fresh:
                        raise

    def _drop(self):
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except Exception:
                pass


_READERS_LOCK = threading.Lock()


def _autocommit_read(db, stmt, params):
    """Rows of one read statement (see _AutocommitReader); a Session or
    an SQLite database reads in an ordinary transaction.
    """
    if not isinstance(db, Database) or db.backend == 'sqlite':
        with _reading_core(db) as conn:
            return conn.execute(stmt, params).all()
    reader = getattr(db, '_nova_lease_autocommit_reader', None)
    if reader is None:
        with _READERS_LOCK:
            reader = getattr(db, '_nova_lease_autocommit_reader', None)
            if reader is None:
                reader = _AutocommitReader(db)
                db._nova_lease_autocommit_reader = reader
    return reader.read(stmt, params)


def engine_claim_held(db, engine_id, event_id, attempts):
    """Whether ``engine_id`` still holds attempt ``attempts`` of event
    ``event_id`` (see engine_claims_held).
    """
    return bool(engine_claims_held(db, engine_id, [(event_id, attempts)]))


_PROBE = (
    sa.select(sa.func.count(), sa.func.min(EVENTS.c.id),
              sa.func.max(EVENTS.c.id))
    .where(EVENTS.c.status == 'UNDONE',
           EVENTS.c.time <= sa.bindparam('horizon')))


def engine_probe(db, horizon):
    """A cheap fingerprint of the UNDONE events due at or before horizon.

    One range scan of ix_events_status_time: (count, lowest id, highest
    id). It changes when such an event is created, moved before horizon,
    claimed or released; a sleeping engine compares it with the one it
    took before its last look.
    """
    with _reading(db) as session:
        return tuple(session.execute(
            _PROBE, {'horizon': _naive_utc(horizon)}).one())


# -- processes and the database identity -----------------------------------
#
# See nova_lease.registration: which processes use this side database.

def database_identity(db):
    """The identity (a uuid) of this side database, or None if it has
    none (made by nova-lease-manage db sync).
    """
    with _reading(db) as session:
        return session.execute(
            sa.select(DATABASE_IDENTITY.c.id)
            .order_by(DATABASE_IDENTITY.c.created_at)).scalars().first()


def database_identity_create(db):
    """Give the database an identity if it has none; return it."""
    with _writing(db) as session:
        current = session.execute(
            sa.select(DATABASE_IDENTITY.c.id)).scalars().first()
        if current is not None:
            return current
        identity = uuidutils.generate_uuid()
        session.execute(sa.insert(DATABASE_IDENTITY).values(
            id=identity, created_at=_naive_utc(timeutils.utcnow())))
        return identity


@retry_on_deadlock
def process_register(db, values):
    """Insert a process row (``binary``, ``host``, ``pid``, optional
    ``name`` and ``id``); started_at = heartbeat_at = now. Returns it.
    """
    now = _naive_utc(timeutils.utcnow())
    row = _new_row(PROCESSES, 'process', values)
    row.setdefault('started_at', now)
    row.setdefault('heartbeat_at', now)
    row.setdefault('heartbeats', 0)
    with _writing(db) as session:
        session.execute(sa.insert(PROCESSES).values(**row))
    return _complete(PROCESSES, row, now)


@retry_on_deadlock
def process_heartbeat(db, process_id, now=None):
    """One heartbeat of a registered process.

    Returns None if the row is gone (pruned: register again), else the
    ``stop_reason`` it had if another process had marked it stopped (the
    mark is cleared: it is alive), else ''.
    """
    now = _naive_utc(now or timeutils.utcnow())
    with _writing(db) as session:
        row = session.execute(
            sa.select(PROCESSES.c.stopped_at, PROCESSES.c.stop_reason)
            .where(PROCESSES.c.id == process_id)).first()
        if row is None:
            return None
        session.execute(
            sa.update(PROCESSES).where(PROCESSES.c.id == process_id)
            .values(heartbeats=PROCESSES.c.heartbeats + 1,
                    heartbeat_at=now, stopped_at=None, stop_reason=None))
        if row.stopped_at is not None:
            return row.stop_reason or 'marked stopped'
        return ''


@retry_on_deadlock
def process_stop(db, process_id, reason='stopped', now=None):
    """Mark a process stopped (a clean stop); True if it was running."""
    now = _naive_utc(now or timeutils.utcnow())
    with _writing(db) as session:
        return bool(session.execute(
            sa.update(PROCESSES)
            .where(PROCESSES.c.id == process_id,
                   PROCESSES.c.stopped_at.is_(None))
            .values(stopped_at=now, stop_reason=reason)).rowcount)


def process_list(db, binary=None, running=None):
    """Process rows, oldest first; ``running``: only (not) stopped ones."""
    stmt = sa.select(PROCESSES).order_by(PROCESSES.c.started_at,
                                         PROCESSES.c.id)
    if binary is not None:
        stmt = stmt.where(PROCESSES.c.binary.in_(_as_list(binary)))
    if running is True:
        stmt = stmt.where(PROCESSES.c.stopped_at.is_(None))
    elif running is False:
        stmt = stmt.where(PROCESSES.c.stopped_at.is_not(None))
    with _reading(db) as session:
        return _dicts(session.execute(stmt))


@retry_on_deadlock
def process_prune(db, before):
    """Delete the rows of processes not seen since ``before``; how many."""
    with _writing(db) as session:
        return session.execute(sa.delete(PROCESSES).where(
            PROCESSES.c.heartbeat_at < _naive_utc(before))).rowcount


@retry_on_deadlock
def engine_release_dead(db, process_id, heartbeats, reason, keep=(),
                        alive=(), now=None):
    """An engine process is dead: release its claims and mark it stopped.

    Nothing happens unless its heartbeat counter is still ``heartbeats``
    and it is not marked yet (compare-and-set, under a lock of its row: an
    engine that beat meanwhile is alive). Its claims are the IN_PROGRESS
    events claimed by its name, except ``keep`` (the events a live engine
    with the same name runs), and none if a running process other than it
    and those of ``alive`` bears the same name. They become UNDONE and
    unclaimed, due at once; the attempt counts. Claims locked by another
    transaction are skipped; the process is marked stopped (with
    ``reason``) only once none is left, so that the next call releases
    the rest. Returns (marked, released event dicts as
    engine_recover_events).
    """
    now = _naive_utc(now or timeutils.utcnow())
    with _writing(db) as session:
        row = session.execute(
            sa.select(PROCESSES.c.name)
            .where(PROCESSES.c.id == process_id,
                   PROCESSES.c.heartbeats == heartbeats,
                   PROCESSES.c.stopped_at.is_(None))
            .with_for_update()).first()
        if row is None:
            return False, []
        stale, left = [], None
        others = row.name and session.execute(
            sa.select(PROCESSES.c.id)
            .where(PROCESSES.c.name == row.name,
                   PROCESSES.c.stopped_at.is_(None),
                   PROCESSES.c.id.not_in([process_id] + list(alive)))
        ).first()
        if row.name and others is None:
            where = [EVENTS.c.status == 'IN_PROGRESS',
                     EVENTS.c.claimed_by == row.name]
            if keep:
                where.append(EVENTS.c.id.not_in(list(keep)))
            stmt = (sa.select(EVENTS.c.id, EVENTS.c.lease_id,
                              EVENTS.c.event_type, EVENTS.c.claimed_by,
                              EVENTS.c.claimed_at, EVENTS.c.attempts)
                    .where(*where))
            stale = _dicts(session.execute(_locking(stmt, session)))
            if stale:
                session.execute(
                    sa.update(EVENTS)
                    .where(EVENTS.c.id.in_([e['id'] for e in stale]),
                           EVENTS.c.status == 'IN_PROGRESS',
                           EVENTS.c.claimed_by == row.name)
                    .values(status='UNDONE', claimed_by=None,
                            claimed_at=None, next_attempt_at=None,
                            updated_at=now,
                            last_error='engine %s died (%s); claim '
                                       'released at %s'
                                       % (row.name, reason, now)))
            left = session.execute(
                sa.select(sa.func.count()).select_from(EVENTS)
                .where(*where)).scalar()
        if left:
            return False, stale
        session.execute(
            sa.update(PROCESSES).where(PROCESSES.c.id == process_id)
            .values(stopped_at=now, stop_reason=reason))
        return True, stale
