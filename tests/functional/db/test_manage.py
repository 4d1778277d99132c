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
"""nova-lease-manage, run as a real command with a nova.conf."""

import os
import subprocess
import sys

import fixtures
import sqlalchemy as sa

from nova_lease.cmd import manage
from nova_lease.db import migration
from nova_lease.db import models
from tests.functional.db import base
from tests.functional.db import fixtures as db_fixtures


class _ManageTests(object):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def _manage(self, url, *args):
        """Run nova-lease-manage from an unrelated directory."""
        path = os.path.join(self.tmp, 'nova.conf')
        with open(path, 'w') as f:
            f.write('[DEFAULT]\nstate_path = %s\n\n[nova_lease]\n'
                    'connection = %s\n' % (self.tmp, url))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        proc = subprocess.run(
            [sys.executable, '-m', 'nova_lease.cmd.manage',
             '--config-file', path] + list(args),
            cwd=self.tmp, env=env, capture_output=True, text=True,
            timeout=60)
        return proc.returncode, proc.stdout, proc.stderr

    def test_db_sync_then_version(self):
        url = self.useFixture(db_fixtures.EmptyDatabase(self.backend)).url
        code, out, err = self._manage(url, 'db', 'sync')
        self.assertEqual(0, code, err)
        self.assertEqual('', out)
        code, out, err = self._manage(url, 'db', 'version')
        self.assertEqual(0, code, err)
        self.assertEqual(migration.head(), out.strip())
        engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
        self.addCleanup(engine.dispose)
        self.assertTrue(set(models.Base.metadata.tables).issubset(
            sa.inspect(engine).get_table_names()))


class ManageSQLiteTest(_ManageTests, base.BackendTestCase):
    BACKEND = 'sqlite'

    def test_empty_connection_is_refused(self):
        # No implicit SQLite file under state_path any more.
        code, out, err = self._manage('', 'db', 'sync')
        self.assertEqual(1, code, err)
        self.assertIn('[nova_lease_database] connection is not set', err)
        self.assertFalse(os.path.exists(
            os.path.join(self.tmp, 'nova_lease.sqlite')))

    def test_unreachable_database(self):
        # Nothing listens on port 1.
        code, out, err = self._manage(
            'mysql+pymysql://nova:secret@127.0.0.1:1/nova_lease',
            'db', 'version')
        self.assertEqual(1, code)
        self.assertIn('cannot connect to the nova_lease database', err)
        self.assertIn('127.0.0.1:1', err)
        self.assertNotIn('secret', err)
        self.assertNotIn('Traceback', err)

    def test_unknown_revision(self):
        url = self.useFixture(db_fixtures.EmptyDatabase(self.backend)).url
        code, out, err = self._manage(url, 'db', 'sync', '--revision',
                                      'nope')
        self.assertEqual(1, code)
        self.assertIn("Can't locate revision identified by 'nope'", err)
        self.assertIsNone(migration.version(url))

    def test_usage_errors(self):
        # In process: these fail before any logging or database set-up.
        stderr = self.useFixture(fixtures.StringStream('stderr')).stream
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', stderr))
        e = self.assertRaises(SystemExit, manage.main, ['db', 'nope'])
        self.assertEqual(2, e.code)
        e = self.assertRaises(SystemExit, manage.main, [])
        self.assertEqual(2, e.code)
        self.assertEqual(2, manage.main(
            ['--config-file', os.path.join(self.tmp, 'missing.conf'),
             'db', 'version']))
        stderr.seek(0)
        self.assertIn('invalid choice', stderr.read())


class ManageMySQLTest(_ManageTests, base.BackendTestCase):
    BACKEND = 'mysql'


class ManagePostgreSQLTest(_ManageTests, base.BackendTestCase):
    BACKEND = 'postgresql'
