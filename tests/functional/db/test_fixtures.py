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
"""The test database fixtures: skip, or fail when databases are required."""

import fixtures
from oslotest import base as oslotest_base

from tests.functional.db import fixtures as db_fixtures


class RequireTest(oslotest_base.BaseTestCase):

    def setUp(self):
        super().setUp()
        # Nothing listens on port 1.
        self.useFixture(fixtures.EnvironmentVariable(
            'NOVA_LEASE_TEST_UNREACHABLE_URL',
            'mysql+pymysql://root@127.0.0.1:1/'))
        self.backend = db_fixtures.MySQLBackend(
            'mysql', 'NOVA_LEASE_TEST_UNREACHABLE_URL', 'unused://')

    def test_unreachable_server_skips(self):
        self.useFixture(fixtures.EnvironmentVariable(
            db_fixtures.REQUIRE_ENV, None))
        self.assertRaises(self.skipException, db_fixtures.require, self,
                          self.backend)

    def test_unreachable_server_fails_when_required(self):
        self.useFixture(fixtures.EnvironmentVariable(
            db_fixtures.REQUIRE_ENV, '1'))
        e = self.assertRaises(self.failureException, db_fixtures.require,
                              self, self.backend)
        self.assertIn('unavailable', str(e))

    def test_sqlite_is_always_available(self):
        self.assertIsNone(db_fixtures.require(self, db_fixtures.SQLITE))
