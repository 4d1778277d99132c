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

import os
import subprocess
import sys

import fixtures
from oslo_config import cfg
import testtools

from nova_lease import conf as lease_conf
from nova_lease import exception


class ConfTest(testtools.TestCase):

    def _conf(self, args=()):
        conf = cfg.ConfigOpts()
        lease_conf.register_opts(conf)
        lease_conf.register_opts(conf)  # idempotent
        conf(list(args), project='nova', default_config_files=[])
        return conf

    def test_every_option_documented(self):
        for group, opts in lease_conf.list_opts():
            for opt in opts:
                self.assertTrue(opt.help and opt.help.strip(),
                                '%s.%s has no help' % (group, opt.name))
        names = [o.name for g, opts in lease_conf.list_opts()
                 if str(g) == 'nova_lease' for o in opts]
        for wanted in ('freepool_aggregate', 'cleaning_time',
                       'minutes_before_end_lease', 'default_lease',
                       'default_lease_duration', 'max_lease_duration',
                       'on_end', 'max_retries', 'retry_interval',
                       'engine_claim_timeout', 'resource_plugins',
                       'weigher_multiplier'):
            self.assertIn(wanted, names)
        database = [o.name for g, opts in lease_conf.list_opts()
                    if str(g) == 'nova_lease_database' for o in opts]
        for wanted in ('connection', 'connection_parameters',
                       'max_pool_size', 'max_overflow', 'pool_timeout',
                       'connection_recycle_time', 'mysql_sql_mode',
                       'max_retries', 'retry_interval'):
            self.assertIn(wanted, database)

    def test_defaults(self):
        conf = self._conf()
        self.assertEqual('freepool', conf.nova_lease.freepool_aggregate)
        self.assertEqual(60, conf.nova_lease.minutes_before_end_lease)
        self.assertFalse(conf.nova_lease.default_lease)
        self.assertEqual('30d', conf.nova_lease.default_lease_duration)
        self.assertEqual('delete', conf.nova_lease.on_end)
        self.assertEqual(['virtual:instance', 'physical:host',
                          'flavor:instance'],
                         conf.nova_lease.resource_plugins)
        self.assertEqual('compute', conf.nova_lease_auth.service_type)

    def test_connection_url_has_no_implicit_default(self):
        conf = self._conf()
        error = self.assertRaises(exception.DatabaseNotConfigured,
                                  lease_conf.connection_url, conf)
        self.assertIn('[nova_lease_database] connection is not set',
                      str(error))
        conf.set_override('connection', 'mysql+pymysql://u:p@db/nl',
                          group='nova_lease_database')
        self.assertEqual('mysql+pymysql://u:p@db/nl',
                         lease_conf.connection_url(conf))
        # A single-host SQLite file is an explicit choice.
        conf.set_override('connection', 'sqlite:////srv/nova/nl.sqlite',
                          group='nova_lease_database')
        self.assertEqual('sqlite:////srv/nova/nl.sqlite',
                         lease_conf.connection_url(conf))

    def test_database_options_from_nova_conf(self):
        path = self.useFixture(fixtures.TempDir()).path + '/nova.conf'
        with open(path, 'w') as f:
            f.write('[nova_lease_database]\n'
                    'connection = mysql+pymysql://u:p@db/nl\n'
                    'max_pool_size = 20\n'
                    'connection_recycle_time = 600\n')
        conf = self._conf(['--config-file', path])
        self.assertEqual('mysql+pymysql://u:p@db/nl',
                         lease_conf.connection_url(conf))
        options = lease_conf.database_options(conf)
        self.assertEqual(20, options['max_pool_size'])
        self.assertEqual(600, options['connection_recycle_time'])
        self.assertEqual(50, options['max_overflow'])
        self.assertNotIn('connection', options)

    def test_connection_under_its_former_name_is_still_read(self):
        path = self.useFixture(fixtures.TempDir()).path + '/nova.conf'
        with open(path, 'w') as f:
            f.write('[nova_lease]\n'
                    'connection = sqlite:////srv/nova/nl.sqlite\n')
        conf = self._conf(['--config-file', path])
        self.assertEqual('sqlite:////srv/nova/nl.sqlite',
                         lease_conf.connection_url(conf))

    def test_engine_timeouts_are_consistent_by_default(self):
        conf = self._conf()
        opts = conf.nova_lease
        self.assertGreater(opts.engine_claim_timeout,
                           opts.plugin_call_timeout)
        self.assertGreaterEqual(opts.engine_heartbeat_timeout,
                                3 * opts.engine_heartbeat_interval)
        self.assertLess(opts.engine_probe_interval, 1)

    def test_configopts_do_not_share_options(self):
        # Nova's CONF and the engine's own ConfigOpts live in one process
        # (tests, the sandbox): options registered on one must not appear
        # on the other through a shared OptGroup.
        first, second = self._conf(), cfg.ConfigOpts()
        lease_conf.register_opts(second)
        second.register_opt(cfg.StrOpt('only_here'), group='nova_lease')
        second.register_opt(cfg.StrOpt('only_here'),
                            group='nova_lease_auth')
        for group in ('nova_lease', 'nova_lease_auth'):
            self.assertRaises(cfg.NoSuchOptError, getattr, first[group],
                              'only_here')

    def test_bad_on_end_rejected(self):
        conf = self._conf()
        self.assertRaises(ValueError, conf.set_override, 'on_end', 'explode',
                          group='nova_lease')

    def test_config_generator_lists_every_option(self):
        gen = os.path.join(os.path.dirname(sys.executable),
                           'oslo-config-generator')
        out = subprocess.run([gen, '--namespace', 'nova_lease'],
                             capture_output=True, text=True, check=True,
                             timeout=120).stdout
        self.assertIn('[nova_lease]', out)
        self.assertIn('[nova_lease_auth]', out)
        for group, opts in lease_conf.list_opts():
            for opt in opts:
                self.assertRegex(out, r'(?m)^#%s =' % opt.dest)
        self.assertNotIn('Warning: Failed to format', out)
