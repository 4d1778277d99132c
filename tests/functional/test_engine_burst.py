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
"""A burst of starts: the engine acts, then observes, without a worker per
server.

Nova here runs its casts as casts (CAST_AS_CALL off), so a boot or an
unshelve returns before the compute has built the server, as in a
deployment; the fake driver takes a second to spawn, as a hypervisor
takes its time. Six leases due at the same instant on an engine with two
workers: every server must be asked for before the first is built (the
engine issued all the Nova actions, then waited for all of them
together), not two at a time. The batched poll of the servers it waits for
is a safety net while notifications reach the engine.
"""

import datetime
import threading
import time

import fixtures
from nova.virt import fake as fake_virt

from nova_lease import compute
from nova_lease.db import api as db_api
from tests.functional import test_instance_lease

SPAWN_SECONDS = 6.0


class _SlowSpawn(object):
    """The fake driver's spawn, taking SPAWN_SECONDS; counts overlap."""

    def __init__(self):
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0
        self.spawned = 0
        self.first_done = float('inf')

    def wrap(self, original):
        slow = self

        def spawn(driver, *args, **kwargs):
            with slow.lock:
                slow.running += 1
                slow.peak = max(slow.peak, slow.running)
            try:
                time.sleep(SPAWN_SECONDS)
                return original(driver, *args, **kwargs)
            finally:
                with slow.lock:
                    slow.running -= 1
                    slow.spawned += 1
                    slow.first_done = min(slow.first_done,
                                          time.monotonic())
        return spawn


class BurstTest(test_instance_lease.InstanceLeaseTest):

    CAST_AS_CALL = False
    LISTEN = False
    LEASES = 6

    def setUp(self):
        super().setUp()
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        self.slow = _SlowSpawn()
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.fake.FakeDriver.spawn',
            self.slow.wrap(fake_virt.FakeDriver.spawn)))
        self.created = []
        real_unshelve = compute.ComputeClient.unshelve_server

        def unshelve(client, *args, **kwargs):
            try:
                return real_unshelve(client, *args, **kwargs)
            finally:
                self.created.append(time.monotonic())
        self.useFixture(fixtures.MonkeyPatch(
            'nova_lease.compute.ComputeClient.unshelve_server', unshelve))

    def _engine(self, **overrides):
        overrides.setdefault('engine_workers', 2)
        return super()._engine(**overrides)

    def test_burst_of_unshelved_servers_builds_at_once(self):
        start = (self.clock.now + datetime.timedelta(hours=1)).replace(
            second=0)
        for i in range(self.LEASES):
            self._lease_boot(name='burst-%d' % i, wait=None,
                             start=self._date(start), duration='2h')
        self.assertEqual(0, self.slow.spawned)
        self.clock.advance_to(start)
        t0 = time.monotonic()
        self.assertEqual(self.LEASES, self.engine.process_due())
        elapsed = time.monotonic() - t0
        leases = db_api.lease_list(self.db)
        self.assertEqual(['ACTIVE'] * self.LEASES,
                         [lease['status'] for lease in leases])
        servers = self.admin_api.get_servers(search_opts={'all_tenants': 1})
        self.assertEqual(['ACTIVE'] * self.LEASES,
                         [s['status'] for s in servers])
        # The two workers did not wait for one server to be built before
        # they unshelved the next: every server was asked for before the
        # first build was done (with a worker held per server, the third
        # is asked for only once the first is ACTIVE).
        self.assertEqual(self.LEASES, len(self.created))
        self.assertLess(max(self.created), self.slow.first_done,
                        'a server was asked for after the first build was '
                        'done (at most %d builds at once; the burst took '
                        '%.1f s)' % (self.slow.peak, elapsed))


class _ListedBurst(test_instance_lease.InstanceLeaseTest):
    """A burst of LEASES starts with Nova's notifications on; ``lists``
    records when the engine listed the servers it waits for.
    """

    CAST_AS_CALL = False
    LISTEN = True
    LEASES = 3

    def _engine(self, **overrides):
        engine = super()._engine(**overrides)
        compute = engine.plugins['virtual:instance'].compute
        self.lists = []
        real = compute.list_servers_changed_since

        def listed(since):
            self.lists.append(time.monotonic())
            return real(since)
        compute.list_servers_changed_since = listed
        self.gets = []
        real_get = compute.get_server

        def get(server_id):
            self.gets.append(server_id)
            return real_get(server_id)
        compute.get_server = get
        return engine

    def _burst(self, name, timeout):
        """Start LEASES leases at once; every lease ACTIVE; the seconds
        the engine took.
        """
        start = (self.clock.now + datetime.timedelta(hours=1)).replace(
            second=0)
        for i in range(self.LEASES):
            self._lease_boot(name='%s-%d' % (name, i), wait=None,
                             start=self._date(start), duration='2h')
        self.clock.advance_to(start)
        t0 = time.monotonic()
        self.assertEqual(self.LEASES,
                         self.engine.process_due(timeout=timeout))
        elapsed = time.monotonic() - t0
        self.assertEqual(
            ['ACTIVE'] * self.LEASES,
            [lease['status'] for lease in db_api.lease_list(self.db)])
        return elapsed


class NotifiedTest(_ListedBurst):
    """A start sees its server ACTIVE through Nova's notification, as its
    payload shows it: no request to look at the server, no waiting for
    the batched poll (set to a minute here), no list of every server
    changed meanwhile.
    """

    def _engine(self, **overrides):
        engine = super()._engine(**overrides)
        engine.plugins['virtual:instance'].compute.poll_interval = 60.0
        return engine

    def test_started_on_notification(self):
        elapsed = self._burst('notified', timeout=50)
        self.assertEqual(
            ['ACTIVE'] * self.LEASES,
            [s['status'] for s in self.admin_api.get_servers(
                search_opts={'all_tenants': 1})])
        self.assertLess(elapsed, 30)
        self.assertEqual([], self.lists)
        self.assertEqual([], self.gets)


