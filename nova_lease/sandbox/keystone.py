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
"""A real Keystone for the sandbox, run as a child process.

:class:`Keystone` writes ``keystone.conf`` under ``<state>/keystone``,
initialises the database and key repositories with ``keystone-manage``
(db_sync, fernet_setup, credential_setup, bootstrap: about 15 s, done once
per state directory and reused on later starts), starts
:mod:`nova_lease.sandbox.keystone_server` as a child process, waits for
``/v3`` and then makes the sandbox's projects, users, roles and service
catalog through Keystone's REST API (idempotent, so a restart with other
ports fixes the endpoint URLs).
"""

import getpass
import grp
import json
import os
import shutil
import subprocess
import sys
import time

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1.identity import v3 as ks_v3
from keystoneauth1 import session as ks_session
from oslo_log import log as logging

from nova_lease.sandbox import children

LOG = logging.getLogger(__name__)

HOST = '127.0.0.1'
REGION = 'RegionOne'
DOMAIN = 'Default'
DOMAIN_ID = 'default'
SERVICE_PROJECT = 'service'
_MARKER = 'bootstrapped.json'
_MARKER_VERSION = 1

_KEYSTONE_CONF = """\
# Written by nova-lease-sandbox; rewritten at every start.
[DEFAULT]
debug = False
use_stderr = True

[database]
connection = %(connection)s

[token]
provider = fernet
expiration = 43200

[fernet_tokens]
key_repository = %(dir)s/fernet-keys

[fernet_receipts]
key_repository = %(dir)s/fernet-keys

[credential]
key_repository = %(dir)s/credential-keys

[cache]
enabled = True
backend = dogpile.cache.memory

[identity]
# A sandbox on loopback: cheap password hashes keep start-up fast.
password_hash_rounds = 4
"""

# service name -> (type, description, path under the nova endpoint)
CATALOG = (
    ('nova', 'compute', 'Nova compute API', '/v2.1'),
    ('nova_lease', 'reservation',
     'nova_lease reservation API (Blazar v1 compatible)',
     '/v2.1/os-reservation'),
    # Read-only stand-in so the clients can look images up
    # (nova_lease.sandbox.images).
    ('glance', 'image', 'Image service stand-in (read-only)', '/image'),
    # The in-process placement, for nova-lease-manage audit and capacity
    # (nova_lease.sandbox.placement_edge).
    ('placement', 'placement', 'Placement API (in process)', '/placement'),
)
INTERFACES = ('public', 'internal', 'admin')


class KeystoneError(Exception):
    pass


