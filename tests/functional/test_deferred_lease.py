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
"""Future instance leases are created at their start (issue 11, item 5).

A boot with lease hints whose start is in the future builds nothing: the
lease is admitted and recorded with the boot request, nova-api answers
202 with the reservation's id as the server id (an alias), and at the
start the engine has nova-api create the server, as its owner, on the
promised host. Same setting as tests.functional.test_instance_lease (the
real compute hook on Nova's notifications, the engine as
nova-lease-engine builds it, python-novaclient and the ``nova`` CLI
through the harness Keystone).
"""

import datetime

import fixtures
from nova.tests.functional.api import client as api_client
from novaclient import exceptions as nova_exc
from oslo_db import exception as db_exc
from oslo_serialization import jsonutils

from nova_lease.db import api as db_api
from tests.functional import test_harness
from tests.functional.test_instance_lease import InstanceLeaseTest

HOUR = datetime.timedelta(hours=1)


class DeferredLeaseTest(InstanceLeaseTest):

    COMPUTES = {'host1': (4, 8192, 100)}

    def _setup_services(self):
        # A host of N vcpus holds N vcpus (Nova's default CPU allocation
        # ratio is 4.0); set before the computes report.
        for resource in ('cpu', 'ram', 'disk'):
            self.flags(**{'%s_allocation_ratio' % resource: 1.0,
                          'initial_%s_allocation_ratio' % resource: 1.0})
        super()._setup_services()

    def setUp(self):
        super().setUp()
        self.T = self.clock.now
        self._create_flavor(id='big', name='big', vcpu=4, memory_mb=512,
                            disk=1, ephemeral=0)

    def _future_body(self, start, end, name='later', flavor='big',
                     **server_extra):
        body = {'server': self._build_server(
            name=name, image_uuid=self.image_id, flavor_id=flavor,
            networks='none')}
        body['server'].update(server_extra)
        body['os:scheduler_hints'] = {
            'reserved': 'True', 'lease_params': jsonutils.dumps({
                'name': name, 'start': self._date(start),
                'end': self._date(end)})}
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

    def _lease_of(self, alias):
        reservation = db_api.reservation_get(self.db, alias)
        return db_api.lease_get(self.db, reservation['lease_id'])


