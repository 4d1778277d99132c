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
"""The compute hook against the real Nova: notifications and reconcile.

Same setting as tests.functional.test_instance_lease (a real
oslo.messaging listener on fake:/ fed by Nova's real versioned
notifications, the engine as nova-lease-engine builds it).
"""

import datetime

from oslo_serialization import jsonutils

from nova_lease.cmd import engine as engine_cmd
from nova_lease.compute_hook import hook as compute_hook
from nova_lease.db import api as db_api
from nova_lease import params
from nova_lease.plugins.instance import leases
from nova_lease.plugins.instance import rtype as instance_rtype
from tests.functional import base
from tests.functional.test_instance_lease import InstanceLeaseTest


def legacy_future_server(test, start, hours=1, name='legacy'):
    """A future lease as releases before servers were created at their
    lease's start made it: its server built at the boot, ACTIVE, with the
    lease's metadata, and linked to it (the compute hook or the reconcile
    pass then shelves it until the start). Returns (server, lease).
    """
    server = test._boot(name=name)
    lease = instance_rtype.create_instance_lease(
        test.db, base.CONF, params.LeaseParams(
            name=name, start=start,
            end=start + datetime.timedelta(hours=hours)),
        test.api.project_id, 'fake',
        {'vcpus': 1, 'memory_mb': 512, 'disk_gb': 1}, 1, flavor_id='1')
    lease = leases.link_instances(test.db, lease, [server['id']])
    test.api.post_server_metadata(server['id'], {
        'lease_id': lease['id'], 'lease_status': 'pending'})
    return server, lease


