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
"""NOVA_LEASE_SKIP_DASHBOARD skips the browser tests, saying why.

The dashboard's and the capacity page's browser tests skip with the
reason :func:`tests.browser.missing` gives; with the variable set it names
the variable, whether Chromium is installed or not, and the test command
does not install Chromium.
"""

import os
import subprocess

import fixtures
import testtools

from tests import browser

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


class SkipDashboardTest(testtools.TestCase):

    def _set(self, value):
        self.useFixture(fixtures.EnvironmentVariable(
            'NOVA_LEASE_SKIP_DASHBOARD', value))

    def test_set_skips_even_with_chromium(self):
        self._set('1')
        self.useFixture(fixtures.MockPatch(
            'tests.browser.binary', return_value='/usr/bin/chromium'))
        self.useFixture(fixtures.MockPatch(
            'tests.browser.driver', return_value='/usr/bin/chromedriver'))
        reason = browser.missing()
        self.assertIsNotNone(reason)
        self.assertIn('NOVA_LEASE_SKIP_DASHBOARD is set', reason)

    def test_unset_or_zero_runs_with_chromium(self):
        self.useFixture(fixtures.MockPatch(
            'tests.browser.binary', return_value='/usr/bin/chromium'))
        self.useFixture(fixtures.MockPatch(
            'tests.browser.driver', return_value='/usr/bin/chromedriver'))
        for value in (None, '', '0'):
            self._set(value)
            self.assertIsNone(browser.missing(), value)

    def test_unset_without_chromium_says_so(self):
        self._set(None)
        self.useFixture(fixtures.MockPatch(
            'tests.browser.binary', return_value=None))
        self.assertIn('Chromium is not installed', browser.missing())

    def test_run_tests_does_not_install_when_set(self):
        # The test command's Chromium step alone, as the script runs it.
        with open(os.path.join(ROOT, 'tools', 'run-tests.sh')) as f:
            script = f.read()
        start = script.index('case "${NOVA_LEASE_SKIP_DASHBOARD:-}"')
        step = script[start:script.index('esac', start) + len('esac')]
        self.assertIn('./tools/install-chromium.sh', step)
        env = dict(os.environ, NOVA_LEASE_SKIP_DASHBOARD='1')
        proc = subprocess.run(
            ['bash', '-c', 'set -eu; ' + step], cwd=ROOT, env=env,
            capture_output=True, text=True, timeout=30)
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertIn('NOVA_LEASE_SKIP_DASHBOARD is set', proc.stderr)
        self.assertNotIn('install-chromium', proc.stderr)
