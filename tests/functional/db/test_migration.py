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
"""Alembic migrations: from scratch they give exactly the models' schema."""

import datetime

from alembic import autogenerate
from alembic import migration as alembic_migration
import sqlalchemy as sa

from nova_lease.db import api
from nova_lease.db import migration
from nova_lease.db import models
from tests.functional.db import base
from tests.functional.db import fixtures as db_fixtures


class _MigrationTests(object):

    def setUp(self):
        super().setUp()
        self.url = self.useFixture(db_fixtures.EmptyDatabase(
            self.backend)).url

    def _diff(self, db):
        with db.connection(writer=False) as conn:
            context = alembic_migration.MigrationContext.configure(
                conn, opts={'compare_type': True,
                            'compare_server_default': True})
            return autogenerate.compare_metadata(context,
                                                 models.Base.metadata)

    def test_upgrade_from_scratch_matches_models(self):
        self.assertIsNone(migration.version(self.url))
        migration.upgrade(self.url)
        self.assertEqual(migration.head(), migration.version(self.url))
        db = api.Database(self.url)
        self.addCleanup(db.dispose)
        self.assertEqual([], self._diff(db))
        tables = set(sa.inspect(db.engine).get_table_names())
        self.assertEqual(set(models.Base.metadata.tables) |
                         {'alembic_version'}, tables)
        # Upgrading an up-to-date schema is a no-op.
        migration.upgrade(db)
        self.assertEqual(migration.head(), migration.version(db))

    def test_span_class_of_existing_allocations(self):
        migration.upgrade(self.url, '9d2f4b7c1e58')
        db = api.Database(self.url)
        self.addCleanup(db.dispose)
        t0 = datetime.datetime(2030, 1, 1)
        hours = (0.5, 1, 3, 24 * 365, 24 * 365 * 100)
        allocations = sa.table(
            'allocations', *[sa.column(c) for c in (
                'reservation_id', 'host', 'start_date', 'end_date',
                'vcpus', 'memory_mb', 'disk_gb', 'whole_host')])
        with db.connection() as conn:
            conn.execute(models.LEASES.insert().values(
                id='l', name='l', project_id='p', start_date=t0,
                end_date=t0, status='PENDING', created_at=t0))
            conn.execute(models.RESERVATIONS.insert().values(
                id='r', lease_id='l', resource_type='virtual:instance',
                status='pending', created_at=t0))
            for h in hours:
                conn.execute(allocations.insert().values(
                    reservation_id='r', host='h', start_date=t0,
                    end_date=t0 + datetime.timedelta(hours=h), vcpus=1,
                    memory_mb=1, disk_gb=1, whole_host=False))
        migration.upgrade(db)
        with db.connection(writer=False) as conn:
            classes = conn.execute(sa.select(models.ALLOCATIONS.c.span_class)
                                   .order_by(models.ALLOCATIONS.c.id)
                                   ).scalars().all()
        self.assertEqual([0, 0, 2, 14, models.SPAN_CLASSES], classes)

    def test_stamp(self):
        migration.stamp(self.url, 'head')
        self.assertEqual(migration.head(), migration.version(self.url))


class MigrationSQLiteTest(_MigrationTests, base.BackendTestCase):
    BACKEND = 'sqlite'

    def test_in_memory_database(self):
        db = api.Database('sqlite://')
        self.addCleanup(db.dispose)
        migration.upgrade(db)
        self.assertEqual(migration.head(), migration.version(db))
        self.assertEqual([], self._diff(db))

    def test_create_schema_is_stamped(self):
        db = api.Database(self.url)
        self.addCleanup(db.dispose)
        migration.create_schema(db)
        self.assertEqual(migration.head(), migration.version(db))
        self.assertEqual([], self._diff(db))


class MigrationMySQLTest(_MigrationTests, base.BackendTestCase):
    BACKEND = 'mysql'

    def test_tables_are_innodb_utf8mb4(self):
        migration.upgrade(self.url)
        db = api.Database(self.url)
        self.addCleanup(db.dispose)
        with db.connection(writer=False) as conn:
            rows = conn.exec_driver_sql(
                'SELECT table_name, engine, table_collation '
                'FROM information_schema.tables '
                'WHERE table_schema = DATABASE() '
                "AND table_name != 'alembic_version'").all()
        self.assertEqual(len(models.Base.metadata.tables), len(rows))
        for name, engine, collation in rows:
            self.assertEqual('InnoDB', engine, name)
            self.assertTrue(collation.startswith('utf8mb4'), name)

    def test_datetimes_keep_microseconds(self):
        # (autogenerate does not compare DATETIME precision)
        migration.upgrade(self.url)
        db = api.Database(self.url)
        self.addCleanup(db.dispose)
        with db.connection(writer=False) as conn:
            rows = conn.exec_driver_sql(
                'SELECT table_name, column_name, datetime_precision '
                'FROM information_schema.columns '
                "WHERE table_schema = DATABASE() AND data_type = 'datetime'"
            ).all()
        expected = sorted(
            (table.name, column.name)
            for table in models.Base.metadata.sorted_tables
            for column in table.columns
            if isinstance(column.type, sa.DateTime))
        self.assertEqual(expected, sorted((t, c) for t, c, _ in rows))
        self.assertEqual({6}, {p for _, _, p in rows})


class MigrationPostgreSQLTest(_MigrationTests, base.BackendTestCase):
    BACKEND = 'postgresql'