class TestCreatedAtStart(DeferredLeaseTest):

    def test_full_now_then_created_at_start_on_the_promised_host(self):
        T = self.T
        # The host is full now with a lease that ends in an hour.
        now_hints = {'reserved': 'True', 'lease_params': jsonutils.dumps(
            {'name': 'now', 'duration': '1h'})}
        running = self._boot(hints=now_hints, name='now', flavor='big')
        self.engine.process_due()
        # A lease of the same size from T+2h: admitted (the host is free
        # by then), and nothing is built now.
        alias = self._book(T + 2 * HOUR, T + 4 * HOUR)
        lease = self._lease_of(alias['id'])
        self.assertEqual('PENDING', lease['status'])
        self.assertEqual([running['id']],
                         [s['id'] for s in self._nova_servers()])
        [allocation] = db_api.allocation_list(
            self.db, reservation_id=alias['id'])
        self.assertEqual('host1', allocation['host'])

        # The first lease ends (its server is deleted), the second starts:
        # its server is created on the promised host.
        self.clock.advance(hours=1)
        self.engine.process_due()
        self._gone(running['id'])
        self.clock.advance_to(T + 2 * HOUR)
        self.engine.process_due()
        lease = self._lease_of(alias['id'])
        self.assertEqual('ACTIVE', lease['status'])
        [reservation] = lease['reservations']
        server_id = reservation['resource_id']
        self.assertNotEqual(alias['id'], server_id)
        server = self.admin_api.get_server(server_id)
        self.assertEqual(('ACTIVE', 'host1', 'later'),
                         (server['status'], server['OS-EXT-SRV-ATTR:host'],
                          server['name']))
        self.assertEqual({'lease_id': lease['id'], 'lease_status': 'active',
                          'lease_reservation_id': alias['id']},
                         server['metadata'])
        # Owned by the lease's owner, not by the engine's service user.
        self.assertEqual((self.api.project_id, 'fake'),
                         (server['tenant_id'], server['user_id']))
        self.assertEqual({'nova_lease_reservation': [alias['id']]},
                         server['scheduler_hints'])
        # The alias now answers for the real server.
        self.assertEqual(server_id, self.api.get_server(alias['id'])['id'])
        self.assertNoTransitional()

        # At its end the real server goes; nothing is left.
        self.clock.advance_to(lease['end_date'])
        self.engine.process_due()
        self._gone(server_id)
        self.assertEqual('TERMINATED', self._lease_of(alias['id'])['status'])
        self.assertEqual([], self._nova_servers())

    def test_quota_exceeded_at_start_is_lease_error_with_novas_message(self):
        T = self.T
        alias = self._book(T + HOUR, T + 2 * HOUR)
        self.flags(instances=0, group='quota')
        self.clock.advance_to(T + HOUR)
        self.engine.process_due()                       # attempt 1
        self.assertEqual('PENDING', self._lease_of(alias['id'])['status'])
        self.clock.advance(seconds=5)
        self.engine.process_due()                       # attempt 2: gives up
        lease = self._lease_of(alias['id'])
        self.assertEqual('ERROR', lease['status'])
        self.assertIn('Quota exceeded for instances', lease['status_reason'])
        self.assertEqual([], self._nova_servers())
        self.assertNoTransitional()

    def test_retry_after_create_done_link_lost_creates_no_second_server(self):
        T = self.T
        alias = self._book(T + HOUR, T + 2 * HOUR)
        # nova-api creates the server, then cannot link it (the side
        # database fails once): the start fails and is retried.
        original = db_api.reservations_link
        calls = []

        def lose_once(*args, **kwargs):
            calls.append(args)
            if len(calls) == 1:
                raise db_exc.DBConnectionError('link lost')
            return original(*args, **kwargs)

        self.useFixture(fixtures.MockPatchObject(
            db_api, 'reservations_link', side_effect=lose_once))
        self.clock.advance_to(T + HOUR)
        self.engine.process_due()
        lease = self._lease_of(alias['id'])
        self.assertEqual('PENDING', lease['status'])
        # (A 5xx never carries database text.)
        self.assertIn('start_lease failed', lease['status_reason'])
        self.assertNotIn('link lost', lease['status_reason'])
        self.assertIsNone(lease['reservations'][0]['resource_id'])
        [orphan] = self._nova_servers()
        self.clock.advance(seconds=5)
        self.engine.process_due()
        lease = self._lease_of(alias['id'])
        self.assertEqual('ACTIVE', lease['status'])
        self.assertEqual(orphan['id'], lease['reservations'][0]['resource_id'])
        self.assertEqual([orphan['id']],
                         [s['id'] for s in self._nova_servers()])
        self.assertNoTransitional()

    def test_alias_deleted_after_create_done_link_lost(self):
        # Between two attempts of the start, the server created by the
        # first (its link lost) goes with the alias: nothing is left.
        T = self.T
        alias = self._book(T + HOUR, T + 2 * HOUR)['id']
        self.useFixture(fixtures.MockPatchObject(
            db_api, 'reservations_link',
            side_effect=db_exc.DBConnectionError('link lost')))
        self.clock.advance_to(T + HOUR)
        self.engine.process_due()
        self.assertEqual('PENDING', self._lease_of(alias)['status'])
        [orphan] = self._nova_servers()
        self.api.delete_server(alias)
        self._gone(orphan['id'])
        self.assertEqual([], self._leases())
        self.assertEqual([], self._nova_servers())
        self.clock.advance(seconds=5)
        self.assertEqual(0, self.engine.process_due())

    def test_multi_create_names_servers_as_nova_does(self):
        T = self.T
        self._create_flavor(id='small', name='small', vcpu=1,
                            memory_mb=256, disk=1, ephemeral=0)
        resp = self.api.api_post('/servers', self._future_body(
            T + HOUR, T + 2 * HOUR, name='pair', flavor='small',
            min_count=2), check_response_status=[202])
        first = resp.body['server']['id']
        [lease] = self._leases()
        self.assertEqual(2, len(lease['reservations']))
        self.assertIn(first, [r['id'] for r in lease['reservations']])
        self.assertEqual([], self._nova_servers())
        # Deleting one alias of two keeps the lease and the other.
        self.api.delete_server(first)
        [lease] = self._leases()
        self.assertEqual(1, len(lease['reservations']))
        # return_reservation_id: Nova's shape.
        resp = self.api.api_post('/servers', self._future_body(
            T + HOUR, T + 2 * HOUR, name='trio', flavor='small',
            min_count=1, max_count=2, return_reservation_id=True),
            check_response_status=[202])
        self.assertEqual(['reservation_id'], list(resp.body))
        self.clock.advance_to(T + HOUR)
        self.engine.process_due()
        names = sorted(s['name'] for s in self._nova_servers())
        # (pair-1 was deleted before the start.)
        self.assertEqual(['pair-2', 'trio-1', 'trio-2'], names)
        self.assertTrue(all(le['status'] == 'ACTIVE'
                            for le in self._leases()))


