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
"""Instance leases end to end: nova-api filter, compute hook, engine.

Everything runs in the test process against the real in-process Nova:
the paste filter records leases, the compute hook listens to Nova's real
versioned notifications through a real oslo.messaging listener on the
fake:/ transport (Nova's notifier is switched from the fixture's recorder
to a real messagingv2 one), and the engine is built exactly as
nova-lease-engine builds it (its own ConfigOpts from a file, the
virtual:instance plugin talking to nova-api through the harness Keystone
with python-novaclient). Time moves with the harness clock.
"""

import datetime
import re
import threading
import time

from nova import rpc
import oslo_messaging
from oslo_serialization import jsonutils

from nova_lease import compute
from nova_lease.compute_hook import hook as compute_hook
from nova_lease.db import api as db_api
from nova_lease import lease_events
from nova_lease.periodic import engine as lease_engine
# Imported before Nova's fixtures forbid os.uname() (numpy calls it).
from nova_lease.scheduler import filters  # noqa: F401
from tests.functional import base
from tests.functional import fixtures as lease_fixtures


def _table_value(output, prop):
    match = re.search(r'^\|\s*%s\s*\|\s*(.*?)\s*\|$' % re.escape(prop),
                      output, re.MULTILINE)
    return match.group(1) if match else None


class RecordingNotifier(object):
    """The engine's notifier: records (event type, lease id, clock time)."""

    def __init__(self, clock):
        self.clock = clock
        self.sent = []

    def notify(self, event_type, lease, reservations=None, usage=None):
        self.sent.append((event_type, lease['id'], self.clock.now))
        return True

    def of(self, event_type):
        return [s for s in self.sent if s[0] == event_type]


class InstanceLeaseTest(base.LeaseFunctionalBase):

    COMPUTES = {'host1': (8, 16384, 200), 'host2': (8, 16384, 200)}
    CLOCK_START = datetime.datetime(2026, 11, 20, 10, 0, 0)
    LISTEN = True

    def setUp(self):
        super().setUp()
        self.db = db_api.get_database(base.CONF)
        self.faults = lease_fixtures.FaultInjector(self.keystone.nova_app)
        self.keystone.nova_app = self.faults
        self.notified = RecordingNotifier(self.clock)
        self.engine = self._engine()
        # Next to the engine, as nova-lease-engine starts it
        # (cmd.engine.start_compute_hook); a test may replace the engine.
        self.hook = compute_hook.ComputeHook(
            self.engine.conf, db=self.db,
            compute_client=compute.ComputeClient(
                self.keystone.session('admin'),
                region_name=self.keystone.REGION),
            on_server_change=lambda server_id, server: (
                self.engine.observe_now(server_id, server)))
        self.hook.compute.poll_interval = 0.1
        if self.LISTEN:
            self._listen()

    def _real_nova_notifier(self):
        """Nova's notifier -> the fake:/ transport, for real; return it."""
        transport = rpc.NOTIFICATION_TRANSPORT
        real = oslo_messaging.Notifier(
            transport, driver='messagingv2',
            topics=base.CONF.notifications.versioned_notifications_topics,
            serializer=rpc.RequestContextSerializer(
                rpc.JsonPayloadSerializer()))
        self.stub_out('nova.rpc.NOTIFIER', real)
        return transport

    def _listen(self):
        transport = self._real_nova_notifier()
        self.listener = compute_hook.start_listener(
            self.engine.conf, self.hook, transport=transport)
        self.addCleanup(self.listener.wait)
        self.addCleanup(self.listener.stop)

    def _engine(self, **overrides):
        options = {
            'resource_plugins': 'virtual:instance',
            'max_retries': 1,
            'retry_interval': 1,
            'plugin_call_timeout': 30,
        }
        options.update(overrides)
        conf = self.engine_conf(**options)
        engine = lease_engine.Engine(conf, notifier=self.notified)
        self.addCleanup(engine.close)
        plugin = engine.plugins['virtual:instance']
        plugin.compute.poll_interval = 0.1
        return engine

    # -- helpers ------------------------------------------------------------

    def _date(self, when):
        return when.strftime('%Y-%m-%d %H:%M')

    def _lease_boot(self, name='vm', wait='ACTIVE', **params):
        hints = {'reserved': 'True', 'lease_params': jsonutils.dumps(params)}
        return self._boot(hints=hints, name=name, wait=wait)

    def _lease(self):
        [lease] = db_api.lease_list(self.db)
        return lease

    def _shelved_server_leases(self, server_ids):
        """One PENDING lease per shelved server, holding it, all due at
        the same minute an hour on (as leases made before their servers
        were created at their start hold theirs); that start.
        """
        start = (self.clock.now + datetime.timedelta(hours=1)).replace(
            second=0, microsecond=0)
        end = start + datetime.timedelta(hours=2)
        for server_id in server_ids:
            db_api.lease_create(self.db, {
                'name': 'shelved', 'project_id': self.api.project_id,
                'user_id': 'fake', 'start_date': start, 'end_date': end,
                'status': 'PENDING'}, reservations=[{
                    'resource_type': 'virtual:instance',
                    'resource_id': server_id, 'status': 'pending',
                    'properties': {'vcpus': 1, 'memory_mb': 512,
                                   'disk_gb': 1}}],
                events=lease_events.lease_events(start, end))
        return start

    def _wait_for(self, predicate, what, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.1)
        self.fail('timed out waiting for %s' % what)

    def _status(self, server_id):
        try:
            return self.admin_api.get_server(server_id)['status']
        except Exception:
            return 'GONE'

    def _gone(self, server_id):
        self._wait_for(lambda: self._status(server_id) == 'GONE',
                       'server %s deleted' % server_id)

    def assertNoTransitional(self):
        for lease in db_api.lease_list(self.db):
            self.assertNotIn(lease['status'], ('STARTING', 'TERMINATING',
                                               'IN_PROGRESS'), lease)
            for event in lease['events']:
                self.assertNotEqual('IN_PROGRESS', event['status'], event)


