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
from nova_lease import lease_types
from nova_lease import params
from nova_lease.periodic import engine as lease_engine

#: Options added to the process groups after the split: never in
#: [nova_lease], so no deprecated name.
NEW_SINCE_THE_SPLIT = frozenset({'lost_delete_timeout'})


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
        names = {(str(g), o.name) for g, opts in lease_conf.list_opts()
                 for o in opts}
        for wanted in (('nova_lease', 'freepool_aggregate'),
                       ('nova_lease_api', 'cleaning_time'),
                       ('nova_lease_api', 'minutes_before_end_lease'),
                       ('nova_lease', 'default_lease'),
                       ('nova_lease_api', 'default_lease_duration'),
                       ('nova_lease_api', 'max_lease_duration'),
                       ('nova_lease_engine', 'on_end'),
                       ('nova_lease', 'max_retries'),
                       ('nova_lease_engine', 'retry_interval'),
                       ('nova_lease', 'engine_claim_timeout'),
                       ('nova_lease_engine', 'resource_plugins'),
                       ('nova_lease_scheduler', 'weigher_multiplier')):
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
        self.assertEqual(60, conf.nova_lease_api.minutes_before_end_lease)
        self.assertFalse(conf.nova_lease.default_lease)
        self.assertEqual('30d', conf.nova_lease_api.default_lease_duration)
        self.assertEqual('delete', conf.nova_lease_engine.on_end)
        self.assertEqual(['virtual:instance', 'physical:host',
                          'flavor:instance'],
                         conf.nova_lease_engine.resource_plugins)
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
        shared, opts = conf.nova_lease, conf.nova_lease_engine
        self.assertGreater(shared.engine_claim_timeout,
                           opts.plugin_call_timeout)
        self.assertGreaterEqual(shared.engine_heartbeat_timeout,
                                3 * opts.engine_heartbeat_interval)
        self.assertLess(opts.engine_probe_interval, 1)

    def test_configopts_do_not_share_options(self):
        # Nova's CONF and the engine's own ConfigOpts live in one process
        # (tests, the sandbox): options registered on one must not appear
        # on the other through a shared OptGroup.
        first, second = self._conf(), cfg.ConfigOpts()
        lease_conf.register_opts(second)
        groups = ('nova_lease', 'nova_lease_api', 'nova_lease_scheduler',
                  'nova_lease_engine', 'nova_lease_auth')
        for group in groups:
            second.register_opt(cfg.StrOpt('only_here'), group=group)
        for group in groups:
            self.assertRaises(cfg.NoSuchOptError, getattr, first[group],
                              'only_here')

    def _nova_conf(self, text):
        path = self.useFixture(fixtures.TempDir()).path + '/nova.conf'
        with open(path, 'w') as f:
            f.write(text)
        return self._conf(['--config-file', path])

    def test_moved_options_are_still_read_from_nova_lease(self):
        # A nova.conf written before the split: the options that moved to
        # a group of their own are still read where they were, by the
        # code that reads them from their new group, with oslo.config's
        # deprecation warning.
        logger = self.useFixture(fixtures.FakeLogger(name='oslo_config'))
        conf = self._nova_conf('[nova_lease]\n'
                               'freepool_aggregate = pool\n'
                               'default_lease_type = immediate\n'
                               'max_lease_retries = 2\n'
                               'plugin_call_timeout = 900\n'
                               'weigher_multiplier = -2.5\n')
        self.assertEqual('pool', conf.nova_lease.freepool_aggregate)
        self.assertEqual('immediate',
                         conf.nova_lease_api.default_lease_type)
        self.assertEqual(900, conf.nova_lease_engine.plugin_call_timeout)
        self.assertEqual(-2.5, conf.nova_lease_scheduler.weigher_multiplier)
        # The readers: the lease API's lease types ...
        now = params.LeaseParams(name='x', start=None, end=None,
                                 start_now=True)
        self.assertEqual(('immediate', 0), lease_types.effective(now, conf))
        error = self.assertRaises(
            params.LeaseParamError, lease_types.effective,
            params.LeaseParams(name='x', start=None, end=None,
                               lease_type='retries', retries=3), conf)
        self.assertIn('at most 2 times ([nova_lease_api] '
                      'max_lease_retries)', str(error))
        # ... and the engine's check of its time-outs (900 s is not under
        # the default engine_claim_timeout of 900 s).
        error = self.assertRaises(exception.ConfigurationError,
                                  lease_engine.check_options, conf)
        self.assertIn('[nova_lease_engine] plugin_call_timeout (900 s)',
                      str(error))
        for name, group in (('default_lease_type', 'nova_lease_api'),
                            ('max_lease_retries', 'nova_lease_api'),
                            ('plugin_call_timeout', 'nova_lease_engine'),
                            ('weigher_multiplier', 'nova_lease_scheduler')):
            self.assertIn('Option "%s" from group "nova_lease" is '
                          'deprecated. Use option "%s" from group "%s"'
                          % (name, name, group), logger.output)
        self.assertNotIn('freepool_aggregate', logger.output)

    def test_new_group_wins_over_the_old_one(self):
        conf = self._nova_conf('[nova_lease]\n'
                               'engine_workers = 4\n'
                               'cleaning_time = 5\n'
                               '[nova_lease_engine]\n'
                               'engine_workers = 8\n'
                               '[nova_lease_api]\n'
                               'cleaning_time = 15\n')
        self.assertEqual(8, conf.nova_lease_engine.engine_workers)
        self.assertEqual(15, conf.nova_lease_api.cleaning_time)

    def test_moved_options_are_gone_from_nova_lease(self):
        conf = self._conf()
        for group, opts in lease_conf.list_opts():
            if str(group) in ('nova_lease_api', 'nova_lease_scheduler',
                              'nova_lease_engine'):
                for opt in opts:
                    if opt.dest in NEW_SINCE_THE_SPLIT:
                        self.assertEqual([], opt.deprecated_opts)
                        continue
                    self.assertEqual([cfg.DeprecatedOpt(None,
                                                        group='nova_lease')],
                                     opt.deprecated_opts, opt.name)
                    self.assertNotIn(opt.dest, conf.nova_lease)
                    self.assertEqual(str(group),
                                     lease_conf.group_of(opt.dest))

    def test_list_opts_lists_every_registered_option(self):
        # oslo-config-generator (and the configuration reference) see
        # list_opts only: every group register_opts registers, with every
        # option of it, must be there, once.
        conf = self._conf()
        registered = {(name, opt) for name in conf
                      if isinstance(conf[name], cfg.ConfigOpts.GroupAttr)
                      for opt in conf[name]}
        listed = [(str(group), opt.dest)
                  for group, opts in lease_conf.list_opts() for opt in opts]
        self.assertEqual(len(listed), len(set(listed)))
        # (The auth group also lists the password plugin's options, which
        # keystoneauth registers only when it loads the plugin.)
        self.assertEqual(set(), registered - set(listed))
        self.assertEqual({'nova_lease_auth'}, {
            group for group, _name in set(listed) - registered})
        self.assertEqual(
            {'nova_lease', 'nova_lease_api', 'nova_lease_scheduler',
             'nova_lease_engine', 'nova_lease_database', 'nova_lease_auth',
             'nova_lease_enforcement'},
            {group for group, _name in registered})
        # The 41 options [nova_lease] held before the split, each in one
        # group.
        split = [name for group, name in listed if group in (
            'nova_lease', 'nova_lease_api', 'nova_lease_scheduler',
            'nova_lease_engine') and name not in NEW_SINCE_THE_SPLIT]
        self.assertEqual(41, len(split))

    def test_bad_on_end_rejected(self):
        conf = self._conf()
        self.assertRaises(ValueError, conf.set_override, 'on_end', 'explode',
                          group='nova_lease_engine')

    def test_config_generator_lists_every_option(self):
        gen = os.path.join(os.path.dirname(sys.executable),
                           'oslo-config-generator')
        # The generator imports list_opts from this tree (the one under
        # test), whatever tree the package was installed from.
        root = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [root] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
        out = subprocess.run([gen, '--namespace', 'nova_lease'],
                             capture_output=True, text=True, check=True,
                             timeout=120, env=env).stdout
        for group in ('nova_lease', 'nova_lease_api', 'nova_lease_scheduler',
                      'nova_lease_engine', 'nova_lease_auth'):
            self.assertIn('[%s]' % group, out)
        for group, opts in lease_conf.list_opts():
            for opt in opts:
                self.assertRegex(out, r'(?m)^#%s =' % opt.dest)
        self.assertNotIn('Warning: Failed to format', out)
