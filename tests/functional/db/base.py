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
"""Test case classes: one per database backend.

A module writes its tests once in a mixin (not a TestCase) and runs them on
every backend with one subclass per backend::

    class _LeaseTests(object):
        def test_x(self):
            api.lease_get(self.db, ...)

    class LeaseSQLiteTest(_LeaseTests, base.SQLiteTestCase):
        pass
    ...
"""

from oslotest import base as oslotest_base

from nova_lease.db import api
from tests.functional.db import fixtures as db_fixtures


class BackendTestCase(oslotest_base.BaseTestCase):
    """A test on BACKEND; skipped (or failed) if it is unavailable."""

    BACKEND = None

    def setUp(self):
        super().setUp()
        self.backend = db_fixtures.BACKENDS[self.BACKEND]
        db_fixtures.require(self, self.backend)
        self.addCleanup(api.reset_databases)


class DatabaseTestCase(BackendTestCase):
    """self.db: an empty, migrated Database on BACKEND."""

    def setUp(self):
        super().setUp()
        fixture = self.useFixture(db_fixtures.Database(self.backend))
        self.db = fixture.db
        self.url = fixture.url


class SQLiteTestCase(DatabaseTestCase):
    BACKEND = 'sqlite'


class MySQLTestCase(DatabaseTestCase):
    BACKEND = 'mysql'


class PostgreSQLTestCase(DatabaseTestCase):
    BACKEND = 'postgresql'
