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
"""``[nova_lease_engine] idle_host_action = disable`` on the in-process Nova:
the engine disables idle registered hosts' nova-compute services and enables
them before a lease needs them.
"""

import datetime
import threading
import time
from unittest import mock

from oslo_utils import importutils

from nova_lease.periodic import idle
from tests.functional import base
from tests.functional import test_flavor_reservation
from tests.functional import test_host_reservation

PREFIX = test_host_reservation.PREFIX


class _Recorder(object):
    def __init__(self):
        self.hosts = []

    def notify(self, event_type, lease, reservations=None, usage=None):
        return True

    def notify_host(self, event_type, host, reason, idle_until=None,
                    wake_at=None):
        self.hosts.append((event_type, host['hypervisor_hostname'],
                           idle_until, wake_at))
        return True


class IdleHostActionTest(test_host_reservation.HostLeaseMixin,
                         base.LeaseFunctionalBase):

    CLOCK_START = datetime.datetime(2030, 1, 1, 12, 0, 0)
    COMPUTES = {'host1': (4, 8192, 100), 'host2': (4, 8192, 100),
                'host3': (4, 8192, 100)}

    def setUp(self):
        super().setUp()
        self.engine, self.plugin = self._engine(
            idle_host_action='disable', idle_host_min_hours=1,
            idle_host_wake_minutes=30)
        self.notified = _Recorder()
        self.engine.notifier = self.notified

    def _services(self):
        return {s['host']: s for s in self.admin_api.api_get(
            '/os-services?binary=nova-compute').body['services']}

    def _state(self):
        return {host: (s['status'], s['disabled_reason'])
                for host, s in self._services().items()}

    def _operator_disables(self, host):
        service = self._services()[host]
        self.admin_api.api_put('/os-services/%s' % service['id'],
                               {'status': 'disabled',
                                'disabled_reason': 'maintenance'})

    def _pass(self):
        return self.engine.idle_hosts.run_pass()

    def test_disable_idle_hosts_and_wake_before_a_lease(self):
        self._register('host1', ssd='true')
        self._register('host2')
        self._register('host3')
        # host2 runs a server (an admin forced it there); an operator
        # disabled host3.
        forced = {'server': self._build_server(
            name='forced', image_uuid=self.image_id, flavor_id='1',
            networks='none', az='nova:host2')}
        self._wait_for_state_change(self.admin_api.post_server(forced),
                                    'ACTIVE')
        self._operator_disables('host3')
        lease = self._create(self._lease_body(
            '2030-01-01 15:00', '2030-01-01 16:00', reservations=[
                self._host_res(extra_specs={'ssd': 'true'})]))
        self.assertEqual(['host1'], self._hosts_of(lease))

        # 12:00: host1 is free until 15:00, to be woken at 14:30 (2.5 h
        # disabled, over the hour asked).
        self.assertEqual({'host1': 'disabled'}, self._pass())
        state = self._state()
        self.assertEqual('disabled', state['host1'][0])
        self.assertTrue(state['host1'][1].startswith(idle.REASON_PREFIX),
                        state['host1'])
        self.assertIn('2030-01-01T14:30:00Z', state['host1'][1])
        self.assertEqual(('enabled', None), state['host2'])
        self.assertEqual(('disabled', 'maintenance'), state['host3'])
        self.assertEqual(
            [('host.idle.disable', 'host1',
              datetime.datetime(2030, 1, 1, 15, 0),
              datetime.datetime(2030, 1, 1, 14, 30))], self.notified.hosts)
        # It looks before it acts: a second pass (another engine) does
        # nothing.
        self.assertEqual({}, self._pass())
        self.clock.advance(hours=2)
        self.assertEqual({}, self._pass())
        self.assertEqual('disabled', self._state()['host1'][0])

        # 14:30: the promise is 30 minutes away: host1 is enabled; the
        # operator's host3 still not.
        self.clock.advance(minutes=30)
        self.assertEqual({'host1': 'enabled'}, self._pass())
        state = self._state()
        self.assertEqual(('enabled', None), state['host1'])
        self.assertEqual(('disabled', 'maintenance'), state['host3'])
        self.assertEqual(['host.idle.disable', 'host.idle.enable'],
                         [n[0] for n in self.notified.hosts])
        self.assertEqual({}, self._pass())

        # 15:00: the lease starts on host1, and its server lands there.
        self.clock.advance(minutes=30)
        self.assertEqual(1, self.engine.process_due())
        lease = self._lease(lease['id'])
        self.assertEqual('ACTIVE', lease['status'])
        server = self._boot_hinted(lease['reservations'][0]['id'])
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])
        # Busy host1 stays enabled; host2 (its server) and host3 (the
        # operator's) untouched.
        self.assertEqual({}, self._pass())
        self.assertEqual(('disabled', 'maintenance'),
                         self._state()['host3'])

    def test_lease_starting_now_wakes_its_host(self):
        self._register('host1')
        self._operator_disables('host2')
        self._operator_disables('host3')
        # No promise at all: disabled for good.
        self.assertEqual({'host1': 'disabled'}, self._pass())
        self.assertEqual([('host.idle.disable', 'host1', None, None)],
                         self.notified.hosts)
        # A lease created after the pass, starting now: the host plugin
        # enables the host before it starts the lease.
        lease = self._create(self._lease_body('now', self._at(hours=1)))
        self.assertEqual(1, self.engine.process_due())
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        self.assertEqual(('enabled', None), self._state()['host1'])
        server = self._boot_hinted(lease['reservations'][0]['id'])
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])

    def test_lease_started_between_the_read_and_the_disable_keeps_its_host(
            self):
        # I1: the pass reads the calendar (host1 idle for good), then,
        # before it acts, a lease is created on host1 and started (its
        # start finds host1 enabled: nothing to wake). The pass looks
        # again under the host's lock and leaves host1 enabled.
        self._register('host1')
        self._operator_disables('host2')
        self._operator_disables('host3')
        passes = self.engine.idle_hosts
        real = passes._disable
        leases = []

        def lease_between_read_and_action(*args, **kwargs):
            if not leases:
                leases.append(self._create(self._lease_body(
                    'now', self._at(hours=1))))
                self.assertEqual(1, self.engine.process_due())
                self.assertEqual('ACTIVE',
                                 self._lease(leases[0]['id'])['status'])
            return real(*args, **kwargs)

        with mock.patch.object(passes, '_disable',
                               lease_between_read_and_action):
            self.assertEqual({}, self._pass())
        self.assertEqual(1, len(leases))
        self.assertEqual(('enabled', None), self._state()['host1'])
        self.assertEqual([], self.notified.hosts)
        self.assertEqual(0, passes.stats['disabled'])
        # The owner's boot lands on its host at once (no pass needed).
        server = self._boot_hinted(leases[0]['reservations'][0]['id'])
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])

    def test_start_wakes_its_host_with_the_action_off_here(self):
        # I1: a start always leaves its hosts enabled, also on an engine
        # whose own idle action is off (another engine's pass disabled
        # the host).
        self._register('host1')
        self._operator_disables('host2')
        self._operator_disables('host3')
        self.assertEqual({'host1': 'disabled'}, self._pass())
        engine, _plugin = self._engine(idle_host_action='none')
        lease = self._create(self._lease_body('now', self._at(hours=1)))
        self.assertEqual(1, engine.process_due())
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        self.assertEqual(('enabled', None), self._state()['host1'])
        server = self._boot_hinted(lease['reservations'][0]['id'])
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])

    def test_turned_off_enables_what_it_disabled(self):
        self._register('host1')
        self._register('host2')
        self._operator_disables('host3')
        self.assertEqual({'host1': 'disabled', 'host2': 'disabled'},
                         self._pass())
        # A host that leaves the registry is enabled.
        self.admin_api.api_delete('/os-reservation/os-hosts/%s' % [
            h['id'] for h in self.admin_api.api_get(
                '/os-reservation/os-hosts').body['hosts']
            if h['hypervisor_hostname'] == 'host2'][0])
        self.assertEqual({'host2': 'enabled'}, self._pass())
        # An engine started with the action off enables the rest, once,
        # and only its own (its real loop: the pass runs in a thread of
        # its own).
        engine, _plugin = self._engine(idle_host_action='none')
        runner = threading.Thread(target=engine.run, daemon=True)
        runner.start()
        self.addCleanup(runner.join, 30)
        self.addCleanup(engine.stop)
        deadline = time.monotonic() + 20
        while (not engine.idle_hosts.stats['enabled'] and
               time.monotonic() < deadline):
            time.sleep(0.1)
        self.assertEqual({'passes': 1, 'disabled': 0, 'enabled': 1},
                         engine.idle_hosts.stats)
        state = self._state()
        self.assertEqual(('enabled', None), state['host1'])
        self.assertEqual(('disabled', 'maintenance'), state['host3'])