class TestSeedWorkflow(InstanceLeaseTest):

    def test_seed_command_through_the_nova_cli(self):
        out = self.nova_cli(
            'boot', '--flavor', '1', '--image', 'fakeimage7',
            '--hint', 'reserved=True', '--hint',
            'lease_params={"name": "lease1", "start": "now", '
            '"end": "2026-12-01 16:07"}', 'vm1')
        server_id = _table_value(out, 'id')
        self._wait_for_state_change({'id': server_id}, 'ACTIVE')
        lease = self._lease()
        self.assertEqual(('lease1', 'PENDING'),
                         (lease['name'], lease['status']))
        self.assertEqual(datetime.datetime(2026, 12, 1, 16, 7),
                         lease['end_date'])

        self.assertEqual(1, self.engine.process_due())     # start_lease
        lease = self._lease()
        self.assertEqual('ACTIVE', lease['status'])
        self.assertEqual('active', lease['reservations'][0]['status'])
        shown = self.nova_cli('show', 'vm1')
        self.assertEqual('ACTIVE', _table_value(shown, 'status'))
        self.assertEqual({'lease_id': lease['id'], 'lease_status': 'active'},
                         jsonutils.loads(_table_value(shown, 'metadata')))

        self.clock.advance_to(lease['end_date'])
        self.assertEqual(2, self.engine.process_due())   # before_end, end
        self._gone(server_id)
        lease = self._lease()
        self.assertEqual('TERMINATED', lease['status'])
        self.assertEqual(['DONE'] * 3, [e['status'] for e in lease['events']])
        self.assertEqual([], self.nova.servers.list())
        self.assertEqual(['lease.start', 'lease.before_end', 'lease.end'],
                         [s[0] for s in self.notified.sent])


