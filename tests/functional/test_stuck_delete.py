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
"""The end of a lease whose server Nova left in task state ``deleting``.

Found by the fault drill (benchmarks/faults.py --quick --overlap): a
server DELETE whose nova-api worker died after setting the task state to
``deleting`` and before its cast reached RabbitMQ leaves the server
deleting for good, and Nova ignores every later delete of it ("Instance
is already in deleting state, ignoring this request"). The engine's end
then waits for a deletion that never comes (plugin_call_timeout per
attempt) and the lease goes to ERROR; meanwhile the starts of later
leases on the same hosts wait for that end. Not fixed yet: the test
states what should happen, as an expected failure.
"""

from nova import context as nova_context
from nova import objects

from tests.functional import test_instance_lease


class StuckDeleteTest(test_instance_lease.InstanceLeaseTest):

    LISTEN = False

    def _engine(self, **overrides):
        overrides.setdefault('plugin_call_timeout', 3)
        return super()._engine(**overrides)

    def _end_with_stuck_delete(self):
        server = self._lease_boot(name='stuck', duration='2h')
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease()['status'])
        # The lost cast: the task state is set, nothing reaches the compute.
        ctx = nova_context.get_admin_context()
        instance = objects.Instance.get_by_uuid(ctx, server['id'])
        instance.task_state = 'deleting'
        instance.save()
        self.clock.advance(hours=2)
        self.engine.process_due()
        for _ in range(3):            # the retries (retry_interval 1 s)
            self.clock.advance(minutes=1)
            self.engine.process_due()
        return server

    def test_lease_ends_although_nova_lost_a_delete(self):
        server = self._end_with_stuck_delete()
        self.expectFailure(
            'a server stuck in task state deleting is never deleted: the '
            'lease ends in ERROR',
            self.assertEqual, 'TERMINATED', self._lease()['status'])
        self.assertEqual('ERROR', self._lease()['status'])
        self.assertNotEqual('GONE', self._status(server['id']))
