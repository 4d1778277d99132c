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
then waited for a deletion that never came (plugin_call_timeout per
attempt) and the lease went to ERROR; meanwhile the starts of later
leases on the same hosts waited for that end. Now a server ``deleting``
for longer than ``[nova_lease_engine] lost_delete_timeout`` has its state
reset (journaled) and is deleted again; a delete under way is left alone.
"""

import datetime

from nova import context as nova_context
from nova import objects

from nova_lease.db import api as db_api
from tests.functional import test_instance_lease


class StuckDeleteTest(test_instance_lease.InstanceLeaseTest):

    LISTEN = False

    def _engine(self, **overrides):
        overrides.setdefault('plugin_call_timeout', 3)
        return super()._engine(**overrides)

    def _end_with_stuck_delete(self, deleting_for):
        """A 2-hour lease whose server Nova shows ``deleting`` since
        ``deleting_for`` (a timedelta) when the lease ends.
        """
        server = self._lease_boot(name='stuck', duration='2h')
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease()['status'])
        self.clock.advance(
            seconds=(datetime.timedelta(hours=2) - deleting_for)
            .total_seconds())
        # The lost cast: the task state is set, nothing reaches the compute.
        ctx = nova_context.get_admin_context()
        instance = objects.Instance.get_by_uuid(ctx, server['id'])
        instance.task_state = 'deleting'
        instance.save()
        self.clock.advance(seconds=deleting_for.total_seconds())
        self.engine.process_due()
        for _ in range(3):            # the retries (retry_interval 1 s)
            self.clock.advance(minutes=1)
            self.engine.process_due()
        return server

    def _actions(self):
        return [(a['action'], a['outcome']) for a in db_api.action_list(
            self.db, lease_id=self._lease()['id'])]

    def test_lease_ends_although_nova_lost_a_delete(self):
        # Deleting for an hour, lost_delete_timeout 15 minutes.
        server = self._end_with_stuck_delete(datetime.timedelta(hours=1))
        self.assertEqual('TERMINATED', self._lease()['status'])
        self.assertEqual('GONE', self._status(server['id']))
        self.assertIn(('reset_state', 'done'), self._actions())

    def test_a_delete_under_way_is_left_alone(self):
        # Deleting for 5 minutes: a slow delete, not yet a lost one. The
        # end waits for it (and, this one never ending, fails).
        server = self._end_with_stuck_delete(datetime.timedelta(minutes=5))
        self.assertNotEqual('TERMINATED', self._lease()['status'])
        self.assertNotEqual('GONE', self._status(server['id']))
        self.assertNotIn('reset_state', [a for a, _ in self._actions()])
