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
"""Lease notifications reach a real RabbitMQ.

The test creates a virtual host of its own with rabbitmqctl (deleted
afterwards), configures the engine's [oslo_messaging_notifications] as an
operator would in nova.conf and listens with an oslo.messaging
notification listener on the same transport.
"""

import datetime
import os
import shutil
import subprocess
import threading

import fixtures
import oslo_messaging
from oslo_utils import uuidutils
from oslotest import base as oslotest_base

from nova_lease.cmd import engine as engine_cmd
from nova_lease.db import api as db_api
from nova_lease.db import migration
from nova_lease import notifications
from nova_lease.periodic import engine as lease_engine
from tests.functional.db import fixtures as db_fixtures
from tests.functional import fixtures as lease_fixtures
from tests.functional import test_engine_helpers as helpers

RABBIT = os.environ.get('NOVA_LEASE_TEST_RABBIT_HOSTPORT', '127.0.0.1:5672')
TOPIC = 'lease_notifications'


class RabbitVhost(fixtures.Fixture):
    """A RabbitMQ virtual host for one test, guest allowed; then deleted."""

    def _setUp(self):
        ctl = shutil.which('rabbitmqctl')
        if ctl is None:
            raise fixtures.SetupError('rabbitmqctl not found')
        self.name = 'nova_lease_test_%s' % uuidutils.generate_uuid(
            dashed=False)
        subprocess.run([ctl, 'add_vhost', self.name], check=True,
                       capture_output=True, timeout=60)
        self.addCleanup(subprocess.run, [ctl, 'delete_vhost', self.name],
                        capture_output=True, timeout=60)
        subprocess.run([ctl, 'set_permissions', '-p', self.name, 'guest',
                        '.*', '.*', '.*'], check=True, capture_output=True,
                       timeout=60)
        self.url = 'rabbit://guest:guest@%s/%s' % (RABBIT, self.name)


def use_vhost(test):
    """A :class:`RabbitVhost` for ``test``; the test skips without one."""
    try:
        return test.useFixture(RabbitVhost())
    except Exception as e:
        test.skipTest('RabbitMQ unavailable: %s' % e)


class Endpoint(object):
    def __init__(self):
        self.received = []
        self.condition = threading.Condition()

    def _got(self, priority, event_type, payload, publisher_id):
        with self.condition:
            self.received.append((priority, event_type, payload,
                                  publisher_id))
            self.condition.notify_all()

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self._got('INFO', event_type, payload, publisher_id)

    def error(self, ctxt, publisher_id, event_type, payload, metadata):
        self._got('ERROR', event_type, payload, publisher_id)

    def wait(self, count, timeout=30):
        with self.condition:
            self.condition.wait_for(lambda: len(self.received) >= count,
                                    timeout)
            return list(self.received)


