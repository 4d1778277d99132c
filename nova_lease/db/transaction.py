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
"""Transactions on the nova_lease side database (oslo.db's enginefacade).

A :class:`Database` is one side database: an enginefacade transaction
context configured from ``[nova_lease_database]`` (the standard oslo.db
options, as placement's ``[placement_database]``), with reader and writer
transactions. Every function of ``nova_lease.db`` takes ``db`` first: a
Database (the function opens its own transaction with :func:`reading` or
:func:`writing`) or a Session of the caller's transaction.

What enginefacade does not do for us, done in :func:`_on_engine_create`:

* SQLite: writers take the write lock when they begin (``BEGIN
  IMMEDIATE``), so that concurrent writers queue on it instead of failing
  to upgrade a read lock; a file database runs in WAL mode, so readers
  and the writer do not block each other; a lock wait that timed out is a
  DBDeadlock (retried by :data:`retry_on_deadlock`).
* SQLite files: idle connections are kept and reused
  (:class:`_SQLiteConnections`); oslo.db opens a connection per
  transaction there, and SQLite reads the whole schema again on each.
* MySQL/MariaDB: READ COMMITTED (PostgreSQL's default): a statement that
  follows ``lock_hosts()`` sees what the previous lock holder committed,
  and InnoDB takes no gap locks; utf8mb4 unless the URL names a charset.
"""

import contextlib
import os
import sqlite3
import threading

from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import enginefacade
import sqlalchemy as sa
from sqlalchemy import event as sa_event
from sqlalchemy import orm

from nova_lease import conf as lease_conf
from nova_lease import exception

# Seconds an SQLite writer waits for the write lock before giving up with
# DBDeadlock.
SQLITE_BUSY_TIMEOUT = 30

_WRITER = 'nova_lease_writer'
_SQLITE_IMMEDIATE = 'nova_lease_sqlite_immediate'


class TransactionError(exception.NovaLeaseException):
    msg_fmt = '%(reason)s'


def _is_lock_timeout(error):
    """An SQLite writer waited SQLITE_BUSY_TIMEOUT for the write lock."""
    return 'database is locked' in str(error)


# Idle connections an SQLite file database keeps when max_pool_size is
# not set (oslo.db's own default pool size).
SQLITE_IDLE_CONNECTIONS = 5


def _on_engine_create(engine, memory, synchronous, connections):
    backend = engine.dialect.name
    if backend == 'sqlite':
        _setup_sqlite(engine, memory, synchronous)
        if connections is not None:
            sa_event.listen(engine, 'do_connect', connections.connect)
    elif backend == 'mysql':
        sa_event.listen(engine, 'connect', _mysql_on_connect)


def _mysql_on_connect(dbapi_con, connection_record):
    cursor = dbapi_con.cursor()
    cursor.execute('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED')
    cursor.close()


def _setup_sqlite(engine, memory, synchronous):
    @sa_event.listens_for(engine, 'connect')
    def _on_connect(dbapi_con, connection_record):
        if getattr(dbapi_con, 'prepared', False):
            return  # a kept connection (_SQLiteConnections): set up once
        cursor = dbapi_con.cursor()
        cursor.execute('PRAGMA busy_timeout = %d'
                       % (SQLITE_BUSY_TIMEOUT * 1000))
        if not memory:
            # Readers do not block the writer, nor the writer readers.
            cursor.execute('PRAGMA journal_mode = WAL')
            if synchronous:
                cursor.execute('PRAGMA synchronous = NORMAL')
        cursor.close()
        if isinstance(dbapi_con, _KeptConnection):
            dbapi_con.prepared = True

    @sa_event.listens_for(engine, 'begin')
    def _on_begin(conn):
        if not conn.get_execution_options().get(_SQLITE_IMMEDIATE):
            return
        # A writer takes the write lock as it begins. oslo.db's listener
        # (registered first) has begun a deferred transaction: empty, it
        # holds no lock yet, so it is ended and begun again, IMMEDIATE.
        if conn.connection.dbapi_connection.in_transaction:
            conn.exec_driver_sql('ROLLBACK')
        conn.exec_driver_sql('BEGIN IMMEDIATE')


class _KeptConnection(sqlite3.Connection):
    """An SQLite connection that close() gives back to its keeper."""

    keeper = None
    generation = 0
    prepared = False

    def close(self):
        keeper = self.keeper
        if keeper is None or not keeper.keep(self):
            self.keeper = None
            super().close()


