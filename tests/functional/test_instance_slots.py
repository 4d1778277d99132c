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
"""The slots of Blazar's instance reservations, on real Nova.

A reservation of ``amount`` instances holds that many servers with its
flavor, never more: not with one multi-create request, not with boots
racing for the last slot (SlotCountTest). A server that holds a slot
keeps it when it moves: unshelve, cold and live migration, evacuation
(SlotMoveTest); a resize to another flavor gives it up once confirmed
(SlotResizeTest). A new size set while the lease starts keeps the
project's access to the flavor (SizeChangeRaceTest).
"""

import threading

import fixtures
from nova.tests.functional.api import client as api_client

from nova_lease.api_ext import nova_flavors
from nova_lease.db import api as db_api
from tests.functional import base
from tests.functional import test_flavor_reservation

PREFIX = test_flavor_reservation.PREFIX
SMALL_FLAVOR = '2'      # m1.small: 1 vCPU, 2048 MB, 20 GB


class _SlotTestBase(test_flavor_reservation.FlavorLeaseMixin,
                    base.LeaseFunctionalBase):

    def _started(self, amount, affinity=None, **sizes):
        """A lease of ``amount`` slots, started now; its reservation."""
        lease = self._create(self._lease_body(
            'now', self._at(hours=1), reservations=[self._instance_res(
                amount, affinity=affinity, **sizes)]))
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        return lease['reservations'][0]

    def _post(self, res, name, min_count=None, max_count=None,
              group=True):
        """POST /servers with the reservation's flavor: (status, body)."""
        server = self._build_server(
            name=name, image_uuid=self.image_id, flavor_id=res['id'],
            networks='none')
        if min_count is not None:
            server['min_count'] = min_count
        if max_count is not None:
            server['max_count'] = max_count
        body = {'server': server}
        if group and res.get('server_group_id'):
            body['os:scheduler_hints'] = {'group': res['server_group_id']}
        resp = self.api.api_post('/servers', body,
                                 check_response_status=[202, 409])
        return resp.status, resp.body

    def _servers_of(self, res):
        """Every server with the reservation's flavor, settled (any
        project), by name.
        """
        servers = self.admin_api.get_servers(search_opts={
            'all_tenants': 1, 'flavor': res['id']})
        return {s['name']: self._settled(s) for s in servers}

    def _settled(self, server):
        for _ in range(300):
            server = self.admin_api.get_server(server['id'])
            if server['status'] not in ('BUILD',):
                return server
            self._sleep()
        self.fail('server %s still building' % server['id'])

    @staticmethod
    def _sleep():
        threading.Event().wait(0.1)

    def _statuses(self, res):
        return sorted(s['status'] for s in self._servers_of(res).values())