class Keystone(children.PidFileChild):
    """Set up, start, configure and stop the sandbox's Keystone."""

    what = 'keystone'

    def __init__(self, state_dir, port, nova_port, passwords,
                 catalog=None, service_users=('nova',), connection=None):
        """``catalog``: (name, type, description, URL) of each service
        but Keystone (default: :data:`CATALOG` on ``nova_port``);
        ``service_users``: the users made admin of the service project;
        ``connection``: the database (default: an SQLite file in the
        state directory, reused by later starts); another one is empty
        and bootstrapped at every start.
        """
        self.dir = os.path.join(state_dir, 'keystone')
        self.connection = connection
        self.log_path = os.path.join(state_dir, 'keystone.log')
        self.port = port
        self.nova_port = nova_port
        self.passwords = passwords
        self.catalog = catalog
        self.service_users = tuple(service_users)
        self.conf_path = os.path.join(self.dir, 'keystone.conf')
        self.pid_path = os.path.join(state_dir, 'keystone.pid')
        self.url = 'http://%s:%d/v3' % (HOST, port)
        self.proc = None
        self.reused = False
        self.project_ids = {}
        self._log = None

    # -- setup -------------------------------------------------------------

    def _manage(self, *args):
        cmd = [sys.executable, '-c',
               'import sys; from keystone.cmd.manage import main; '
               'sys.exit(main())',
               '--config-file', self.conf_path] + list(args)
        return subprocess.Popen(cmd, stdout=self._log,
                                stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)

    @staticmethod
    def _wait(procs, what):
        for proc in procs:
            if proc.wait() != 0:
                raise KeystoneError('keystone-manage %s failed (exit %s); '
                                    'see keystone.log' % (what,
                                                          proc.returncode))

    def _bootstrapped(self):
        if self.connection is not None:
            return False
        try:
            with open(os.path.join(self.dir, _MARKER)) as f:
                marker = json.load(f)
        except (OSError, ValueError):
            return False
        return (marker.get('version') == _MARKER_VERSION and
                marker.get('admin_password') == self.passwords['admin'] and
                os.path.exists(os.path.join(self.dir, 'keystone.sqlite')))

    def setup(self):
        """Write keystone.conf; initialise the database once."""
        self.reused = self._bootstrapped()
        if not self.reused and os.path.isdir(self.dir):
            shutil.rmtree(self.dir)        # a half-made one: start over
        os.makedirs(self.dir, exist_ok=True)
        with open(self.conf_path, 'w') as f:
            f.write(_KEYSTONE_CONF % {
                'dir': self.dir,
                'connection': self.connection or 'sqlite:///%s' % (
                    os.path.join(self.dir, 'keystone.sqlite'))})
        if self.reused:
            return
        self._log = open(self.log_path, 'ab')
        try:
            user = getpass.getuser()
            group = grp.getgrgid(os.getgid()).gr_name
            owner = ['--keystone-user', user, '--keystone-group', group]
            # The key repositories do not need the database: make them
            # while db_sync (the slow part) runs.
            procs = [self._manage('db_sync'),
                     self._manage('fernet_setup', *owner),
                     self._manage('credential_setup', *owner)]
            self._wait(procs, 'db_sync/fernet_setup/credential_setup')
            self._wait([self._manage(
                'bootstrap',
                # One argument: a generated password may start with '-'.
                '--bootstrap-password=%s' % self.passwords['admin'],
                '--bootstrap-username', 'admin',
                '--bootstrap-project-name', 'admin',
                '--bootstrap-role-name', 'admin',
                '--bootstrap-public-url', self.url,
                '--bootstrap-internal-url', self.url,
                '--bootstrap-admin-url', self.url,
                '--bootstrap-region-id', REGION)], 'bootstrap')
        finally:
            self._log.close()
            self._log = None
        with open(os.path.join(self.dir, _MARKER), 'w') as f:
            json.dump({'version': _MARKER_VERSION,
                       'admin_password': self.passwords['admin']}, f)

    # -- process -----------------------------------------------------------

    def start(self):
        self.spawn(
            [sys.executable, '-m', 'nova_lease.sandbox.keystone_server',
             '--config-file', self.conf_path, '--host', HOST,
             '--port', str(self.port), '--parent-pid', str(os.getpid())])

    def wait_ready(self, timeout=60.0):
        sess = ks_session.Session()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise KeystoneError('keystone exited with %s; see keystone.log'
                                    % self.proc.returncode)
            try:
                resp = sess.get(self.url, raise_exc=False, timeout=2)
                if resp.status_code == 200:
                    return
            except ks_exc.ConnectFailure:
                pass
            except ks_exc.ClientException as e:
                LOG.debug('keystone not ready yet: %s', e)
            if time.monotonic() > deadline:
                raise KeystoneError('keystone did not answer on %s within '
                                    '%d s' % (self.url, timeout))
            time.sleep(0.2)

    # -- projects, users, roles, catalog ------------------------------------

    def admin_session(self):
        auth = ks_v3.Password(
            auth_url=self.url, username='admin',
            password=self.passwords['admin'], project_name='admin',
            user_domain_id=DOMAIN_ID, project_domain_id=DOMAIN_ID)
        return ks_session.Session(auth=auth)

    def configure(self):
        """Make projects, users, roles, services and endpoints (idempotent).

        Returns the endpoint URLs by service type; :attr:`project_ids` maps
        the project names to their ids.
        """
        sess = self.admin_session()
        api = _Api(sess, self.url)
        roles = {r['name']: r['id'] for r in api.list('roles')}
        for name in ('member', 'reader', 'service'):
            if name not in roles:
                roles[name] = api.create('roles', {'name': name})['id']

        projects = {}
        for name in ('admin', 'demo', SERVICE_PROJECT):
            projects[name] = api.ensure(
                'projects', {'name': name, 'domain_id': DOMAIN_ID},
                {'description': 'nova-lease-sandbox %s project' % name})
        self.project_ids = {name: p['id'] for name, p in projects.items()}
        users = {}
        accounts = [('demo', 'demo')] + [(name, SERVICE_PROJECT)
                                         for name in self.service_users]
        for name, project in accounts:
            users[name] = api.ensure(
                'users', {'name': name, 'domain_id': DOMAIN_ID},
                {'password': self.passwords[name],
                 'default_project_id': projects[project]['id']})
            # Keep the password in step with the secrets file.
            api.patch('users', users[name]['id'],
                      {'password': self.passwords[name]})
        grants = [('demo', 'demo', ('member', 'reader'))]
        grants += [(name, SERVICE_PROJECT, ('admin', 'service'))
                   for name in self.service_users]
        for user, project, names in grants:
            for role in names:
                sess.put('%s/projects/%s/users/%s/roles/%s' % (
                    self.url, projects[project]['id'], users[user]['id'],
                    roles[role]))

        urls = {'identity': self.url}
        base = 'http://%s:%d' % (HOST, self.nova_port)
        services = [('keystone', 'identity', None, self.url)]
        if self.catalog is None:
            services += [(name, stype, desc, base + path)
                         for name, stype, desc, path in CATALOG]
        else:
            services += list(self.catalog)
        for name, stype, desc, url in services:
            attrs = {'description': desc} if desc else {}
            service = api.ensure('services', {'type': stype, 'name': name},
                                 attrs, query={'type': stype})
            for interface in INTERFACES:
                api.ensure_endpoint(service['id'], interface, url)
            urls[stype] = url
        # Keystone refuses ("Invalid user token") a token issued in the same
        # second as a revocation event of its user: fernet tokens carry
        # whole seconds. The password updates and role grants above emit
        # such events for the demo and nova users, so let that second pass
        # before anyone gets a token.
        time.sleep(1.05 - time.time() % 1)
        return urls