class MultiNodeIdleHostTest(test_host_reservation.HostLeaseMixin,
                            base.LeaseFunctionalBase):
    """One nova-compute service with several compute nodes (Ironic,
    vCenter): its service is disabled only when every node of it is a
    registered idle one, and enabled when any of them needs it.
    """

    CLOCK_START = datetime.datetime(2030, 1, 1, 12, 0, 0)
    COMPUTES = {'host1': (4, 8192, 100)}
    #: {service host: its compute nodes} (Nova's fake driver runs
    #: several nodes per service, as Ironic's does).
    NODES = {'ironic': ['node-a', 'node-b'], 'vcenter': ['vc-1', 'vc-2']}

    def _setup_compute_service(self):
        first = super()._setup_compute_service()
        driver_cls = importutils.import_class(
            'nova.virt.' + base.CONF.compute_driver)
        real = driver_cls.init_host
        for host, nodes in self.NODES.items():
            def init_host(driver, host, nodes=nodes):
                real(driver, host)
                driver._set_nodes(list(nodes))
            with mock.patch.object(driver_cls, 'init_host', init_host):
                self._start_compute_with(host, 4, 8192, 100)
        return first

    def setUp(self):
        super().setUp()
        self.engine, self.plugin = self._engine(
            idle_host_action='disable', idle_host_min_hours=1,
            idle_host_wake_minutes=30)
        self.notified = _Recorder()
        self.engine.notifier = self.notified

    def _state(self):
        return {s['host']: (s['status'], s['disabled_reason'])
                for s in self.admin_api.api_get(
                    '/os-services?binary=nova-compute').body['services']}

    def test_a_service_is_idle_only_when_all_its_nodes_are(self):
        nodes = {h['hypervisor_hostname']: h['service']['host']
                 for h in self.admin_api.api_get(
                     '/os-hypervisors/detail').body['hypervisors']}
        self.assertEqual({'host1': 'host1', 'node-a': 'ironic',
                          'node-b': 'ironic', 'vc-1': 'vcenter',
                          'vc-2': 'vcenter'}, nodes)
        self._register('host1')
        self._register('node-a', rack='a')
        self._register('node-b', rack='b')
        # vc-2 is not registered: it takes unleased work.
        self._register('vc-1')
        # node-a is promised from 12:20: its service must stay enabled,
        # whatever node-b does.
        lease = self._create(self._lease_body(
            '2030-01-01 12:20', '2030-01-01 13:00', reservations=[
                self._host_res(extra_specs={'rack': 'a'})]))
        self.assertEqual(['node-a'], self._hosts_of(lease))
        self.assertEqual({'host1': 'disabled'}, self.engine.idle_hosts
                         .run_pass())
        state = self._state()
        self.assertEqual(('enabled', None), state['ironic'])
        self.assertEqual(('enabled', None), state['vcenter'])
        self.assertEqual('disabled', state['host1'][0])

        # Without the promise, both nodes are idle: the service is
        # disabled, once.
        self.api.api_delete(PREFIX + '/leases/%s' % lease['id'])
        self.assertEqual({'node-a': 'disabled', 'node-b': 'disabled'},
                         self.engine.idle_hosts.run_pass())
        self.assertEqual('disabled', self._state()['ironic'][0])
        self.assertTrue(self._state()['ironic'][1].startswith(
            idle.REASON_PREFIX))
        self.assertEqual(['host1', 'node-a'],
                         [n[1] for n in self.notified.hosts])
        self.assertEqual({}, self.engine.idle_hosts.run_pass())

        # A promise on either node wakes the service.
        self._create(self._lease_body(
            '2030-01-01 12:10', '2030-01-01 13:00', reservations=[
                self._host_res(extra_specs={'rack': 'b'})]))
        self.assertEqual({'node-a': 'enabled', 'node-b': 'enabled'},
                         self.engine.idle_hosts.run_pass())
        self.assertEqual(('enabled', None), self._state()['ironic'])
        self.assertEqual({}, self.engine.idle_hosts.run_pass())
        self.assertEqual(('enabled', None), self._state()['vcenter'])

    def test_hunt_lists_the_servers_of_its_node(self):
        # A best-effort hunt that takes node-a has node-a's servers to
        # move, not those of node-b, which shares node-a's service.
        from nova import context as nova_context

        from nova_lease.api_ext import nova_hosts

        body = {'server': self._build_server(
            name='on-b', image_uuid=self.image_id, flavor_id='1',
            networks='none', az='nova:ironic:node-b')}
        server = self._wait_for_state_change(
            self.admin_api.post_server(body), 'ACTIVE')
        self.assertEqual('node-b',
                         server['OS-EXT-SRV-ATTR:hypervisor_hostname'])
        ctx = nova_context.get_admin_context()
        self.assertEqual([], nova_hosts.servers_to_move(ctx, 'ironic',
                                                        node='node-a'))
        self.assertEqual([server['id']], [s.id for s in nova_hosts
                                          .servers_to_move(ctx, 'ironic',
                                                           node='node-b')])
        # Without a node: every node of the service (as before).
        self.assertEqual([server['id']], [
            s.id for s in nova_hosts.servers_to_move(ctx, 'ironic')])