class SlotCountTest(_SlotTestBase):
    """Never more servers than slots (finding X1)."""

    def test_multi_create_gets_no_more_servers_than_slots_left(self):
        res = self._started(1)
        # min_count over the slots left: refused before Nova sees it,
        # in Nova's fault format, naming only the caller's reservation.
        status, body = self._post(res, 'three', min_count=3)
        self.assertEqual(409, status, body)
        message = body['conflictingRequest']['message']
        self.assertIn('instance reservation %s has 1 of its 1 slot(s) '
                      'left' % res['id'], message)
        self.assertIn('at least 3 server(s)', message)
        self.assertEqual({}, self._servers_of(res))
        # max_count over it: as many as there are slots (as Nova does
        # with a quota).
        status, body = self._post(res, 'up-to-three', max_count=3)
        self.assertEqual(202, status, body)
        self.assertEqual(['ACTIVE'], self._statuses(res))
        # Full: the next boot is refused.
        status, body = self._post(res, 'one-more')
        self.assertEqual(409, status, body)
        self.assertIn('has 0 of its 1 slot(s) left',
                      body['conflictingRequest']['message'])
        self.assertEqual(['ACTIVE'], self._statuses(res))

    def test_multi_create_puts_one_server_per_slot_host(self):
        # One slot on each host; one request for both servers, without
        # the server group that would spread them, and Nova's weighers
        # set to stack servers (fill a host before the next): the
        # scheduler counts the request's own instances placed before.
        for name in ('ram', 'cpu', 'disk'):
            self.flags(group='filter_scheduler',
                       **{'%s_weight_multiplier' % name: -1.0})
        res = self._started(2, affinity=False)
        status, body = self._post(res, 'pair', min_count=2, group=False)
        self.assertEqual(202, status, body)
        servers = self._servers_of(res).values()
        self.assertEqual(['ACTIVE', 'ACTIVE'],
                         sorted(s['status'] for s in servers))
        self.assertEqual(['host1', 'host2'], sorted(
            s['OS-EXT-SRV-ATTR:host'] for s in servers))

    def test_boot_while_another_is_being_scheduled_for_the_last_slot(self):
        res = self._started(1)
        scheduled = threading.Event()
        go = threading.Event()
        self.addCleanup(go.set)
        calls = []
        original = self._hold_after_scheduling(calls, scheduled, go)
        self.assertIsNotNone(original)
        first = []
        thread = threading.Thread(target=lambda: first.append(
            self._post(res, 'first')))
        thread.start()
        self.addCleanup(thread.join, 60)
        # The first boot has its host (claimed in placement) and is not
        # in its cell yet.
        self.assertTrue(scheduled.wait(60))
        status, body = self._post(res, 'second')
        go.set()
        thread.join(60)
        self.assertEqual(202, first[0][0], first)
        self.assertEqual(409, status, body)
        self.assertEqual({'first'}, set(self._servers_of(res)))
        self.assertEqual(['ACTIVE'], self._statuses(res))

    def test_two_boots_past_the_api_race_for_the_last_slot(self):
        # Both pass nova-api's count (neither has a build request yet),
        # both have build requests before either is scheduled, and both
        # are scheduled before either reaches its cell: the scheduler
        # lets one of them have the slot.
        res = self._started(1)
        self._barrier('nova.compute.api.API.create')
        self._barrier('nova.conductor.api.ComputeTaskAPI.'
                      'schedule_and_build_instances')
        self._barrier('nova.scheduler.manager.SchedulerManager.'
                      'select_destinations', after=True)
        results = []
        threads = [threading.Thread(target=lambda n=n: results.append(
            self._post(res, 'racer%d' % n))) for n in range(2)]
        for thread in threads:
            thread.start()
            self.addCleanup(thread.join, 60)
        for thread in threads:
            thread.join(120)
        self.assertEqual([202, 202], [r[0] for r in results], results)
        servers = self._servers_of(res)
        self.assertEqual(['ACTIVE', 'ERROR'], sorted(
            s['status'] for s in servers.values()))
        [lost] = [s for s in servers.values() if s['status'] == 'ERROR']
        self.assertIn('No valid host', lost['fault']['message'])

    def test_a_slot_server_has_no_other_lease(self):
        # Its lease is the reservation's: no lease hints, and the
        # default lease does not apply (it would give the server an
        # interval of its own, outside the count).
        self.flags(default_lease=True, group='nova_lease')
        res = self._started(1)
        leases = len(db_api.lease_list(self.lease_db))
        server = self._build_server(name='hinted', image_uuid=self.image_id,
                                    flavor_id=res['id'], networks='none')
        params = '{"start": "now", "end": "%s"}' % self._at(minutes=30)
        body = self.api.api_post('/servers', {
            'server': server, 'os:scheduler_hints': {
                'reserved': 'True', 'lease_params': params}},
            check_response_status=[400, 202]).body
        self.assertIn("cannot have the lease hint 'reserved'",
                      body['badRequest']['message'])
        server = self._boot_reserved(res, 'slot')
        self.assertEqual(leases, len(db_api.lease_list(self.lease_db)))
        self.assertEqual(['ACTIVE'], self._statuses(res))

    # -- helpers ----------------------------------------------------------

    def _hold_after_scheduling(self, calls, scheduled, go):
        """The first select_destinations waits for ``go`` once it has
        chosen (and claimed) its host.
        """
        from nova.scheduler import manager
        original = manager.SchedulerManager.select_destinations

        def select_destinations(manager_self, *args, **kwargs):
            result = original(manager_self, *args, **kwargs)
            calls.append(1)
            if len(calls) == 1:
                scheduled.set()
                go.wait(60)
            return result

        self.stub_out('nova.scheduler.manager.SchedulerManager.'
                      'select_destinations', select_destinations)
        return original

    def _barrier(self, path, after=False):
        """Calls of the method at ``path`` wait for each other (two of
        them, at most 30 s), before it runs (or after, ``after``).
        """
        module, cls, name = path.rsplit('.', 2)
        import importlib
        original = getattr(getattr(importlib.import_module(module), cls),
                           name)
        barrier = threading.Barrier(2, timeout=30)
        self.addCleanup(barrier.abort)

        def wait():
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                pass

        def method(obj, *args, **kwargs):
            if not after:
                wait()
                return original(obj, *args, **kwargs)
            try:
                return original(obj, *args, **kwargs)
            finally:
                wait()

        self.stub_out(path, method)


