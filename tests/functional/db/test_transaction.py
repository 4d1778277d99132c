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
"""The side database's transactions (oslo.db's enginefacade) and the
``[nova_lease_database]`` options, on every backend.
"""

import datetime

from oslo_config import cfg
from oslo_config import fixture as config_fixture

from nova_lease import conf as lease_conf
from nova_lease.db import api
from nova_lease.db import transaction
from tests.functional.db import base


class _TransactionTests(object):

    def _database(self, **options):
        db = transaction.Database(self.url, **options)
        self.addCleanup(db.dispose)
        return db

    def test_options_of_the_group_reach_the_pool(self):
        conf = cfg.ConfigOpts()
        lease_conf.register_opts(conf)
        conf([], project='nova', default_config_files=[])
        flags = self.useFixture(config_fixture.Config(conf))
        flags.config(group='nova_lease_database', connection=self.url,
                     max_pool_size=3, max_overflow=7, pool_timeout=9,
                     connection_recycle_time=120)
        db = transaction.get_database(conf)
        self.assertIs(db, transaction.get_database(conf))
        pool = db.engine.pool
        if self.BACKEND == 'sqlite':
            # oslo.db: SQLite files use no pool (a connection each time).
            self.assertEqual('NullPool', type(pool).__name__)
        else:
            self.assertEqual(3, pool.size())
            self.assertEqual(9, pool.timeout())

    def test_a_writer_joins_no_other_transaction(self):
        # Each reader()/writer() is a transaction of its own (enginefacade's
        # independent), even inside another one of the same thread.
        with self.db.writer() as outer:
            api.lease_create(outer, _lease('outer'))
            if self.BACKEND != 'sqlite':    # (SQLite: one writer at once)
                with self.db.reader() as inner:
                    self.assertIsNot(outer, inner)
                    self.assertEqual([], api.lease_list(inner))
        self.assertEqual(['outer'],
                         [x['name'] for x in api.lease_list(self.db)])

    def test_a_writer_rolls_back_on_error(self):
        class Boom(Exception):
            pass

        def write():
            with self.db.writer() as session:
                api.lease_create(session, _lease('lost'))
                raise Boom()

        self.assertRaises(Boom, write)
        self.assertEqual([], api.lease_list(self.db))

    def test_a_reader_session_refuses_writes(self):
        with self.db.reader() as session:
            self.assertRaises(transaction.TransactionError,
                              api.lease_create, session, _lease('no'))

    def test_session_settings(self):
        with self.db.reader() as session:
            conn = session.connection()
            if self.BACKEND == 'mysql':
                self.assertEqual('READ-COMMITTED', conn.exec_driver_sql(
                    'SELECT @@SESSION.tx_isolation').scalar())
                self.assertIn('TRADITIONAL', conn.exec_driver_sql(
                    'SELECT @@SESSION.sql_mode').scalar())
                self.assertEqual('utf8mb4', conn.exec_driver_sql(
                    'SELECT @@character_set_client').scalar())
            elif self.BACKEND == 'postgresql':
                self.assertEqual('read committed', conn.exec_driver_sql(
                    'SHOW transaction_isolation').scalar())
            else:
                self.assertEqual(1, conn.exec_driver_sql(
                    'PRAGMA foreign_keys').scalar())

    def test_four_byte_characters_survive(self):
        lease = api.lease_create(self.db, _lease('lab \U0001F680'))
        self.assertEqual('lab \U0001F680',
                         api.lease_get(self.db, lease['id'])['name'])


def _lease(name):
    start = datetime.datetime(2030, 1, 1)
    return {'name': name, 'project_id': 'p', 'start_date': start,
            'end_date': start + datetime.timedelta(hours=1),
            'status': 'PENDING'}


class TransactionSQLiteTest(_TransactionTests, base.SQLiteTestCase):
    pass


class TransactionMySQLTest(_TransactionTests, base.MySQLTestCase):
    pass


class TransactionPostgreSQLTest(_TransactionTests, base.PostgreSQLTestCase):
    pass