class NotificationsRabbitTest(oslotest_base.BaseTestCase):

    def setUp(self):
        super().setUp()
        vhost = use_vhost(self)
        url = self.useFixture(
            db_fixtures.EmptyDatabase(db_fixtures.SQLITE)).url
        migration.upgrade(url)
        self.db = db_api.Database(url)
        self.addCleanup(self.db.dispose)
        self.addCleanup(db_api.reset_databases)
        tmp = self.useFixture(fixtures.TempDir()).path
        config = helpers.write_config(
            os.path.join(tmp, 'engine.conf'),
            nova_lease={'connection': url, 'resource_plugins': 'noop',
                        'minutes_before_end_lease': 10},
            extra={'oslo_messaging_notifications': {
                'driver': 'messagingv2', 'transport_url': vhost.url,
                'topics': TOPIC}})
        self.conf = engine_cmd.parse_args(['--config-file', config])
        self.clock = self.useFixture(lease_fixtures.ClockFixture(
            datetime.datetime(2031, 5, 1, 8, 0)))

        self.endpoint = Endpoint()
        transport = oslo_messaging.get_notification_transport(self.conf)
        self.addCleanup(transport.cleanup)
        listener = oslo_messaging.get_notification_listener(
            transport, [oslo_messaging.Target(topic=TOPIC)],
            [self.endpoint], executor='threading')
        # One dispatch thread: received in the order RabbitMQ delivers.
        listener.start(override_pool_size=1)
        self.addCleanup(listener.wait)
        self.addCleanup(listener.stop)

        self.notifier = notifications.LeaseNotifier(
            self.conf, publisher_id='nova-lease-engine:test')
        self.addCleanup(self.notifier.close)
        self.engine = lease_engine.Engine(self.conf, db=self.db,
                                          notifier=self.notifier)
        self.addCleanup(self.engine.close)

    def test_lease_lifecycle_notifications(self):
        now = self.clock.now
        lease_id, = helpers.create_noop_leases(
            self.db, [now + datetime.timedelta(minutes=1)],
            datetime.timedelta(hours=1),
            before_end=datetime.timedelta(minutes=10))
        lease = db_api.lease_get(self.db, lease_id)
        self.assertTrue(self.notifier.notify(notifications.CREATE, lease))
        self.clock.advance(minutes=1)
        self.engine.process_due()
        self.clock.advance(minutes=50)
        self.engine.process_due()
        self.clock.advance(minutes=10)
        self.engine.process_due()
        # The engine sends its notifications from a thread of its own:
        # let the end arrive before the test sends the delete.
        self.assertEqual(4, len(self.endpoint.wait(4)))
        lease = db_api.lease_get(self.db, lease_id)
        self.assertTrue(self.notifier.notify(notifications.DELETE, lease))

        received = self.endpoint.wait(5)
        self.assertEqual(
            ['lease.create', 'lease.start', 'lease.before_end', 'lease.end',
             'lease.delete'], [r[1] for r in received])
        self.assertEqual({'INFO'}, {r[0] for r in received})
        self.assertEqual({'nova-lease-engine:test'}, {r[3] for r in received})
        payloads = [r[2] for r in received]
        for payload in payloads:
            self.assertEqual(('LeasePayload', 'nova_lease', '1.1'),
                             (payload['nova_object.name'],
                              payload['nova_object.namespace'],
                              payload['nova_object.version']))
            data = payload['nova_object.data']
            self.assertEqual((lease_id, 'p1', 'u1'),
                             (data['id'], data['project_id'],
                              data['user_id']))
            self.assertEqual('2031-05-01T08:01:00Z', data['start_date'])
            self.assertEqual('noop', data['reservations'][0]['resource_type'])
        self.assertEqual(
            ['PENDING', 'ACTIVE', 'ACTIVE', 'TERMINATED', 'TERMINATED'],
            [p['nova_object.data']['status'] for p in payloads])
        # lease.end carries the lease's hours: an hour promised, an hour
        # run (started at 08:01, ended at 09:01).
        self.assertEqual(
            [None, None, None, 1.0, None],
            [(p['nova_object.data']['usage'] or {}).get('reserved', {}).get(
                'lease_hours') for p in payloads])
        self.assertEqual(
            1.0, payloads[3]['nova_object.data']['usage']['used'][
                'lease_hours'])

    def test_host_idle_notifications(self):
        host = {'hypervisor_hostname': 'node-7', 'service_host': 'compute-7'}
        until = datetime.datetime(2031, 5, 2, 9, 0)
        wake = datetime.datetime(2031, 5, 2, 8, 30)
        self.assertTrue(self.notifier.notify_host(
            notifications.HOST_IDLE_DISABLE, host, 'nova_lease idle host: '
            'idle until 2031-05-02T09:00:00Z', idle_until=until,
            wake_at=wake))
        self.assertTrue(self.notifier.notify_host(
            notifications.HOST_IDLE_ENABLE, host, 'promised now'))
        self.assertRaises(ValueError, self.notifier.notify_host,
                          'host.idle.bogus', host, 'x')
        received = self.endpoint.wait(2)
        self.assertEqual(
            [('INFO', 'host.idle.disable'), ('INFO', 'host.idle.enable')],
            [r[:2] for r in received])
        payload = received[0][2]
        self.assertEqual(('HostIdlePayload', 'nova_lease', '1.0'),
                         (payload['nova_object.name'],
                          payload['nova_object.namespace'],
                          payload['nova_object.version']))
        self.assertEqual(
            {'host': 'node-7', 'service_host': 'compute-7',
             'reason': 'nova_lease idle host: idle until '
                       '2031-05-02T09:00:00Z',
             'idle_until': '2031-05-02T09:00:00Z',
             'wake_at': '2031-05-02T08:30:00Z'},
            payload['nova_object.data'])
        self.assertEqual((None, None),
                         (received[1][2]['nova_object.data']['idle_until'],
                          received[1][2]['nova_object.data']['wake_at']))