class _SQLiteConnections(object):
    """The idle connections of an SQLite file database, reused.

    oslo.db gives SQLite files SQLAlchemy's NullPool: each transaction
    opens a connection and closes it, and SQLite parses the whole schema
    again for the first statement on every new connection (most of a
    short transaction's time). Through SQLAlchemy's ``do_connect`` event,
    a new connection is taken from the idle ones when there is one; the
    pool's close() (at the end of each transaction, after its rollback)
    puts it back, up to ``size`` idle ones (None: no limit). Connections
    are opened with ``check_same_thread=False``: a connection is used by
    one thread at a time, as SQLAlchemy's own QueuePool does for SQLite
    files.
    """

    def __init__(self, size):
        self.size = size
        self._idle = []
        self._lock = threading.Lock()
        self._generation = 0

    def connect(self, dialect, connection_record, cargs, cparams):
        with self._lock:
            if self._idle:
                return self._idle.pop()
        cparams['factory'] = _KeptConnection
        cparams['check_same_thread'] = False
        conn = dialect.connect(*cargs, **cparams)
        conn.keeper = self
        conn.generation = self._generation
        return conn

    def keep(self, conn):
        """Take conn back (True), or refuse it (False: it is closed)."""
        if conn.in_transaction:
            try:
                conn.rollback()
            except sqlite3.Error:
                return False
        with self._lock:
            if conn.generation != self._generation or (
                    self.size is not None and len(self._idle) >= self.size):
                return False
            self._idle.append(conn)
            return True

    def dispose(self):
        """Close the idle connections, and those in use when they are
        given back (as SQLAlchemy's Engine.dispose() does).
        """
        with self._lock:
            idle, self._idle = self._idle, []
            self._generation += 1
        for conn in idle:
            conn.keeper = None
            conn.close()


class _Scope(object):
    """What enginefacade keeps a Database's per-thread transactions on."""


class Database(object):
    """A side database: its reader and writer transactions.

    ``options``: the oslo.db options of ``[nova_lease_database]`` other
    than ``connection`` (``max_pool_size``, ``max_overflow``,
    ``connection_recycle_time``, ...), as enginefacade's ``configure()``
    takes them. The engine is made at the first transaction.

    Thread-safe: every reader()/writer() is a transaction of its own
    (enginefacade's ``independent``), with its own Session and connection.
    An in-memory SQLite database ('sqlite://') has one connection, so all
    of its transactions are serialised.
    """

    def __init__(self, url, **options):
        self.url = sa.engine.make_url(url)
        self.backend = self.url.get_backend_name()
        memory = (self.backend == 'sqlite' and
                  self.url.database in (None, '', ':memory:'))
        if self.backend == 'sqlite' and not memory:
            os.makedirs(os.path.dirname(os.path.abspath(self.url.database)),
                        exist_ok=True)
        # (thread_checkin: oslo.db's sleep(0) at every connection checkin
        # lets eventlet switch; nova_lease runs on native threads only.)
        settings = {'max_retries': 0, 'thread_checkin': False}
        settings.update(options)
        self._connections = None
        if self.backend == 'sqlite':
            # oslo.db gives SQLite no pool and refuses its options; a file
            # database keeps up to max_pool_size idle connections of its
            # own.
            size = settings.pop('max_pool_size', None)
            for name in ('max_overflow', 'pool_timeout'):
                settings.pop(name, None)
            if not memory:
                if size is None:
                    size = SQLITE_IDLE_CONNECTIONS
                self._connections = _SQLiteConnections(size or None)
        if self.backend == 'mysql' and 'charset' not in self.url.query:
            parameters = settings.get('connection_parameters') or ''
            if 'charset=' not in parameters:
                settings['connection_parameters'] = '&'.join(
                    p for p in (parameters, 'charset=utf8mb4') if p)
        self._manager = enginefacade.transaction_context()
        self._manager.configure(
            connection=self.url.render_as_string(hide_password=False),
            sqlite_fk=True, **settings)
        synchronous = settings.get('sqlite_synchronous', True)
        connections = self._connections
        self._manager.append_on_engine_create(
            lambda engine: _on_engine_create(engine, memory, synchronous,
                                             connections))
        self._serial = threading.RLock() if memory else None
        self._scope = _Scope()

    def __repr__(self):
        return '<Database %s>' % self.url.render_as_string(
            hide_password=True)

    @property
    def engine(self):
        """The SQLAlchemy Engine (made now if it is not yet)."""
        return self._manager.writer.get_engine()

    @contextlib.contextmanager
    def _serialised(self):
        if self._serial is None:
            yield
        else:
            with self._serial:
                yield

    @contextlib.contextmanager
    def _lock_timeout_retryable(self):
        # An SQLite writer that waited SQLITE_BUSY_TIMEOUT for the write
        # lock gets a DBDeadlock (retried by retry_on_deadlock), not the
        # OperationalError oslo.db's filters leave it as.
        try:
            yield
        except sa.exc.OperationalError as e:
            if self.backend == 'sqlite' and _is_lock_timeout(e):
                raise db_exc.DBDeadlock(e) from e
            raise

    @contextlib.contextmanager
    def _transaction(self, writer, core=False):
        mode = self._manager.writer if writer else self._manager.reader
        if core and not (writer and self.backend == 'sqlite'):
            # (An SQLite writer begins IMMEDIATE through the execution
            # options of its Session's connection, set before it begins:
            # it stays a Session.)
            mode = mode.connection
        with self._lock_timeout_retryable(), self._serialised(), \
                mode.independent.using(self._scope) as session:
            # (A Connection's info lives as long as the pooled connection:
            # set on every checkout.)
            session.info[_WRITER] = writer
            if writer and self.backend == 'sqlite':
                session.connection(
                    execution_options={_SQLITE_IMMEDIATE: True})
            yield session

    def reader(self, core=False):
        """Context manager: a Session in a read transaction.

        ``core``: a Core Connection instead (enginefacade's connection
        mode), for code that runs Core statements only: no ORM Session is
        made, which is most of the cost of a short transaction (the
        engine's claims, records and claim checks).
        """
        return self._transaction(False, core)

    def writer(self, core=False):
        """Context manager: a Session in a write transaction.

        It commits when the block ends and rolls back on an exception.
        There are no automatic retries: see :data:`retry_on_deadlock`.
        Pass the session to the functions that should run in it.
        ``core``: as for :meth:`reader` (an SQLite writer is a Session
        whatever it says).
        """
        return self._transaction(True, core)

    @contextlib.contextmanager
    def connection(self, writer=True):
        """Context manager: a Core Connection in a transaction, for DDL
        and migrations (like writer() on SQLite when writer is true).
        """
        with self._lock_timeout_retryable(), self._serialised(), \
                self.engine.connect() as conn:
            # (Connection.info lives as long as the pooled connection: set
            # on every checkout.)
            conn.info[_WRITER] = writer
            if writer and self.backend == 'sqlite':
                conn.execution_options(**{_SQLITE_IMMEDIATE: True})
            with conn.begin():
                yield conn

    def dispose(self):
        """Close the pooled connections (a started engine only)."""
        if self._connections is not None:
            self._connections.dispose()
        self._manager.dispose_pool()


