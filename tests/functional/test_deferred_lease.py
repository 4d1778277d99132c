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
"""A future leased server is a real Nova server from its boot on (issue 29).

A boot with lease hints whose start is in the future is admitted against
the calendar and creates a real server, SHELVED_OFFLOADED, unscheduled
(no capacity now, no placement allocation); Nova lists, shows, finds,
renames, tags and deletes it as any shelved server; at the start the
engine unshelves it, with the same id, onto the promised host. Same
setting as tests.functional.test_instance_lease (the real compute hook on
Nova's notifications, the engine as nova-lease-engine builds it, the
``nova`` and ``openstack`` CLIs in process through the harness Keystone).
"""

import datetime

from nova.tests.functional.api import client as api_client
from oslo_serialization import jsonutils

from nova_lease.db import api as db_api
from tests.functional import test_harness
from tests.functional.test_instance_lease import InstanceLeaseTest

HOUR = datetime.timedelta(hours=1)


class FutureServerTest(InstanceLeaseTest):

    COMPUTES = {'host1': (4, 8192, 100)}

    # A host of N vcpus holds N vcpus (Nova's default CPU allocation
    # ratio is 4.0).
    ALLOCATION_RATIO = 1.0

    def setUp(self):
        super().setUp()
        self.T = self.clock.now
        self._create_flavor(id='big', name='big', vcpu=4, memory_mb=512,
                            disk=1, ephemeral=0)

    def _future_body(self, start, end, name='later', flavor='big',
                     lease_extra=None, **server_extra):
        body = {'server': self._build_server(
            name=name, image_uuid=self.image_id, flavor_id=flavor,
            networks='none')}
        body['server'].update(server_extra)
        body['os:scheduler_hints'] = {
            'reserved': 'True', 'lease_params': jsonutils.dumps(dict({
                'name': name, 'start': self._date(start),
                'end': self._date(end)}, **(lease_extra or {})))}
        return body

    def _book(self, start, end, **kwargs):
        """POST /servers for a future lease; returns the 202's server."""
        resp = self.api.api_post('/servers', self._future_body(
            start, end, **kwargs), check_response_status=[202])
        return resp.body['server']

    def _leases(self, project=None):
        return db_api.lease_list(self.db, project_id=project)

    def _nova_servers(self):
        return self.admin_api.get_servers(search_opts={'all_tenants': 1})

    def _lease_of(self, server_id):
        [reservation] = db_api.reservation_list(self.db,
                                                resource_id=server_id)
        return db_api.lease_get(self.db, reservation['lease_id'])

    def _placement_allocations(self, server_id):
        return self.placement.get(
            '/allocations/%s' % server_id).body['allocations']

    def _ids(self, **kwargs):
        return [s['id'] for s in self.api.get_servers(**kwargs)]

    def _usage(self, api=None):
        return (api or self.api).get_limits()['absolute']


