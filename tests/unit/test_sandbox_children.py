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
"""A sandbox child: launched tied to the sandbox, served, stopped.

The split sandbox's Glance and Neutron stand-ins run as the sandbox runs
them (:func:`nova_lease.sandbox.children.launch`), serve
(:func:`nova_lease.sandbox.children.serve`), and stop on SIGTERM or
when their parent is gone.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from urllib import request

import fixtures
import testtools

from nova_lease.sandbox import children
from nova_lease.sandbox import standins


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class StandInsChildTest(testtools.TestCase):

    def _start(self, argv):
        log = tempfile.TemporaryFile()
        self.addCleanup(log.close)
        proc = children.launch(argv, log)
        self.addCleanup(children.terminate, proc, 10, 'the stand-ins')
        return proc, log

    def _get(self, port, path, deadline):
        while True:
            try:
                with request.urlopen('http://127.0.0.1:%d%s' % (port, path),
                                     timeout=5) as resp:
                    return json.loads(resp.read())
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def test_serves_until_sigterm(self):
        port = _free_port()
        proc, log = self._start(
            [sys.executable, '-m', 'nova_lease.sandbox.standins',
             '--port', str(port), '--parent-pid', str(os.getpid())])
        body = self._get(port, standins.IMAGE_PREFIX + '/v2/images',
                         time.monotonic() + 60)
        self.assertEqual([standins.IMAGE['id']],
                         [image['id'] for image in body['images']])
        # Its own session: Ctrl-C in the sandbox's terminal misses it.
        self.assertEqual(proc.pid, os.getsid(proc.pid))
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(0, proc.wait(10))
        log.seek(0)
        text = log.read().decode()
        self.assertIn('glance and neutron stand-ins on http://127.0.0.1:%d'
                      % port, text)
        self.assertIn('GET %s/v2/images' % standins.IMAGE_PREFIX, text)

    def test_stops_when_its_parent_is_gone(self):
        # Its parent pid is not the launcher's: it stops at its first
        # look (about a second), as when the sandbox died.
        port = _free_port()
        proc = subprocess.Popen(
            [sys.executable, '-m', 'nova_lease.sandbox.standins',
             '--port', str(port), '--parent-pid', '1'],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(children.terminate, proc, 10, 'the stand-ins')
        self.assertEqual(0, proc.wait(30))

    def test_the_launcher_refuses_an_orphan(self):
        # Started for a sandbox that is not its parent (gone meanwhile):
        # it exits before it runs anything.
        proc = subprocess.run(
            [sys.executable, '-c', children.LAUNCHER, '1',
             sys.executable, '-c', 'print("ran")'],
            capture_output=True, text=True, timeout=30)
        self.assertEqual((1, ''), (proc.returncode, proc.stdout))


class PidFileChildTest(testtools.TestCase):

    def test_spawn_and_stop(self):
        tmp = self.useFixture(fixtures.TempDir()).path

        class Sleeper(children.PidFileChild):
            what = 'the sleeper'
            log_path = os.path.join(tmp, 'sleeper.log')
            pid_path = os.path.join(tmp, 'sleeper.pid')
            proc = None

        child = Sleeper()
        self.addCleanup(child.stop, 5)
        self.assertIsNone(child.pid)
        # (SIGTERM's default action, whatever the test runner's process
        # passed on: an ignored signal stays ignored across exec. The
        # child says when it has it, so that a slow start on a loaded
        # machine does not meet an ignored SIGTERM.)
        ready = os.path.join(tmp, 'ready')
        child.spawn([sys.executable, '-c',
                     'import signal, sys, time; '
                     'signal.signal(signal.SIGTERM, signal.SIG_DFL); '
                     'open(sys.argv[1], "w").close(); '
                     'time.sleep(60)', ready])
        proc = child.proc
        deadline = time.monotonic() + 60
        while not os.path.exists(ready) and time.monotonic() < deadline:
            time.sleep(0.05)
        with open(child.pid_path) as f:
            self.assertEqual('%d\n' % proc.pid, f.read())
        self.assertEqual(proc.pid, child.pid)
        child.stop(5)
        self.assertEqual(-signal.SIGTERM, proc.returncode)
        self.assertEqual((None, None), (child.proc, child.pid))
        self.assertFalse(os.path.exists(child.pid_path))
        child.stop(5)       # stopped: nothing to do