_DATABASES = {}
_DATABASES_LOCK = threading.Lock()


def get_database(conf):
    """The process-wide Database of conf's ``[nova_lease_database]``.

    The nova_lease options must be registered on conf. One Database (and
    pool) per URL; thread-safe.

    :raises nova_lease.exception.DatabaseNotConfigured: no connection.
    """
    url = lease_conf.connection_url(conf)
    with _DATABASES_LOCK:
        db = _DATABASES.get(url)
        if db is None:
            db = _DATABASES[url] = Database(
                url, **lease_conf.database_options(conf))
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


#: Decorator for a function that opens its own transaction(s) (it takes a
#: Database, not a Session): retried with back-off and jitter on
#: DBDeadlock (and, on SQLite, on a lock wait that timed out).
retry_on_deadlock = oslo_db_api.wrap_db_retry(
    max_retries=5, retry_interval=0.1, inc_retry_interval=True,
    max_retry_interval=2, retry_on_deadlock=True, jitter=True)


def _is_transaction(db):
    return isinstance(db, (orm.Session, sa.engine.Connection))


@contextlib.contextmanager
def reading(db, core=False):
    """A read transaction: db's own, or db if it is one (a Session or a
    Connection). ``core``: db's own is a Core Connection (see
    :meth:`Database.reader`).
    """
    if _is_transaction(db):
        yield db
    else:
        with db.reader(core=core) as session:
            yield session


@contextlib.contextmanager
def writing(db, core=False):
    """A write transaction: db's own, or db if it is a writer's Session
    or Connection (TransactionError for a reader's). ``core``: as for
    :func:`reading`.
    """
    if _is_transaction(db):
        require_writer(db)
        yield db
    else:
        with db.writer(core=core) as session:
            yield session


def require_writer(session):
    """Raise TransactionError unless session is a writer's."""
    if not session.info.get(_WRITER):
        raise TransactionError(
            reason='this operation needs a Database.writer() session')


def connection_of(session):
    """The Core Connection of a Session's transaction (or the Connection).
    """
    if isinstance(session, orm.Session):
        return session.connection()
    return session


def dialect_name(session):
    """The dialect name of a Session's or Connection's database."""
    return connection_of(session).dialect.name


def url_of(session):
    """The database URL of a Session or Connection."""
    return connection_of(session).engine.url
