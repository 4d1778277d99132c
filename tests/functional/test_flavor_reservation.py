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
"""Blazar's instance reservations through the lease API, on real Nova.

``virtual:instance`` (a size and an ``amount``) and ``flavor:instance``
(an existing flavor and an ``amount``): admission on the registered
hosts, the reservation's private flavor and server group, boots with
that flavor counted against ``amount``, affinity, the end action.
"""

import time

from nova.tests.functional.api import client as api_client

from nova_lease import audit
from nova_lease.db import api as db_api
from nova_lease.plugins.flavor import plugin as flavor_plugin
from tests.functional import base
from tests.functional import test_host_reservation
from tests.functional import test_lease_api

PREFIX = test_host_reservation.PREFIX


class FlavorLeaseMixin(test_host_reservation.HostLeaseMixin):
    """An engine with the physical:host and flavor:instance plugins, and
    every host registered.
    """

    MORE_PLUGINS = {flavor_plugin.RESOURCE_TYPE: flavor_plugin.FlavorPlugin}

    def setUp(self):
        super().setUp()
        # As on Blazar's one-node gate: every host in the free pool.
        self.registered = {name: self._register(name)
                           for name in ('host1', 'host2')}

    def _host_id(self, name):
        return self.registered[name]['id']

    def _instance_res(self, amount=1, affinity=False, **sizes):
        res = {'resource_type': 'virtual:instance', 'amount': amount,
               'vcpus': 1, 'memory_mb': 512, 'disk_gb': 1,
               'affinity': affinity, 'resource_properties': ''}
        res.update(sizes)
        return res

    def _flavors(self):
        return {f['id'] for f in self.admin_api.api_get(
            '/flavors?is_public=None').body['flavors']}

    def _groups(self):
        return {g['id'] for g in self.admin_api.api_get(
            '/os-server-groups?all_projects=True').body['server_groups']}

    def _assert_no_slot_left(self, reservation, name):
        """A boot with the reservation's flavor is a 409: no slot left."""
        error = self.assertRaises(
            api_client.OpenStackApiException, self._boot_reserved,
            reservation, name, wait=None)
        self.assertEqual(409, error.response.status_code)
        self.assertIn('has 0 of its', error.response.text)

    def _boot_reserved(self, reservation, name, wait='ACTIVE'):
        hints = None
        if reservation.get('server_group_id'):
            hints = {'group': reservation['server_group_id']}
        return self._boot(hints, name=name, flavor=reservation['id'],
                          wait=wait)


