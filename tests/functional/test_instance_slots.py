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
"""The slots of Blazar's instance reservations, on real Nova.

A reservation of ``amount`` instances holds that many servers with its
flavor, never more: not with one multi-create request, not with boots
racing for the last slot (SlotCountTest). A server that holds a slot
keeps it when it moves: unshelve, cold and live migration, evacuation;
a resize to another flavor gives it up once confirmed (SlotMoveTest).
"""

import threading

from nova.tests.functional.api import client as api_client

from tests.functional import base
from tests.functional import test_flavor_reservation

PREFIX = test_flavor_reservation.PREFIX
SMALL_FLAVOR = '2'      # m1.small: 1 vCPU, 2048 MB, 20 GB


class _SlotTestBase(test_flavor_reservation.FlavorLeaseMixin,
                    base.LeaseFunctionalBase):

    def _started(self, amount, affinity=None, **sizes):
        """A lease of ``amount`` slots, started now; its reservation."""
        lease = self._create(self._lease_body(
            'now', self._at(hours=1), reservations=[self._instance_res(
                amount, affinity=affinity, **sizes)]))
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        return lease['reservations'][0]

    def _post(self, res, name, min_count=None, max_count=None,
              group=True):
        """POST /servers with the reservation's flavor: (status, body)."""
        server = self._build_server(
            name=name, image_uuid=self.image_id, flavor_id=res['id'],
            networks='none')
        if min_count is not None:
            server['min_count'] = min_count
        if max_count is not None:
            server['max_count'] = max_count
        body = {'server': server}
        if group and res.get('server_group_id'):
            body['os:scheduler_hints'] = {'group': res['server_group_id']}
        resp = self.api.api_post('/servers', body,
                                 check_response_status=[202, 409])
        return resp.status, resp.body

    def _servers_of(self, res):
        """Every server with the reservation's flavor, settled (any
        project), by name.
        """
        servers = self.admin_api.get_servers(search_opts={
            'all_tenants': 1, 'flavor': res['id']})
        return {s['name']: self._settled(s) for s in servers}

    def _settled(self, server):
        for _ in range(300):
            server = self.admin_api.get_server(server['id'])
            if server['status'] not in ('BUILD',):
                return server
            self._sleep()
        self.fail('server %s still building' % server['id'])

    @staticmethod
    def _sleep():
        threading.Event().wait(0.1)

    def _statuses(self, res):
        return sorted(s['status'] for s in self._servers_of(res).values())


class SlotMoveTest(_SlotTestBase):
    """A server that holds a slot keeps it when it moves (finding X3)."""

    def test_unshelve_the_only_server_of_a_full_reservation(self):
        res = self._started(1)
        server = self._boot_reserved(res, 'only')
        host = server['OS-EXT-SRV-ATTR:host']
        server = self._shelve_server(server)     # offloaded at once
        self.assertIsNone(server['OS-EXT-SRV-ATTR:host'])
        # The shelved server holds the slot: no other boot.
        self._assert_no_valid_host(self._boot_reserved(res, 'other',
                                                       wait=None))
        server = self._unshelve_server(server)
        self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])

    def _two_slots_one_shelved(self):
        """Two slots (one per host), both held: one server running, the
        other shelved (offloaded). Returns (reservation, running server).
        """
        res = self._started(2, affinity=False)
        # (Without the server group: Nova's anti-affinity filter would
        # keep a server off a host another member just left, which the
        # scheduler learns late.)
        running = self._boot(name='running', flavor=res['id'])
        shelved = self._boot(name='shelved', flavor=res['id'])
        shelved = self._shelve_server(shelved)
        self._assert_no_valid_host(self._boot_reserved(res, 'third',
                                                       wait=None))
        return res, running, shelved

    def test_cold_and_live_migration_keep_the_slot(self):
        res, server, shelved = self._two_slots_one_shelved()
        first = server['OS-EXT-SRV-ATTR:host']
        other = ({'host1', 'host2'} - {first}).pop()
        # Into the slot the shelved server left free, and back.
        server = self._migrate_server(server, api=self.admin_api)
        self.assertEqual(other, server['OS-EXT-SRV-ATTR:host'])
        server = self._confirm_resize(server)
        server = self._live_migrate(server, api=self.admin_api)
        self.assertEqual(first, self._host(server))
        # Both servers on their slots: a move has nowhere to go (the
        # other host's slot is the other server's).
        shelved = self._unshelve_server(shelved)
        self.assertEqual(other, shelved['OS-EXT-SRV-ATTR:host'])
        error = self.assertRaises(
            api_client.OpenStackApiException,
            self.admin_api.post_server_action, server['id'],
            {'migrate': None})
        self.assertIn('NoValidHost', str(error))
        self.assertEqual(first, self._host(server))

    def test_evacuation_keeps_the_slot(self):
        res, server, _shelved = self._two_slots_one_shelved()
        source = server['OS-EXT-SRV-ATTR:host']
        self.computes[source].stop()
        service = self.admin_api.get_services(
            host=source, binary='nova-compute')[0]
        self.admin_api.put_service_force_down(service['id'], True)
        # (>= 2.95 an evacuated server is stopped.)
        server = self._evacuate_server(server, expected_state='SHUTOFF')
        self.assertEqual(({'host1', 'host2'} - {source}).pop(),
                         server['OS-EXT-SRV-ATTR:host'])
