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
"""The engine's action gate (nova_lease.gate): no engine module can change
Nova but through it, and what it checks and journals.
"""

import ast
import datetime
import glob
import inspect
import os

from oslo_config import cfg
from oslo_utils import fixture as utils_fixture
import testtools

from nova_lease import compute
from nova_lease import conf as lease_conf
from nova_lease.db import api as db_api
from nova_lease.db import migration
from nova_lease import gate
from nova_lease.plugins import base as plugin_base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
T0 = datetime.datetime(2030, 1, 1, 12, 0)

#: The engine: every module that acts on Nova for a lease or a host.
ENGINE_MODULES = sorted(
    glob.glob(os.path.join(ROOT, 'nova_lease', 'periodic', '*.py')) +
    glob.glob(os.path.join(ROOT, 'nova_lease', 'plugins', '*.py')) +
    glob.glob(os.path.join(ROOT, 'nova_lease', 'plugins', '*', '*.py')) +
    [os.path.join(ROOT, 'nova_lease', 'hunt.py')])

#: A call of a mutating method is allowed on these receivers only: a
#: gate binding (``gate.x(...)``, ``self._gate(...).x(...)``,
#: ``client.idle().x(...)``).
GATE_NAMES = ('gate',)
GATE_CALLS = ('_gate', 'lease', 'idle')


def _receiver_ok(node):
    if isinstance(node, ast.Name):
        return node.id in GATE_NAMES
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in GATE_CALLS
    return False


class NoBypassTest(testtools.TestCase):

    def test_every_client_method_is_a_read_or_gated(self):
        public = {name for name, _ in inspect.getmembers(
            compute.ComputeClient) if not name.startswith('_')}
        public -= {'from_conf'}
        unclassified = public - gate.READS - set(gate.MUTATING)
        self.assertEqual(set(), unclassified,
                         'classify each new ComputeClient method in '
                         'nova_lease.gate (READS or MUTATING)')
        self.assertEqual(set(), gate.READS & set(gate.MUTATING))

    def test_no_engine_module_calls_a_mutating_method_directly(self):
        self.assertIn(os.path.join(ROOT, 'nova_lease', 'plugins', 'host',
                                   'plugin.py'), ENGINE_MODULES)
        bad = []
        for path in ENGINE_MODULES:
            with open(path) as f:
                tree = ast.parse(f.read(), path)
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and
                        isinstance(node.func, ast.Attribute) and
                        node.func.attr in gate.MUTATING and
                        not _receiver_ok(node.func.value)):
                    bad.append('%s:%d %s' % (os.path.relpath(path, ROOT),
                                             node.lineno, node.func.attr))
        self.assertEqual([], bad)

    def test_the_gate_has_no_mutating_method(self):
        g = gate.Gate(object(), None)
        for name in gate.MUTATING:
            self.assertRaises(AttributeError, getattr, g, name)

    def test_plugins_hold_a_gate(self):
        conf = cfg.ConfigOpts()
        lease_conf.register_opts(conf)
        conf([])
        raw = object()

        class Plugin(plugin_base.ComputePlugin):
            on_start = on_end = None

        plugin = Plugin(conf, compute_client=raw)
        self.assertIsInstance(plugin.compute, gate.Gate)
        self.assertRaises(AttributeError, getattr, plugin.compute,
                          'delete_server')


class FakeClient(object):

    def __init__(self, servers):
        self.servers = servers
        self.calls = []

    def get_server(self, server_id):
        try:
            return dict(self.servers[server_id])
        except KeyError:
            raise compute.ServerNotFound(server_id=server_id)

    def __getattr__(self, name):
        if name not in gate.MUTATING:
            raise AttributeError(name)

        def call(*args):
            self.calls.append((name,) + args)
            return True
        return call


class GateTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(utils_fixture.TimeFixture(T0))
        self.db = db_api.Database('sqlite://')
        self.addCleanup(self.db.dispose)
        migration.upgrade(self.db)
        self.lease = db_api.lease_create(self.db, {
            'name': 'l', 'project_id': 'p1', 'start_date': T0,
            'end_date': T0 + datetime.timedelta(hours=1),
            'status': 'ACTIVE'})
        self.res = db_api.reservation_create(self.db, {
            'lease_id': self.lease['id'], 'resource_type': 'noop',
            'resource_id': 'mine', 'status': 'active'})
        self.client = FakeClient({
            'mine': {'id': 'mine', 'tenant_id': 'p1'},
            'theirs': {'id': 'theirs', 'tenant_id': 'p2',
                       'OS-EXT-SRV-ATTR:host': 'h1'},
            'bystander': {'id': 'bystander', 'tenant_id': 'p2',
                          'OS-EXT-SRV-ATTR:host': 'h1'},
            'locked': {'id': 'locked', 'tenant_id': 'p2', 'locked': True,
                       'OS-EXT-SRV-ATTR:host': 'h1'}})
        self.gate = gate.Gate(self.client, self.db)

    def _bound(self, hosts=('h1',)):
        return self.gate.lease(self.lease, self.res,
                               hosts_of=lambda r: set(hosts))

    def _journal(self):
        return [(r['target_id'], r['action'], r['outcome'])
                for r in db_api.action_list(self.db)]

    def test_own_server_done_and_journaled(self):
        self.assertTrue(self._bound().delete_server('mine', why='end'))
        self.assertEqual([('delete_server', 'mine')], self.client.calls)
        [row] = db_api.action_list(self.db)
        self.assertEqual(('mine', 'delete', 'done'),
                         (row['target_id'], row['action'], row['outcome']))
        self.assertEqual(self.lease['id'], row['lease_id'])
        self.assertEqual('p1', row['target_project_id'])
        self.assertEqual('end', row['reason'])

    def test_another_projects_server_is_refused(self):
        self.assertRaises(gate.Refused, self._bound().delete_server,
                          'theirs')
        self.assertEqual([], self.client.calls)
        self.assertEqual([('theirs', 'delete', 'refused')],
                         self._journal())

    def test_metadata_does_not_make_a_server_the_leases(self):
        server = dict(self.client.servers['theirs'],
                      metadata={'lease_id': self.lease['id']})
        self.assertRaises(gate.Refused, self._bound().delete_server,
                          'theirs', server=server)

    def test_migration_of_a_bystander_on_the_reservations_host(self):
        self._bound().live_migrate_server('bystander', why='hunt')
        self.assertEqual([('live_migrate_server', 'bystander')],
                         self.client.calls)
        # Not on one of its hosts: refused.
        self.assertRaises(gate.Refused, self._bound(hosts=('h2',))
                          .live_migrate_server, 'bystander')
        # A leased server is never moved.
        self.assertRaises(gate.Refused, self._bound().live_migrate_server,
                          'mine')

    def test_locked_server_is_never_moved(self):
        self.assertRaises(gate.Refused, self._bound().migrate_server,
                          'locked')
        self.assertEqual([], self.client.calls)
        self.assertIn('locked by its owner',
                      db_api.action_list(self.db)[0]['reason'])

    def test_confirm_only_what_the_lease_migrated(self):
        self.assertRaises(gate.Refused, self._bound().confirm_migration,
                          'bystander')
        self._bound().migrate_server('bystander')
        self._bound().confirm_migration('bystander')
        self.assertEqual([('migrate_server', 'bystander'),
                          ('confirm_migration', 'bystander')],
                         self.client.calls)

    def test_ended_or_deleted_lease_gets_nothing_more(self):
        db_api.lease_update(self.db, self.lease['id'], {'end_date': T0})
        error = self.assertRaises(gate.Refused,
                                  self._bound().live_migrate_server,
                                  'bystander')
        self.assertTrue(error.lease_gone)
        self.assertRaises(gate.Refused, self._bound().unshelve_server,
                          'mine')
        # What it holds is still taken back.
        self._bound().delete_server('mine')
        self.assertEqual([('delete_server', 'mine')], self.client.calls)

    def test_failed_call_is_journaled_failed(self):
        def boom(*args):
            raise compute.ComputeConflict(reason='busy')
        self.client.shelve_server = boom
        self.assertRaises(compute.ComputeConflict,
                          self._bound().shelve_server, 'mine')
        self.assertEqual([('mine', 'shelve', 'failed')], self._journal())

    def test_idle_pass_never_disables_a_held_host(self):
        db_api.allocation_create(self.db, {
            'reservation_id': self.res['id'], 'host': 'h1',
            'start_date': T0, 'end_date': T0 + datetime.timedelta(hours=1)})
        idle = self.gate.idle()
        self.assertRaises(gate.Refused, idle.disable_service, 'svc-1',
                          'idle', service={'id': 'svc-1', 'host': 'h1'})
        idle.disable_service('svc-2', 'idle',
                             service={'id': 'svc-2', 'host': 'h2'})
        self.assertEqual([('disable_service', 'svc-2', 'idle')],
                         self.client.calls)
        self.assertEqual([('svc-1', 'disable', 'refused'),
                          ('svc-2', 'disable', 'done')], self._journal())