class TestShelvedFromTheBoot(FutureServerTest):

    def test_boot_is_a_real_shelved_offloaded_server(self):
        T = self.T
        server = self._book(T + HOUR, T + 2 * HOUR)
        lease = self._lease_of(server['id'])
        [reservation] = lease['reservations']
        self.assertEqual(('PENDING', server['id']),
                         (lease['status'], reservation['resource_id']))
        self.assertTrue(reservation['properties']['shelved_until_start'])
        shown = self.api.get_server(server['id'])
        self.assertEqual(
            (server['id'], 'later', 'SHELVED_OFFLOADED', ['reserved'], {},
             None),
            (shown['id'], shown['name'], shown['status'], shown['tags'],
             shown['addresses'], shown.get('OS-EXT-SRV-ATTR:host')))
        self.assertEqual({'lease_id': lease['id'],
                          'lease_status': 'reserved'}, shown['metadata'])
        self.assertEqual(self.image_id, shown['image']['id'])
        self.assertEqual('big', shown['flavor']['original_name'])
        # No capacity now: no host, no placement allocation; the promise
        # is the lease's allocation on host1.
        self.assertEqual({}, self._placement_allocations(server['id']))
        [allocation] = db_api.allocation_list(
            self.db, reservation_id=reservation['id'])
        self.assertEqual('host1', allocation['host'])
        admin_view = self.admin_api.get_server(server['id'])
        self.assertIsNone(admin_view['OS-EXT-SRV-ATTR:host'])
        # Listed, found by name, paginated, filtered, as Nova does.
        self.assertEqual([server['id']],
                         [s['id'] for s in self.api.get_servers()])
        self.assertEqual([server['id']], self._ids(
            detail=False, search_opts={'name': '^later$'}))
        self.assertEqual([], self.api.get_servers(
            search_opts={'status': 'ACTIVE'}))
        self.assertEqual([server['id']], self._ids(
            search_opts={'status': 'SHELVED_OFFLOADED', 'limit': 1}))
        self.assertEqual([], self.api.get_servers(
            search_opts={'marker': server['id']}))
        self.assertEqual([server['id']], self._ids(
            search_opts={'changes-since': self._date(T - HOUR)}))
        self.assertEqual([server['id']],
                         [s['id'] for s in self._nova_servers()])
        # Counted against the project's quota as a shelved-offloaded
        # server is (an instance and its cores and RAM, legacy quotas).
        usage = self._usage()
        self.assertEqual((1, 4, 512), (usage['totalInstancesUsed'],
                                       usage['totalCoresUsed'],
                                       usage['totalRAMUsed']))
        # Another project sees nothing of it.
        other = api_client.TestOpenStackClient(
            'other', self.api.base_url, project_id='other-project',
            roles=['reader', 'member'])
        self.assertRaises(api_client.OpenStackApiNotFoundException,
                          other.get_server, server['id'])
        self.assertEqual([], other.get_servers())
        # Deleted as any shelved-offloaded server: the lease ends and
        # its promise goes.
        self.api.delete_server(server['id'])
        self._gone(server['id'])
        self._wait_for(
            lambda: self._lease_of(server['id'])['status'] == 'TERMINATED',
            'lease ended')
        self.assertEqual([], db_api.allocation_list(
            self.db, reservation_id=reservation['id']))

    def test_nova_and_openstack_clis(self):
        T = self.T
        out = self.nova_cli(
            'boot', '--flavor', 'big', '--image', 'fakeimage7',
            '--nic', 'none', '--hint', 'reserved=True', '--hint',
            'lease_params={"name": "cli", "start": "%s", "end": "%s"}'
            % (self._date(T + HOUR), self._date(T + 2 * HOUR)), 'vm1')
        server_id = test_harness._table_value(out, 'id')
        self.assertEqual('SHELVED_OFFLOADED',
                         test_harness._table_value(out, 'status'))
        lease = self._lease_of(server_id)
        self.assertEqual(server_id, lease['reservations'][0]['resource_id'])
        # nova list, show by name.
        listed = self.nova_cli('list')
        self.assertIn(server_id, listed)
        self.assertIn('SHELVED_OFFLOADED', listed)
        shown = self.nova_cli('show', 'vm1')
        self.assertEqual(server_id, test_harness._table_value(shown, 'id'))
        self.assertEqual(
            {'lease_id': lease['id'], 'lease_status': 'reserved'},
            jsonutils.loads(test_harness._table_value(shown, 'metadata')))
        # nova list --name; openstack server list (with --name) and show
        # by name.
        listed = self.nova_cli('list', '--name', '^vm1$')
        self.assertIn(server_id, listed)
        self.assertNotIn(server_id, self.nova_cli('list', '--name', 'vm2'))
        listed = jsonutils.loads(self.openstack_cli(
            'server', 'list', '-f', 'json'))
        self.assertEqual([(server_id, 'vm1', 'SHELVED_OFFLOADED')],
                         [(s['ID'], s['Name'], s['Status']) for s in listed])
        listed = jsonutils.loads(self.openstack_cli(
            'server', 'list', '--name', '^vm1$', '-f', 'json'))
        self.assertEqual([server_id], [s['ID'] for s in listed])
        self.assertEqual([], jsonutils.loads(self.openstack_cli(
            'server', 'list', '--name', 'vm2', '-f', 'json')))
        shown = jsonutils.loads(self.openstack_cli(
            'server', 'show', 'vm1', '-f', 'json'))
        self.assertEqual((server_id, 'SHELVED_OFFLOADED'),
                         (shown['id'], shown['status']))
        self.assertEqual({'lease_id': lease['id'],
                          'lease_status': 'reserved'}, shown['properties'])
        # Renamed by name. Its tags and metadata Nova refuses to change
        # while it is shelved-offloaded, as for any such server.
        self.openstack_cli('server', 'set', '--name', 'vm2', 'vm1')
        self.openstack_cli('--os-compute-api-version', '2.26', 'server',
                           'set', '--tag', 'blue', 'vm2', expect_exit=1)
        shown = self.api.get_server(server_id)
        self.assertEqual('vm2', shown['name'])
        self.assertEqual(['reserved'], shown['tags'])
        error = self.assertRaises(
            api_client.OpenStackApiException, self.api.api_post,
            '/servers/%s/metadata' % server_id, {'metadata': {'k': 'v'}})
        self.assertEqual(409, error.response.status_code)
        self.assertIn('shelved_offloaded', error.response.text)
        self.assertNotIn(server_id, self.nova_cli('list', '--name', 'vm1'))
        self.assertIn(server_id, self.nova_cli('list', '--name', 'vm2'))
        # Deleted by name: the lease ends, its promise goes.
        self.openstack_cli('server', 'delete', '--wait', 'vm2')
        self._gone(server_id)
        self._wait_for(
            lambda: self._lease_of(server_id)['status'] == 'TERMINATED',
            'lease ended')
        self.assertEqual([], db_api.allocation_list(
            self.db, reservation_id=lease['reservations'][0]['id']))
        self.assertEqual([], self._nova_servers())

    def test_malformed_body_is_400_and_books_nothing(self):
        T = self.T
        body = self._future_body(T + HOUR, T + 2 * HOUR)
        body['server']['networks'] = 'everything'
        error = self.assertRaises(api_client.OpenStackApiException,
                                  self.api.api_post, '/servers', body)
        self.assertEqual(400, error.response.status_code)
        self.assertIn('networks', error.response.text)
        self.assertEqual([], self._leases())
        self.assertEqual([], self._nova_servers())

    def test_quota_exceeded_is_novas_403_and_books_nothing(self):
        T = self.T
        self.flags(instances=0, group='quota')
        error = self.assertRaises(
            api_client.OpenStackApiException, self.api.api_post, '/servers',
            self._future_body(T + HOUR, T + 2 * HOUR))
        self.assertEqual(403, error.response.status_code)
        self.assertIn('Quota exceeded for instances', error.response.text)
        self.assertEqual([], self._leases())
        self.assertEqual([], self._nova_servers())


