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
"""Allocations go with their lease, whatever its type and state.

A future instance lease holds an allocation (the capacity admission
promised it on a host). When the lease ends early -- deleted through the
lease API before or after its start, or all its servers deleted -- the
part of the allocation after "now" must go too: otherwise the host looks
booked to host allocation (``POST /os-hosts`` and host leases), which
counts every allocation on a host, and a later host lease of that idle
host is refused with "not enough free hosts".

The compute hook listens to Nova's real notifications and the engine runs
the virtual:instance plugin (tests/functional/test_instance_lease.py).
"""

import datetime

from nova_lease.db import api as db_api
from nova_lease.plugins.instance import leases
from tests.functional import test_instance_lease
from tests.functional import test_lease_api

PREFIX = test_lease_api.PREFIX


class LeaseAllocationsTest(test_lease_api.LeaseAPIMixin,
                           test_instance_lease.InstanceLeaseTest):

    # One host: admission has no choice.
    COMPUTES = {'host1': (8, 16384, 200)}

    def _future_lease(self, hours=2, length=2):
        start = self.clock.now + datetime.timedelta(hours=hours)
        end = start + datetime.timedelta(hours=length)
        self._lease_boot(name='future', wait=None, start=self._date(start),
                         end=self._date(end))
        lease = self._lease()
        [allocation] = db_api.allocation_list(self.db, lease_id=lease['id'])
        self.assertEqual(('host1', start, end),
                         (allocation['host'], allocation['start_date'],
                          allocation['end_date']))
        # Its server exists, shelved-offloaded: it holds no host now.
        self.assertEqual(
            ['SHELVED_OFFLOADED'], [s['status'] for s in self.api.get_servers(
                detail=True)])
        return lease, start, end

    def _no_servers(self):
        self._wait_for(lambda: not self.admin_api.get_servers(
            search_opts={'all_tenants': 1}), 'every server gone')

    def _host_lease_over(self, start, end):
        body = self._lease_body(start.strftime('%Y-%m-%d %H:%M'),
                                end.strftime('%Y-%m-%d %H:%M'),
                                name='whole-host')
        return self._create(body)

    def test_delete_pending_instance_lease_frees_its_host(self):
        lease, start, end = self._future_lease()
        self.api.api_delete(PREFIX + '/leases/%s' % lease['id'],
                            check_response_status=[204])
        # Gone with the delete, before the engine ends the lease: the
        # lease for the lease API (as Blazar removes a lease that never
        # started), its allocation for the calendar.
        self.api.api_get(PREFIX + '/leases/%s' % lease['id'],
                         check_response_status=[404])
        self.assertEqual([], db_api.allocation_list(self.db,
                                                    lease_id=lease['id']))
        self.engine.process_due()
        self._no_servers()
        self.assertEqual([], db_api.lease_list(self.db))
        # The idle host can be registered and leased whole over the
        # window the instance lease had.
        host = self._register('host1')
        leased = self._host_lease_over(start, end)
        allocations = self.admin_api.api_get(
            PREFIX + '/os-hosts/allocations').body['allocations']
        self.assertEqual(
            [{'resource_id': host['id'], 'reservations': [{
                'id': leased['reservations'][0]['id'],
                'lease_id': leased['id'],
                'start_date': leased['start_date'],
                'end_date': leased['end_date']}]}], allocations)

    def test_delete_pending_lease_of_a_shelved_server(self):
        # A pending VM lease that holds its (shelved) server: deleting the
        # lease removes it at once; the engine deletes the server, then
        # its rows.
        server = self._boot(name='held', wait='ACTIVE')
        self.admin_api.post_server_action(server['id'], {'shelve': None})
        self._wait_for(lambda: self._status(server['id']) in (
            'SHELVED', 'SHELVED_OFFLOADED'), 'server shelved')
        self._shelved_server_leases([server['id']])
        lease = self._lease()
        url = PREFIX + '/leases/%s' % lease['id']
        self.api.api_delete(url, check_response_status=[204])
        self.api.api_get(url, check_response_status=[404])
        self.assertEqual([], self.api.api_get(PREFIX + '/leases').body[
            'leases'])
        self.engine.process_due()
        self._gone(server['id'])
        self.assertEqual([], db_api.lease_list(self.db))

    def test_delete_started_instance_lease_cuts_its_allocation(self):
        lease, start, end = self._future_lease()
        self.clock.advance_to(start)
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease()['status'])
        self.clock.advance(minutes=30)
        now = self.clock.now
        self.api.api_delete(PREFIX + '/leases/%s' % lease['id'],
                            check_response_status=[204])
        [allocation] = db_api.allocation_list(self.db, lease_id=lease['id'])
        self.assertEqual((start, now), (allocation['start_date'],
                                        allocation['end_date']))
        self.engine.process_due()
        self._no_servers()
        self.assertEqual('TERMINATED', self._lease()['status'])
        self._register('host1')
        self._host_lease_over(now, end)

    def test_server_deleted_before_the_start_frees_its_host(self):
        lease, start, end = self._future_lease()
        # Before its start the server is shelved-offloaded: deleting it
        # ends the lease early, and its promise goes.
        [reservation] = lease['reservations']
        self.api.api_delete('/servers/%s' % reservation['resource_id'],
                            check_response_status=[204])
        self._no_servers()
        self._wait_for(lambda: self._lease()['status'] == 'TERMINATED',
                       'lease ended early')
        self.assertEqual([], db_api.allocation_list(self.db,
                                                    lease_id=lease['id']))
        self._register('host1')
        self._host_lease_over(start, end)

    def test_allocations_name_the_lease_of_any_reservation(self):
        # An instance lease's allocation on a registered host (left by a
        # version that admitted instance leases there): the allocation
        # list names its lease, as for host leases.
        host = self._register('host1')
        start = self.clock.now + datetime.timedelta(hours=1)
        end = start + datetime.timedelta(hours=1)
        lease = db_api.lease_create(self.db, {
            'name': 'old', 'project_id': self.api.project_id,
            'user_id': 'fake', 'start_date': start, 'end_date': end,
            'status': 'PENDING'}, reservations=[{
                'resource_type': leases.RESOURCE_TYPE, 'status': 'pending',
                'properties': {'vcpus': 1, 'memory_mb': 512, 'disk_gb': 1},
                'allocations': [{'host': 'host1', 'start_date': start,
                                 'end_date': end, 'vcpus': 1,
                                 'memory_mb': 512, 'disk_gb': 1}]}])
        allocations = self.admin_api.api_get(
            PREFIX + '/os-hosts/allocations').body['allocations']
        self.assertEqual(host['id'], allocations[0]['resource_id'])
        self.assertEqual([lease['id']], [
            r['lease_id'] for r in allocations[0]['reservations']])