class FlavorReservationTest(FlavorLeaseMixin, base.LeaseFunctionalBase):

    def test_anti_affinity_amount_and_end(self):
        flavors, groups = self._flavors(), self._groups()
        lease = self._create(self._lease_body('now', self._at(hours=1),
                                              reservations=[
                                                  self._instance_res(2)]))
        [res] = lease['reservations']
        self.assertEqual('virtual:instance', res['resource_type'])
        self.assertEqual(res['id'], res['flavor_id'])
        self.assertIn(res['server_group_id'], self._groups())
        self.assertEqual(2, res['amount'])
        self.assertEqual(['host1', 'host2'], self._hosts_of(lease))
        # Not before the start: the project has no access yet.
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        self.assertEqual(['host1', 'host2'],
                         sorted(self._aggregate(res['id'])['hosts']))
        self.assertEqual(['host1', 'host2'],
                         sorted(self._aggregate('freepool')['hosts']))
        one = self._boot_reserved(res, 'one')
        two = self._boot_reserved(res, 'two')
        self.assertEqual({'host1', 'host2'},
                         {self._host(one), self._host(two)})
        # The amount + 1-th boot is refused (no slot left).
        self._assert_no_slot_left(res, 'three')
        # Nor has a boot without the reservation: every host is the free
        # pool's.
        self._assert_no_valid_host(self._boot(name='plain', wait=None))
        # Deleting the lease ends it: its servers, flavor, group and
        # aggregate go; the hosts stay in the free pool.
        self.api.api_delete(PREFIX + '/leases/%s' % lease['id'],
                            check_response_status=[204])
        self.engine.process_due()
        self.assertEqual('TERMINATED', self._lease(lease['id'])['status'])
        for server in (one, two):
            self._wait_until_deleted(server)
        self.assertIsNone(self._aggregate(res['id']))
        self.assertEqual(flavors, self._flavors())
        self.assertEqual(groups, self._groups())
        self.assertEqual(['host1', 'host2'],
                         sorted(self._aggregate('freepool')['hosts']))

    def test_end_deletes_only_the_leases_projects_servers(self):
        # X2: another project's server with the reservation's flavor (one
        # the operator shared the flavor with) is not deleted
        # at the end: it is left alone and named in the log; the lease's
        # note counts it without naming it.
        other = api_client.TestOpenStackClient(
            'other-admin', self.api_fixture.base_url,
            project_id=test_lease_api.OTHER_PROJECT,
            roles=['reader', 'member', 'admin'])
        other.microversion = 'latest'
        lease = self._create(self._lease_body('now', self._at(hours=1),
                                              reservations=[
                                                  self._instance_res(2)]))
        [res] = lease['reservations']
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        mine = self._boot_reserved(res, 'mine')
        # The operator shares the flavor with another project.
        self.admin_api.api_post('/flavors/%s/action' % res['id'], {
            'addTenantAccess': {'tenant': test_lease_api.OTHER_PROJECT}})
        theirs = other.post_server({'server': self._build_server(
            name='theirs', image_uuid=self.image_id, flavor_id=res['id'],
            networks='none')})
        for _i in range(100):
            if self.admin_api.get_server(theirs['id'])['status'] in (
                    'ACTIVE', 'ERROR'):
                break
            time.sleep(0.1)
        self.assertEqual(res['id'], self.admin_api.get_server(
            theirs['id'])['flavor']['original_name'].split(':')[-1])
        self.api.api_delete(PREFIX + '/leases/%s' % lease['id'],
                            check_response_status=[204])
        self.engine.process_due()
        lease = self._lease(lease['id'])
        self.assertEqual('TERMINATED', lease['status'])
        self._wait_until_deleted(mine)
        # Another project's server is untouched.
        self.assertEqual(theirs['id'],
                         self.admin_api.get_server(theirs['id'])['id'])
        self.assertIn('1 server(s) of other projects', lease['status_reason'])
        self.assertNotIn(theirs['id'], lease['status_reason'])
        self.assertEqual([], [r for r in db_api.action_list(
            self.lease_db, lease_id=lease['id'])
            if r['target_id'] == theirs['id']])

    def test_affinity_puts_every_slot_on_one_host(self):
        lease = self._create(self._lease_body('now', self._at(hours=1),
                                              reservations=[
                                                  self._instance_res(
                                                      3, affinity=True)]))
        [res] = lease['reservations']
        hosts = self._hosts_of(lease)
        self.assertEqual(3, len(hosts))
        self.assertEqual(1, len(set(hosts)))
        self.engine.process_due()
        servers = [self._boot_reserved(res, 'a%d' % i) for i in range(3)]
        self.assertEqual(set(hosts), {self._host(s) for s in servers})

    def test_slots_fit_what_placement_offers(self):
        # host1 has 8,192 MB, of which placement offers 7,680 (512 MB are
        # reserved for the host): two 4,096 MB instances do not fit there
        # together, whatever its raw size says. Every promised boot runs.
        lease = self._create(self._lease_body('now', self._at(hours=1),
                                              reservations=[
                                                  self._instance_res(
                                                      2, affinity=True,
                                                      memory_mb=4096)]))
        [res] = lease['reservations']
        self.assertEqual(['host2', 'host2'], self._hosts_of(lease))
        self.engine.process_due()
        servers = [self._boot_reserved(res, 'm%d' % i) for i in range(2)]
        self.assertEqual({'host2'}, {self._host(s) for s in servers})

    def test_refused_when_it_does_not_fit_and_nothing_is_left(self):
        flavors, groups = self._flavors(), self._groups()
        counts = self._counts()
        # Anti-affinity: one per host, and there are two hosts.
        body = self._create(self._lease_body(
            'now', self._at(hours=1),
            reservations=[self._instance_res(3)]), status=409)
        self.assertIn('Not enough hosts available', body['error_message'])
        self.assertIn('reservations[0]', body['error_message'])
        # Too big for any host (host2 has 8 vCPUs).
        body = self._create(self._lease_body(
            'now', self._at(hours=1),
            reservations=[self._instance_res(1, vcpus=9)]), status=409)
        self.assertIn('Not enough hosts available', body['error_message'])
        self.assertEqual(counts, self._counts())
        self.assertEqual(flavors, self._flavors())
        self.assertEqual(groups, self._groups())
        # A host lease over the same time takes one host: one slot left.
        self._create(self._lease_body('now', self._at(hours=1),
                                      name='host-lease'))
        self._create(self._lease_body('now', self._at(hours=1),
                                      reservations=[self._instance_res(2)]),
                     status=409)
        lease = self._create(self._lease_body(
            'now', self._at(hours=1), reservations=[self._instance_res(1)]))
        # And the slot's host is busy for host leases now.
        body = self._create(self._lease_body('now', self._at(hours=1),
                                             name='second-host-lease'),
                            status=409)
        self.assertIn('not enough free hosts', body['error_message'])
        self.assertEqual(1, len(self._hosts_of(lease)))

    def _one_tiny_slot_for_an_hour(self):
        """A lease from now for an hour: one m1.tiny (flavor 1) slot."""
        return self._create(self._lease_body('now', self._at(hours=1),
                                             reservations=[{
                                                 'resource_type':
                                                     'flavor:instance',
                                                 'flavor_id': '1',
                                                 'amount': 1,
                                                 'affinity': None,
                                                 'resource_properties':
                                                     ''}]))

    def test_flavor_instance_reservation(self):
        lease = self._one_tiny_slot_for_an_hour()
        [res] = lease['reservations']
        self.assertEqual('flavor:instance', res['resource_type'])
        self.assertIsNone(res['server_group_id'])
        self.assertEqual('1', res['source_flavor_id'])
        # m1.tiny's size.
        self.assertEqual((1, 512, 1), (res['vcpus'], res['memory_mb'],
                                       res['disk_gb']))
        self.engine.process_due()
        server = self._boot_reserved(res, 'f1')
        self._assert_no_slot_left(res, 'f2')
        # Its end deletes the server booted with the flavor, and no
        # other server.
        self.clock.advance(hours=1, minutes=1)
        self.engine.process_due()
        self._wait_until_deleted(server)
        self.assertEqual('TERMINATED', self._lease(lease['id'])['status'])
        statuses = {r['status'] for r in db_api.reservation_list(
            self.lease_db, lease_id=lease['id'])}
        self.assertEqual({'deleted'}, statuses)

    def test_overflow_error_as_blazar(self):
        # [nova_lease_api] instance_reservation_overflow = error: the boot over
        # the slots goes to Nova and ends in ERROR (Blazar's acceptance
        # tests expect it), and still gets no host.
        self.flags(instance_reservation_overflow='error',
                   group='nova_lease_api')
        lease = self._one_tiny_slot_for_an_hour()
        [res] = lease['reservations']
        self.engine.process_due()
        first = self._boot_reserved(res, 'f1')
        over = self._boot_reserved(res, 'f2', wait='ERROR')
        self.assertIn('No valid host', over['fault']['message'])
        self.assertEqual('ACTIVE', self.api.get_server(first['id'])['status'])

    def test_dates_change_while_the_slots_fit(self):
        # Placement offers 7,680 MB on host1 and 15,872 MB on host2: one
        # 7,680 MB slot there, two here.
        big = self._instance_res(1, affinity=None, memory_mb=7680)
        lease = self._create(self._lease_body('now', self._at(hours=1),
                                              reservations=[big]))
        [host] = self._hosts_of(lease)
        self.engine.process_due()
        server = self._boot_reserved(lease['reservations'][0], 'big')
        url = PREFIX + '/leases/%s' % lease['id']
        # Later leases take what is left of both hosts from 2 h on.
        self._create(self._lease_body(
            self._at(hours=2), self._at(hours=3), name='later',
            reservations=[self._instance_res(3, affinity=None,
                                             memory_mb=7680)]))
        # Extended within the free time: fine.
        updated = self.api.api_put(url, {'end_date': self._at(
            hours=1, minutes=30)}).body['lease']
        self.assertEqual(self._at(hours=1, minutes=30),
                         updated['end_date'][:16].replace('T', ' '))
        # Into the later lease's time: 409, nothing changes.
        body = self.api.api_put(url, {'end_date': self._at(hours=2,
                                                           minutes=30)},
                                check_response_status=[409]).body
        self.assertIn('Not enough hosts available', body['error_message'])
        # (N1: members read it; the host is in the log.)
        self.assertNotIn(host, body['error_message'])
        self.assertEqual(updated['end_date'],
                         self._lease(lease['id'])['end_date'])
        # Shortened: it ends then, and its server goes.
        self.api.api_put(url, {'end_date': self._at(minutes=10)})
        self.clock.advance(minutes=11)
        self.engine.process_due()
        self._wait_until_deleted(server)
        self.assertEqual('TERMINATED', self._lease(lease['id'])['status'])

    def test_bad_requests_name_the_field(self):
        cases = [
            (self._instance_res(0), 'reservations[0].amount'),
            (dict(self._instance_res(), affinity='maybe'),
             'reservations[0].affinity'),
            ({'resource_type': 'virtual:instance', 'amount': 1},
             'Missing parameter vcpus'),
            ({'resource_type': 'flavor:instance', 'amount': 1,
              'flavor_id': 'no-such-flavor'}, 'flavor no-such-flavor not '
                                              'found'),
            (dict(self._instance_res(), colour='red'),
             "'reservations[0].colour': unknown key"),
        ]
        for res, message in cases:
            body = self._create(self._lease_body(
                'now', self._at(hours=1), reservations=[res]), status=400)
            self.assertIn(message, body['error_message'])


