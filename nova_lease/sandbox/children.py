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
"""The sandbox's child processes (Keystone, the engine, Horizon, the
split sandbox's Nova): starting them tied to the sandbox (:func:`launch`),
the servers they run (:func:`serve`), stopping them (:func:`terminate`).
"""

import argparse
import os
import signal
import socketserver
import subprocess
import sys
import threading
import time
from wsgiref import simple_server

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: Runs in a child before it becomes its program (execv keeps the pid and
#: the death signal): SIGTERM when the sandbox thread that started it is
#: gone (``PR_SET_PDEATHSIG``), so that no child outlives its sandbox; it
#: exits at once if the sandbox died while it started.
#: ``python -c LAUNCHER <sandbox pid> <program> <args>...``.
LAUNCHER = """\
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))
except Exception:
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(1)
os.execv(sys.argv[2], sys.argv[2:])
"""


def launch(argv, log, **kwargs):
    """Start ``argv`` (its program by path) through :data:`LAUNCHER`, in
    a session of its own (Ctrl-C reaches the sandbox, which stops it),
    its output to the file object ``log``; return its Popen.
    ``kwargs``: more Popen arguments (``env``, ``cwd``).
    """
    return subprocess.Popen(
        [sys.executable, '-c', LAUNCHER, str(os.getpid())] + list(argv),
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True, **kwargs)


class ThreadingWSGIServer(socketserver.ThreadingMixIn,
                          simple_server.WSGIServer):
    """wsgiref's server, a thread a request (the sandbox's servers)."""

    daemon_threads = True
    allow_reuse_address = True


class _StderrHandler(simple_server.WSGIRequestHandler):
    """Log one line per request to stderr (the child's log file)."""

    def log_message(self, fmt, *args):
        sys.stderr.write('%s %s\n' % (self.address_string(), fmt % args))
        sys.stderr.flush()


def _watch_parent(parent_pid, server):
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    server.shutdown()


def server_parser(prog):
    """The arguments of a child that serves (:func:`serve`): ``--host``
    (127.0.0.1), ``--port``, ``--parent-pid``; add its own ones.
    """
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument('--host', default='127.0.0.1')
    parser.add_argument('--port', type=int, required=True)
    parser.add_argument('--parent-pid', type=int, default=None)
    return parser


def serve(host, port, app, banner, parent_pid=None):
    """Serve the WSGI ``app`` on host:port (threaded wsgiref) until
    SIGTERM or SIGINT, or until ``parent_pid`` is no longer this
    process's parent (the sandbox is gone); ``banner`` goes to stderr once
    it listens. What a child's ``main()`` runs; returns 0.
    """
    server = simple_server.make_server(
        host, port, app, server_class=ThreadingWSGIServer,
        handler_class=_StderrHandler)

    def _stop(signum, frame):
        # shutdown() waits for serve_forever() to return: not from the
        # thread that runs it.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    if parent_pid:
        threading.Thread(target=_watch_parent, args=(parent_pid, server),
                         daemon=True).start()
    sys.stderr.write(banner + '\n')
    sys.stderr.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return 0


class PidFileChild(object):
    """A child process of the sandbox whose pid is kept in a file.

    The class sets ``self.proc`` (None until :meth:`spawn`),
    ``self.log_path`` and ``self.pid_path``; :attr:`what` names the
    child in the log.
    """

    what = 'the child process'

    def spawn(self, argv, **kwargs):
        """Start ``argv``, its output appended to the log file, and write
        its pid file. ``kwargs``: more Popen arguments (``env``, ``cwd``).
        """
        with open(self.log_path, 'ab') as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, **kwargs)
        with open(self.pid_path, 'w') as f:
            f.write('%d\n' % self.proc.pid)

    def stop(self, timeout=15.0):
        """Stop it (:func:`terminate`) and remove its pid file."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        terminate(proc, timeout, self.what)
        try:
            os.unlink(self.pid_path)
        except OSError:
            pass

    @property
    def pid(self):
        return self.proc.pid if self.proc else None


def terminate(proc, timeout, what):
    """SIGTERM ``proc`` if it runs; SIGKILL it after ``timeout`` seconds."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        LOG.warning('%(what)s (pid %(pid)d) did not stop in %(timeout)d s; '
                    'killing it',
                    {'what': what, 'pid': proc.pid, 'timeout': timeout})
        proc.kill()
        proc.wait()