class TestComputeHook(InstanceLeaseTest):

    def test_user_deletes_the_reserved_server_of_a_future_lease(self):
        # A real server, shelved-offloaded from its boot: its deletion
        # ends the lease early (its promise goes); nothing runs later.
        start = self.clock.now + datetime.timedelta(hours=1)
        server = self._lease_boot(wait='SHELVED_OFFLOADED',
                                  start=self._date(start), duration='1h')
        self.api.delete_server(server['id'])
        self._gone(server['id'])
        self._wait_for(lambda: self._lease()['status'] == 'TERMINATED',
                       'lease ended early')
        lease = self._lease()
        self.assertEqual('deleted', lease['reservations'][0]['status'])
        self.assertEqual([], db_api.allocation_list(
            self.db, reservation_id=lease['reservations'][0]['id']))
        self.clock.advance(hours=3)
        self.assertEqual(0, self.engine.process_due())

    def test_reconcile_leaves_a_future_server_shelved(self):
        # Shelved-offloaded until its start: neither vanished, nor
        # unlinked, nor to be shelved.
        start = self.clock.now + datetime.timedelta(hours=1)
        server = self._lease_boot(wait=None, start=self._date(start),
                                  duration='1h')
        self.clock.advance(minutes=10)       # past leases.START_HOLD
        stats = self.hook.reconcile()
        self.assertEqual(0, sum(stats.values()), stats)
        lease = self._lease()
        self.assertEqual(('PENDING', 'pending', server['id']),
                         (lease['status'], lease['reservations'][0]['status'],
                          lease['reservations'][0]['resource_id']))
        self.assertEqual('SHELVED_OFFLOADED',
                         self.api.get_server(server['id'])['status'])

    def test_user_deletes_the_shelved_server_of_a_legacy_future_lease(self):
        start = self.clock.now + datetime.timedelta(hours=1)
        server, _lease = legacy_future_server(self, start)
        self.assertEqual(1, self.hook.reconcile()['reserved'])
        server = self._wait_for_state_change(server, 'SHELVED_OFFLOADED')
        self.api.delete_server(server['id'])
        self._gone(server['id'])
        self._wait_for(lambda: self._lease()['status'] == 'TERMINATED',
                       'lease ended early')
        lease = self._lease()
        self.assertEqual('deleted', lease['reservations'][0]['status'])
        self.assertIn('deleted', lease['status_reason'])
        self.assertEqual(['DONE'] * 3, [e['status'] for e in lease['events']])
        self.assertTrue(all(e['last_error'].startswith('cancelled')
                            for e in lease['events']))
        # Its events never run.
        self.clock.advance(hours=3)
        self.assertEqual(0, self.engine.process_due())
        self.assertEqual([], self.notified.sent)

    def test_user_deletes_one_of_two_servers_of_an_active_lease(self):
        hints = {'reserved': 'True',
                 'lease_params': jsonutils.dumps({'duration': '2h'})}
        body = {'server': self._build_server(
            name='pair', image_uuid=self.image_id, flavor_id='1',
            networks='none')}
        body['server']['min_count'] = 2
        body['os:scheduler_hints'] = hints
        self.api.api_post('/servers', body)
        ids = [r['resource_id'] for r in self._lease()['reservations']]
        for server_id in ids:
            self._wait_for_state_change({'id': server_id}, 'ACTIVE')
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease()['status'])
        self.api.delete_server(ids[0])
        self._gone(ids[0])
        self._wait_for(lambda: self._lease()['reservations'][0]['status']
                       == 'deleted', 'reservation deleted')
        self.assertEqual('ACTIVE', self._lease()['status'])
        self.api.delete_server(ids[1])
        self._gone(ids[1])
        self._wait_for(lambda: self._lease()['status'] == 'TERMINATED',
                       'lease ended early')

    def test_shelve_fails_then_reconcile_repairs(self):
        self.faults.fail('shelve', 'POST', r'/servers/[^/]+/action$',
                         '"shelve"')
        start = self.clock.now + datetime.timedelta(hours=1)
        server, _lease = legacy_future_server(self, start)
        self.assertEqual(1, self.hook.reconcile()['errors'])
        self.assertEqual(1, self.faults.faults['shelve'])
        self.assertEqual('ACTIVE', self._status(server['id']))
        self.assertEqual('PENDING', self._lease()['status'])
        self.assertNoTransitional()
        self.faults.clear()
        stats = self.hook.reconcile()
        self.assertEqual(1, stats['reserved'])
        self._wait_for_state_change(server, 'SHELVED_OFFLOADED')
        self.assertEqual(0, self.hook.reconcile()['reserved'])
        self.clock.advance_to(start)
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._status(server['id']))
        self.assertEqual('ACTIVE', self._lease()['status'])

    def test_unshelve_fails_lease_error_then_reclaimed(self):
        start = self.clock.now + datetime.timedelta(hours=1)
        server, _lease = legacy_future_server(self, start, hours=2)
        self.assertEqual(1, self.hook.reconcile()['reserved'])
        server = self._wait_for_state_change(server, 'SHELVED_OFFLOADED')
        self.faults.fail('unshelve', 'POST', r'/servers/[^/]+/action$',
                         '"unshelve"')
        self.clock.advance_to(start)
        self.engine.process_due()
        self.assertEqual('PENDING', self._lease()['status'])   # retry due
        self.clock.advance(seconds=5)
        self.engine.process_due()
        lease = self._lease()
        self.assertEqual('ERROR', lease['status'])
        self.assertIn('injected fault unshelve', lease['status_reason'])
        self.assertEqual(2, self.faults.faults['unshelve'])
        self.assertNoTransitional()
        self.faults.clear()
        self.clock.advance_to(lease['end_date'])
        self.engine.process_due()
        self._gone(server['id'])
        self.assertEqual('TERMINATED', self._lease()['status'])
        self.assertNoTransitional()


class TestReconcileWithoutNotifications(InstanceLeaseTest):

    LISTEN = False

    def test_lost_notifications_are_repaired(self):
        start = self.clock.now + datetime.timedelta(hours=1)
        server, _lease = legacy_future_server(self, start)
        self.assertEqual('ACTIVE', self._status(server['id']))
        self.assertEqual(1, self.hook.reconcile()['reserved'])
        server = self._wait_for_state_change(server, 'SHELVED_OFFLOADED')
        self.assertEqual(['reserved'], server['tags'])

        self.api.delete_server(server['id'])
        self._gone(server['id'])
        self.assertEqual('PENDING', self._lease()['status'])
        self.assertEqual(1, self.hook.reconcile()['vanished'])
        self.assertEqual('TERMINATED', self._lease()['status'])

    def test_unlinked_lease_is_linked_or_ended(self):
        orig = leases.link_instances
        # nova-api "dies" between Nova's 202 and the link.
        self.useFixture(base.fixtures.MockPatchObject(
            leases, 'link_instances', side_effect=SystemExit))
        hints = {'lease_params': jsonutils.dumps({'duration': '1h'})}
        body = {'server': self._build_server(
            name='orphan', image_uuid=self.image_id, flavor_id='1',
            networks='none')}
        body['os:scheduler_hints'] = hints
        try:
            self.api.api_post('/servers', body)
        except BaseException:
            pass
        self.useFixture(base.fixtures.MockPatchObject(
            leases, 'link_instances', new=orig))
        lease = self._lease()
        self.assertIsNone(lease['reservations'][0]['resource_id'])
        [server] = self.admin_api.get_servers(
            search_opts={'all_tenants': 1})
        self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual(0, self.hook.reconcile()['linked'])   # too soon
        self.clock.advance(minutes=10)
        stats = self.hook.reconcile()
        self.assertEqual(1, stats['linked'])
        self.assertEqual(0, stats['reserved'])     # its lease has started
        self.assertEqual(server['id'],
                         self._lease()['reservations'][0]['resource_id'])
        self.assertEqual('ACTIVE', self._status(server['id']))


