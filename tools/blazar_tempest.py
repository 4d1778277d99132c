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
"""Run blazar-tempest-plugin, unmodified, against the sandbox.

Called by tools/blazar-tempest.sh (which prepares both virtualenvs) as::

    python tools/blazar_tempest.py TEMPEST_VENV [--workspace DIR]
        [--state-dir DIR] [--only api|scenario] [--regex REGEX] [--keep]

1. Starts ``nova-lease-sandbox --devstack-layout`` (its own state
   directory; Keystone on 5000, nova-api on 8774, DevStack's layout on
   127.0.0.1:80, which the plugin's gabbi tests hard-code) and waits for
   its ready line.
2. Writes a tempest workspace (as ``tempest init`` does) whose
   tempest.conf points at the sandbox's Keystone with its admin
   credentials, image and flavors; dynamic credentials; no network,
   volume or object service.
3. Runs the plugin's API tests (``blazar_tempest_plugin.tests.api``:
   they expect no host registered when they start).
4. Registers every compute host of the sandbox in the free pool
   (``POST /os-hosts``): the scenario tests are written for DevStack's
   one-node cloud, where the one compute host is registered and a server
   without a reservation has nowhere to go.
5. Runs the scenario tests (``blazar_tempest_plugin.tests.scenario``).
6. Stops the sandbox (unless ``--keep``) and prints each run's summary.

Exit status 0 only if both runs pass.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from keystoneauth1 import loading
from keystoneauth1 import session as ks_session
from openstack import connection
from openstack import exceptions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
API_TESTS = r'^blazar_tempest_plugin\.tests\.api'
SCENARIO_TESTS = r'^blazar_tempest_plugin\.tests\.scenario'

TEMPEST_CONF = """[DEFAULT]
log_file = tempest.log

[oslo_concurrency]
lock_path = {lock_path}

[auth]
use_dynamic_credentials = True
admin_username = admin
admin_password = {password}
admin_project_name = admin
admin_domain_name = Default
default_credentials_domain_name = Default

[identity]
auth_version = v3
uri_v3 = {auth_url}
region = {region}
v3_endpoint_type = public

[identity-feature-enabled]
api_v2 = False

[compute]
image_ref = {image}
image_ref_alt = {image}
flavor_ref = {flavor}
flavor_ref_alt = {flavor}
min_compute_nodes = 1
build_timeout = 120
endpoint_type = publicURL

[compute-feature-enabled]
console_output = False

[validation]
run_validation = False

[service_available]
blazar = True
nova = True
neutron = False
glance = False
cinder = False
swift = False
placement = False

[resource_reservation]
endpoint_type = publicURL
lease_interval = 2
lease_end_timeout = 300
"""


def _log(text):
    sys.stderr.write('blazar-tempest: %s\n' % text)
    sys.stderr.flush()


def read_openrc(path):
    sys.path.insert(0, ROOT)
    from nova_lease.sandbox import openrc
    return openrc.read_openrc(path)


def start_sandbox(state_dir, log_path):
    cmd = [os.path.join(os.path.dirname(sys.executable),
                        'nova-lease-sandbox'),
           '--state-dir', state_dir, '--devstack-layout']
    log = open(log_path, 'w')
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log,
                            stdin=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    line = proc.stdout.readline()
    if not line.startswith('ready:'):
        proc.wait(30)
        raise SystemExit('blazar-tempest: the sandbox did not start (see %s)'
                         % log_path)
    _log('sandbox ready (%s)' % state_dir)
    return proc


def stop_sandbox(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def admin_session(env):
    loader = loading.get_plugin_loader('password')
    auth = loader.load_from_options(
        auth_url=env['OS_AUTH_URL'], username=env['OS_USERNAME'],
        password=env['OS_PASSWORD'], project_name=env['OS_PROJECT_NAME'],
        user_domain_name=env['OS_USER_DOMAIN_NAME'],
        project_domain_name=env['OS_PROJECT_DOMAIN_NAME'])
    return ks_session.Session(auth=auth)


def register_all_hosts(env):
    """Put every compute host in the free pool, as DevStack's one node."""
    sess = admin_session(env)
    # Nova through openstacksdk's compute proxy; the lease API (which
    # openstacksdk does not know) through the catalog's reservation entry.
    conn = connection.Connection(session=sess,
                                 region_name=env['OS_REGION_NAME'])
    lease_api = {'service_type': 'reservation', 'interface': 'public',
                 'region_name': env['OS_REGION_NAME']}
    resp = conn.compute.get('/os-hypervisors', microversion='2.96')
    exceptions.raise_from_response(resp)
    hypervisors = resp.json()
    known = {h['hypervisor_hostname'] for h in sess.get(
        '/os-hosts', endpoint_filter=lease_api).json()['hosts']}
    for hyp in hypervisors['hypervisors']:
        name = hyp['hypervisor_hostname']
        if name not in known:
            sess.post('/os-hosts', json={'name': name},
                      endpoint_filter=lease_api)
            _log('registered host %s in the free pool' % name)


