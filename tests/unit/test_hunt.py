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
"""The best-effort hunt's choice (nova_lease.hunt) and how the engine
records a hunt's attempts (nova_lease.periodic.outcomes).
"""

import datetime
import types

import testtools

from nova_lease import hunt
from nova_lease.periodic import outcomes
from nova_lease.plugins import base as plugin_base


def _server(sid, memory_mb=512, status='ACTIVE', task=None, locked=False):
    return hunt.Server(sid, 'p', status, task, 1, memory_mb, 1, locked)


def _host(name, *servers):
    return hunt.Candidate(name, {'hypervisor_hostname': name}, servers)


class ChooseTest(testtools.TestCase):

    def test_fewest_servers_then_least_memory_first(self):
        hosts = [_host('a', _server('a1'), _server('a2')),
                 _host('b', _server('b1', 4096)),
                 _host('c', _server('c1', 1024)),
                 _host('d')]
        self.assertEqual(['d', 'c', 'b', 'a'],
                         [c.host for c in hunt.order(hosts)])
        chosen = hunt.choose(hosts, 2, lambda servers, taken: None)
        self.assertEqual(['d', 'c'], [c.host for c in chosen])

    def test_a_host_whose_servers_cannot_move_is_skipped(self):
        asked = []

        def can_move(servers, taken):
            asked.append((sorted(s.id for s in servers), sorted(taken)))
            return 'b1 fits nowhere' if 'b1' in [s.id for s in servers] \
                else None

        hosts = [_host('b', _server('b1')),
                 _host('c', _server('c1'), _server('c2'))]
        chosen = hunt.choose(hosts, 1, can_move)
        self.assertEqual(['c'], [c.host for c in chosen])
        # Each trial asks for every server of the hosts taken so far.
        self.assertEqual([(['b1'], ['b']), (['c1', 'c2'], ['c'])], asked)

    def test_not_enough_says_why_each_was_not_taken(self):
        hosts = [_host('a', _server('a1', status='SHUTOFF')),
                 _host('b', _server('b1', task='migrating')),
                 _host('c', _server('c1', status='ERROR')),
                 _host('d', _server('d1'))]
        e = self.assertRaises(hunt.NoCandidates, hunt.choose, hosts, 2,
                              lambda servers, taken: None)
        message = str(e)
        self.assertIn('2 more host(s) needed, 1 compute host(s) could be '
                      'emptied', message)
        self.assertIn('a: server a1 is SHUTOFF, which live migration does '
                      'not take', message)
        self.assertIn('b: server b1 is busy (migrating)', message)
        self.assertIn('c: server c1 is ERROR', message)

    def test_cold_migration_takes_stopped_servers(self):
        hosts = [_host('a', _server('a1', status='SHUTOFF'))]
        self.assertEqual(['a'], [c.host for c in hunt.choose(
            hosts, 1, lambda servers, taken: None, cold=True)])
        self.assertIsNone(hunt.movable(hosts[0].servers[0], cold=True))

    def test_a_locked_server_is_never_moved(self):
        hosts = [_host('a', _server('a1', locked=True)),
                 _host('b', _server('b1'), _server('b2'))]
        self.assertEqual(['b'], [c.host for c in hunt.choose(
            hosts, 1, lambda servers, taken: None, cold=True)])
        self.assertIn('locked', hunt.movable(hosts[0].servers[0], cold=True))

    def test_s4_destinations_keep_zone_and_anti_affinity(self):
        anti = hunt.ServerGroup('g', 'anti-affinity', frozenset({'b'}))
        server = _server('a1')._replace(zone='az1', group=anti)
        zones = {'a': 'az1', 'b': 'az1', 'c': 'az2', 'd': 'az1'}
        self.assertEqual({'a', 'd'}, hunt.destinations(server, zones, zones))
        self.assertEqual({'a', 'b', 'c', 'd'},
                         hunt.destinations(_server('a2'), zones, zones))
        self.assertEqual('g', hunt.spread(server))
        self.assertIsNone(hunt.spread(_server('a2')))

    def test_s4_an_affinity_member_does_not_move_alone(self):
        group = hunt.ServerGroup('g', 'affinity', frozenset({'a'}))
        self.assertIn('affinity', hunt.movable(
            _server('a1')._replace(group=group)))
        alone = hunt.ServerGroup('g', 'affinity', frozenset())
        self.assertIsNone(hunt.movable(_server('a1')._replace(group=alone)))

    def test_nothing_to_hunt(self):
        self.assertEqual([], hunt.choose([], 0, None))
        e = self.assertRaises(hunt.NoCandidates, hunt.choose, [], 1, None)
        self.assertIn('no compute host is a candidate', str(e))


class HuntOutcomeTest(testtools.TestCase):

    OPTS = types.SimpleNamespace(
        nova_lease=types.SimpleNamespace(max_retries=0),
        nova_lease_engine=types.SimpleNamespace(
            retry_interval=30, best_effort_retry_interval=5,
            best_effort_timeout=60))
    EVENT = {'id': 'e', 'lease_id': 'l', 'event_type': 'start_lease',
             'attempts': 7}
    LEASE = {'id': 'l', 'status': 'IN_PROGRESS'}

    def test_a_hunt_is_retried_whatever_max_retries(self):
        result, notices = outcomes.failure(
            self.EVENT, self.LEASE, plugin_base.PluginError(
                reason='servers still there'), self.OPTS)
        self.assertEqual('UNDONE', result['status'])
        self.assertNotIn('lease_status', result)
        self.assertLess(result['next_attempt_at'] - datetime.datetime.now(
            datetime.timezone.utc).replace(tzinfo=None),
            datetime.timedelta(seconds=6))
        self.assertEqual(['lease.in_progress'], [n[0] for n in notices])

    def test_gave_up_is_timedout(self):
        cause = plugin_base.HuntTimedOut(reason='gave up after 60 minutes')
        wrapper = plugin_base.PluginError(reason='on_start failed: %s'
                                          % cause)
        wrapper.__cause__ = cause
        result, notices = outcomes.failure(self.EVENT, self.LEASE, wrapper,
                                           self.OPTS)
        self.assertEqual(('ERROR', 'TIMEDOUT', ['IN_PROGRESS'], 'deleted'),
                         (result['status'], result['lease_status'],
                          result['lease_expected'],
                          result['reservation_status']))
        self.assertIn('gave up after 60 minutes', result['status_reason'])
        self.assertIn('best_effort_timeout', result['status_reason'])
        self.assertEqual(['lease.timedout'], [n[0] for n in notices])

    def test_a_started_hunt_is_active_on_success(self):
        result, _notices = outcomes.success(self.EVENT, self.LEASE)
        self.assertEqual('ACTIVE', result['lease_status'])
        self.assertIn('IN_PROGRESS', result['lease_expected'])
