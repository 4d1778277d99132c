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
"""Leftover boot hints do not rebuild a lease (issue 11, item 3).

Nova keeps a server's scheduler hints in its RequestSpec and hands them
to the scheduler again at every unshelve, resize, migration and
evacuation. A server counts as leased only through a live link in the
side database: once its lease has ended, or when it never had one
(``default_lease`` switched on later), it is scheduled as unleased work,
which runs forever and so never gets capacity that a later promise needs.

The promises are recorded in the side database directly (allocations on
chosen hosts), so that the tests do not depend on where admission would
put them.
"""

import datetime

from nova.compute import instance_actions
from oslo_serialization import jsonutils

from nova_lease.db import api as db_api
from tests.functional.test_instance_lease import InstanceLeaseTest

HOUR = datetime.timedelta(hours=1)


class _Base(InstanceLeaseTest):

    COMPUTES = {'host1': (4, 8192, 100), 'host2': (4, 8192, 100)}
    LISTEN = False

    # A host of N vcpus holds N vcpus (Nova's default CPU allocation
    # ratio is 4.0).
    ALLOCATION_RATIO = 1.0

    def setUp(self):
        super().setUp()
        self.T = self.clock.now
        self._create_flavor(id='half', name='half', vcpu=2, memory_mb=512,
                            disk=1, ephemeral=0)
        self._create_flavor(id='big', name='big', vcpu=4, memory_mb=512,
                            disk=1, ephemeral=0)

    def _ended_lease_server(self):
        """A server whose 30-minute lease ended with on_end=shelve.

        The lease is TERMINATED; the server is SHELVED_OFFLOADED and keeps
        its hints (``lease_params`` with a relative duration).
        """
        hints = {'reserved': 'True', 'lease_params': jsonutils.dumps(
            {'name': 'short', 'duration': '30m', 'on_end': 'shelve'})}
        server = self._boot(hints=hints, name='short', flavor='half')
        [lease] = db_api.lease_list(self.db)
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease()['status'])
        self.clock.advance_to(lease['end_date'])
        self.engine.process_due()
        self.assertEqual('TERMINATED', self._lease()['status'])
        server = self._wait_for_server_parameter(
            server, {'status': 'SHELVED_OFFLOADED',
                     'OS-EXT-STS:task_state': None})
        return server

    def _host(self, server):
        return self.admin_api.get_server(server['id'])[
            'OS-EXT-SRV-ATTR:host']


class LeftoverHintsTest(_Base):

    def test_unshelve_after_the_end_is_unleased(self):
        server = self._ended_lease_server()
        now = self.clock.now
        # Both hosts are fully promised from in 1.5 hours: only work that
        # ends before then may use them.
        for host in self.COMPUTES:
            self.promise(host, now + 1.5 * HOUR, now + 4 * HOUR, 4)
        self.api.post_server_action(server['id'], {'unshelve': None})
        self._wait_for_action_fail_completion(
            server, instance_actions.UNSHELVE, 'schedule_instances')
        server = self._wait_for_server_parameter(
            server, {'status': 'SHELVED_OFFLOADED',
                     'OS-EXT-STS:task_state': None})
        self.assertIsNone(server['OS-EXT-SRV-ATTR:host'])

    def _running_after_the_end(self):
        """The ended lease's server, unshelved again (unleased), and the
        other host: the server's host H keeps room for it forever next to
        a promise of 2 vcpus; the other host is fully promised from in
        1.5 hours.
        """
        server = self._ended_lease_server()
        server = self._unshelve_server(server)
        host = self._host(server)
        other = (set(self.COMPUTES) - {host}).pop()
        now = self.clock.now
        self.promise(host, now + 1.5 * HOUR, now + 4 * HOUR, 2)
        self.promise(other, now + 1.5 * HOUR, now + 4 * HOUR, 4)
        return server, host

    def test_cold_migration_after_the_end_is_unleased(self):
        server, host = self._running_after_the_end()
        self.move_fails(server, instance_actions.MIGRATE, {'migrate': None})

    def test_resize_after_the_end_is_unleased(self):
        self.flags(allow_resize_to_same_host=False)
        server, host = self._running_after_the_end()
        server = self.move_fails(server, instance_actions.RESIZE,
                                 {'resize': {'flavorRef': 'big'}},
                                 api=self.api)
        self.assertEqual('half', server['flavor']['original_name'])


class DefaultLeaseLaterTest(_Base):

    def test_server_booted_before_default_lease_moves_unleased(self):
        # Booted without a lease; default_lease is switched on afterwards.
        server = self._boot(name='old', flavor='half')
        self.assertEqual([], db_api.lease_list(self.db))
        host = self._host(server)
        other = (set(self.COMPUTES) - {host}).pop()
        now = self.clock.now
        self.promise(other, now + 1.5 * HOUR, now + 4 * HOUR, 4)
        self.flags(default_lease=True, group='nova_lease')
        self.flags(default_lease_duration='1h', group='nova_lease_api')
        # Moved, it stays what it is: unleased, so it does not fit the
        # other host, whose capacity is promised from in 1.5 hours.
        self.move_fails(server, instance_actions.MIGRATE, {'migrate': None})
        self.assertEqual([], db_api.lease_list(
            self.db, project_id=self.api.project_id))
