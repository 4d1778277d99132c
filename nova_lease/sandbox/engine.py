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
"""nova-lease-engine as a child process of the sandbox.

The sandbox runs the engine as production does: the installed
``nova-lease-engine`` console script, in a process of its own, on a
configuration file (:func:`write_engine_conf`, ``<state>/nova/
nova-lease-engine.conf``). It reaches the sandbox's nova-api through
Keystone as the ``nova`` service user (``[nova_lease_auth]``) and shares
only the side database (``[nova_lease_database] connection``) with
nova-api and nova-scheduler.

:class:`EngineProcess` starts it once Nova is up, waits until its loop
runs (the ``Lease engine <id> started`` line of its log), writes its pid
to ``<state>/nova-lease-engine.pid`` and its log to
``<state>/nova-lease-engine.log``, and supervises it: an engine that exits
on its own (a crash, ``kill -9 <pid>``) is started again after
``restart_delay`` seconds (longer when it keeps failing at once), with the
same database, so the leases are kept. At the end it is stopped with
SIGTERM (it finishes or releases its claims), before Nova. Should the
sandbox itself die without cleaning up, the engine gets SIGTERM from the
kernel (``PR_SET_PDEATHSIG``) rather than act on a later sandbox.

What differs from a production engine, and why (written as comments into
the configuration file too):

* Nova's versioned notifications do not reach it: the sandbox's Nova sends
  them on oslo.messaging's ``fake://`` transport, which lives inside the
  sandbox process. The engine's compute hook relies on its reconcile pass
  instead, every :data:`RECONCILE_INTERVAL` seconds (production: notifications
  plus a pass every 60 s).
* It looks at the database every :data:`MAX_SLEEP` second at most, so that
  leases created through nova-api (another process) start about as soon
  as they are due (production default: 10 s).
"""

import os
import re
import shutil
import signal
import sys
import threading
import time

from oslo_log import log as logging

from nova_lease.sandbox import children

LOG = logging.getLogger(__name__)

SCRIPT = 'nova-lease-engine'
CONF_NAME = 'nova-lease-engine.conf'
LOG_NAME = 'nova-lease-engine.log'
PID_NAME = 'nova-lease-engine.pid'

#: [nova_lease_engine] reconcile_interval of the sandbox's engine (see above).
RECONCILE_INTERVAL = 5
#: [nova_lease_engine] engine_max_sleep of the sandbox's engine (see above).
MAX_SLEEP = 1.0
#: [nova_lease_engine] engine_shutdown_timeout of the sandbox's engine: the
#: fake computes act in milliseconds, and Ctrl-C should not take half a minute.
SHUTDOWN_TIMEOUT = 10

#: What the engine logs once its loop runs (nova_lease.periodic.engine).
_STARTED = re.compile(r'Lease engine (\S+) started')


class EngineError(Exception):
    pass


def find_script():
    """Path of the installed nova-lease-engine console script."""
    path = os.path.join(os.path.dirname(sys.executable), SCRIPT)
    if os.access(path, os.X_OK):
        return path
    path = shutil.which(SCRIPT)
    if path is None:
        raise EngineError('%s is not installed next to %s nor on PATH '
                          '(pip install the nova-lease package)'
                          % (SCRIPT, sys.executable))
    return path


def write_engine_conf(path, log_file, connection, auth, debug=False):
    """Write the engine's configuration file.

    :param connection: the side database URL, the same as nova.conf's.
    :param auth: the ``[nova_lease_auth]`` options (a service user).
    """
    lines = [
        '# nova-lease-engine of nova-lease-sandbox; rewritten at every '
        'start.',
        '# Run it by hand (nova-lease-sandbox --no-engine) with:',
        '#     %s --config-file %s' % (SCRIPT, path),
        '',
        '[DEFAULT]',
        'debug = %s' % bool(debug),
        'log_file = %s' % log_file,
        '',
        '[nova_lease_database]',
        '# The side database of nova-api and nova-scheduler (nova.conf).',
        'connection = %s' % connection,
        '',
        '[nova_lease_engine]',
        '# Nova sends its versioned notifications on the fake:// transport',
        '# inside the sandbox process: they cannot reach this process, and',
        '# no [oslo_messaging_notifications] driver is set here. The compute',
        '# hook keeps leased servers right with its reconcile pass instead',
        '# (production: notifications, and a pass every 60 s).',
        'reconcile_interval = %d' % RECONCILE_INTERVAL,
        '# Leases created through nova-api (another process) are seen',
        '# within this many seconds (production default: 10).',
        'engine_max_sleep = %s' % MAX_SLEEP,
        'engine_shutdown_timeout = %d' % SHUTDOWN_TIMEOUT,
        '',
        '[nova_lease_auth]',
        '# The service user the engine calls the compute API as.',
    ]
    lines += ['%s = %s' % item for item in auth.items()]
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')


def stop_stale(state_dir):
    """Kill an engine left by an earlier sandbox on ``state_dir``.

    Its pid file outlives a sandbox that was killed; the engine itself
    should not (it gets SIGTERM when the sandbox dies), but one that is
    still there must not act on the databases of the next sandbox. Only a
    nova-lease-engine whose command line names a file of ``state_dir`` is
    killed. The pid file goes in any case.
    """
    pid_path = os.path.join(state_dir, PID_NAME)
    try:
        with open(pid_path) as f:
            pid = int(f.read())
    except (OSError, ValueError):
        return
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            command = f.read().decode('utf-8', 'replace')
    except OSError:
        command = ''
    if SCRIPT in command and state_dir in command:
        LOG.warning('Killing the engine (pid %d) left by an earlier '
                    'sandbox', pid)
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.unlink(pid_path)
    except OSError:
        pass


