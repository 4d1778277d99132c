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
"""``nova-lease-sandbox --split --demo`` as a subprocess.

Nova as separate processes on MariaDB and RabbitMQ (see
nova_lease.sandbox.split): skipped, saying why, when either is not
reachable on 127.0.0.1 (failed with NOVA_LEASE_TEST_REQUIRE_DBS set, as
in CI). About a minute and a half on an idle machine.
"""

import io
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from unittest import mock

import testtools

from nova_lease.sandbox import split
from tests.functional.db import fixtures as db_fixtures

BIN = os.path.dirname(sys.executable)
TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
TIMEOUT = 1200


def _free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _processes_naming(text):
    found = []
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as f:
                command = f.read().replace(b'\0', b' ').decode()
        except OSError:
            continue
        if text in command:
            found.append('%s %s' % (pid, command))
    return found


class SplitSandboxTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.state = tempfile.mkdtemp(prefix='nova-lease-split-')
        self.addCleanup(shutil.rmtree, self.state, ignore_errors=True)
        self.backends = split.Backends(self.state)
        try:
            self.backends.check()
        except split.SplitError as e:
            if os.environ.get(db_fixtures.REQUIRE_ENV):
                # CI: MariaDB and RabbitMQ are there, or the run fails.
                self.fail(str(e))
            self.skipTest(str(e))

    def test_split_demo(self):
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1',
                   PYTHONPATH=os.pathsep.join(
                       [TOP] + [p for p in os.environ.get(
                           'PYTHONPATH', '').split(os.pathsep) if p]))
        command = [os.path.join(BIN, 'nova-lease-sandbox'), '--split',
                   '--demo', '--state-dir', self.state]
        for option in ('--keystone-port', '--nova-port',
                       '--placement-port', '--stand-in-port'):
            command += [option, str(_free_port())]
        proc = subprocess.run(command, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True,
                              timeout=TIMEOUT)
        output = proc.stdout + proc.stderr
        self.assertEqual(0, proc.returncode, output[-6000:])
        self.assertIn('demo: done', proc.stdout)
        # Two nova-api workers, the scheduler and two engines registered.
        match = re.search(r'process list: (\d+) nova-api workers, (\d+) '
                          r'nova-scheduler, (\d+) engines up', output)
        self.assertIsNotNone(match, output[-6000:])
        api, scheduler, engines = map(int, match.groups())
        self.assertEqual(2, api)
        self.assertGreaterEqual(scheduler, 1)
        self.assertEqual(2, engines)
        # The engines heard Nova: a deleted server's lease ended at once.
        self.assertRegex(proc.stdout, r'its lease \S+ TERMINATED')
        counts = [int(n) for n in re.findall(
            r'nova-lease-engine-\d received (\d+) instance notifications',
            proc.stdout)]
        self.assertEqual(2, len(counts))
        self.assertGreater(sum(counts), 0)
        # Nothing left: no process, database or vhost.
        self.assertEqual([], _processes_naming(self.state))
        conn = self.backends._mysql()
        try:
            with conn.cursor() as cur:
                cur.execute('SHOW DATABASES')
                left = [row[0] for row in cur.fetchall()
                        if row[0].startswith(self.backends.prefix)]
        finally:
            conn.close()
        self.assertEqual([], left)
        vhosts = self.backends._ctl('list_vhosts').split()
        self.assertEqual([], [v for v in vhosts
                              if v.startswith(self.backends.prefix)])


class SplitSandboxMissingBackendTest(testtools.TestCase):
    """Without MariaDB and RabbitMQ: a clear error, exit code 2."""

    def test_exit_2_naming_what_is_missing(self):
        state = tempfile.mkdtemp(prefix='nova-lease-split-')
        self.addCleanup(shutil.rmtree, state, ignore_errors=True)
        closed = _free_port()
        err = io.StringIO()
        with mock.patch.object(split, 'MYSQL_PORT', closed), \
                mock.patch.object(split, 'RABBIT_PORT', closed):
            sandbox = split.SplitSandbox(
                state, keystone_port=_free_port(), nova_port=_free_port(),
                placement_port=_free_port(), standins_port=_free_port(),
                out=io.StringIO(), err=err)
            self.assertEqual(2, sandbox.run())
        text = err.getvalue()
        self.assertIn('MariaDB on 127.0.0.1:%d' % closed, text)
        self.assertIn('RabbitMQ on 127.0.0.1:%d' % closed, text)
        self.assertFalse(os.path.exists(os.path.join(state, 'split',
                                                     'backends.json')))
        self.assertEqual([], sandbox.children)