class ReservationUpdateTest(FlavorLeaseMixin, base.LeaseFunctionalBase):
    """``PUT /leases/{id}`` with ``reservations`` (Blazar's updates)."""

    def _put(self, lease, items, status=200):
        resp = self.api.api_put(PREFIX + '/leases/%s' % lease['id'],
                                {'reservations': items},
                                check_response_status=[status])
        return resp.body['lease'] if status == 200 else resp.body

    def test_active_host_reservation_takes_more_hosts_at_once(self):
        lease = self._create(self._lease_body('now', self._at(hours=1)))
        rid = lease['reservations'][0]['id']
        self.engine.process_due()
        [first] = self._hosts_of(lease)
        updated = self._put(lease, [{'id': rid, 'max': 2}])
        self.assertEqual(2, updated['reservations'][0]['max'])
        self.assertEqual(['host1', 'host2'], self._hosts_of(lease))
        # In its aggregate now, out of the free pool, without the engine.
        self.assertEqual(['host1', 'host2'],
                         sorted(self._aggregate(rid)['hosts']))
        self.assertEqual([], self._aggregate('freepool')['hosts'])
        # A started reservation keeps its hosts: max cannot go down.
        body = self._put(lease, [{'id': rid, 'max': 1}], status=409)
        self.assertIn('a started host reservation keeps its hosts',
                      body['error_message'])
        self.assertEqual(['host1', 'host2'], self._hosts_of(lease))
        # At its end both hosts go back.
        self.api.api_delete(PREFIX + '/leases/%s' % lease['id'],
                            check_response_status=[204])
        self.engine.process_due()
        self.assertEqual(['host1', 'host2'],
                         sorted(self._aggregate('freepool')['hosts']))
        self.assertIsNotNone(first)

    def test_pending_host_reservation_follows_its_properties(self):
        self.admin_api.api_put(PREFIX + '/os-hosts/%s' % self._host_id(
            'host2'), {'gpu': 'true'})
        lease = self._create(self._lease_body(self._at(hours=2),
                                              self._at(hours=3)))
        rid = lease['reservations'][0]['id']
        self.assertEqual(['host1'], self._hosts_of(lease))
        updated = self._put(lease, [{
            'id': rid, 'resource_type': 'physical:host',
            'resource_properties': '["==", "$gpu", "true"]'}])
        self.assertEqual('["==", "$gpu", "true"]',
                         updated['reservations'][0]['resource_properties'])
        self.assertEqual(['host2'], self._hosts_of(lease))
        # Nothing matches: 409, nothing changes.
        body = self._put(lease, [{'id': rid, 'resource_properties':
                                  '["==", "$gpu", "false"]'}], status=409)
        self.assertIn('not enough free hosts', body['error_message'])
        self.assertEqual(['host2'], self._hosts_of(lease))
        # Bad requests name the field.
        for items, message in (
                ([{'max': 2}], 'Missing parameter reservation ID'),
                ([{'id': 'nope'}], 'Invalid reservation IDs are: nope'),
                ([{'id': rid, 'amount': 2}],
                 "'reservations[0].amount': a physical:host reservation "
                 "update may change"),
                ([{'id': rid, 'min': 2, 'max': 1}],
                 "'reservations[0].max' (1) must not be less than"),
                ([{'id': rid, 'resource_type': 'virtual:instance'}],
                 'Cannot update parameter resource_type')):
            body = self._put(lease, items, status=400)
            self.assertIn(message, body['error_message'])

    def test_instance_reservation_amount_and_size(self):
        lease = self._create(self._lease_body(
            self._at(hours=2), self._at(hours=3),
            reservations=[self._instance_res(1, affinity=None)]))
        rid = lease['reservations'][0]['id']
        # Before the start: new slots, and the flavor remade.
        updated = self._put(lease, [{'id': rid, 'amount': 3, 'vcpus': 2}])
        res = updated['reservations'][0]
        self.assertEqual((3, 2), (res['amount'], res['vcpus']))
        self.assertEqual(3, len(self._hosts_of(lease)))
        flavor = self.admin_api.api_get('/flavors/%s' % rid).body['flavor']
        self.assertEqual(2, flavor['vcpus'])
        # Too many: 409 (placement offers 16 + 32 vCPUs: 24 2-vCPU slots).
        body = self._put(lease, [{'id': rid, 'amount': 25}], status=409)
        self.assertIn('Not enough hosts available', body['error_message'])
        self.assertEqual(3, len(self._hosts_of(lease)))
        # Started: more slots yes; a new size or fewer slots no.
        self.clock.advance(hours=2)
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        self._put(lease, [{'id': rid, 'amount': 4}])
        self.assertEqual(4, len(self._hosts_of(lease)))
        body = self._put(lease, [{'id': rid, 'vcpus': 1}], status=409)
        self.assertIn('cannot change', body['error_message'])
        body = self._put(lease, [{'id': rid, 'amount': 2}], status=409)
        self.assertIn('cannot go down', body['error_message'])
        servers = [self._boot_reserved(res, 's%d' % i) for i in range(4)]
        self.assertEqual(4, len(servers))


