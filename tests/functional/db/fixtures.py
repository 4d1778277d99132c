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
"""Databases for tests, on SQLite, MariaDB/MySQL and PostgreSQL.

Server URLs (without a database name) come from the environment, with the
defaults of a developer machine / CI node:

* NOVA_LEASE_TEST_MYSQL_URL: mysql+pymysql://root@127.0.0.1:3306/
* NOVA_LEASE_TEST_POSTGRESQL_URL:
  postgresql+psycopg2://postgres@127.0.0.1:5432/

A test on a server that does not answer is skipped, unless
NOVA_LEASE_TEST_REQUIRE_DBS=1: then it fails.

:class:`Database` gives a test an empty database with the schema. The
schema is migrated once per test process and backend (creating and
migrating a MySQL database per test would cost a second each); every row is
deleted before each test. :class:`EmptyDatabase` gives a test a new
database without any schema, dropped afterwards (for migrations and the
nova-lease-manage tests).
"""

import atexit
import os
import shutil
import tempfile
import threading

import fixtures
from oslo_utils import uuidutils
import sqlalchemy as sa

from nova_lease.db import api
from nova_lease.db import migration
from nova_lease.db import models

REQUIRE_ENV = 'NOVA_LEASE_TEST_REQUIRE_DBS'


class Backend(object):
    name = None

    def unavailable_reason(self):
        """None if usable, else why not."""
        return None

    def create(self):
        """Create a new empty database; return its URL."""
        raise NotImplementedError()

    def drop(self, url):
        raise NotImplementedError()


class SQLiteBackend(Backend):
    name = 'sqlite'

    def __init__(self):
        # Decided at import, outside any test: oslotest points TMPDIR at a
        # directory that goes away with each test, and the per-process
        # database outlives tests.
        self._root = tempfile.gettempdir()
        self._dir = None
        self._lock = threading.Lock()

    def create(self):
        with self._lock:
            if self._dir is None:
                self._dir = tempfile.mkdtemp(prefix='nova_lease_test_',
                                             dir=self._root)
                atexit.register(shutil.rmtree, self._dir, True)
        path = os.path.join(self._dir, 'db_%s.sqlite'
                            % uuidutils.generate_uuid(dashed=False))
        return 'sqlite:///%s' % path

    def drop(self, url):
        path = sa.engine.make_url(url).database
        for suffix in ('', '-wal', '-shm', '-journal'):
            try:
                os.unlink(path + suffix)
            except FileNotFoundError:
                pass


class ServerBackend(Backend):
    """A database server on which tests create and drop databases."""

    def __init__(self, name, env, default_url, admin_database=None):
        self.name = name
        self.url = sa.engine.make_url(os.environ.get(env) or default_url)
        self._admin_url = self.url.set(database=admin_database)
        self._probed = False
        self._reason = None
        self._lock = threading.Lock()

    def _admin_engine(self):
        connect_args = {'connect_timeout': 3}
        return sa.create_engine(self._admin_url, isolation_level='AUTOCOMMIT',
                                poolclass=sa.pool.NullPool,
                                connect_args=connect_args)

    def unavailable_reason(self):
        with self._lock:
            if not self._probed:
                self._probed = True
                engine = self._admin_engine()
                try:
                    with engine.connect() as conn:
                        conn.exec_driver_sql('SELECT 1')
                except Exception as e:
                    self._reason = '%s server %s unavailable: %s' % (
                        self.name, self._admin_url.render_as_string(), e)
                finally:
                    engine.dispose()
            return self._reason

    def _execute(self, sql):
        engine = self._admin_engine()
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql(sql)
        finally:
            engine.dispose()

    def create(self):
        name = 'nova_lease_test_%s' % uuidutils.generate_uuid(dashed=False)
        self._execute(self.CREATE % name)
        return self.url.set(database=name).render_as_string(
            hide_password=False)

    def drop(self, url):
        self._execute(self.DROP % sa.engine.make_url(url).database)


class MySQLBackend(ServerBackend):
    CREATE = 'CREATE DATABASE %s CHARACTER SET utf8mb4'
    DROP = 'DROP DATABASE IF EXISTS %s'


class PostgreSQLBackend(ServerBackend):
    CREATE = 'CREATE DATABASE %s'
    DROP = 'DROP DATABASE IF EXISTS %s WITH (FORCE)'


SQLITE = SQLiteBackend()
MYSQL = MySQLBackend('mysql', 'NOVA_LEASE_TEST_MYSQL_URL',
                     'mysql+pymysql://root@127.0.0.1:3306/')
POSTGRESQL = PostgreSQLBackend(
    'postgresql', 'NOVA_LEASE_TEST_POSTGRESQL_URL',
    'postgresql+psycopg2://postgres@127.0.0.1:5432/', 'postgres')
BACKENDS = {b.name: b for b in (SQLITE, MYSQL, POSTGRESQL)}


def require(test, backend):
    """Skip test (or fail it, when required) if backend is unavailable."""
    reason = backend.unavailable_reason()
    if reason is None:
        return
    if os.environ.get(REQUIRE_ENV) == '1':
        test.fail('%s (and %s=1)' % (reason, REQUIRE_ENV))
    test.skipTest(reason)


_SHARED = {}
_SHARED_LOCK = threading.Lock()


def _drop_shared():
    for backend, (url, db) in list(_SHARED.items()):
        db.dispose()
        try:
            BACKENDS[backend].drop(url)
        except Exception:  # the interpreter is exiting; best effort
            pass


atexit.register(_drop_shared)


def _shared_database(backend):
    with _SHARED_LOCK:
        if backend.name not in _SHARED:
            url = backend.create()
            db = api.Database(url)
            migration.upgrade(db)
            _SHARED[backend.name] = (url, db)
        return _SHARED[backend.name]


def empty(db):
    """Delete every row of every table of db but its identity."""
    with db.connection() as conn:
        for table in reversed(models.Base.metadata.sorted_tables):
            if table is not models.DATABASE_IDENTITY:
                conn.execute(table.delete())


class Database(fixtures.Fixture):
    """An empty, migrated database on backend: ``.db`` and ``.url``."""

    def __init__(self, backend):
        super().__init__()
        self.backend = backend

    def _setUp(self):
        self.url, self.db = _shared_database(self.backend)
        empty(self.db)


class EmptyDatabase(fixtures.Fixture):
    """A new database without schema on backend (``.url``), then dropped."""

    def __init__(self, backend):
        super().__init__()
        self.backend = backend

    def _setUp(self):
        self.url = self.backend.create()
        self.addCleanup(self.backend.drop, self.url)