class NotifiedUnshelveTest(_ListedBurst):
    """Shelved servers unshelved at their leases' start: each start is
    over when its ``instance.unshelve.end`` notification shows the
    server ACTIVE, with no request to look at it.
    """

    def _engine(self, **overrides):
        engine = super()._engine(**overrides)
        engine.plugins['virtual:instance'].compute.poll_interval = 60.0
        return engine

    def test_unshelved_on_notification(self):
        ids = [self._boot(name='shelved-%d' % i)['id']
               for i in range(self.LEASES)]
        for server_id in ids:
            self.admin_api.put_server_tags(server_id, ['reserved'])
            self.admin_api.post_server_action(server_id, {'shelve': None})
        for server_id in ids:
            self._wait_for(lambda: self.admin_api.get_server(server_id)[
                'status'] == 'SHELVED_OFFLOADED', 'shelved', timeout=60)
        start = self._shelved_server_leases(ids)
        self.clock.advance_to(start)
        self.assertEqual(self.LEASES, self.engine.process_due(timeout=50))
        self.assertEqual(['ACTIVE'] * self.LEASES, [
            lease['status'] for lease in db_api.lease_list(self.db)])
        for server_id in ids:
            server = self.admin_api.get_server(server_id)
            self.assertEqual('ACTIVE', server['status'])
            self.assertEqual([], self.admin_api.get_server_tags(server_id))
        self.assertEqual([], self.lists)
        self.assertEqual([], self.gets)


class OneAtATimeTest(_ListedBurst):
    """A burst of unshelves reaches nova-api one request at a time
    (``engine_placing_requests``, 1 by default): Nova's scheduler weighs
    requests that arrive together against the same view of its hosts and
    put them all on one (benchmarks/wakeup.py: a burst of ten on two
    hosts took twice as long as ten unshelves sent by hand). The engine
    still sends them all before the first server is ACTIVE.
    """

    LEASES = 4

    def test_unshelves_sent_one_after_the_other(self):
        ids = [self._boot(name='placed-%d' % i)['id']
               for i in range(self.LEASES)]
        for server_id in ids:
            self.admin_api.post_server_action(server_id, {'shelve': None})
        for server_id in ids:
            self._wait_for(lambda: self.admin_api.get_server(server_id)[
                'status'] == 'SHELVED_OFFLOADED', 'shelved', timeout=60)
        plugin = self.engine.plugins['virtual:instance']
        plugin.compute
        # The compute client behind the engine's action gate.
        client = plugin._client
        real = client.unshelve_server
        lock = threading.Lock()
        flight = {'now': 0, 'peak': 0, 'sent': []}

        def unshelve(server_id):
            with lock:
                flight['now'] += 1
                flight['peak'] = max(flight['peak'], flight['now'])
            try:
                # As long as a loaded nova-api takes: with the workers
                # free to send at once, the requests would overlap.
                time.sleep(0.5)
                return real(server_id)
            finally:
                with lock:
                    flight['now'] -= 1
                    flight['sent'].append(time.monotonic())
        client.unshelve_server = unshelve
        start = self._shelved_server_leases(ids)
        self.clock.advance_to(start)
        self.assertEqual(self.LEASES, self.engine.process_due(timeout=50))
        self.assertEqual(['ACTIVE'] * self.LEASES, [
            lease['status'] for lease in db_api.lease_list(self.db)])
        self.assertEqual(self.LEASES, len(flight['sent']))
        self.assertEqual(1, flight['peak'],
                         'unshelves in flight to nova-api at once')


class BatchedPollTest(_ListedBurst):
    """The batched poll of waited servers (a list of every server changed
    since the earliest wait) is a safety net while Nova's notifications
    reach the engine: it runs every ``engine_max_sleep`` seconds, not
    every poll interval (0.1 s here), until a wait is found over without
    its notification.
    """

    MAX_SLEEP = 4.0

    def _engine(self, **overrides):
        overrides.setdefault('engine_max_sleep', self.MAX_SLEEP)
        return super()._engine(**overrides)

    def _notified_once(self):
        # An unleased server: its notification shows that Nova's
        # notifications reach the engine.
        self.assertFalse(self.engine.notices_flow)
        self._boot(name='bystander')
        self._wait_for(lambda: self.engine.notices_flow, 'a notification')

    def test_no_list_per_interval_while_notifications_flow(self):
        self._notified_once()
        elapsed = self._burst('polled', timeout=60)
        # A list every 0.1 s while the servers build would be tens.
        self.assertLessEqual(len(self.lists), elapsed / self.MAX_SLEEP + 1,
                             'batched polls in %.1f s' % elapsed)
        self.assertTrue(self.engine.notices_flow)

    def test_lost_notifications_found_by_the_safety_net(self):
        self._notified_once()
        # From now on, no notification reaches the engine: the batched
        # poll finds the starts over, and the engine polls every interval
        # again until the next notification.
        self.useFixture(fixtures.MockPatchObject(
            self.hook, 'on_server_change', None))
        elapsed = self._burst('polled', timeout=60)
        self.assertFalse(self.engine.notices_flow)
        self.assertLess(elapsed, 3 * self.MAX_SLEEP)
        self.assertGreaterEqual(len(self.lists), 1)