class TestAtTheStart(FutureServerTest):

    def test_active_with_the_same_id_on_the_promised_host(self):
        T = self.T
        out = self.nova_cli(
            'boot', '--flavor', 'big', '--image', 'fakeimage7',
            '--nic', 'none', '--hint', 'reserved=True', '--hint',
            'lease_params={"name": "cli", "start": "%s", "end": "%s"}'
            % (self._date(T + HOUR), self._date(T + 2 * HOUR)), 'vm1')
        server_id = test_harness._table_value(out, 'id')
        self.clock.advance_to(T + HOUR)
        self.engine.process_due()
        lease = self._lease_of(server_id)
        self.assertEqual('ACTIVE', lease['status'])
        shown = self.nova_cli('show', 'vm1')
        self.assertEqual((server_id, 'ACTIVE'), (
            test_harness._table_value(shown, 'id'),
            test_harness._table_value(shown, 'status')))
        self.assertEqual(
            'host1',
            self.admin_api.get_server(server_id)['OS-EXT-SRV-ATTR:host'])
        server = self.api.get_server(server_id)
        self.assertEqual({'lease_id': lease['id'], 'lease_status': 'active'},
                         server['metadata'])
        self.assertEqual([], server['tags'])
        self.assertNoTransitional()
        # At its end the server goes; nothing is left.
        self.clock.advance_to(lease['end_date'])
        self.engine.process_due()
        self._gone(server_id)
        self.assertEqual('TERMINATED', self._lease_of(server_id)['status'])
        self.assertEqual([], self._nova_servers())

    def test_full_now_still_admits_a_future_lease_started_on_time(self):
        T = self.T
        # The cloud (one host) is full now with a lease that ends in an
        # hour.
        now_hints = {'reserved': 'True', 'lease_params': jsonutils.dumps(
            {'name': 'now', 'duration': '1h'})}
        running = self._boot(hints=now_hints, name='now', flavor='big')
        self.engine.process_due()
        # A lease of the same size from T+2h: admitted (the host is free
        # by then), its server exists now, shelved, holding nothing.
        server = self._book(T + 2 * HOUR, T + 4 * HOUR)
        self.assertEqual('PENDING', self._lease_of(server['id'])['status'])
        self.assertEqual('SHELVED_OFFLOADED',
                         self.api.get_server(server['id'])['status'])
        self.assertEqual({}, self._placement_allocations(server['id']))
        # A third of the same size for the same window does not fit.
        error = self.assertRaises(
            api_client.OpenStackApiException, self.api.api_post, '/servers',
            self._future_body(T + 2 * HOUR, T + 3 * HOUR, name='third'))
        self.assertEqual(409, error.response.status_code)
        self.assertEqual(2, len(self._nova_servers()))
        # The first lease ends (its server is deleted), the second starts
        # on time: the same server, ACTIVE on the promised host.
        self.clock.advance(hours=1)
        self.engine.process_due()
        self._gone(running['id'])
        self.clock.advance_to(T + 2 * HOUR)
        self.engine.process_due()
        lease = self._lease_of(server['id'])
        self.assertEqual('ACTIVE', lease['status'])
        shown = self.admin_api.get_server(server['id'])
        self.assertEqual(('ACTIVE', 'host1', 'later'),
                         (shown['status'], shown['OS-EXT-SRV-ATTR:host'],
                          shown['name']))
        self.assertEqual((self.api.project_id, 'fake'),
                         (shown['tenant_id'], shown['user_id']))
        self.assertNoTransitional()

    def test_multi_create_names_servers_as_nova_does(self):
        T = self.T
        self._create_flavor(id='small', name='small', vcpu=1,
                            memory_mb=256, disk=1, ephemeral=0)
        self.api.api_post('/servers', self._future_body(
            T + HOUR, T + 2 * HOUR, name='pair', flavor='small',
            min_count=2), check_response_status=[202])
        [lease] = self._leases()
        self.assertEqual(2, len(lease['reservations']))
        servers = {s['name']: s['id'] for s in self._nova_servers()}
        self.assertEqual(['pair-1', 'pair-2'], sorted(servers))
        self.assertEqual(set(servers.values()),
                         {r['resource_id'] for r in lease['reservations']})
        # Deleting one of two keeps the lease and the other.
        self.api.delete_server(servers['pair-1'])
        self._gone(servers['pair-1'])
        self.clock.advance_to(T + HOUR)
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease_of(servers['pair-2'])['status'])
        self.assertEqual(
            [('pair-2', 'ACTIVE')],
            [(s['name'], s['status']) for s in self._nova_servers()])

    def test_engine_that_catches_up_after_the_end_starts_nothing(self):
        # The engine was down over the whole window: the late start does
        # nothing (the action gate refuses to give an ended lease
        # anything), the end follows and deletes the server.
        T = self.T
        server_id = self._book(T + HOUR, T + 2 * HOUR)['id']
        self.clock.advance(hours=3)
        self.engine.process_due()
        lease = self._lease_of(server_id)
        self.assertEqual('TERMINATED', lease['status'])
        self._gone(server_id)
        self.assertEqual(
            ['DONE'] * 3, [e['status'] for e in db_api.event_list(
                self.db, lease_id=lease['id'])])
        self.assertNoTransitional()

    def test_lease_deleted_before_its_start_deletes_its_server(self):
        T = self.T
        server_id = self._book(T + HOUR, T + 2 * HOUR)['id']
        lease_id = self._lease_of(server_id)['id']
        self.api.api_delete('/os-reservation/leases/%s' % lease_id)
        self.engine.process_due()
        self._gone(server_id)
        self.clock.advance(hours=3)
        self.engine.process_due()
        self.assertEqual([], self._nova_servers())
        self.assertNoTransitional()

    def test_server_deleted_while_its_start_runs_ends_the_lease(self):
        # The user deletes the server while the engine starts its lease:
        # the hook leaves such a lease to the engine (its start is in
        # progress), so the notification is as good as lost here. The
        # start finds the server gone: not a failure to retry (it was
        # retried until reconcile ended the lease, ~60 s), the lease ends
        # at once, as for a server deleted any other time.
        T = self.T
        server_id = self._book(T + HOUR, T + 2 * HOUR)['id']
        lease_id = self._lease_of(server_id)['id']
        self.listener.stop()
        self.listener.wait()
        self.api.delete_server(server_id)
        self._gone(server_id)
        self.assertEqual('PENDING', db_api.lease_get(self.db,
                                                     lease_id)['status'])
        self.clock.advance_to(T + HOUR)
        self.engine.process_due()
        lease = db_api.lease_get(self.db, lease_id)
        self.assertEqual('TERMINATED', lease['status'])
        self.assertEqual(['deleted'],
                         [r['status'] for r in lease['reservations']])
        # Started once (not retried), then ended.
        self.assertEqual({'DONE'}, {e['status'] for e in lease['events']})
        self.assertEqual([1], [e['attempts'] for e in lease['events']
                               if e['event_type'] == 'start_lease'])
        self.assertNoTransitional()

    def test_deleted_before_its_start_with_on_end_shelve(self):
        # on_end=shelve keeps a server its lease ran; one whose lease never
        # started holds nothing of the user's: the lease's deletion
        # deletes it (a shelved server left behind, still marked for the
        # removed lease, would run leaseless once unshelved).
        T = self.T
        server_id = self._book(T + HOUR, T + 2 * HOUR,
                               lease_extra={'on_end': 'shelve'})['id']
        lease_id = self._lease_of(server_id)['id']
        self.api.api_delete('/os-reservation/leases/%s' % lease_id)
        self.engine.process_due()
        self._gone(server_id)
        self.assertRaises(db_api.LeaseNotFound, db_api.lease_get, self.db,
                          lease_id)
        self.assertNoTransitional()