def write_workspace(tempest_venv, workspace, env):
    """What ``tempest init`` writes (without registering a workspace)."""
    if os.path.isdir(workspace):
        shutil.rmtree(workspace)
    os.makedirs(os.path.join(workspace, 'etc'))
    tempest_dir = subprocess.run(
        [os.path.join(tempest_venv, 'bin', 'python'), '-c',
         'import os, tempest; print(os.path.dirname(tempest.__file__))'],
        check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    with open(os.path.join(workspace, '.stestr.conf'), 'w') as f:
        f.write('[DEFAULT]\ntest_path=%s\ntop_dir=%s\n'
                'group_regex=([^\\.]*\\.)*\n'
                % (os.path.join(tempest_dir, 'test_discover'),
                   tempest_dir))
    conf = TEMPEST_CONF.format(
        password=env['OS_PASSWORD'],
        auth_url=env['OS_AUTH_URL'].rstrip('/'),
        region=env['OS_REGION_NAME'], image=env['NOVA_LEASE_IMAGE'],
        flavor=env['NOVA_LEASE_FLAVOR'],
        lock_path=os.path.join(workspace, 'tempest_lock'))
    with open(os.path.join(workspace, 'etc', 'tempest.conf'), 'w') as f:
        f.write(conf)


def run_tempest(tempest_venv, workspace, regex):
    cmd = [os.path.join(tempest_venv, 'bin', 'tempest'), 'run',
           '--regex', regex, '--concurrency', '1']
    _log('running %s' % ' '.join(cmd[1:]))
    env = dict(os.environ, TEMPEST_CONFIG_DIR=os.path.join(workspace, 'etc'),
               TEMPEST_CONFIG='tempest.conf')
    proc = subprocess.run(cmd, cwd=workspace, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env)
    sys.stdout.write(proc.stdout)
    summary = [line for line in proc.stdout.splitlines()
               if line.startswith((' - Passed', ' - Failed', ' - Skipped',
                                   'Totals', 'Ran:', '======'))]
    return proc.returncode, summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('tempest_venv')
    parser.add_argument('--workspace',
                        default=os.path.join(ROOT, '.blazar-tempest'))
    parser.add_argument('--state-dir', default=None,
                        help='sandbox state directory (default: a new '
                             'temporary one)')
    parser.add_argument('--only', choices=('api', 'scenario'),
                        help='run only the API or only the scenario tests')
    parser.add_argument('--regex', default=None,
                        help='of those, run only the tests matching REGEX')
    parser.add_argument('--keep', action='store_true',
                        help='leave the sandbox running afterwards')
    args = parser.parse_args(argv)
    state_dir = args.state_dir or tempfile.mkdtemp(prefix='nl-tempest-')
    os.makedirs(args.workspace, exist_ok=True)
    os.makedirs(state_dir, exist_ok=True)
    proc = start_sandbox(state_dir, os.path.join(state_dir, 'sandbox.log'))
    results = []
    try:
        env = read_openrc(os.path.join(state_dir, 'admin-openrc'))
        write_workspace(args.tempest_venv, args.workspace, env)
        for name, regex, register in (('api', API_TESTS, False),
                                      ('scenario', SCENARIO_TESTS, True)):
            if args.only and args.only != name:
                continue
            if args.regex:
                regex = '(?=%s)(?=.*(?:%s))' % (regex, args.regex)
            if register:
                register_all_hosts(env)
            code, summary = run_tempest(args.tempest_venv, args.workspace,
                                        regex)
            results.append((regex, code, summary))
    finally:
        if args.keep:
            _log('sandbox left running (pid %d); state in %s'
                 % (proc.pid, state_dir))
        else:
            stop_sandbox(proc)
    for regex, code, summary in results:
        _log('%s: %s; %s' % (regex, 'passed' if code == 0 else 'FAILED',
                             ' '.join(s.strip() for s in summary)))
    return 0 if results and all(code == 0 for _r, code, _s in results) \
        else 1


if __name__ == '__main__':
    sys.exit(main())