class TestFutureLease(InstanceLeaseTest):

    def test_reserved_then_started_then_gone(self):
        start = self.clock.now + datetime.timedelta(hours=2)
        end = start + datetime.timedelta(hours=6)
        server = self._lease_boot(name='future', wait=None,
                                  start=self._date(start),
                                  end=self._date(end))
        # Nothing is built before the start: the server exists, shelved
        # and offloaded (no host, no capacity), linked to its reservation.
        server = self.api.get_server(server['id'])
        self.assertEqual([server['id']], [
            s['id'] for s in self.admin_api.get_servers(
                search_opts={'all_tenants': 1})])
        self.assertEqual(('SHELVED_OFFLOADED', None),
                         (server['status'], server['OS-EXT-STS:task_state']))
        self.assertEqual('reserved', server['metadata']['lease_status'])
        self.assertEqual(['reserved'], server['tags'])
        lease = self._lease()
        self.assertEqual('PENDING', lease['status'])
        self.assertEqual(server['id'],
                         lease['reservations'][0]['resource_id'])

        # The engine runs its real loop; the clock wakes it.
        runner = threading.Thread(target=self.engine.run, daemon=True)
        runner.start()
        self.addCleanup(runner.join, 30)
        self.addCleanup(self.engine.stop)
        self.clock.advance_to(start - datetime.timedelta(seconds=1))
        time.sleep(0.5)
        self.assertEqual('SHELVED_OFFLOADED', self._status(server['id']))

        # Claimed at its time (below); how long Nova then takes is the
        # wake-up benchmark's to measure (benchmarks/wakeup.py), not a
        # test's.
        self.clock.advance_to(start)
        self._wait_for(lambda: self._lease()['status'] == 'ACTIVE',
                       'lease ACTIVE')
        # Unshelved at the start: the same server.
        server = self.admin_api.get_server(server['id'])
        self.assertEqual('ACTIVE', server['status'])
        self.assertEqual('active', server['metadata']['lease_status'])
        self.assertEqual([], server['tags'])
        started = [e for e in self._lease()['events']
                   if e['event_type'] == 'start_lease'][0]
        self.assertEqual(start, started['claimed_at'])   # no clock lag

        # before_end_lease: one notification, at end - 60 min.
        before = end - datetime.timedelta(minutes=60)
        self.clock.advance_to(before - datetime.timedelta(seconds=1))
        time.sleep(0.5)
        self.assertEqual([], self.notified.of('lease.before_end'))
        self.clock.advance_to(before)
        self._wait_for(lambda: self.notified.of('lease.before_end'),
                       'lease.before_end')
        self.assertEqual([('lease.before_end', self._lease()['id'], before)],
                         self.notified.of('lease.before_end'))

        self.clock.advance_to(end)
        self._gone(server['id'])
        self._wait_for(lambda: self._lease()['status'] == 'TERMINATED',
                       'lease TERMINATED')
        self.assertEqual(1, len(self.notified.of('lease.before_end')))
        self.assertNoTransitional()

    def test_on_end_shelve(self):
        server = self._lease_boot(name='keep', duration='2h',
                                  on_end='shelve')
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease()['status'])
        self.clock.advance(hours=2)
        self.engine.process_due()
        server = self.admin_api.get_server(server['id'])
        self.assertEqual('SHELVED_OFFLOADED', server['status'])
        self.assertEqual('terminated', server['metadata']['lease_status'])
        lease = self._lease()
        self.assertEqual('TERMINATED', lease['status'])
        self.assertNoTransitional()


class TestDefaultLease(InstanceLeaseTest):

    def setUp(self):
        super().setUp()
        self.flags(default_lease=True, group='nova_lease')

    def test_plain_boot_gets_30_days_and_is_reclaimed(self):
        server = self._boot(name='lab')
        lease = self._lease()
        self.assertEqual(datetime.timedelta(days=30),
                         lease['end_date'] - lease['start_date'])
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease()['status'])
        self.clock.advance(days=29, hours=23)
        self.engine.process_due()           # before_end only
        self.assertEqual('ACTIVE', self._status(server['id']))
        self.clock.advance(hours=1)
        self.engine.process_due()
        self._gone(server['id'])
        self.assertEqual('TERMINATED', self._lease()['status'])