class TestAlias(DeferredLeaseTest):

    def test_boot_answers_novas_format_with_the_alias(self):
        T = self.T
        resp = self.api.api_post('/servers', self._future_body(
            T + HOUR, T + 2 * HOUR), check_response_status=[202])
        server = resp.body['server']
        [lease] = self._leases()
        [reservation] = lease['reservations']
        self.assertEqual(reservation['id'], server['id'])
        self.assertEqual({'id', 'links', 'OS-DCF:diskConfig',
                          'security_groups', 'adminPass'}, set(server))
        self.assertEqual([{'name': 'default'}], server['security_groups'])
        self.assertEqual('MANUAL', server['OS-DCF:diskConfig'])
        self.assertTrue(resp.headers['Location'].endswith(
            '/servers/' + server['id']))
        self.assertEqual([], self._nova_servers())

        shown = self.api.get_server(server['id'])
        self.assertEqual(
            (server['id'], 'later', 'SHELVED_OFFLOADED', ['reserved'], {}),
            (shown['id'], shown['name'], shown['status'], shown['tags'],
             shown['addresses']))
        self.assertEqual({'lease_id': lease['id'],
                          'lease_status': 'reserved'}, shown['metadata'])
        self.assertEqual(self.image_id, shown['image']['id'])
        self.assertEqual('big', shown['flavor']['original_name'])
        # Only for its project (and admins), like a server.
        self.assertEqual(server['id'],
                         self.admin_api.get_server(server['id'])['id'])
        other = api_client.TestOpenStackClient(
            'other', self.api.base_url, project_id='other-project',
            roles=['reader', 'member'])
        error = self.assertRaises(api_client.OpenStackApiNotFoundException,
                                  other.get_server, server['id'])
        self.assertEqual(404, error.response.status_code)
        # Any other action: 409, saying why.
        error = self.assertRaises(
            api_client.OpenStackApiException, self.api.post_server_action,
            server['id'], {'os-stop': None})
        self.assertEqual(409, error.response.status_code)
        self.assertIn('reserved by lease %s' % lease['id'],
                      error.response.text)
        # DELETE removes the reservation, and the lease with its last one.
        self.api.delete_server(server['id'])
        self.assertEqual([], self._leases())
        self.assertRaises(db_api.BootRequestNotFound,
                          db_api.boot_request_get, self.db, server['id'])
        self.assertRaises(api_client.OpenStackApiNotFoundException,
                          self.api.get_server, server['id'])
        self.assertEqual([], self._nova_servers())

    def test_nova_cli_boot_show_delete(self):
        T = self.T
        out = self.nova_cli(
            'boot', '--flavor', 'big', '--image', 'fakeimage7',
            '--nic', 'none', '--hint', 'reserved=True', '--hint',
            'lease_params={"name": "cli", "start": "%s", "end": "%s"}'
            % (self._date(T + HOUR), self._date(T + 2 * HOUR)), 'vm1')
        alias = test_harness._table_value(out, 'id')
        [lease] = self._leases()
        self.assertEqual(lease['reservations'][0]['id'], alias)
        self.assertEqual('SHELVED_OFFLOADED',
                         test_harness._table_value(out, 'status'))
        shown = self.nova_cli('show', alias)
        self.assertEqual('vm1', test_harness._table_value(shown, 'name'))
        self.assertEqual(
            {'lease_id': lease['id'], 'lease_status': 'reserved'},
            jsonutils.loads(test_harness._table_value(shown, 'metadata')))
        # python-novaclient as a library.
        server = self.nova.servers.get(alias)
        self.assertEqual('SHELVED_OFFLOADED', server.status)
        self.nova.servers.delete(alias)
        self.assertRaises(nova_exc.NotFound, self.nova.servers.get, alias)
        self.assertEqual([], self._leases())
        self.assertEqual([], self._nova_servers())

    def test_malformed_body_is_400_now(self):
        T = self.T
        body = self._future_body(T + HOUR, T + 2 * HOUR)
        body['server']['networks'] = 'everything'
        error = self.assertRaises(api_client.OpenStackApiException,
                                  self.api.api_post, '/servers', body)
        self.assertEqual(400, error.response.status_code)
        self.assertIn('networks', error.response.text)
        self.assertEqual([], self._leases())