class TestUnlinkedAndForged(InstanceLeaseTest):

    def test_unlinked_lease_without_servers_ends(self):
        now = self.clock.now
        lease = instance_rtype.create_instance_lease(
            self.db, base.CONF, params.LeaseParams(
                name='lost', start=now + datetime.timedelta(hours=1),
                end=now + datetime.timedelta(hours=2)),
            self.api.project_id, 'fake',
            {'vcpus': 1, 'memory_mb': 512, 'disk_gb': 1}, 2)
        self.assertEqual(0, self.hook.reconcile()['unlinked_ended'])
        self.clock.advance(minutes=6)
        self.assertEqual(1, self.hook.reconcile()['unlinked_ended'])
        lease = db_api.lease_get(self.db, lease['id'])
        self.assertEqual('TERMINATED', lease['status'])
        self.assertEqual(['deleted', 'deleted'],
                         [r['status'] for r in lease['reservations']])
        self.clock.advance(hours=3)
        self.assertEqual(0, self.engine.process_due())
        self.assertNoTransitional()

    def test_metadata_naming_another_projects_lease_is_ignored(self):
        now = self.clock.now
        other = instance_rtype.create_instance_lease(
            self.db, base.CONF, params.LeaseParams(
                name='theirs', start=now + datetime.timedelta(hours=1),
                end=now + datetime.timedelta(hours=2)),
            'another-project', 'someone',
            {'vcpus': 1, 'memory_mb': 512, 'disk_gb': 1}, 1)
        # The filter only replaces lease keys on leased boots: set them
        # after the boot, as a user could.
        server = self._boot(name='sneaky')
        self.api.post_server_metadata(server['id'], {'lease_id': other['id']})
        data = {'uuid': server['id'], 'state': 'active',
                'tenant_id': self.api.project_id,
                'metadata': {'lease_id': other['id']}}
        self.assertFalse(self.hook.instance_created(data))
        self.assertEqual('ACTIVE', self._status(server['id']))

    def test_endpoint_filter_and_errors(self):
        endpoint = compute_hook.InstanceEndpoint(self.hook)
        self.assertTrue(endpoint.filter_rule.match(
            {}, 'nova-compute:host1', 'instance.create.end', {}, {}))
        self.assertFalse(endpoint.filter_rule.match(
            {}, 'nova-compute:host1', 'instance.shelve.end', {}, {}))
        # A failure is logged, not raised (the reconcile pass repairs).
        self.useFixture(base.fixtures.MockPatchObject(
            leases, 'instance_deleted', side_effect=RuntimeError('boom')))
        changed = []
        self.useFixture(base.fixtures.MockPatchObject(
            self.hook, 'on_server_change',
            lambda server_id, server: changed.append((server_id, server))))
        self.assertEqual(
            compute_hook.oslo_messaging.NotificationResult.HANDLED,
            endpoint.info({}, 'nova-compute:host1', 'instance.delete.end',
                          {'nova_object.data': {'uuid': 'x'}}, {}))
        # Every notification is passed on (to the engine).
        self.assertEqual([('x', None)], changed)


class TestStartedLikeTheEngine(InstanceLeaseTest):
    """The hook as nova-lease-engine starts it (cmd.engine)."""

    LISTEN = False

    def test_start_compute_hook(self):
        transport = self._real_nova_notifier()
        stop = engine_cmd.start_compute_hook(
            self.engine.conf, self.engine, self.notified,
            transport=transport)
        self.addCleanup(stop)
        self.assertIsNotNone(stop.listener)
        # It tells the engine of the servers that changed.
        self.assertEqual(self.engine.observe_now, stop.hook.on_server_change)
        server = self._lease_boot(duration='1h')
        self.api.delete_server(server['id'])
        self._gone(server['id'])
        self._wait_for(lambda: self._lease()['status'] == 'TERMINATED',
                       'lease ended early')
        self.assertEqual([('lease.end', self._lease()['id'],
                           self.clock.now)], self.notified.sent)