class TestPromisedHost(FutureServerTest):

    # Nova's weighers prefer host2 (more free RAM); admission promises
    # host1 (see _book_on_host1).
    COMPUTES = {'host1': (4, 8192, 100), 'host2': (8, 16384, 200)}

    def _book_on_host1(self, start, end):
        """A lease over [start, end), promised on host1.

        Admission takes the host with the largest share of its capacity
        left over the period: host2 (one vcpu of eight promised by a
        first lease that overlaps the period and starts later) and host1
        (one of four once this one is on it) are then level, and the
        first by name wins.
        """
        first = self._book(start + HOUR / 2, end + HOUR, name='first')
        [allocation] = db_api.allocation_list(
            self.db, reservation_id=self._lease_of(
                first['id'])['reservations'][0]['id'])
        self.assertEqual('host2', allocation['host'])
        return self._book(start, end)

    def test_started_on_the_promised_host_not_novas_choice(self):
        T = self.T
        server = self._book_on_host1(T + HOUR, T + 2 * HOUR)
        lease = self._lease_of(server['id'])
        [allocation] = db_api.allocation_list(
            self.db, reservation_id=lease['reservations'][0]['id'])
        self.assertEqual('host1', allocation['host'])
        plain = self._boot(name='plain', flavor='1')
        self.assertEqual('host2', plain['OS-EXT-SRV-ATTR:host'])
        self._delete_server(plain)
        self.clock.advance_to(T + HOUR)
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease_of(server['id'])['status'])
        shown = self.admin_api.get_server(server['id'])
        self.assertEqual(('ACTIVE', 'host1'),
                         (shown['status'], shown['OS-EXT-SRV-ATTR:host']))

    def test_no_valid_host_at_start_is_retried(self):
        T = self.T
        server = self._book_on_host1(T + HOUR, T + 2 * HOUR)
        # The promised host is down at the start: the unshelve finds no
        # valid host (never host2), the server stays shelved and the
        # start is retried.
        service = self.admin_api.get_services(host='host1',
                                              binary='nova-compute')[0]
        self.admin_api.put_service(service['id'], {'status': 'disabled'})
        self.clock.advance_to(T + HOUR)
        self.engine.process_due()
        lease = self._lease_of(server['id'])
        self.assertEqual('PENDING', lease['status'])
        self.assertEqual('SHELVED_OFFLOADED',
                         self.api.get_server(server['id'])['status'])
        self.admin_api.put_service(service['id'], {'status': 'enabled'})
        self.clock.advance(seconds=5)
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease_of(server['id'])['status'])
        shown = self.admin_api.get_server(server['id'])
        self.assertEqual(('ACTIVE', 'host1'),
                         (shown['status'], shown['OS-EXT-SRV-ATTR:host']))
        self.assertNoTransitional()