class TestOpenStackClient(DeferredLeaseTest):

    def test_server_create_show_delete(self):
        T = self.T
        params = jsonutils.dumps({'name': 'osc', 'start': self._date(
            T + HOUR), 'end': self._date(T + 2 * HOUR)})
        out = self.openstack_cli(
            'server', 'create', '--flavor', 'big', '--image', self.image_id,
            '--no-network', '--hint', 'reserved=True', '--hint',
            'lease_params=' + params, '-f', 'json', 'vm-osc')
        created = jsonutils.loads(out)
        [lease] = self._leases()
        alias = lease['reservations'][0]['id']
        self.assertEqual((alias, 'vm-osc', 'SHELVED_OFFLOADED'),
                         (created['id'], created['name'],
                          created['status']))
        shown = jsonutils.loads(self.openstack_cli(
            'server', 'show', alias, '-f', 'json'))
        self.assertEqual({'lease_id': lease['id'],
                          'lease_status': 'reserved'}, shown['properties'])
        self.assertEqual('big', shown['flavor']['original_name'])
        self.openstack_cli('server', 'delete', alias)
        self.assertEqual([], self._leases())
        self.assertEqual([], self._nova_servers())


class TestPromisedHost(DeferredLeaseTest):

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
        first = self._book(start + HOUR / 2, end + HOUR)
        [allocation] = db_api.allocation_list(self.db,
                                              reservation_id=first['id'])
        self.assertEqual('host2', allocation['host'])
        return self._book(start, end)

    def test_created_on_the_promised_host_not_novas_choice(self):
        T = self.T
        alias = self._book_on_host1(T + HOUR, T + 2 * HOUR)
        [allocation] = db_api.allocation_list(self.db,
                                              reservation_id=alias['id'])
        self.assertEqual('host1', allocation['host'])
        plain = self._boot(name='plain', flavor='1')
        self.assertEqual('host2', plain['OS-EXT-SRV-ATTR:host'])
        self._delete_server(plain)
        self.clock.advance_to(T + HOUR)
        self.engine.process_due()
        lease = self._lease_of(alias['id'])
        self.assertEqual('ACTIVE', lease['status'])
        server = self.admin_api.get_server(
            lease['reservations'][0]['resource_id'])
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])

    def test_no_valid_host_at_start_is_retried_with_a_new_server(self):
        T = self.T
        alias = self._book_on_host1(T + HOUR, T + 2 * HOUR)
        # The promised host is down at the start: the server goes to
        # ERROR (NoValidHost, never host2); the start is retried.
        service = self.admin_api.get_services(host='host1',
                                              binary='nova-compute')[0]
        self.admin_api.put_service(service['id'], {'status': 'disabled'})
        self.clock.advance_to(T + HOUR)
        self.engine.process_due()
        lease = self._lease_of(alias['id'])
        self.assertEqual('PENDING', lease['status'])
        self.assertIn('No valid host', lease['status_reason'])
        [failed] = self._nova_servers()
        self.assertEqual('ERROR', failed['status'])
        # Back: the retry replaces the failed server.
        self.admin_api.put_service(service['id'], {'status': 'enabled'})
        self.clock.advance(seconds=5)
        self.engine.process_due()
        lease = self._lease_of(alias['id'])
        self.assertEqual('ACTIVE', lease['status'])
        [server] = self._nova_servers()
        self.assertNotEqual(failed['id'], server['id'])
        self.assertEqual(server['id'],
                         lease['reservations'][0]['resource_id'])
        self.assertEqual(('ACTIVE', 'host1'),
                         (server['status'], server['OS-EXT-SRV-ATTR:host']))
        self.assertNoTransitional()