class SlotMoveTest(_SlotTestBase):
    """A server that holds a slot keeps it when it moves (finding X3)."""

    def test_unshelve_the_only_server_of_a_full_reservation(self):
        res = self._started(1)
        server = self._boot_reserved(res, 'only')
        host = server['OS-EXT-SRV-ATTR:host']
        server = self._shelve_server(server)     # offloaded at once
        self.assertIsNone(server['OS-EXT-SRV-ATTR:host'])
        # The shelved server holds the slot: no other boot.
        status, body = self._post(res, 'other')
        self.assertEqual(409, status, body)
        server = self._unshelve_server(server)
        self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])

    def _two_slots_one_shelved(self):
        """Two slots (one per host), both held: one server running, the
        other shelved (offloaded). Returns (reservation, running server).
        """
        res = self._started(2, affinity=False)
        # (Without the server group: Nova's anti-affinity filter would
        # keep a server off a host another member just left, which the
        # scheduler learns late.)
        running = self._boot(name='running', flavor=res['id'])
        shelved = self._boot(name='shelved', flavor=res['id'])
        shelved = self._shelve_server(shelved)
        status, body = self._post(res, 'third')
        self.assertEqual(409, status, body)
        return res, running, shelved

    def test_cold_and_live_migration_keep_the_slot(self):
        res, server, shelved = self._two_slots_one_shelved()
        first = server['OS-EXT-SRV-ATTR:host']
        other = ({'host1', 'host2'} - {first}).pop()
        # Into the slot the shelved server left free, and back.
        server = self._migrate_server(server, api=self.admin_api)
        self.assertEqual(other, server['OS-EXT-SRV-ATTR:host'])
        server = self._confirm_resize(server)
        server = self._live_migrate(server, api=self.admin_api)
        self.assertEqual(first, self._host(server))
        # Both servers on their slots: a move has nowhere to go (the
        # other host's slot is the other server's).
        shelved = self._unshelve_server(shelved)
        self.assertEqual(other, shelved['OS-EXT-SRV-ATTR:host'])
        error = self.assertRaises(
            api_client.OpenStackApiException,
            self.admin_api.post_server_action, server['id'],
            {'migrate': None})
        self.assertIn('NoValidHost', str(error))
        self.assertEqual(first, self._host(server))

    def test_evacuation_keeps_the_slot(self):
        res, server, _shelved = self._two_slots_one_shelved()
        source = server['OS-EXT-SRV-ATTR:host']
        self.computes[source].stop()
        service = self.admin_api.get_services(
            host=source, binary='nova-compute')[0]
        self.admin_api.put_service_force_down(service['id'], True)
        # (>= 2.95 an evacuated server is stopped.)
        server = self._evacuate_server(server, expected_state='SHUTOFF')
        self.assertEqual(({'host1', 'host2'} - {source}).pop(),
                         server['OS-EXT-SRV-ATTR:host'])


class SlotResizeTest(_SlotTestBase):
    """A resize to another flavor leaves the reservation: its slot stays
    held while the resize can be reverted, and is free once confirmed.
    """

    # host3 is not registered: unleased servers go there.
    COMPUTES = dict(base.LeaseFunctionalBase.COMPUTES,
                    host3=(8, 16384, 200))

    def test_resize_gives_the_slot_up_when_confirmed(self):
        res = self._started(1)
        server = self._boot_reserved(res, 'resized')
        host = server['OS-EXT-SRV-ATTR:host']
        server = self._resize_server(server, SMALL_FLAVOR)
        self.assertEqual('host3', server['OS-EXT-SRV-ATTR:host'])
        # A revert brings it back with the reservation's flavor: its
        # slot is still its own.
        status, body = self._post(res, 'while-resized')
        self.assertEqual(409, status, body)
        server = self._revert_resize(server)
        self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
        status, body = self._post(res, 'after-revert')
        self.assertEqual(409, status, body)
        # Confirmed: the server is an ordinary one, the slot is free.
        server = self._resize_server(server, SMALL_FLAVOR)
        self._confirm_resize(server)
        other = self._boot_reserved(res, 'after-confirm')
        self.assertEqual(host, other['OS-EXT-SRV-ATTR:host'])


class SizeChangeRaceTest(_SlotTestBase):
    """A size change racing the lease's start (suspected finding S3)."""

    def test_new_size_made_after_the_start_keeps_the_flavor_access(self):
        # PUT with a new size commits while the lease is PENDING; the
        # engine starts the lease (gives the project the flavor) before
        # nova-api has made the flavor again with the new size.
        lease = self._create(self._lease_body(
            self._at(minutes=10), self._at(hours=1),
            reservations=[self._instance_res(1)]))
        rid = lease['reservations'][0]['id']
        reached = threading.Event()
        go = threading.Event()
        self.addCleanup(go.set)
        original = nova_flavors.resize

        def resize(*args, **kwargs):
            reached.set()
            go.wait(60)
            return original(*args, **kwargs)

        self.useFixture(fixtures.MockPatchObject(nova_flavors, 'resize',
                                                 new=resize))
        answers = []
        thread = threading.Thread(target=lambda: answers.append(
            self.api.api_put(PREFIX + '/leases/%s' % lease['id'], {
                'reservations': [{'id': rid, 'vcpus': 2}]},
                check_response_status=[200, 409]).status))
        thread.start()
        self.addCleanup(thread.join, 60)
        self.assertTrue(reached.wait(60))
        self.clock.advance(minutes=11)
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        go.set()
        thread.join(60)
        self.assertEqual([200], answers)
        flavor = self.admin_api.api_get('/flavors/%s' % rid).body['flavor']
        self.assertEqual(2, flavor['vcpus'])
        access = self.admin_api.api_get(
            '/flavors/%s/os-flavor-access' % rid).body['flavor_access']
        self.assertEqual([self.api.project_id],
                         [a['tenant_id'] for a in access])
        server = self._boot_reserved(lease['reservations'][0], 'sized')
        self.assertEqual(2, server['flavor']['vcpus'])
