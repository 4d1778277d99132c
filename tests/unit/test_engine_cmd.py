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
"""nova-lease-engine's process: its stop deadline and SIGHUP reload
(nova_lease.cmd.engine; the real process in
tests/functional/test_engine_multi.py).
"""

import nova_lease.cmd  # noqa: F401  (threading mode first)

import os  # noqa: E402
import threading  # noqa: E402

import fixtures  # noqa: E402
import testtools  # noqa: E402

from nova_lease.cmd import engine as engine_cmd  # noqa: E402


class EngineCommandTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.config = os.path.join(self.tmp, 'nova.conf')
        self._write(engine_max_sleep=2, engine_workers=4)
        self.log = self.useFixture(fixtures.FakeLogger())

    def _write(self, default=None, **engine):
        with open(self.config, 'w') as f:
            f.write('[DEFAULT]\n')
            for key, value in (default or {}).items():
                f.write('%s = %s\n' % (key, value))
            f.write('[nova_lease_engine]\n')
            for key, value in engine.items():
                f.write('%s = %s\n' % (key, value))

    def _conf(self):
        conf = engine_cmd.parse_args(['--config-file', self.config])
        self.addCleanup(conf.reset)
        return conf

    def test_stop_timeout_is_graceful_shutdown_timeout(self):
        self._write(default={'graceful_shutdown_timeout': 120},
                    engine_shutdown_timeout=30)
        self.assertEqual(120, engine_cmd.stop_timeout(self._conf()))

    def test_stop_timeout_leaves_time_to_release_the_claims(self):
        # Nova's own services often have a short one in nova.conf.
        self._write(default={'graceful_shutdown_timeout': 5},
                    engine_shutdown_timeout=30)
        self.assertEqual(30 + engine_cmd.RELEASE_MARGIN,
                         engine_cmd.stop_timeout(self._conf()))

    def test_no_stop_timeout_with_zero(self):
        self._write(default={'graceful_shutdown_timeout': 0})
        self.assertIsNone(engine_cmd.stop_timeout(self._conf()))

    def test_the_deadline_exits(self):
        exited = threading.Event()
        codes = []
        self.useFixture(fixtures.MonkeyPatch(
            'os._exit', lambda code: codes.append(code) or exited.set()))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_lease.cmd.engine.stop_timeout', lambda conf: 0.05))
        self.addCleanup(engine_cmd._deadline.clear)
        engine_cmd._deadline.clear()
        engine_cmd.exit_deadline(None)
        engine_cmd.exit_deadline(None)      # armed once
        self.assertTrue(exited.wait(10))
        self.assertEqual([2], codes)
        self.assertEqual(1, len(engine_cmd._deadline))
        self.assertIn('did not stop within 0.05 s', self.log.output)

    def test_reload_mutates_the_mutable_options_only(self):
        conf = self._conf()
        self._write(engine_max_sleep=9, engine_workers=16)
        engine_cmd.reload_options(conf)
        self.assertEqual(9, conf.nova_lease_engine.engine_max_sleep)
        self.assertEqual(4, conf.nova_lease_engine.engine_workers)

    def test_reload_says_when_the_result_is_not_valid(self):
        conf = self._conf()
        self._write(engine_max_sleep=2, engine_workers=4,
                    engine_shutdown_timeout=5)
        conf.set_override('plugin_call_timeout', 10**6, 'nova_lease_engine')
        engine_cmd.reload_options(conf)
        self.assertIn('The reloaded configuration is not valid',
                      self.log.output)