class PendingDeleteTest(FlavorLeaseMixin, base.LeaseFunctionalBase):

    def test_deleting_a_pending_instance_lease_removes_it(self):
        # Blazar removes a lease that never started (404 afterwards), with
        # everything it held: its slots at once, its flavor and server
        # group as soon as the engine has released them, then its rows.
        flavors, groups = self._flavors(), self._groups()
        lease = self._create(self._lease_body(
            self._at(hours=2), self._at(hours=3),
            reservations=[self._instance_res(1, affinity=True)]))
        [res] = lease['reservations']
        self.assertIn(res['id'], self._flavors())
        url = PREFIX + '/leases/%s' % lease['id']
        self.api.api_delete(url, check_response_status=[204])
        self.api.api_get(url, check_response_status=[404])
        self.assertEqual([], self.api.api_get(PREFIX + '/leases').body[
            'leases'])
        self.assertEqual([], self.admin_api.api_get(
            PREFIX + '/leases?all_projects=1').body['leases'])
        self.api.api_put(url, {'name': 'again'}, check_response_status=[404])
        self.api.api_delete(url, check_response_status=[404])
        self.assertEqual([], self._hosts_of(lease))
        self.engine.process_due()
        self.assertEqual(flavors, self._flavors())
        self.assertEqual(groups, self._groups())
        self.assertRaises(db_api.LeaseNotFound, db_api.lease_get,
                          self.lease_db, lease['id'])
        self.assertEqual([], db_api.event_list(self.lease_db,
                                               lease_id=lease['id']))
        self.assertEqual([], db_api.allocation_list(self.lease_db))
        self.assertEqual([], audit.run(self.engine.conf))