class _Api(object):
    """Just enough of Keystone's v3 REST API."""

    def __init__(self, sess, url):
        self.sess = sess
        self.url = url

    def list(self, collection, **query):
        resp = self.sess.get('%s/%s' % (self.url, collection), params=query)
        return resp.json()[collection]

    def create(self, collection, body):
        resp = self.sess.post('%s/%s' % (self.url, collection),
                              json={collection[:-1]: body})
        return resp.json()[collection[:-1]]

    def patch(self, collection, obj_id, body):
        resp = self.sess.patch('%s/%s/%s' % (self.url, collection, obj_id),
                               json={collection[:-1]: body})
        return resp.json()[collection[:-1]]

    def ensure(self, collection, key, attrs, query=None):
        query = key if query is None else query
        for obj in self.list(collection, **query):
            if all(obj.get(k) == v for k, v in key.items()):
                return obj
        return self.create(collection, dict(key, **attrs))

    def ensure_endpoint(self, service_id, interface, url):
        found = self.list('endpoints', service_id=service_id,
                          interface=interface, region_id=REGION)
        if not found:
            return self.create('endpoints', {
                'service_id': service_id, 'interface': interface,
                'region_id': REGION, 'url': url, 'enabled': True})
        for extra in found[1:]:
            self.sess.delete('%s/endpoints/%s' % (self.url, extra['id']))
        if found[0]['url'] != url:
            return self.patch('endpoints', found[0]['id'], {'url': url})
        return found[0]
