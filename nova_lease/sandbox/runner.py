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
"""nova-lease-sandbox's main sequence.

Start Keystone (child process; set up in a background thread while Nova
starts here), start the all-in-one Nova, then nova-lease-engine (child
process, supervised: restarted when it dies), give the demo project its
quota, write the openrc files, print the ready line, then run the demo or
wait for SIGINT/SIGTERM and shut down (the engine first, then Nova, then
Keystone).

The terminal (stderr) gets short progress lines; stdout gets only the
ready line and the demo's timeline; everything else goes to
``<state>/nova.log``, ``<state>/nova-lease-engine.log`` and
``<state>/keystone.log``.
"""

import logging as std_logging
import os
import signal
import socket
import sys
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging

from nova_lease.sandbox import dashboard as dash
from nova_lease.sandbox import demo
from nova_lease.sandbox import engine as engine_proc
from nova_lease.sandbox import keystone as ks
from nova_lease.sandbox import openrc

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


class SandboxError(Exception):
    pass


class _Stop(BaseException):
    """Raised in the main thread by the SIGINT/SIGTERM handler."""


def _root_cause(exc):
    """The first real error inside a fixtures/testtools wrapper."""
    args = getattr(exc, 'args', ())
    if type(exc).__name__ == 'MultipleExceptions' and args:
        first = args[0]
        if isinstance(first, tuple) and len(first) == 3:
            return first[1]
    return exc


