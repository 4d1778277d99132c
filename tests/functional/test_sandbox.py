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
"""Smoke tests of nova-lease-sandbox, driven with the unmodified clients.

The sandbox runs as a subprocess (the console script from the venv); the
``nova`` and ``openstack`` executables next to this interpreter talk to it
with the credentials of DIR/demo-openrc, exactly as a user would.
:class:`Sandbox` and :class:`ClientMixin` are shared with the other sandbox
tests (test_sandbox_reservation).
"""

import atexit
import configparser
import datetime
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import testtools

from nova_lease.sandbox import openrc

BIN = os.path.dirname(sys.executable)
READY_TIMEOUT = 150
STOP_TIMEOUT = 30


_STATE_DIR = []


def state_dir():
    """One sandbox state directory for every sandbox test of this process.

    Starts after the first reuse its bootstrapped Keystone (as a user
    restarting the sandbox would), which saves its set-up; Nova and the
    lease database start empty at every start anyway. Removed at exit.
    """
    if not _STATE_DIR:
        path = tempfile.mkdtemp(prefix='nova-lease-sandbox-')
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        _STATE_DIR.append(path)
    return _STATE_DIR[0]


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def ppid(pid):
    """The parent pid of pid (from /proc)."""
    with open('/proc/%d/stat' % pid) as f:
        # The command name (field 2) may hold blanks: split after it.
        return int(f.read().rsplit(')', 1)[1].split()[1])


def cmdline(pid):
    with open('/proc/%d/cmdline' % pid, 'rb') as f:
        return f.read().replace(b'\0', b' ').decode()


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie of ours does not count.
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().split()[2] != 'Z'
    except OSError:
        return False


