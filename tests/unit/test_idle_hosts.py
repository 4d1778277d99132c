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
"""The idle-host action's rule (nova_lease.periodic.idle.decide)."""

import datetime

import testtools

from nova_lease.periodic import idle
from nova_lease.plugins import idle_hosts

NOW = datetime.datetime(2030, 1, 1, 12, 0)
ENABLED = {'status': 'enabled', 'disabled_reason': None}
OURS = {'status': 'disabled',
        'disabled_reason': idle.REASON_PREFIX + ': idle until ...'}
OPERATOR = {'status': 'disabled', 'disabled_reason': 'broken fan'}


def _at(hours):
    return NOW + datetime.timedelta(hours=hours)


def _decide(bookings, service, eligible=True, min_hours=2.0, wake=30):
    return idle.decide(NOW, bookings, service, eligible, min_hours, wake)


class DecideTest(testtools.TestCase):

    def test_disable_when_idle_long_enough(self):
        # Nothing ever: disabled, no wake-up.
        self.assertEqual(('disable', None, None, 'idle'),
                         _decide([], ENABLED))
        # Promised in 3 h: disabled until 2.5 h from now (>= 2 h).
        what, until, wake_at, why = _decide([(_at(3), _at(4))], ENABLED)
        self.assertEqual(('disable', _at(3), _at(2.5)),
                         (what, until, wake_at))
        self.assertEqual('idle until 2030-01-01T15:00:00Z', why)
        # Past bookings do not count.
        self.assertEqual('disable', _decide([(_at(-3), _at(-1))],
                                            ENABLED)[0])

    def test_not_worth_it_busy_or_not_eligible(self):
        # In 2 h 15 min: disabled for 1 h 45 min only.
        self.assertIsNone(_decide([(_at(2.25), _at(4))], ENABLED)[0])
        self.assertEqual('disable', _decide([(_at(2.25), _at(4))], ENABLED,
                                            min_hours=1.5)[0])
        # Within the wake margin, with no minimum.
        self.assertIsNone(_decide([(_at(0.25), _at(4))], ENABLED,
                                  min_hours=0)[0])
        # Promised now.
        self.assertIsNone(_decide([(_at(-1), _at(1))], ENABLED)[0])
        # Not a registered free-pool host.
        self.assertIsNone(_decide([], ENABLED, eligible=False)[0])

    def test_never_touch_an_operator_disabled_host(self):
        for bookings in ([], [(_at(0.25), _at(1))], [(_at(-1), _at(1))]):
            for eligible in (True, False):
                self.assertIsNone(_decide(bookings, OPERATOR, eligible)[0])
        self.assertFalse(idle_hosts.ours(OPERATOR))
        self.assertFalse(idle_hosts.ours({
            'status': 'enabled', 'disabled_reason': OURS['disabled_reason']}))

    def test_enable_what_it_disabled(self):
        # Still far: stays disabled.
        self.assertIsNone(_decide([(_at(3), _at(4))], OURS)[0])
        self.assertIsNone(_decide([], OURS)[0])
        # Within the margin (29 min before), now promised, or out of the
        # pool.
        self.assertEqual(
            ('enable', 'promised from 2030-01-01T12:29:00Z'),
            _decide([(NOW + datetime.timedelta(minutes=29), _at(4))],
                    OURS)[::3])
        self.assertEqual('enable', _decide([(_at(-1), _at(1))], OURS)[0])
        self.assertEqual('enable', _decide([], OURS, eligible=False)[0])


class DecideServiceTest(testtools.TestCase):
    """One nova-compute service, several compute nodes (Ironic)."""

    def test_one_node_is_its_own_decision(self):
        for decision in (('disable', None, None, 'idle'),
                         ('enable', _at(1), _at(0.5), 'promised now'),
                         (None, _at(1), _at(0.5), None)):
            self.assertEqual(decision, idle.decide_service(
                {'n1': decision}, {'n1'}))
        self.assertEqual((None, None, None, None), idle.decide_service({}))

    def test_disabled_only_when_every_node_is_idle(self):
        idle_until_5 = _decide([(_at(5), _at(6))], ENABLED)
        idle_for_ever = _decide([], ENABLED)
        busy = _decide([(_at(-1), _at(1))], ENABLED)
        self.assertEqual('disable', idle_until_5[0])
        self.assertIsNone(busy[0])
        self.assertIsNone(idle.decide_service(
            {'n1': idle_for_ever, 'n2': busy}, {'n1', 'n2'})[0])
        # A node nobody registered takes unleased work.
        self.assertIsNone(idle.decide_service(
            {'n1': idle_for_ever}, {'n1', 'n2'})[0])
        what, until, wake_at, why = idle.decide_service(
            {'n1': idle_for_ever, 'n2': idle_until_5}, {'n1', 'n2'})
        self.assertEqual(('disable', _at(5), _at(4.5)),
                         (what, until, wake_at))
        self.assertIn('n1, n2', why)

    def test_enabled_when_any_node_needs_it(self):
        soon = _decide([(_at(0.25), _at(1))], OURS)
        idle_ours = _decide([], OURS)
        self.assertEqual('enable', soon[0])
        self.assertIsNone(idle_ours[0])
        self.assertEqual(soon, idle.decide_service(
            {'n1': idle_ours, 'n2': soon}, {'n1', 'n2'}))
        self.assertIsNone(idle.decide_service(
            {'n1': idle_ours, 'n2': idle_ours}, {'n1', 'n2'})[0])
