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
"""What a reservation update of a started lease tells Nova (the booking
pipeline's after-commit step), on the in-process Nova: the hosts that
join it are in its aggregate, out of the free pool, and usable at once,
also when the engine's idle-host action had disabled them (I3).
"""

import datetime

from tests.functional import base
from tests.functional import test_host_reservation
from tests.functional import test_lease_api

PREFIX = test_lease_api.PREFIX


class UpdateOfAStartedLeaseTest(test_host_reservation.HostLeaseMixin,
                                base.LeaseFunctionalBase):

    CLOCK_START = datetime.datetime(2030, 1, 1, 12, 0, 0)
    COMPUTES = {'host1': (4, 8192, 100), 'host2': (4, 8192, 100)}

    def setUp(self):
        super().setUp()
        self.engine, self.plugin = self._engine(
            idle_host_action='disable', idle_host_min_hours=1,
            idle_host_wake_minutes=30)

    def _service(self, host):
        [service] = self.admin_api.api_get(
            '/os-services?binary=nova-compute&host=%s' % host).body[
            'services']
        return service['status'], service['disabled_reason']

    def test_a_host_added_to_an_active_lease_is_woken(self):
        self._register('host1')
        self._register('host2')
        lease = self._create(self._lease_body(
            'now', self._at(hours=3), reservations=[self._host_res(1)]))
        [taken] = self._hosts_of(lease)
        other = ({'host1', 'host2'} - {taken}).pop()
        self.assertEqual(1, self.engine.process_due())
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        # The other host is idle for good: the idle action disables it.
        self.assertEqual({other: 'disabled'},
                         self.engine.idle_hosts.run_pass())
        self.assertEqual('disabled', self._service(other)[0])

        rid = lease['reservations'][0]['id']
        self.api.api_put(PREFIX + '/leases/%s' % lease['id'], {
            'reservations': [{'id': rid, 'min': 2, 'max': 2}]})
        self.assertEqual(sorted(['host1', 'host2']),
                         self._hosts_of(self._lease(lease['id'])))
        # At once, before any engine pass: in the lease's aggregate, out
        # of the free pool, enabled, and the owner's boot lands there.
        self.assertEqual(('enabled', None), self._service(other))
        self.assertEqual(sorted(['host1', 'host2']),
                         sorted(self._aggregate(rid)['hosts']))
        self.assertEqual([], self._aggregate('freepool')['hosts'])
        servers = [self._boot_hinted(rid, name='on-%d' % i)
                   for i in range(2)]
        self.assertIn(other, {s['OS-EXT-SRV-ATTR:host'] for s in servers})