class InstanceReservationIdleHostTest(
        test_flavor_reservation.FlavorLeaseMixin, base.LeaseFunctionalBase):
    """I2: Blazar's instance reservations (``virtual:instance``,
    ``flavor:instance``) have slots on registered hosts of the free pool,
    which the idle action disables when nothing is promised there: their
    start, and a booking that starts within ``idle_host_wake_minutes``,
    wake the hosts the slots are on.
    """

    CLOCK_START = datetime.datetime(2030, 1, 1, 12, 0, 0)

    def setUp(self):
        super().setUp()
        self.engine, self.plugin = self._engine(
            idle_host_action='disable', idle_host_min_hours=1,
            idle_host_wake_minutes=30)

    def _state(self):
        return {s['host']: (s['status'], s['disabled_reason'])
                for s in self.admin_api.api_get(
                    '/os-services?binary=nova-compute').body['services']}

    def _slot_lease(self, start, end):
        lease = self._create(self._lease_body(start, end, reservations=[
            self._instance_res(1)]))
        [host] = self._hosts_of(lease)
        return lease, host

    def test_start_wakes_the_slot_host(self):
        self.assertEqual({'host1': 'disabled', 'host2': 'disabled'},
                         self.engine.idle_hosts.run_pass())
        # Booked three hours ahead: its host stays disabled (idle until
        # 14:30).
        lease, host = self._slot_lease('2030-01-01 15:00',
                                       '2030-01-01 16:00')
        self.assertEqual('disabled', self._state()[host][0])
        self.assertEqual({}, self.engine.idle_hosts.run_pass())
        # No pass ran since (a long idle_host_interval, or a pass that
        # failed): the start itself wakes the slot's host.
        self.clock.advance(hours=3)
        self.assertEqual(1, self.engine.process_due())
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        state = self._state()
        self.assertEqual(('enabled', None), state[host])
        other = ({'host1', 'host2'} - {host}).pop()
        self.assertEqual('disabled', state[other][0])
        [res] = self._lease(lease['id'])['reservations']
        server = self._boot_reserved(res, 'promised')
        self.assertEqual(host, self._host(server))

    def test_booking_that_starts_soon_wakes_the_slot_host(self):
        self.assertEqual({'host1': 'disabled', 'host2': 'disabled'},
                         self.engine.idle_hosts.run_pass())
        # Starts in 10 minutes, within idle_host_wake_minutes: its host
        # is woken as the booking commits, before any pass.
        lease, host = self._slot_lease('2030-01-01 12:10',
                                       '2030-01-01 13:00')
        state = self._state()
        self.assertEqual(('enabled', None), state[host])
        other = ({'host1', 'host2'} - {host}).pop()
        self.assertEqual('disabled', state[other][0])
        # The pass leaves it enabled, and the boot at the start lands.
        self.assertEqual({}, self.engine.idle_hosts.run_pass())
        self.clock.advance(minutes=10)
        self.assertEqual(1, self.engine.process_due())
        [res] = self._lease(lease['id'])['reservations']
        server = self._boot_reserved(res, 'promised')
        self.assertEqual(host, self._host(server))