class TestAfterTheStart(DeferredLeaseTest):

    def test_requests_to_the_alias_are_replayed_on_the_real_server(self):
        T = self.T
        alias = self._book(T + HOUR, T + 2 * HOUR)['id']
        self.clock.advance_to(T + HOUR)
        self.engine.process_due()
        real = self._lease_of(alias)['reservations'][0]['resource_id']
        # An action, a sub-resource, then the delete, all by the alias.
        self.api.post_server_action(alias, {'os-stop': None})
        self._wait_for_state_change({'id': real}, 'SHUTOFF')
        self.assertEqual(
            'active', self.api.api_get('/servers/%s/metadata/lease_status'
                                       % alias).body['meta']['lease_status'])
        self.api.delete_server(alias)
        self._gone(real)
        self.assertRaises(api_client.OpenStackApiNotFoundException,
                          self.api.get_server, alias)

    def test_engine_that_catches_up_after_the_end_builds_nothing(self):
        # The engine was down over the whole window: the late start
        # creates no server (the action gate refuses to give an ended
        # lease anything), the end follows, nothing is left and no event
        # is left to retry.
        T = self.T
        alias = self._book(T + HOUR, T + 2 * HOUR)['id']
        self.clock.advance(hours=3)
        self.engine.process_due()
        lease = self._lease_of(alias)
        self.assertEqual('TERMINATED', lease['status'])
        self.assertEqual([], self._nova_servers())
        self.assertEqual(
            ['DONE'] * 3, [e['status'] for e in db_api.event_list(
                self.db, lease_id=lease['id'])])
        self.assertNoTransitional()

    def test_lease_deleted_before_its_start_leaves_nothing(self):
        T = self.T
        alias = self._book(T + HOUR, T + 2 * HOUR)['id']
        lease_id = self._lease_of(alias)['id']
        self.api.api_delete('/os-reservation/leases/%s' % lease_id)
        self.engine.process_due()
        self.clock.advance(hours=3)
        self.engine.process_due()
        for lease in self._leases():
            self.assertEqual('TERMINATED', lease['status'])
        self.assertEqual([], self._nova_servers())
        self.assertRaises(api_client.OpenStackApiNotFoundException,
                          self.api.get_server, alias)
        self.assertNoTransitional()
