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
"""nova_lease.compute.ComputeClient (openstacksdk) against the real Nova.

The client finds Nova through the harness Keystone's catalog, as against
a real cloud; Nova's own answers (404, 409, 403) and injected faults
(5xx) must come out as the module's exceptions.
"""

from oslo_utils import uuidutils

from nova_lease.audit import reader
from nova_lease import compute
from tests.functional import base
from tests.functional import fixtures as lease_fixtures


class ComputeClientNovaTest(base.LeaseFunctionalBase):

    def setUp(self):
        super().setUp()
        self.faults = lease_fixtures.FaultInjector(self.keystone.nova_app)
        self.keystone.nova_app = self.faults
        self.client = self._client('admin')

    def _client(self, user):
        return compute.ComputeClient(self.keystone.session(user),
                                     region_name=self.keystone.REGION)

    def test_server_reads_in_nova_shapes(self):
        server = self._boot(name='shape')
        got = self.client.get_server(server['id'])
        self.assertEqual('ACTIVE', got['status'])
        self.assertIsNone(got['OS-EXT-STS:task_state'])
        self.assertEqual(server['OS-EXT-SRV-ATTR:host'],
                         got['OS-EXT-SRV-ATTR:host'])
        self.assertIn(server['id'],
                      [s['id'] for s in self.client.list_servers()])
        self.assertEqual({}, self.client.get_server_scheduler_hints(
            server['id']))
        self.assertEqual(
            sorted(self.computes),
            sorted(h['host'] for h in self.client.list_hypervisors()))

    def test_missing_server_is_server_not_found(self):
        missing = uuidutils.generate_uuid()
        for call in (self.client.get_server,
                     self.client.get_server_scheduler_hints):
            e = self.assertRaises(compute.ServerNotFound, call, missing)
            self.assertEqual(404, e.status_code)
        e = self.assertRaises(compute.ComputeNotFound,
                              self.client.shelve_server, missing)
        self.assertEqual(404, e.status_code)
        self.assertIn('shelve server %s' % missing, str(e))
        self.assertFalse(self.client.delete_server(missing))
        self.assertRaises(compute.ServerNotFound, self.client.wait_for_server,
                          missing, ('ACTIVE',), 5)
        self.assertIsNone(self.client.wait_for_server(
            missing, ('ACTIVE',), 5, gone_ok=True))

    def test_wrong_state_is_conflict(self):
        server = self._boot(name='active')
        # Unshelving a server that is not shelved: Nova answers 409.
        e = self.assertRaises(compute.ComputeConflict,
                              self.client.unshelve_server, server['id'])
        self.assertEqual(409, e.status_code)
        self.assertIn('unshelve server %s' % server['id'], str(e))

    def test_member_is_forbidden_admin_calls(self):
        member = self._client('fake')
        e = self.assertRaises(compute.ComputeForbidden,
                              member.list_services)
        self.assertEqual(403, e.status_code)

    def test_5xx_is_unavailable(self):
        server = self._boot(name='busy')
        self.faults.fail('shelve', 'POST', r'/servers/.*/action',
                         body='"shelve"', status=503)
        e = self.assertRaises(compute.ComputeUnavailable,
                              self.client.shelve_server, server['id'])
        self.assertEqual(503, e.status_code)

    def test_actions_and_waits(self):
        server = self._boot(name='cycle')
        self.client.poll_interval = 0.1
        self.client.shelve_server(server['id'])
        got = self.client.wait_for_server(
            server['id'], ('SHELVED', 'SHELVED_OFFLOADED'), 30)
        if got['status'] == 'SHELVED':
            self.client.shelve_offload_server(server['id'])
            got = self.client.wait_for_server(server['id'],
                                              ('SHELVED_OFFLOADED',), 30)
        self.assertEqual('SHELVED_OFFLOADED', got['status'])
        e = self.assertRaises(compute.ServerStatusTimeout,
                              self.client.wait_for_server, server['id'],
                              ('ACTIVE',), 0.2)
        self.assertIn('SHELVED_OFFLOADED', str(e))
        self.client.unshelve_server(server['id'])
        self.client.wait_for_server(server['id'], ('ACTIVE',), 30)
        self.client.set_server_metadata(server['id'], {'k': 'v'})
        self.client.add_server_tag(server['id'], 't1')
        self.assertEqual(['t1'], self.client.list_server_tags(server['id']))
        self.assertTrue(self.client.delete_server_tag(server['id'], 't1'))
        self.assertFalse(self.client.delete_server_tag(server['id'], 't1'))
        self.assertEqual({'k': 'v'},
                         self.client.get_server(server['id'])['metadata'])
        self.assertTrue(self.client.delete_server(server['id']))
        self.assertIsNone(self.client.wait_for_server(server['id'], (), 30,
                                                      gone_ok=True))

    def test_per_call_microversions(self):
        server = self._boot(name='versions')
        seen = []
        real = self.faults.app

        def app(environ, start_response):
            seen.append((environ['PATH_INFO'],
                         environ.get('HTTP_OPENSTACK_API_VERSION')))
            return real(environ, start_response)

        self.faults.app = app
        self.client.get_server(server['id'])
        self.client.get_server_scheduler_hints(server['id'])
        path = '/v2.1/servers/%s' % server['id']
        self.assertEqual([(path, 'compute %s' % compute.MICROVERSION),
                          (path, 'compute %s' % compute.HINTS_MICROVERSION)],
                         [s for s in seen if s[0] == path])

    def test_services_aggregates_and_flavors(self):
        service = self.client.get_compute_service('host1')
        self.assertEqual('nova-compute', service['binary'])
        disabled = self.client.disable_service(service['id'], 'idle test')
        self.assertEqual('disabled', disabled['status'])
        self.assertEqual('idle test', disabled['disabled_reason'])
        self.assertEqual('enabled',
                         self.client.enable_service(service['id'])['status'])
        agg = self.client.create_aggregate('sdk-agg')
        agg = self.client.add_aggregate_host(agg['id'], 'host1')
        self.assertEqual(['host1'], agg['hosts'])
        agg = self.client.set_aggregate_metadata(agg['id'], {'a': 'b'})
        self.assertEqual('b', agg['metadata']['a'])
        self.assertIn('sdk-agg',
                      [a['name'] for a in self.client.list_aggregates()])
        self.client.remove_aggregate_host(agg['id'], 'host1')
        self.assertEqual([], self.client.get_aggregate(agg['id'])['hosts'])
        self.assertTrue(self.client.delete_aggregate(agg['id']))
        self.assertFalse(self.client.delete_aggregate(agg['id']))
        flavor = self.admin_api.post_flavor({'flavor': {
            'name': 'private', 'ram': 512, 'vcpus': 1, 'disk': 1,
            'os-flavor-access:is_public': False}})
        self.client.add_flavor_access(flavor['id'], 'p1')
        self.client.add_flavor_access(flavor['id'], 'p1')   # 409: fine
        self.assertEqual(['p1'], self.client.list_flavor_access(flavor['id']))
        listed = {f['id']: f for f in self.client.list_flavors()}
        self.assertFalse(listed[flavor['id']]['is_public'])
        self.client.remove_flavor_access(flavor['id'], 'p1')
        self.client.remove_flavor_access(flavor['id'], 'p1')  # 404: fine
        self.assertTrue(self.client.delete_flavor(flavor['id']))
        self.assertFalse(self.client.delete_flavor(flavor['id']))


class PlacementClientTest(base.LeaseFunctionalBase):

    def test_providers_through_the_catalog(self):
        client = reader.PlacementClient(self.keystone.session('admin'),
                                        region_name=self.keystone.REGION)
        providers = client.providers()
        self.assertEqual(sorted(self.computes), sorted(providers))
