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
"""What the sandbox's Keystone child process runs.

``python -m nova_lease.sandbox.keystone_server --config-file F --port P``
serves Keystone's WSGI application (keystone.server.wsgi) with a threaded
stdlib wsgiref server on 127.0.0.1 until SIGTERM/SIGINT, or until the parent
process is gone. Keystone imports eventlet-based oslo.service code, which is
why it lives in a process of its own: the Nova process runs in native
threading mode. Keystone is imported only inside main(), so importing this
module stays cheap and eventlet-free.
"""

import argparse
import os
import signal
import socketserver
import sys
import threading
import time
from wsgiref import simple_server


class _ThreadingWSGIServer(socketserver.ThreadingMixIn,
                           simple_server.WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(simple_server.WSGIRequestHandler):
    """Log one line per request to stderr (the keystone log file)."""

    def log_message(self, fmt, *args):
        sys.stderr.write('%s %s\n' % (self.address_string(), fmt % args))


def _watch_parent(parent_pid, server):
    """Stop serving when the sandbox process that started us is gone."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent_pid:
            server.shutdown()
            return


def main(argv=None):
    parser = argparse.ArgumentParser(prog='nova-lease-sandbox-keystone')
    parser.add_argument('--config-file', required=True)
    parser.add_argument('--host', default='127.0.0.1')
    parser.add_argument('--port', type=int, required=True)
    parser.add_argument('--parent-pid', type=int, default=None)
    args = parser.parse_args(argv)

    os.environ['OS_KEYSTONE_CONFIG_FILES'] = os.path.abspath(
        args.config_file)
    # Keystone parses sys.argv itself: leave it nothing of ours.
    sys.argv = sys.argv[:1]
    from keystone.server import wsgi as keystone_wsgi

    app = keystone_wsgi.initialize_public_application()
    server = simple_server.make_server(
        args.host, args.port, app, server_class=_ThreadingWSGIServer,
        handler_class=_QuietHandler)

    def _stop(signum, frame):
        # shutdown() waits for serve_forever() to return: not from the
        # thread that runs it.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    if args.parent_pid:
        threading.Thread(target=_watch_parent,
                         args=(args.parent_pid, server),
                         daemon=True).start()
    sys.stderr.write('keystone listening on http://%s:%d\n'
                     % (args.host, args.port))
    sys.stderr.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
