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
"""The slot rules of instance reservations (nova_lease.plugins.flavor.
slots): who holds a slot, and where a server may go.
"""

import testtools

from nova_lease.plugins.flavor import slots

SLOTS = {'host1': 1, 'host2': 2}


def on(uuid, *hosts):
    """A server in its cell, on ``hosts`` (none: shelved, ERROR)."""
    return slots.Holder(uuid, frozenset(hosts), False, None)


def building(uuid, order, *hosts):
    """A build request; ``hosts``: where the scheduler placed it."""
    return slots.Holder(uuid, frozenset(hosts), True, order)


class HostsForTest(testtools.TestCase):

    def allowed(self, holders, uuid):
        return slots.hosts_for(SLOTS, holders, uuid)[0]

    def test_a_new_server_takes_a_free_slot(self):
        self.assertEqual({'host1', 'host2'},
                         self.allowed([building('me', 5)], 'me'))
        self.assertEqual({'host2'}, self.allowed(
            [on('a', 'host1'), building('me', 5)], 'me'))

    def test_no_slot_left_for_a_new_server(self):
        # Shelved (on no host) or in ERROR, a server still holds a slot.
        holders = [on('a', 'host1'), on('b'), on('c', 'host2'),
                   building('me', 5)]
        self.assertEqual(set(), self.allowed(holders, 'me'))
        self.assertEqual(0, slots.slots_left(SLOTS, holders[:3]))

    def test_older_boots_go_first(self):
        # Two boots for the last slot, neither placed: the older gets it.
        holders = [on('a', 'host1'), on('b', 'host2'), building('old', 3),
                   building('young', 4)]
        self.assertEqual({'host2'}, self.allowed(holders, 'old'))
        self.assertEqual(set(), self.allowed(holders, 'young'))

    def test_placed_boots_count_on_their_host(self):
        # The instances of one multi-create placed before this one.
        holders = [building('first', 1, 'host2'),
                   building('second', 2, 'host2'), building('me', 3)]
        self.assertEqual({'host1'}, self.allowed(holders, 'me'))
        # A younger one placed (another scheduler worker) counts too.
        holders = [building('young', 9, 'host1'), building('me', 3)]
        self.assertEqual({'host2'}, self.allowed(holders, 'me'))

    def test_an_unknown_server_counts_every_boot(self):
        holders = [on('a', 'host1'), building('x', 1), building('y', 2)]
        self.assertEqual(set(), self.allowed(holders, None))

    def test_a_server_that_holds_a_slot_keeps_it(self):
        # Full: its own slot is the only free one (an unshelve).
        holders = [on('me'), on('a', 'host2'), on('b', 'host2')]
        self.assertEqual({'host1'}, self.allowed(holders, 'me'))
        # Over-full (more servers than slots): it still moves where the
        # others leave a slot.
        holders = [on('me', 'host2'), on('a', 'host2'), on('b'), on('c')]
        self.assertEqual({'host1', 'host2'}, self.allowed(holders, 'me'))

    def test_a_move_in_progress_holds_both_ends(self):
        holders = [on('moving', 'host1', 'host2'), on('a', 'host2'),
                   building('me', 1)]
        self.assertEqual(set(), self.allowed(holders, 'me'))