class Sandbox(object):

    def __init__(self, state_dir, keystone_port=5000, nova_port=8774,
                 demo=False, keep_running=False, debug=False,
                 with_plugin=True, with_engine=True, out=None, err=None,
                 devstack_port=None, dashboard_port=None,
                 dashboard_python=None):
        self.state_dir = os.path.abspath(state_dir)
        self.keystone_port = keystone_port
        self.nova_port = nova_port
        self.demo = demo
        self.keep_running = keep_running
        self.debug = debug
        self.with_plugin = with_plugin
        self.with_engine = with_plugin and with_engine
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.t0 = time.monotonic()
        self.devstack_port = devstack_port
        self.dashboard_port = dashboard_port
        self.dashboard_python = dashboard_python
        self.dashboard = None
        self.keystone = None
        self.nova = None
        self.engine = None
        self._ks_error = None
        #: The demo's steps (None: demo.default_steps()).
        self.demo_steps = None

    def progress(self, text):
        self.err.write('[%5.1fs] %s\n' % (time.monotonic() - self.t0, text))
        self.err.flush()
        LOG.info('%s', text)

    # -- start-up ----------------------------------------------------------

    def _check_ports(self):
        ports = [('keystone', self.keystone_port), ('nova', self.nova_port)]
        if self.devstack_port is not None:
            ports.append(('devstack layout', self.devstack_port))
        if self.dashboard_port is not None:
            ports.append(('dashboard', self.dashboard_port))
        for name, port in ports:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((ks.HOST, port))
            except OSError as e:
                raise SandboxError('%s port %s:%d is not free: %s'
                                   % (name, ks.HOST, port, e))
            finally:
                sock.close()
        if len(set(port for _, port in ports)) != len(ports):
            raise SandboxError('--keystone-port, --nova-port, '
                               '--devstack-port and --dashboard-port must '
                               'differ')

    def _setup_logging(self):
        log_file = os.path.join(self.state_dir, 'nova.log')
        # Until oslo.log takes over (after nova.conf is parsed), send
        # Python warnings and early log records to the log file too.
        std_logging.captureWarnings(True)
        handler = std_logging.FileHandler(log_file)
        root = std_logging.getLogger()
        root.addHandler(handler)
        root.setLevel(std_logging.INFO)
        return handler

    def _keystone_thread(self):
        try:
            k = self.keystone
            k.setup()
            self.progress('keystone: %s database in %s'
                          % ('reusing the' if k.reused else 'created a',
                             k.dir))
            k.start()
            k.wait_ready()
            k.configure()
            self.progress('keystone: ready on %s (pid %d)' % (k.url, k.pid))
        except BaseException as e:  # reported by the main thread
            LOG.exception('keystone start-up failed')
            self._ks_error = e

    def start(self):
        from nova_lease.sandbox import nova_aio

        os.makedirs(self.state_dir, exist_ok=True)
        self._check_ports()
        early = self._setup_logging()
        engine_proc.stop_stale(self.state_dir)
        passwords = openrc.load_passwords(self.state_dir)
        self.keystone = ks.Keystone(self.state_dir, self.keystone_port,
                                    self.nova_port, passwords)
        self.progress('state directory %s; logs in nova.log, '
                      'nova-lease-engine.log and keystone.log'
                      % self.state_dir)
        ks_thread = threading.Thread(target=self._keystone_thread,
                                     name='keystone-setup', daemon=True)
        ks_thread.start()
        if self.dashboard_port is not None:
            # Horizon needs only Keystone's URL to start; it compiles its
            # stylesheets while Nova starts.
            self.dashboard = dash.Dashboard(
                self.state_dir, self.dashboard_port, self.keystone.url,
                python=self.dashboard_python)
            try:
                self.dashboard.start()
            except dash.DashboardError as e:
                raise SandboxError(str(e))

        self.nova = nova_aio.NovaAllInOne(
            self.state_dir, self.nova_port, self.keystone.url, passwords,
            with_plugin=self.with_plugin, debug=self.debug,
            progress=self.progress, devstack_port=self.devstack_port)
        self.nova.configure()
        CONF.set_override('log_file', os.path.join(self.state_dir,
                                                   'nova.log'))
        CONF.set_override('use_stderr', False)
        std_logging.getLogger().removeHandler(early)
        early.close()
        logging.setup(CONF, 'nova')
        self.nova.setUp()
        if self.with_engine:
            # Nova is up: the engine starts while Keystone may still be
            # getting ready (it asks for a token only when it acts).
            self.engine = engine_proc.EngineProcess(
                self.state_dir, self.nova.engine_conf_path,
                progress=self.progress)
            self.engine.start()
        elif self.with_plugin:
            self.progress('engine: not started (--no-engine); run it with '
                          '%s --config-file %s' % (
                              engine_proc.SCRIPT,
                              self.nova.engine_conf_path))

        while ks_thread.is_alive():
            ks_thread.join(0.2)
        if self._ks_error is not None:
            raise SandboxError('keystone failed to start: %s'
                               % self._ks_error)
        if self.engine is not None:
            try:
                self.engine.wait_ready()
            except engine_proc.EngineError as e:
                raise SandboxError(str(e))
        self._set_demo_quota()
        self._write_openrc(passwords)
        if self.dashboard is not None:
            try:
                self.dashboard.wait_ready()
            except dash.DashboardError as e:
                raise SandboxError(str(e))
            self.progress('dashboard: Horizon with blazar-dashboard on %s '
                          '(pid %d; log in %s); log in as admin or demo '
                          'with the passwords of the openrc files'
                          % (self.dashboard.url, self.dashboard.pid,
                             self.dashboard.log_path))

    def _set_demo_quota(self):
        from nova_lease.sandbox import nova_aio

        quota = nova_aio.DEMO_QUOTA
        self.nova.set_quota(self.keystone.admin_session(),
                            self.keystone.project_ids['demo'], quota)
        self.progress('nova: quota of project demo: %d instances, %d '
                      'cores, %d MB of RAM' % (quota['instances'],
                                               quota['cores'], quota['ram']))

    def _write_openrc(self, passwords):
        for user in ('admin', 'demo'):
            env = openrc.openrc_env(
                user, passwords[user], self.keystone.url, ks.REGION,
                self.nova.image_id, self.nova.flavor_id)
            openrc.write_openrc(self.openrc_path(user), env)

    def openrc_path(self, user):
        return os.path.join(self.state_dir, '%s-openrc' % user)

    # -- shut-down ---------------------------------------------------------

    def stop(self):
        if self.dashboard is not None:
            self.progress('stopping the dashboard')
            dashboard, self.dashboard = self.dashboard, None
            try:
                dashboard.stop()
            except Exception:
                LOG.exception('stopping the dashboard failed')
        if self.engine is not None:
            # First, while Nova still answers: it finishes or releases
            # what it is doing.
            self.progress('stopping nova-lease-engine')
            engine, self.engine = self.engine, None
            try:
                engine.stop()
            except Exception:
                LOG.exception('stopping nova-lease-engine failed')
        if self.nova is not None:
            self.progress('stopping nova')
            nova, self.nova = self.nova, None
            try:
                nova.cleanUp()
            except Exception:
                LOG.exception('nova clean-up failed')
        if self.keystone is not None:
            self.progress('stopping keystone')
            self.keystone.stop()
            self.keystone = None

    # -- main --------------------------------------------------------------

    def run(self):
        """Start, serve or demo, stop. Returns the exit code."""
        def _on_signal(signum, frame):
            # One clean-up only: ignore further signals while stopping.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            raise _Stop()

        signal.signal(signal.SIGINT, _on_signal)
        signal.signal(signal.SIGTERM, _on_signal)
        code = 0
        try:
            self.start()
            self.progress('ready after %.1f s' % (time.monotonic() - self.t0))
            self.out.write('ready: source %s\n' % self.openrc_path('demo'))
            self.out.flush()
            if self.demo:
                env = openrc.read_openrc(self.openrc_path('demo'))
                admin_env = openrc.read_openrc(self.openrc_path('admin'))
                code = 0 if demo.run(
                    env, out=self.out, admin_env=admin_env,
                    steps=self.demo_steps,
                    engine=self.engine, conf_path=self.nova.conf_path,
                    page_path=os.path.join(self.state_dir,
                                           'capacity.html')) else 1
                if not self.keep_running:
                    return code
            while True:
                time.sleep(3600)
        except _Stop:
            self.progress('signal received, shutting down')
            return code
        except SandboxError as e:
            self.progress('error: %s' % e)
            return 2
        except Exception as e:
            LOG.exception('sandbox failed')
            e = _root_cause(e)
            self.progress('error: %s: %s (see %s)' % (
                type(e).__name__, e, os.path.join(self.state_dir,
                                                  'nova.log')))
            return 1
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            self.stop()
            self.progress('stopped')
