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
"""No silent misconfiguration: every process refuses to start without the
shared side database, and says which database it uses.

* nova-lease-engine and nova-lease-manage run as real commands;
* the paste filter is loaded by paste.deploy from the api-paste.ini an
  operator edits, and the scheduler's filter and weigher by Nova's own
  HostManager, inside the in-process Nova.
"""

import os
import re
import subprocess
import sys

import fixtures
from nova.scheduler import host_manager
from oslotest import base as oslotest_base
from paste import deploy

from nova_lease.db import api as db_api
from nova_lease.db import migration
from nova_lease import exception
from nova_lease.periodic import engine as lease_engine
from tests.functional import base
from tests.functional import test_engine_helpers as helpers

MANAGE = [sys.executable, '-m', 'nova_lease.cmd.manage']


def _run(argv, cwd, timeout=60):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path),
               OS_NOVA_DISABLE_EVENTLET_PATCHING='1',
               PYTHONWARNINGS='ignore')
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


class CommandsTest(oslotest_base.BaseTestCase):
    """nova-lease-engine and nova-lease-manage, as an operator runs them."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def _config(self, name='nova.conf', **options):
        # state_path is where the old embedded default went.
        return helpers.write_config(
            os.path.join(self.tmp, name),
            default={'state_path': self.tmp, 'debug': 'false'},
            nova_lease=dict({'resource_plugins': 'noop'}, **options))

    def _engine(self, config, timeout=60):
        return _run([helpers.ENGINE_BIN, '--config-file', config,
                     '--engine-id', 'engine-x'], self.tmp, timeout)

    def _manage(self, config, *args):
        return _run(MANAGE + ['--config-file', config] + list(args),
                    self.tmp)

    def _assert_names_connection(self, text):
        self.assertIn('[nova_lease_database] connection is not set', text)
        self.assertIn('nova-api, nova-scheduler and nova-lease-engine',
                      text)
        self.assertIn('sqlite:///', text)     # how to opt in explicitly

    def test_engine_refuses_empty_connection(self):
        proc = self._engine(self._config())
        self.assertEqual(1, proc.returncode, proc.stdout + proc.stderr)
        self._assert_names_connection(proc.stdout + proc.stderr)
        self.assertFalse(os.path.exists(
            os.path.join(self.tmp, 'nova_lease.sqlite')))

    def test_manage_refuses_empty_connection(self):
        proc = self._manage(self._config(), 'db', 'sync')
        self.assertEqual(1, proc.returncode, proc.stdout + proc.stderr)
        self._assert_names_connection(proc.stderr)
        self.assertFalse(os.path.exists(
            os.path.join(self.tmp, 'nova_lease.sqlite')))

    def test_engine_refuses_a_database_without_schema(self):
        url = 'sqlite:///%s' % os.path.join(self.tmp, 'empty.sqlite')
        proc = self._engine(self._config(connection=url))
        self.assertEqual(1, proc.returncode, proc.stdout + proc.stderr)
        self.assertIn('nova-lease-manage db sync', proc.stdout + proc.stderr)

    def test_engine_refuses_an_unreachable_database(self):
        # Nothing listens on port 1: the connection is refused at once.
        url = 'mysql+pymysql://nova_lease:secret@127.0.0.1:1/nova_lease'
        proc = self._engine(self._config(connection=url))
        self.assertEqual(1, proc.returncode, proc.stdout + proc.stderr)
        out = proc.stdout + proc.stderr
        self.assertIn('cannot use the nova_lease database '
                      'mysql+pymysql://nova_lease:***@127.0.0.1:1/'
                      'nova_lease', out)
        self.assertNotIn('secret', out)

    def test_engine_refuses_claim_timeout_not_above_call_timeout(self):
        url = 'sqlite:///%s' % os.path.join(self.tmp, 'lease.sqlite')
        migration.upgrade(url)
        proc = self._engine(self._config(connection=url,
                                         engine_claim_timeout=600,
                                         plugin_call_timeout=600))
        self.assertEqual(1, proc.returncode, proc.stdout + proc.stderr)
        out = proc.stdout + proc.stderr
        self.assertIn('[nova_lease] engine_claim_timeout (600 s) must be '
                      'larger than [nova_lease_engine] plugin_call_timeout '
                      '(600 s)', out)

    def test_explicit_sqlite_file_is_used_and_named(self):
        url = 'sqlite:///%s' % os.path.join(self.tmp, 'lease.sqlite')
        config = self._config(connection=url)
        proc = self._manage(config, 'db', 'sync')
        self.assertEqual(0, proc.returncode, proc.stderr)
        identity = db_api.database_identity(db_api.Database(url))
        self.addCleanup(db_api.reset_databases)
        engine = self.useFixture(helpers.EngineProcess(
            self, config, 'engine-x', self.tmp))
        helpers.wait_for(lambda: 'started' in engine.log(), timeout=60,
                         message='the engine to start')
        log = engine.log()
        self.assertIn('identity %s' % identity, log)
        self.assertIn(os.path.join(self.tmp, 'lease.sqlite'), log)
        proc = self._manage(config, 'process', 'list')
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertIn(identity, proc.stdout)
        row = [line for line in proc.stdout.splitlines()
               if 'nova-lease-engine' in line]
        self.assertEqual(1, len(row), proc.stdout)
        self.assertIn('engine-x', row[0])
        self.assertIn(str(engine.pid), row[0])
        self.assertIn(' up', row[0])
        self.assertEqual(0, engine.stop())
        proc = self._manage(config, 'process', 'list')
        self.assertIn(' stopped', [line for line in proc.stdout.splitlines()
                                   if 'nova-lease-engine' in line][0])


class NovaProcessesTest(base.LeaseFunctionalBase):
    """The paste filter and the scheduler's filter and weigher."""

    def _setup_scheduler_service(self):
        # As nova-scheduler runs in production: its service record's host
        # is [DEFAULT] host (Nova's test fixture names it "scheduler").
        return self.start_service('scheduler', host=base.CONF.host)

    def _paste_filter(self):
        return deploy.loadfilter('config:%s' % self.paste_ini.path,
                                 name='nova_lease')

    def _host_manager(self):
        return host_manager.HostManager()

    def test_paste_filter_refuses_empty_connection(self):
        self.flags(connection='', group='nova_lease_database')
        factory = self._paste_filter()
        error = self.assertRaises(exception.DatabaseNotConfigured, factory,
                                  lambda environ, start_response: [])
        self.assertIn('[nova_lease_database] connection is not set',
                      str(error))

    def test_scheduler_refuses_empty_connection(self):
        self.flags(connection='', group='nova_lease_database')
        error = self.assertRaises(exception.DatabaseNotConfigured,
                                  self._host_manager)
        self.assertIn('[nova_lease_database] connection is not set',
                      str(error))

    def test_scheduler_refuses_a_database_without_schema(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'other.sqlite')
        self.flags(connection='sqlite:///%s' % path,
                   group='nova_lease_database')
        error = self.assertRaises(exception.DatabaseNotReady,
                                  self._host_manager)
        self.assertIn('nova-lease-manage db sync', str(error))

    def test_nova_processes_register_and_are_listed(self):
        # The harness started nova-api (the paste filter) and
        # nova-scheduler (LeaseFilter, LeaseWeigher) in this process.
        db = db_api.get_database(base.CONF)
        rows = {(r['binary'], r['host'], r['pid'])
                for r in db_api.process_list(db)}
        self.assertIn(('nova-api', base.CONF.host, os.getpid()), rows)
        self.assertIn(('nova-scheduler', self.scheduler.host, os.getpid()),
                      rows)
        tmp = self.useFixture(fixtures.TempDir()).path
        config = helpers.write_config(
            os.path.join(tmp, 'nova.conf'),
            nova_lease={'connection': self.lease_db_url})
        proc = _run(MANAGE + ['--config-file', config, 'process', 'list'],
                    tmp)
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertIn(db_api.database_identity(db), proc.stdout)
        for binary in ('nova-api', 'nova-scheduler'):
            line = [li for li in proc.stdout.splitlines()
                    if re.search(r'\b%s\b' % binary, li)]
            self.assertEqual(1, len(line), proc.stdout)
            self.assertIn(str(os.getpid()), line[0])
            self.assertIn(' up', line[0])

    def test_engine_warns_about_schedulers_of_another_database(self):
        # An engine whose [nova_lease] connection names another database
        # than nova-scheduler's: Nova's scheduler is up, but never
        # registered in the engine's database.
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'other.sqlite')
        other = 'sqlite:///%s' % path
        migration.upgrade(other)
        engine = lease_engine.Engine(self.engine_conf(
            connection=other, resource_plugins='virtual:instance'))
        self.addCleanup(engine.close)
        warnings = engine.check_registrations()
        self.assertEqual(1, len(warnings), warnings)
        self.assertIn('nova-scheduler on host %s is up but has never '
                      'registered in this lease database'
                      % self.scheduler.host,
                      warnings[0])
        # With the same database as Nova: nothing to say.
        engine = lease_engine.Engine(self.engine_conf(
            resource_plugins='virtual:instance'))
        self.addCleanup(engine.close)
        self.assertEqual([], engine.check_registrations())