class RecordingHook(object):
    """Stands in for the compute hook's database work: records calls."""

    on_server_change = None

    def __init__(self):
        self.deleted = []
        self.condition = threading.Condition()

    def instance_created(self, data):
        pass

    def instance_deleted(self, uuid):
        with self.condition:
            self.deleted.append(uuid)
            self.condition.notify_all()

    def wait(self, timeout=30):
        with self.condition:
            self.condition.wait_for(lambda: self.deleted, timeout)
            return list(self.deleted)


class NovaExchangeTest(oslotest_base.BaseTestCase):
    """The engine meets Nova on Nova's exchange with no option set.

    Nova's processes default ``[DEFAULT] control_exchange`` to ``nova``
    (nova.config.parse_args); oslo.messaging's own default is
    ``openstack``. The engine reads the same nova.conf: an operator who
    sets nothing must have it hear Nova's instance notifications and
    publish its lease notifications where nova-api's go.
    """

    def setUp(self):
        super().setUp()
        vhost = use_vhost(self)
        tmp = self.useFixture(fixtures.TempDir()).path
        messaging = {'oslo_messaging_notifications': {
            'driver': 'messagingv2', 'transport_url': vhost.url}}
        # The engine's nova.conf, as the install guide writes it: no
        # control_exchange.
        self.conf = engine_cmd.parse_args(
            ['--config-file', helpers.write_config(
                os.path.join(tmp, 'engine.conf'), extra=messaging)])
        # Nova's side: its processes' default exchange, said explicitly so
        # that this side does not depend on what the engine changed.
        self.nova_conf = engine_cmd.parse_args(
            ['--config-file', helpers.write_config(
                os.path.join(tmp, 'nova.conf'),
                default={'control_exchange': 'nova'}, extra=messaging)])
        self.nova_transport = oslo_messaging.get_notification_transport(
            self.nova_conf)
        self.addCleanup(self.nova_transport.cleanup)

    def test_engine_hears_nova_instance_notifications(self):
        from nova_lease.compute_hook import hook as compute_hook
        hook = RecordingHook()
        listener = compute_hook.start_listener(self.conf, hook)
        self.addCleanup(listener.wait)
        self.addCleanup(listener.stop)
        nova = oslo_messaging.Notifier(
            self.nova_transport, publisher_id='nova-compute:host1',
            topics=['versioned_notifications'])
        uuid = uuidutils.generate_uuid()
        nova.info({}, 'instance.delete.end', {
            'nova_object.name': 'InstanceActionPayload',
            'nova_object.namespace': 'nova',
            'nova_object.version': '1.8',
            'nova_object.data': {'uuid': uuid}})
        self.assertEqual([uuid], hook.wait())

    def test_lease_notifications_go_where_novas_go(self):
        # A consumer of Nova's exchange with a pool of its own (as the
        # compute hook, or a billing service): its queue is bound to that
        # exchange only (without a pool, publisher and consumer share a
        # queue named after the topic, whatever the exchange).
        endpoint = Endpoint()
        listener = oslo_messaging.get_notification_listener(
            self.nova_transport,
            [oslo_messaging.Target(topic='notifications')], [endpoint],
            executor='threading', pool='billing')
        listener.start(override_pool_size=1)
        self.addCleanup(listener.wait)
        self.addCleanup(listener.stop)
        notifier = notifications.LeaseNotifier(
            self.conf, publisher_id='nova-lease-engine:test')
        self.addCleanup(notifier.close)
        host = {'hypervisor_hostname': 'node-7', 'service_host': 'compute-7'}
        self.assertTrue(notifier.notify_host(
            notifications.HOST_IDLE_ENABLE, host, 'promised now'))
        self.assertEqual(['host.idle.enable'],
                         [r[1] for r in endpoint.wait(1, timeout=15)])