class Sandbox(object):
    """A nova-lease-sandbox subprocess.

    With ``test``, it is killed in that test's clean-up; without (one
    sandbox for a whole test class), call :meth:`kill` in tearDownClass.
    Failures raise AssertionError with the terminal output and log tails.
    """

    def __init__(self, state_dir, *extra, test=None):
        self.state_dir = state_dir
        self.err_path = os.path.join(state_dir, 'terminal.err')
        os.makedirs(state_dir, exist_ok=True)
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1',
                   PYTHONUNBUFFERED='1')
        self._err = open(self.err_path, 'w')
        self.proc = subprocess.Popen(
            [os.path.join(BIN, 'nova-lease-sandbox'),
             '--state-dir', state_dir,
             '--keystone-port', str(free_port()),
             '--nova-port', str(free_port())] + list(extra),
            stdout=subprocess.PIPE, stderr=self._err,
            stdin=subprocess.DEVNULL, env=env, text=True)
        self.lines = []
        self._queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        if test is not None:
            test.addCleanup(self.kill)

    def _read(self):
        for line in self.proc.stdout:
            self._queue.put(line.rstrip('\n'))
        self._queue.put(None)

    def terminal(self):
        with open(self.err_path) as f:
            text = ('stdout:\n%s\nstderr:\n%s'
                    % ('\n'.join(self.lines), f.read()))
        for name in ('keystone.log', 'nova.log', 'nova-lease-engine.log'):
            try:
                with open(os.path.join(self.state_dir, name)) as f:
                    tail = f.readlines()[-40:]
            except OSError:
                continue
            text += '\n--- last lines of %s:\n%s' % (name, ''.join(tail))
        return text

    def _fail(self, text):
        raise AssertionError(text)

    def wait_for_line(self, predicate, timeout):
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(
                    timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = ''
            if line is None:
                self._fail('sandbox ended before the expected line\n%s'
                           % self.terminal())
            if line:
                self.lines.append(line)
                if predicate(line):
                    return line
            if time.monotonic() > deadline:
                self._fail('no expected line within %d s\n%s'
                           % (timeout, self.terminal()))

    def wait_ready(self, timeout=READY_TIMEOUT):
        line = self.wait_for_line(lambda line: line.startswith('ready: '),
                                  timeout)
        path = self.openrc_path('demo')
        if line != 'ready: source %s' % path:
            self._fail('unexpected ready line %r' % line)
        return openrc.read_openrc(path)

    def openrc_path(self, user):
        return os.path.join(self.state_dir, '%s-openrc' % user)

    def keystone_pid(self):
        with open(os.path.join(self.state_dir, 'keystone.pid')) as f:
            return int(f.read())

    def engine_pid(self):
        """The pid of the sandbox's nova-lease-engine child."""
        with open(os.path.join(self.state_dir, 'nova-lease-engine.pid')) as f:
            return int(f.read())

    def wait_exit(self, timeout):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._fail('sandbox did not exit within %d s\n%s'
                       % (timeout, self.terminal()))

    def kill(self):
        if self._err.closed:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for name in ('keystone.pid', 'nova-lease-engine.pid',
                     'dashboard.pid'):
            try:
                with open(os.path.join(self.state_dir, name)) as f:
                    pid = int(f.read())
            except (OSError, ValueError):
                continue
            # Only a child of this sandbox (its command line names a file of
            # the state directory), not a process that reuses a stale pid.
            if alive(pid) and self.state_dir in cmdline(pid):
                os.kill(pid, signal.SIGKILL)
        self._err.close()


def run_client(env, *argv, timeout=60):
    """Run a client from the venv with only the openrc's OS_* variables."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    clean.update(env)
    return subprocess.run([os.path.join(BIN, argv[0])] + list(argv[1:]),
                          env=clean, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


class ClientMixin(object):
    """Assertions around the unmodified clients, for a TestCase."""

    def _client(self, env, *argv, **kwargs):
        proc = run_client(env, *argv, **kwargs)
        self.assertEqual(0, proc.returncode,
                         '%s failed:\n%s\n%s' % (' '.join(argv), proc.stdout,
                                                 proc.stderr))
        return proc.stdout

    def _rows(self, table):
        """Rows of a prettytable as lists of cells."""
        return [[c.strip() for c in line.strip().strip('|').split('|')]
                for line in table.splitlines() if line.startswith('|')][1:]


class SandboxTest(ClientMixin, testtools.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.state_dir = state_dir()

    def test_unmodified_clients(self):
        sandbox = Sandbox(self.state_dir, test=self)
        env = sandbox.wait_ready()
        for key in ('OS_AUTH_URL', 'OS_USERNAME', 'OS_PASSWORD',
                    'OS_PROJECT_NAME', 'OS_USER_DOMAIN_NAME',
                    'OS_PROJECT_DOMAIN_NAME', 'OS_REGION_NAME',
                    'NOVA_LEASE_IMAGE', 'NOVA_LEASE_FLAVOR'):
            self.assertTrue(env.get(key), key)
        self.assertEqual('3', env['OS_IDENTITY_API_VERSION'])
        self.assertEqual('demo', env['OS_USERNAME'])
        keystone_pid = sandbox.keystone_pid()
        self.assertTrue(alive(keystone_pid))

        # Both openrc files put the clients of the sandbox's virtualenv on
        # PATH: "nova list" works after "source" in a fresh shell. (The
        # virtualenv may be named through a symbolic link.)
        for user in ('demo', 'admin'):
            with open(sandbox.openrc_path(user)) as f:
                [path] = [line for line in f.read().splitlines()
                          if line.startswith('export PATH=')]
            bindir = path[len('export PATH='):]
            self.assertTrue(bindir.endswith(':"$PATH"'), path)
            bindir = bindir[:-len(':"$PATH"')]
            self.assertEqual(os.path.realpath(BIN), os.path.realpath(bindir))
            self.assertTrue(os.access(os.path.join(bindir, 'nova'), os.X_OK))

        # The paste filter is named as the install guide tells operators
        # to name it, right after keystonecontext in both v2.1 pipelines.
        paste = configparser.ConfigParser(interpolation=None)
        paste.read(os.path.join(self.state_dir, 'nova', 'api-paste.ini'))
        self.assertEqual(
            'nova_lease.api_ext.middleware:LeaseMiddleware.factory',
            paste['filter:nova_lease']['paste.filter_factory'])
        self.assertNotIn('filter:lease', paste)
        for section in ('composite:openstack_compute_api_v21',
                        'composite:openstack_compute_api_v21_legacy_v2_'
                        'compatible'):
            self.assertIn(' keystonecontext nova_lease ',
                          paste[section]['keystone'])

        # The demo project's quota has room for what the documentation and
        # the demo invite (Nova's default is 10 instances and 20 cores).
        quota = dict(row[:2] for row in self._rows(self._client(
            env, 'nova', 'quota-show')))
        self.assertEqual(('100', '100', '51200'), (
            quota['instances'], quota['cores'], quota['ram']))
        # The lease engine runs as a child process of its own.
        engine_pid = sandbox.engine_pid()
        self.assertTrue(alive(engine_pid))

        self.assertEqual([], self._rows(self._client(env, 'nova', 'list')))
        # The lease database starts empty with Nova's: test_demo (which
        # runs first, in name order, on the same state directory) left its
        # leases behind, and they referred to servers this Nova never had.
        self.assertEqual('', self._client(
            env, 'openstack', 'reservation', 'lease', 'list', '-f', 'value'))
        self._client(env, 'nova', 'boot', '--flavor',
                     env['NOVA_LEASE_FLAVOR'], '--image',
                     env['NOVA_LEASE_IMAGE'], '--nic', 'none', '--poll',
                     'vm1', timeout=90)
        rows = self._rows(self._client(env, 'nova', 'list'))
        self.assertEqual([['vm1', 'ACTIVE']], [r[1:3] for r in rows])
        out = self._client(env, 'openstack', 'server', 'list', '-f',
                           'value', '-c', 'Name', '-c', 'Status')
        self.assertEqual(['vm1 ACTIVE'], out.split('\n')[:-1])
        self._client(env, 'nova', 'delete', 'vm1')
        deadline = time.monotonic() + 30
        while self._rows(self._client(env, 'nova', 'list')):
            self.assertLess(time.monotonic(), deadline, 'vm1 not deleted')
            time.sleep(0.5)

        sandbox.proc.send_signal(signal.SIGTERM)
        self.assertEqual(0, sandbox.wait_exit(STOP_TIMEOUT),
                         sandbox.terminal())
        self.assertFalse(alive(keystone_pid), 'keystone child still runs')
        self.assertFalse(alive(engine_pid), 'engine child still runs')
        self.assertFalse(os.path.exists(
            os.path.join(self.state_dir, 'nova-lease-engine.pid')))
        self.assertFalse(os.path.exists(
            os.path.join(self.state_dir, 'keystone.pid')))

    def test_demo(self):
        sandbox = Sandbox(self.state_dir, '--demo', test=self)
        sandbox.wait_ready()
        sandbox.wait_for_line(lambda line: line.endswith('demo: done'), 150)
        self.assertEqual(0, sandbox.wait_exit(STOP_TIMEOUT),
                         sandbox.terminal())
        timeline = '\n'.join(sandbox.lines)
        for text in ('step 1/', 'nova boot --flavor', ' is ACTIVE',
                     'the sandbox started a new engine: pid ',
                     ' is still ACTIVE, server ',
                     ' deleted', 'host host3 registered',
                     'openstack reservation lease create --reservation '
                     'resource_type=physical:host,',
                     ' is ACTIVE on host3 (seen by the admin)',
                     'TERMINATED: server ', 'host3 back in the free pool',
                     # The best-effort lease empties a host for itself.
                     'is IN_PROGRESS: 1 of its 2 hosts taken from the cloud',
                     'holds host1, host3 (seen by the admin)',
                     'is ACTIVE on host2',
                     'only host3 in the free pool',
                     'nova-lease-manage --config-file ',
                     ' capacity --start ', 'capacity page: '):
            self.assertIn(text, timeline)
        # The page of the cloud's capacity, written by nova-lease-manage
        # (which reads placement through the sandbox's catalog) while the
        # demo's last bookings were there.
        page = os.path.join(self.state_dir, 'capacity.html')
        self.assertIn('capacity page: %s (open it in a browser)' % page,
                      timeline)
        with open(page) as f:
            html = f.read()
        for text in ('data-lease-name="demo-training"',
                     'data-lease-name="demo-nightly"',
                     'data-lease-name="demo-host-later" data-project-id',
                     'data-host="host3" data-resource-type="physical:host"',
                     'class="idle"'):
            self.assertIn(text, html)


def _lease_statuses(reservation):
    """{lease id: status} of every lease the user sees."""
    leases = reservation._call('GET', '/leases')['leases']
    return {lease['id']: lease['status'] for lease in leases}


class SandboxEngineTest(testtools.TestCase):
    """nova-lease-engine runs as a process of its own in the sandbox."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.state_dir = state_dir()

    def _wait(self, what, predicate, timeout, sandbox):
        deadline = time.monotonic() + timeout
        while True:
            result = predicate()
            if result:
                return result
            if time.monotonic() > deadline:
                self.fail('timed out waiting for %s\n%s'
                          % (what, sandbox.terminal()))
            time.sleep(0.5)

    def test_engine_is_a_process_that_survives_sigkill(self):
        from nova_lease.sandbox import demo

        sandbox = Sandbox(self.state_dir, test=self)
        env = sandbox.wait_ready()
        admin_env = openrc.read_openrc(sandbox.openrc_path('admin'))
        log = os.path.join(self.state_dir, 'nova-lease-engine.log')

        # A process of its own, a child of the sandbox, running the
        # installed console script on a configuration file of the sandbox.
        pid = sandbox.engine_pid()
        self.assertNotEqual(sandbox.proc.pid, pid)
        self.assertTrue(alive(pid))
        self.assertEqual(sandbox.proc.pid, ppid(pid))
        command = cmdline(pid)
        self.assertIn(os.path.join(BIN, 'nova-lease-engine'), command)
        conf_path = os.path.join(self.state_dir, 'nova',
                                 'nova-lease-engine.conf')
        self.assertIn('--config-file %s' % conf_path, command)
        engine_conf = configparser.ConfigParser(interpolation=None)
        engine_conf.read(conf_path)
        self.assertTrue(engine_conf['nova_lease_database']['connection'])
        size = os.path.getsize(log)

        # The admin registers host3 before anything runs on it; the user
        # gets an instance lease that starts now (the engine starts it)
        # and a host lease that starts in 40 seconds.
        demo.Reservation(admin_env).register_host('host3')
        compute = demo.Compute(env)
        hints = {'reserved': 'True', 'lease_params': json.dumps(
            {'name': 'now-lease', 'start': 'now', 'duration': '1h'})}
        server = compute.boot('vm1', env['NOVA_LEASE_IMAGE'],
                              env['NOVA_LEASE_FLAVOR'], hints)
        self._wait('the instance lease to start', lambda: compute.get(
            server.id).metadata.get('lease_status') == 'active', 90,
            sandbox)
        reservation = demo.Reservation(env)
        now = datetime.datetime.now(datetime.timezone.utc)
        start = now + datetime.timedelta(seconds=40)
        host_lease = reservation.create_lease({
            'name': 'later-lease',
            'start_date': start.strftime('%Y-%m-%dT%H:%M:%SZ'),
            'end_date': (now + datetime.timedelta(hours=1)).strftime(
                '%Y-%m-%dT%H:%M:%SZ'),
            'reservations': [{'resource_type': 'physical:host', 'min': 1,
                              'max': 1, 'hypervisor_properties': '[]',
                              'resource_properties': '[]'}],
            'events': []})
        self.assertEqual('PENDING', host_lease['status'])
        before = _lease_statuses(reservation)
        self.assertEqual('PENDING', before[host_lease['id']])
        self.assertEqual(2, len(before))
        # The engine logged its work in its own file.
        self.assertGreater(os.path.getsize(log), size)

        # A crash: the sandbox starts a new engine, which keeps the leases
        # (the side database is not rebuilt) and starts the host lease.
        os.kill(pid, signal.SIGKILL)
        new_pid = self._wait('a new engine', lambda: (
            os.path.exists(os.path.join(self.state_dir,
                                        'nova-lease-engine.pid')) and
            sandbox.engine_pid() != pid and sandbox.engine_pid()), 60,
            sandbox)
        self.assertFalse(alive(pid))
        self.assertTrue(alive(new_pid))
        self.assertEqual(sandbox.proc.pid, ppid(new_pid))

        def _starts():
            with open(log) as f:
                return len(re.findall(r'Lease engine \S+ started', f.read()))

        self._wait('the new engine to start', lambda: _starts() >= 2, 60,
                   sandbox)
        restarted = datetime.datetime.now(datetime.timezone.utc)
        self.assertLess(restarted, start, 'the engine came back only after '
                        'the host lease was due: nothing left to show')
        self.assertEqual(before, _lease_statuses(reservation))
        server = compute.get(server.id)
        self.assertEqual(('ACTIVE', 'active'), (
            server.status, server.metadata.get('lease_status')))

        lease = self._wait('the host lease to start', lambda: (
            reservation.get_lease(host_lease['id'])['status'] == 'ACTIVE'
            and reservation.get_lease(host_lease['id'])), 120, sandbox)
        self.assertEqual(['active'], [r['status']
                                      for r in lease['reservations']])

        # The sandbox killed (no clean-up of its own): its children go too.
        keystone_pid = sandbox.keystone_pid()
        sandbox.proc.kill()
        sandbox.proc.wait()
        self._wait('the engine child to exit', lambda: not alive(new_pid),
                   60, sandbox)
        self._wait('the keystone child to exit',
                   lambda: not alive(keystone_pid), 30, sandbox)

    def test_no_engine_then_the_users_own(self):
        from nova_lease.sandbox import demo

        sandbox = Sandbox(self.state_dir, '--no-engine', test=self)
        env = sandbox.wait_ready()
        self.assertFalse(os.path.exists(
            os.path.join(self.state_dir, 'nova-lease-engine.pid')))
        conf_path = os.path.join(self.state_dir, 'nova',
                                 'nova-lease-engine.conf')
        with open(sandbox.err_path) as f:
            self.assertIn('nova-lease-engine --config-file %s' % conf_path,
                          f.read())

        # Without an engine a lease that starts now stays PENDING...
        compute = demo.Compute(env)
        hints = {'reserved': 'True', 'lease_params': json.dumps(
            {'name': 'mine', 'start': 'now', 'duration': '1h'})}
        server = compute.boot('vm1', env['NOVA_LEASE_IMAGE'],
                              env['NOVA_LEASE_FLAVOR'], hints)
        self._wait('the server to be ACTIVE', lambda: compute.get(
            server.id).status == 'ACTIVE', 90, sandbox)
        reservation = demo.Reservation(env)
        lease_id = compute.get(server.id).metadata['lease_id']
        time.sleep(3)
        self.assertEqual('PENDING', reservation.get_lease(lease_id)['status'])

        # ... until the user runs the engine, as the sandbox page shows.
        with open(os.path.join(self.state_dir, 'mine.log'), 'w') as out:
            engine = subprocess.Popen(
                [os.path.join(BIN, 'nova-lease-engine'), '--config-file',
                 conf_path], stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL)
        self.addCleanup(lambda: engine.poll() is None and engine.kill())
        self._wait('the lease to start', lambda: reservation.get_lease(
            lease_id)['status'] == 'ACTIVE', 90, sandbox)
        engine.send_signal(signal.SIGINT)
        self.assertEqual(0, engine.wait(STOP_TIMEOUT))
