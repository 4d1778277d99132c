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
"""Admission control of future instance leases on the in-process Nova.

Leased boots go through the REST API and the nova_lease paste filter;
hosts are registered and leased through the lease API and started by
the engine with the physical:host plugin; what admission promised is
read back from the side database.
"""

from nova_lease.db import api as db_api
from tests.functional import test_host_reservation
from tests.functional import test_scheduling

HOUR = test_scheduling.HOUR


class _AdmissionBase(test_host_reservation.HostLeaseMixin,
                     test_scheduling._Base):

    def _future_boot(self, flavor, start, end, name='future'):
        """A leased boot for [start, end): (HTTP status, JSON body)."""
        body = {'server': self._build_server(
            name=name, image_uuid=self.image_id, flavor_id=flavor,
            networks='none')}
        body['os:scheduler_hints'] = self._hints(end, start)
        resp = self.api.api_post('/servers', body,
                                 check_response_status=[202, 400, 403,
                                                        409])
        return resp.status, resp.body

    def _promised_hosts(self):
        return sorted(a['host'] for a in db_api.allocation_list(self.db)
                      if not a['whole_host'])

    def _host_lease_now(self, hours=6):
        """A started host lease on the (one) registered host."""
        lease = self._create(self._lease_body('now', self._at(hours=hours)))
        self.assertEqual(1, self.engine.process_due())
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        return lease


class TestRegisteredHosts(_AdmissionBase):
    """Issue 11 item 4 and issue 12 item 8: instance admission never
    promises a registered host, and says so when only those are left.
    """

    COMPUTES = {'host1': (8, 16384, 200), 'host2': (2, 4096, 100)}

    def setUp(self):
        super().setUp()
        self._create_flavor(id='four', name='four', vcpu=4,
                            memory_mb=1024, disk=1, ephemeral=0)
        self._create_flavor(id='two', name='two', vcpu=2, memory_mb=1024,
                            disk=1, ephemeral=0)

    def test_host_under_host_lease_is_never_promised(self):
        # host1 is registered and held by an active host lease until
        # T+2h: it is in the reservation's aggregate, not in the free
        # pool, and goes back to the free pool when that lease ends.
        self._register('host1')
        self._host_lease_now(hours=2)
        self.assertEqual([], self._aggregate('freepool')['hosts'])
        T = self.clock.now

        # 4 vcpus from T+3h (after the host lease): only host1 is big
        # enough, and host1 is not for instances: 409, nothing promised.
        code, body = self._future_boot('four', T + 3 * HOUR, T + 5 * HOUR,
                                       name='big')
        self.assertEqual(409, code, body)
        self.assertIn('host1', body['conflictingRequest']['message'])
        self.assertEqual([], self._promised_hosts())

        # 2 vcpus fit host2 (and host1): promised on host2.
        code, body = self._future_boot('two', T + 3 * HOUR, T + 5 * HOUR,
                                       name='small')
        self.assertEqual(202, code, body)
        self.assertEqual(['host2'], self._promised_hosts())

    def test_all_hosts_registered_409_says_why(self):
        self._register('host1')
        self._register('host2')
        T = self.clock.now
        code, body = self._future_boot('two', T + HOUR, T + 3 * HOUR)
        self.assertEqual(409, code, body)
        message = body['conflictingRequest']['message']
        self.assertIn('registered for host reservations', message)
        self.assertIn('host1, host2', message)
        self.assertEqual([], self._promised_hosts())
        self.assertEqual(0, self._lease_count())
