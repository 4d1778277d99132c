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
"""The sandbox's openrc files work in a fresh shell.

``source DIR/demo-openrc`` in a new terminal, without the virtualenv
activated, must be enough for ``nova list``: the file puts the
virtualenv's ``bin`` on ``PATH``.
"""

import os
import shutil
import subprocess
import sys

import fixtures
import testtools

from nova_lease.sandbox import openrc

ENV = openrc.openrc_env('demo', 'pa$$ word', 'http://127.0.0.1:5000/v3',
                        'RegionOne', 'image-id', 'flavor-id')


class OpenrcTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'demo-openrc')

    def _fresh_shell(self, script):
        """Run ``script`` in bash with a minimal environment."""
        bash = shutil.which('bash')
        if bash is None:
            self.skipTest('no bash')
        proc = subprocess.run(
            [bash, '--noprofile', '--norc', '-c', script],
            env={'PATH': '/usr/bin:/bin', 'HOME': self.dir},
            capture_output=True, text=True, timeout=30)
        self.assertEqual(0, proc.returncode, proc.stderr)
        return proc.stdout

    def test_default_bin_dir_is_the_interpreters(self):
        openrc.write_openrc(self.path, ENV)
        with open(self.path) as f:
            lines = f.read().splitlines()
        bindir = os.path.join(sys.prefix, 'bin')
        self.assertEqual(bindir, openrc.bin_dir())
        self.assertIn('export PATH=%s:"$PATH"' % bindir, lines)

    def test_clients_found_after_source(self):
        # A bin directory with a space in its name, and a "nova" in it.
        bindir = os.path.join(self.dir, 'my venv', 'bin')
        os.makedirs(bindir)
        nova = os.path.join(bindir, 'nova')
        with open(nova, 'w') as f:
            f.write('#!/bin/sh\necho "nova $OS_USERNAME"\n')
        os.chmod(nova, 0o755)
        openrc.write_openrc(self.path, ENV, bindir=bindir)
        out = self._fresh_shell(
            'command -v nova && exit 1; '
            '. "$HOME/demo-openrc" && command -v nova && nova list '
            '&& echo "$PATH" && echo "$OS_PASSWORD"')
        self.assertEqual(
            [nova, 'nova demo', bindir + ':/usr/bin:/bin', 'pa$$ word'],
            out.splitlines())

    def test_read_openrc_gives_the_variables_only(self):
        openrc.write_openrc(self.path, ENV, bindir='/opt/venv/bin')
        self.assertEqual(dict(ENV), openrc.read_openrc(self.path))
