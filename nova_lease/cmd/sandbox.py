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
"""nova-lease-sandbox: a real Keystone, an all-in-one Nova with nova_lease
and nova-lease-engine (a child process, restarted if it dies) on
127.0.0.1, for trying the product with the unmodified ``nova`` and
``openstack`` clients.

    nova-lease-sandbox [--state-dir DIR] [--keystone-port 5000]
                       [--nova-port 8774] [--demo [--keep-running]]
                       [--no-engine] [--debug]
                       [--split [--placement-port 8778]
                        [--stand-in-port 9292]]
                       [--devstack-layout [--devstack-port 80]]
                       [--dashboard [--dashboard-port 8080]
                        [--dashboard-python PYTHON]]

Prints ``ready: source DIR/demo-openrc`` when the clients can be used;
SIGINT/SIGTERM stop everything. See nova_lease.sandbox.
"""

import argparse
import os
import sys
import threading
import time

# Nova in this process runs in native threading mode (importing
# nova_lease.cmd already refuses eventlet); say so before nova is imported.
os.environ['OS_NOVA_DISABLE_EVENTLET_PATCHING'] = '1'


def default_state_dir():
    base = os.environ.get('XDG_STATE_HOME') or os.path.join(
        os.path.expanduser('~'), '.local', 'state')
    return os.path.join(base, 'nova-lease-sandbox')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog='nova-lease-sandbox',
        description='Run a real Keystone, an all-in-one Nova 34 with '
                    'nova_lease and nova-lease-engine on 127.0.0.1 '
                    '(SQLite), and write openrc files for the nova and '
                    'openstack clients.')
    parser.add_argument('--state-dir', default=default_state_dir(),
                        help='where databases, keys, logs and openrc files '
                             'go (default: %(default)s); Keystone is reused '
                             'when restarted with the same directory')
    parser.add_argument('--keystone-port', type=int, default=5000,
                        help='Keystone port on 127.0.0.1 (default: '
                             '%(default)s)')
    parser.add_argument('--nova-port', type=int, default=8774,
                        help='nova-api port on 127.0.0.1 (default: '
                             '%(default)s)')
    parser.add_argument('--demo', action='store_true',
                        help='run a short scripted scenario once ready, '
                             'print its timeline and exit')
    parser.add_argument('--keep-running', action='store_true',
                        help='with --demo: keep the sandbox running after '
                             'the demo')
    parser.add_argument('--no-engine', action='store_true',
                        help='do not start nova-lease-engine (start it '
                             'yourself with nova-lease-engine --config-file '
                             'STATE_DIR/nova/nova-lease-engine.conf); by '
                             'default the sandbox runs it as a child '
                             'process and starts it again if it dies')
    parser.add_argument('--debug', action='store_true',
                        help='debug logging in nova.log and '
                             'nova-lease-engine.log')
    # For comparing with plain Nova: no nova_lease filter, scheduler filter
    # or weigher.
    parser.add_argument('--devstack-layout', action='store_true',
                        help='also serve DevStack\'s URL layout on '
                             '127.0.0.1:--devstack-port: /compute/... for '
                             'Nova and /reservation/v1/... for the lease '
                             'API (what blazar-tempest-plugin\'s API tests '
                             'call; see tools/blazar-tempest.sh)')
    parser.add_argument('--devstack-port', type=int, default=80,
                        help='port of --devstack-layout (default: '
                             '%(default)s)')
    parser.add_argument('--dashboard', action='store_true',
                        help='also serve Horizon with blazar-dashboard on '
                             '127.0.0.1:--dashboard-port (an optional '
                             'extra: tools/sandbox.sh --dashboard installs '
                             'them in a virtualenv of their own)')
    parser.add_argument('--dashboard-port', type=int, default=8080,
                        help='port of --dashboard (default: %(default)s)')
    parser.add_argument('--dashboard-python', default=None,
                        help='python of the dashboard\'s virtualenv '
                             '(default: $NOVA_LEASE_DASHBOARD_PYTHON, or '
                             '.venv-dashboard next to this virtualenv)')
    parser.add_argument('--split', action='store_true',
                        help='run Nova as separate processes the way the '
                             'install guide deploys it: Placement, '
                             'nova-api under gunicorn (2 workers), '
                             'nova-scheduler, conductors, two cells with '
                             'their computes and two engines, on MariaDB '
                             '(127.0.0.1:3306) and RabbitMQ '
                             '(127.0.0.1:5672); see doc/source/install/'
                             'sandbox.rst')
    parser.add_argument('--placement-port', type=int, default=8778,
                        help='with --split: Placement port (default: '
                             '%(default)s)')
    parser.add_argument('--stand-in-port', type=int, default=9292,
                        help='with --split: port of the Glance and Neutron '
                             'stand-ins (default: %(default)s)')
    parser.add_argument('--without-plugin', action='store_true',
                        help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _finish(code, grace=5.0):
    """Return code, or leave at once if non-daemon threads linger."""
    sys.stdout.flush()
    sys.stderr.flush()
    deadline = time.monotonic() + grace
    me = threading.current_thread()
    others = [t for t in threading.enumerate()
              if t is not me and not t.daemon]
    for thread in others:
        thread.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in others):
        os._exit(code)
    return code


def main(argv=None):
    args = parse_args(argv)
    from nova import monkey_patch
    monkey_patch.patch()

    if args.split:
        extra = [name for name, on in (
            ('--devstack-layout', args.devstack_layout),
            ('--dashboard', args.dashboard), ('--no-engine', args.no_engine),
            ('--without-plugin', args.without_plugin)) if on]
        if extra:
            sys.stderr.write('nova-lease-sandbox: --split does not go with '
                             '%s\n' % ', '.join(extra))
            return 2
        from nova_lease.sandbox import split
        sandbox = split.SplitSandbox(
            args.state_dir, placement_port=args.placement_port,
            standins_port=args.stand_in_port,
            keystone_port=args.keystone_port, nova_port=args.nova_port,
            demo=args.demo, keep_running=args.keep_running,
            debug=args.debug)
        return _finish(sandbox.run())

    from nova_lease.sandbox import runner
    sandbox = runner.Sandbox(
        args.state_dir, keystone_port=args.keystone_port,
        nova_port=args.nova_port, demo=args.demo,
        keep_running=args.keep_running, debug=args.debug,
        with_plugin=not args.without_plugin,
        with_engine=not args.no_engine,
        devstack_port=args.devstack_port if args.devstack_layout else None,
        dashboard_port=args.dashboard_port if args.dashboard else None,
        dashboard_python=args.dashboard_python)
    return _finish(sandbox.run())


if __name__ == '__main__':
    sys.exit(main())
