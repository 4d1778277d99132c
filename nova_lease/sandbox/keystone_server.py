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

import os
import sys

from nova_lease.sandbox import children


def main(argv=None):
    parser = children.server_parser('nova-lease-sandbox-keystone')
    parser.add_argument('--config-file', required=True)
    args = parser.parse_args(argv)

    os.environ['OS_KEYSTONE_CONFIG_FILES'] = os.path.abspath(
        args.config_file)
    # Keystone parses sys.argv itself: leave it nothing of ours.
    sys.argv = sys.argv[:1]
    from keystone.server import wsgi as keystone_wsgi

    app = keystone_wsgi.initialize_public_application()
    return children.serve(
        args.host, args.port, app,
        'keystone listening on http://%s:%d' % (args.host, args.port),
        parent_pid=args.parent_pid)


if __name__ == '__main__':
    sys.exit(main())