class EngineProcess(object):
    """Start, supervise (restart) and stop the sandbox's engine.

    Every start and stop runs in one supervisor thread (the thread that
    starts a child is the "parent" of its death signal).
    """

    def __init__(self, state_dir, conf_path, restart_delay=1.0,
                 ready_timeout=90.0, progress=None, name=SCRIPT,
                 extra_args=()):
        """``name``: of its log (``<state>/NAME.log``) and pid file
        (``<state>/NAME.pid``); ``extra_args``: more command-line
        arguments of the engine.
        """
        self.state_dir = state_dir
        self.conf_path = conf_path
        self.name = name
        self.extra_args = list(extra_args)
        self.log_path = os.path.join(state_dir, name + '.log')
        self.pid_path = os.path.join(state_dir, name + '.pid')
        self.restart_delay = restart_delay
        self.ready_timeout = ready_timeout
        self.progress = progress or (lambda text: None)
        self.proc = None
        self.engine_id = None
        #: The pid of the engine whose loop runs now (None between two).
        self.running_pid = None
        self.starts = 0
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._error = None
        self._thread = None

    # -- the sandbox's side -------------------------------------------------

    def start(self):
        """Start the engine in the background (see :meth:`wait_ready`)."""
        self._script = find_script()
        self._thread = threading.Thread(target=self._supervise,
                                        name='%s-supervisor' % self.name,
                                        daemon=True)
        self._thread.start()

    def wait_ready(self):
        """Wait until the first engine runs; raise EngineError if not."""
        while not self._ready.wait(0.2):
            if not self._thread.is_alive():
                break
        if self._error is not None:
            raise self._error
        if not self._ready.is_set():
            raise EngineError('%s did not start; see %s'
                              % (SCRIPT, self.log_path))

    def stop(self):
        """Stop the engine (SIGTERM, then SIGKILL) and its supervisor."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(SHUTDOWN_TIMEOUT + 20)
            self._thread = None

    # -- the supervisor thread ----------------------------------------------

    def _unlink_pid(self):
        try:
            os.unlink(self.pid_path)
        except OSError:
            pass

    def _spawn(self):
        self.starts += 1
        offset = _size(self.log_path)
        with open(self.log_path, 'ab') as log:
            log.write(('--- nova-lease-sandbox: starting %s (start %d)\n'
                       % (SCRIPT, self.starts)).encode())
            log.flush()
            # Ends with the sandbox; Ctrl-C reaches the sandbox, which
            # then stops the engine itself.
            proc = children.launch(
                [self._script, '--config-file', self.conf_path] +
                self.extra_args, log)
        self.proc = proc
        with open(self.pid_path, 'w') as f:
            f.write('%d\n' % proc.pid)
        return proc, offset

    def _wait_started(self, proc, offset):
        """The engine id once its loop runs; EngineError if it does not."""
        deadline = time.monotonic() + self.ready_timeout
        while not self._stopping.is_set():
            with open(self.log_path, 'rb') as f:
                f.seek(offset)
                match = _STARTED.search(f.read().decode('utf-8', 'replace'))
            if match:
                return match.group(1)
            if proc.poll() is not None:
                raise EngineError('%s exited with %s at start; see %s'
                                  % (SCRIPT, proc.returncode,
                                     self.log_path))
            if time.monotonic() > deadline:
                raise EngineError('%s did not start within %d s; see %s'
                                  % (SCRIPT, self.ready_timeout,
                                     self.log_path))
            time.sleep(0.1)
        return None

    def _terminate(self, proc):
        children.terminate(proc, SHUTDOWN_TIMEOUT + 10, SCRIPT)

    def _supervise(self):
        delay = self.restart_delay
        try:
            while not self._stopping.is_set():
                began = time.monotonic()
                try:
                    try:
                        proc, offset = self._spawn()
                    except OSError as e:
                        raise EngineError('%s could not be started: %s'
                                          % (SCRIPT, e))
                    engine_id = self._wait_started(proc, offset)
                except EngineError as e:
                    if not self._ready.is_set():
                        self._error = e     # the sandbox does not start
                        return
                    LOG.error('%s', e)
                    self.progress('engine: %s' % e)
                    if self.proc is None or self.proc.poll() is not None:
                        delay = min(delay * 2, 30.0)
                        self.progress('engine: trying again in %.0f s'
                                      % delay)
                        self._stopping.wait(delay)
                        continue
                else:
                    if engine_id is not None:
                        self.engine_id = engine_id
                        self.running_pid = proc.pid
                        self.progress('engine: %s running (pid %d, engine '
                                      '%s); log in %s' % (
                                          SCRIPT, proc.pid, engine_id,
                                          self.log_path))
                        self._ready.set()
                while (proc.poll() is None and
                       not self._stopping.wait(0.2)):
                    pass
                self.running_pid = None
                if self._stopping.is_set():
                    break
                # One that keeps dying at once is retried less often.
                if time.monotonic() - began < 10:
                    delay = min(delay * 2, 30.0)
                else:
                    delay = self.restart_delay
                self.progress('engine: pid %d exited (%s); starting a new '
                              'one in %.0f s' % (proc.pid,
                                                 _exit_text(proc.returncode),
                                                 delay))
                self._stopping.wait(delay)
        finally:
            proc = self.proc
            if proc is not None:
                self._terminate(proc)
            self._unlink_pid()


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _exit_text(code):
    if code is not None and code < 0:
        try:
            return 'killed by %s' % signal.Signals(-code).name
        except ValueError:
            return 'killed by signal %d' % -code
    return 'exit code %s' % code
