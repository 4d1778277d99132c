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
"""SQLite specifics: threads, the write lock, WAL, in-memory databases."""

import datetime
import sqlite3
import threading
import time

import fixtures
from oslo_db import exception as db_exc

from nova_lease.db import api
from nova_lease.db import migration
from nova_lease.db import transaction
from tests.functional.db import base
from tests import threads

T0 = datetime.datetime(2030, 1, 1)


def _lease(name='l'):
    return {'name': name, 'project_id': 'p', 'start_date': T0,
            'end_date': T0 + datetime.timedelta(hours=1)}


def _in_thread(target):
    result = {}

    def _run():
        try:
            result['value'] = target()
        except Exception as e:  # reported by the test
            result['error'] = e

    thread = threading.Thread(target=_run)
    thread.start()
    return thread, result


class SQLiteTest(base.SQLiteTestCase):

    HOLD = 0.4

    def _hold_writer(self, db=None):
        """A thread that writes a lease and holds the write lock HOLD s."""
        locked = threading.Event()

        def _write():
            with (db or self.db).writer() as session:
                api.lease_create(session, _lease('held'))
                locked.set()
                time.sleep(self.HOLD)
                return time.monotonic()

        thread, result = _in_thread(_write)
        self.assertTrue(locked.wait(10))
        return thread, result

    def test_pragmas(self):
        with self.db.connection(writer=False) as conn:
            self.assertEqual(1, conn.exec_driver_sql(
                'PRAGMA foreign_keys').scalar())
            self.assertEqual('wal', conn.exec_driver_sql(
                'PRAGMA journal_mode').scalar())
            self.assertEqual(transaction.SQLITE_BUSY_TIMEOUT * 1000,
                             conn.exec_driver_sql(
                                 'PRAGMA busy_timeout').scalar())

    def test_writers_queue_for_the_write_lock(self):
        # BEGIN IMMEDIATE: a second writer waits for the first one, even
        # for unrelated rows, and then succeeds (no deadlock, no error).
        holder, held = self._hold_writer()

        def _write():
            with self.db.writer() as session:
                acquired = time.monotonic()
                api.lease_create(session, _lease('second'))
                return acquired

        waiter, result = _in_thread(_write)
        holder.join(10)
        waiter.join(10)
        self.assertNotIn('error', held)
        self.assertNotIn('error', result)
        self.assertGreaterEqual(result['value'], held['value'])
        self.assertEqual(['held', 'second'], sorted(
            lease['name'] for lease in api.lease_list(self.db)))

    def test_readers_do_not_wait_for_a_writer(self):
        api.lease_create(self.db, _lease('old'))
        holder, held = self._hold_writer()
        # WAL: the reader sees the last committed state, at once.
        self.assertEqual(['old'], [x['name'] for x in
                                   api.lease_list(self.db)])
        read_at = time.monotonic()
        holder.join(10)
        self.assertLess(read_at, held['value'])
        self.assertEqual(2, len(api.lease_list(self.db)))

    def test_lock_timeout_is_a_deadlock_error(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_lease.db.transaction.SQLITE_BUSY_TIMEOUT', 0.1))
        impatient = api.Database(self.url)
        self.addCleanup(impatient.dispose)
        holder, _ = self._hold_writer()
        self.assertRaises(db_exc.DBDeadlock, api.lease_create, impatient,
                          _lease('impatient'))
        holder.join(10)

    def test_retry_on_deadlock(self):
        calls = []

        @api.retry_on_deadlock
        def _flaky():
            calls.append(1)
            if len(calls) < 3:
                raise db_exc.DBDeadlock()
            return 'done'

        self.assertEqual('done', _flaky())
        self.assertEqual(3, len(calls))

        @api.retry_on_deadlock
        def _broken():
            calls.append(1)
            raise api.LeaseNotFound(lease_id='x')

        del calls[:]
        self.assertRaises(api.LeaseNotFound, _broken)
        self.assertEqual(1, len(calls))

    def test_in_memory_database_from_threads(self):
        db = api.Database('sqlite://')
        self.addCleanup(db.dispose)
        migration.upgrade(db)

        def _create(i):
            for j in range(5):
                with db.writer() as session:
                    api.lock_hosts(session, ['h1'])
                    api.lease_create(session, _lease('%d-%d' % (i, j)))
                api.lease_list(db)

        self.assertEqual([], threads.errors(threads.race(4, _create,
                                                         timeout=30)))
        self.assertEqual(20, len(api.lease_list(db)))

    def _dbapi_connection(self, session):
        return session.connection().connection.dbapi_connection

    def test_connections_are_kept_and_reused(self):
        # oslo.db opens a connection per transaction on SQLite files; the
        # Database keeps idle ones (SQLite parses its whole schema again
        # on each new connection).
        with self.db.writer() as session:
            first = self._dbapi_connection(session)
            api.lease_create(session, _lease('a'))
        with self.db.reader() as session:
            self.assertIs(first, self._dbapi_connection(session))
            # Set up once, still set.
            self.assertEqual(1, session.connection().exec_driver_sql(
                'PRAGMA foreign_keys').scalar())
            self.assertEqual(transaction.SQLITE_BUSY_TIMEOUT * 1000,
                             session.connection().exec_driver_sql(
                                 'PRAGMA busy_timeout').scalar())

    def test_a_failed_writer_leaves_a_clean_connection(self):
        class Boom(Exception):
            pass

        try:
            with self.db.writer() as session:
                first = self._dbapi_connection(session)
                api.lease_create(session, _lease('lost'))
                raise Boom()
        except Boom:
            pass
        with self.db.writer() as session:
            self.assertIs(first, self._dbapi_connection(session))
            self.assertEqual([], api.lease_list(session))
            api.lease_create(session, _lease('kept'))
        self.assertEqual(['kept'], [x['name']
                                    for x in api.lease_list(self.db)])

    def test_max_pool_size_idle_connections_are_kept(self):
        db = api.Database(self.url, max_pool_size=2)
        self.addCleanup(db.dispose)
        held = threading.Barrier(3, timeout=10)
        seen = []

        def _read(_i):
            with db.reader() as session:
                seen.append(self._dbapi_connection(session))
                api.lease_list(session)
                held.wait()

        for _ in range(2):
            self.assertEqual([], threads.errors(threads.race(3, _read)))
        first, second = seen[:3], seen[3:]
        self.assertEqual(3, len({id(c) for c in first}))
        # Two of the three were kept and used again; the third was closed.
        self.assertEqual(2, len({id(c) for c in second} &
                                {id(c) for c in first}))

    def test_dispose_closes_idle_connections(self):
        with self.db.reader() as session:
            idle = self._dbapi_connection(session)
        self.db.dispose()
        self.assertRaises(sqlite3.ProgrammingError, idle.execute,
                          'SELECT 1')
        with self.db.reader() as session:
            self.assertIsNot(idle, self._dbapi_connection(session))
            self.assertEqual([], api.lease_list(session))

    def test_file_directory_is_created(self):
        url = self.url.rsplit('/', 1)[0] + '/sub/dir/x.sqlite'
        db = api.Database(url)
        self.addCleanup(db.dispose)
        migration.upgrade(db)
        self.assertEqual(migration.head(), migration.version(db))
