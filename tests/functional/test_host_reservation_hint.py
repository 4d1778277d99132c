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
"""``--hint reservation=<id>`` on the real scheduler (LeaseFilter).

Host leases are started and ended by the engine (physical:host plugin);
servers are booted, shelved, unshelved, resized, migrated and evacuated
through Nova's API, scheduled by Nova's scheduler with LeaseFilter and
LeaseWeigher enabled as an operator enables them.

host1 and host2 are big (Nova's RAM and disk weighers prefer them), host3
is small and never registered: it is where work without the hint has to
go. What Nova keeps for these operations (read in Nova's code):

* the RequestSpec is stored with the server at boot, scheduler hints
  included (``RequestSpec._get_update_primitives`` serialises the whole
  object, leaving out only ``ignore_hosts``, ``requested_destination``,
  ``retry``, ``requested_resources`` and the network fields), and is
  reloaded by unshelve, resize, cold and live migration and evacuation:
  the ``reservation`` hint is checked again for each of them;
* resize and cold migration put the source host in ``ignore_hosts``
  unless same-host is allowed -- for resize ``[DEFAULT]
  allow_resize_to_same_host`` (False by default, also in Nova's functional
  fixtures), for cold migration only the compute's
  ``COMPUTE_SAME_HOST_COLD_MIGRATE`` trait, which the fake driver does not
  report (``compute.api.API._allow_resize_to_same_host``); the scheduler
  removes ignored hosts before any filter runs;
* evacuation puts the source host in ``ignore_hosts`` too
  (``conductor.manager.rebuild_instance``); a rebuild on the same host
  sets ``_nova_check_type=rebuild``, for which LeaseFilter does not run.
"""

from unittest import mock

import fixtures
from nova.tests.functional.api import client as api_client
from oslo_utils import timeutils

from nova_lease.plugins.host import aggregates as host_aggregates
from nova_lease.scheduler import request as lease_request
from nova_lease.scheduler import view
from tests.functional import base
from tests.functional import test_harness
from tests.functional import test_host_reservation
from tests.functional import test_lease_api

BIG = (8, 16384, 200)
SMALL = (4, 8192, 100)
HUGE = (16, 32768, 400)
TINY = '1'      # m1.tiny: 1 vCPU, 512 MB, 1 GB
SMALL_FLAVOR = '2'  # m1.small: 1 vCPU, 2048 MB, 20 GB


class _HintTestBase(test_host_reservation.HostLeaseMixin,
                    base.LeaseFunctionalBase):

    def _ssd_lease(self, start, end, count=1, **extra):
        res = self._host_res(
            count=count, availability_zone='nova',
            extra_specs={'ssd': 'true',
                         'capabilities:cpu_info:arch': 'x86_64'})
        lease = self._create(self._lease_body(start, end, reservations=[res],
                                              **extra))
        return lease, lease['reservations'][0]['id']

    def _owner_on_started_lease(self):
        """host1 (ssd) and host2 registered; a lease of host1 started now
        for 5 hours and the owner's hinted server on host1.

        Returns (lease, reservation id, server).
        """
        self._register('host1', ssd='true')
        self._register('host2', ssd='false')
        lease, rid = self._ssd_lease('now', self._at(hours=5))
        self.engine.process_due()
        server = self._boot_hinted(rid)
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])
        return lease, rid, server

    def _boot_with_cli(self, reservation_id, name, **kwargs):
        """``nova boot ... --hint reservation=<id>``, as users type it."""
        out = self.nova_cli(
            'boot', '--flavor', TINY, '--image', self.image_id,
            '--nic', 'none', '--hint', 'reservation=%s' % reservation_id,
            name, **kwargs)
        return {'id': test_harness._table_value(out, 'id')}

    def spy_on_function(self, module, name):
        """Record the calls of ``module.name``, which still does its work.
        """
        original = getattr(module, name)
        recorder = mock.Mock(side_effect=original)
        self.useFixture(fixtures.MockPatchObject(module, name, new=recorder))
        return recorder

    def _boot_unhinted(self, count, prefix='unhinted'):
        return [self._boot(name='%s-%d' % (prefix, n)) for n in range(count)]

    def _migrate_fails(self, server, host=None):
        """An admin cold migration (to ``host``) ends in NoValidHost."""
        self.move_fails(server, 'migrate',
                        {'migrate': {'host': host} if host else None})


class HostReservationHintTest(_HintTestBase):

    # Nova's weighers prefer host1 and host2 to host3.
    COMPUTES = {'host1': BIG, 'host2': BIG, 'host3': SMALL}

    def test_hint_lands_on_the_reservation_for_its_owner_only(self):
        self._register('host1', ssd='true')
        self._register('host2', ssd='false')
        lease, rid = self._ssd_lease('now', self._at(hours=2))
        self.assertEqual(['host1'], self._hosts_of(lease))

        # The lease starts now, but until the engine has started it
        # (PENDING) the hint leads nowhere.
        self._assert_no_valid_host(
            self._boot_hinted(rid, name='too-early', wait=None))

        before = view.get_snapshot(timeutils.utcnow(), wait=60)
        self.assertEqual('PENDING', before.reservations[rid].lease_status)

        self.assertEqual(1, self.engine.process_due())
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        aggregate = self._aggregate(host_aggregates.aggregate_name(rid))
        self.assertEqual(['host1'], aggregate['hosts'])

        # Right after the start the owner boots with the nova CLI. The
        # scheduler's snapshot may still be the one read before the
        # start (see scheduler_snapshot_ttl): it is held there for this
        # boot; the reservation is then read from the side database.
        lookup = self.spy_on_function(lease_request,
                                      'lookup_reservation')
        with mock.patch.object(view, 'get_snapshot',
                               side_effect=lambda now, conf=None: before):
            server = self._wait_for_state_change(
                self._boot_with_cli(rid, 'vm1'), 'ACTIVE')
        self.assertEqual('host1', self._host(server))
        self.assertTrue(lookup.called)
        self.assertEqual(rid, lookup.call_args.args[1])
        self.assertEqual({'reservation': [rid]},
                         self.api.get_server(server['id'])['scheduler_hints'])
        # And again through the REST API.
        second = self._boot_hinted(rid, name='vm2')
        self.assertEqual('host1', second['OS-EXT-SRV-ATTR:host'])

        # Another project, same hint: NoValidHost (the CLI too).
        stranger = self._other_api()
        stranger.microversion = 'latest'
        self._assert_no_valid_host(self._boot_hinted(
            rid, name='stranger', api=stranger, wait=None))
        other_cli = self._boot_with_cli(
            rid, 'stranger-cli', project_id=test_lease_api.OTHER_PROJECT)
        self._assert_no_valid_host(other_cli)

        # Without the hint: never host1 (reserved), nor host2 (free pool),
        # although Nova's weighers prefer both to host3.
        unhinted = self._boot_unhinted(4)
        self.assertEqual(['host3'] * 4,
                         [s['OS-EXT-SRV-ATTR:host'] for s in unhinted])
        self.assertEqual('host3', self._boot(
            name='stranger-vm', api=stranger)['OS-EXT-SRV-ATTR:host'])

        # End: the owner's servers are gone, host1 is back in the free
        # pool, the aggregate is gone, the lease TERMINATED; servers
        # elsewhere are left alone.
        self.clock.advance(hours=1)
        self.assertEqual(1, self.engine.process_due())
        self.clock.advance(hours=1)
        self.assertEqual(1, self.engine.process_due())
        self._wait_until_deleted(server)
        self._wait_until_deleted(second)
        self.assertEqual('TERMINATED', self._lease(lease['id'])['status'])
        self.assertIsNone(self._aggregate(host_aggregates.aggregate_name(rid)))
        self.assertEqual(['host1', 'host2'],
                         sorted(self._aggregate('freepool')['hosts']))
        for left in unhinted:
            self.assertEqual('ACTIVE',
                             self.api.get_server(left['id'])['status'])
        # The hint of a TERMINATED lease leads nowhere either.
        self._assert_no_valid_host(
            self._boot_hinted(rid, name='too-late', wait=None))

    def test_future_lease(self):
        self._register('host1', ssd='true')
        self._register('host2', ssd='false')
        lease, rid = self._ssd_lease(self._at(hours=1), self._at(hours=3))
        self.assertEqual(['host1'], self._hosts_of(lease))
        # Before the start: NoValidHost with the hint; without it, not
        # on host1 (it would still run at the start) nor host2.
        self._assert_no_valid_host(
            self._boot_hinted(rid, name='too-early', wait=None))
        self.assertEqual('host3', self._boot()['OS-EXT-SRV-ATTR:host'])
        self.clock.advance(hours=1)
        self.assertEqual(1, self.engine.process_due())
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        server = self._boot_hinted(rid)
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])

    def test_unhinted_work_stays_off_until_the_engine_ends_the_lease(self):
        # Between the end of the allocation and the engine's end_lease
        # (its lag), host1 is still in the reservation's aggregate and
        # its servers are about to be deleted: no unhinted server there.
        self._register('host1', ssd='true')
        self._register('host2', ssd='false')
        lease, rid = self._ssd_lease('now', self._at(hours=1))
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        self.clock.advance(hours=1, minutes=1)
        self.assertEqual(['host1'], self._aggregate(
            host_aggregates.aggregate_name(rid))['hosts'])
        self.assertEqual(['host3', 'host3'], [
            s['OS-EXT-SRV-ATTR:host'] for s in self._boot_unhinted(2)])
        # Nor a hinted one: the lease is over.
        self._assert_no_valid_host(
            self._boot_hinted(rid, name='too-late', wait=None))
        self.engine.process_due()
        self.assertEqual('TERMINATED', self._lease(lease['id'])['status'])

    def test_hint_after_an_early_end(self):
        lease, rid, server = self._owner_on_started_lease()
        active = view.get_snapshot(timeutils.utcnow(), wait=60)
        self.assertEqual('ACTIVE', active.reservations[rid].lease_status)
        # The owner deletes the lease: the engine ends it at once.
        self.api.api_delete(test_host_reservation.PREFIX + '/leases/%s' %
                            lease['id'], check_response_status=[204])
        self.assertEqual(1, self.engine.process_due())
        self._wait_until_deleted(server)
        self.assertEqual('TERMINATED', self._lease(lease['id'])['status'])
        self.assertEqual(['host1', 'host2'],
                         sorted(self._aggregate('freepool')['hosts']))
        # A scheduler whose snapshot is older (the lease ACTIVE for 5
        # more hours) does not let the hint in: host1 has left the
        # reservation's aggregate.
        with mock.patch.object(view, 'get_snapshot',
                               side_effect=lambda now, conf=None: active):
            self._assert_no_valid_host(
                self._boot_hinted(rid, name='too-late', wait=None))

    def test_operations_on_a_one_host_reservation(self):
        lease, rid, server = self._owner_on_started_lease()
        unleased = self._boot(name='unleased')
        self.assertEqual('host3', unleased['OS-EXT-SRV-ATTR:host'])

        # shelve (offloaded at once) and unshelve: back on host1.
        server = self._shelve_server(server)
        self.assertIsNone(server['OS-EXT-SRV-ATTR:host'])
        server = self._unshelve_server(server)
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])

        # Cold migration: no other reserved host.
        self._migrate_fails(server)
        # Resize: the source host is ignored (allow_resize_to_same_host
        # is False): no other reserved host either.
        self.move_fails(server, 'resize',
                        {'resize': {'flavorRef': SMALL_FLAVOR}},
                        api=self.api)
        # Allowed on the same host: it stays there.
        self.flags(allow_resize_to_same_host=True)
        server = self._resize_server(server, SMALL_FLAVOR)
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])
        server = self._confirm_resize(server)
        self.assertEqual('m1.small', server['flavor']['original_name'])

        # An unleased server cannot be moved onto the reserved host, nor
        # into the free pool.
        self._migrate_fails(unleased, host='host1')
        self._migrate_fails(unleased, host='host2')
        self._migrate_fails(unleased)


class TwoHostReservationHintTest(_HintTestBase):

    # Nova's weighers prefer host3: moves of a hinted server would go
    # there without LeaseFilter.
    COMPUTES = {'host1': BIG, 'host2': BIG, 'host3': HUGE}

    def test_operations_on_a_two_host_reservation(self):
        self._register('host1', ssd='true')
        self._register('host2', ssd='true')
        lease, rid = self._ssd_lease('now', self._at(hours=5), count=2)
        self.assertEqual(['host1', 'host2'], self._hosts_of(lease))
        self.engine.process_due()
        self.assertEqual([], self._aggregate('freepool')['hosts'])
        reserved = {'host1', 'host2'}
        server = self._boot_hinted(rid)
        first = server['OS-EXT-SRV-ATTR:host']
        self.assertIn(first, reserved)
        unleased = self._boot(name='unleased')
        self.assertEqual('host3', unleased['OS-EXT-SRV-ATTR:host'])

        def other(host):
            return (reserved - {host}).pop()

        # Cold migration: to the other reserved host, never host3.
        server = self._migrate_server(server, api=self.admin_api)
        self.assertEqual(other(first), server['OS-EXT-SRV-ATTR:host'])
        server = self._confirm_resize(server)
        # Resize (source host ignored): back to the first one.
        server = self._resize_server(server, SMALL_FLAVOR)
        self.assertEqual(first, server['OS-EXT-SRV-ATTR:host'])
        server = self._confirm_resize(server)
        # Live migration: to the other one.
        server = self._live_migrate(server, api=self.admin_api)
        self.assertEqual(other(first), self._host(server))
        # shelve / unshelve: on a reserved host.
        server = self._unshelve_server(self._shelve_server(server))
        self.assertIn(server['OS-EXT-SRV-ATTR:host'], reserved)

        # An unleased server is not moved onto either reserved host.
        self._migrate_fails(unleased, host='host1')
        self._migrate_fails(unleased, host='host2')
        error = self.assertRaises(
            api_client.OpenStackApiException,
            self.admin_api.post_server_action, unleased['id'],
            {'os-migrateLive': {'host': 'host1', 'block_migration': 'auto'}})
        self.assertIn('NoValidHost', str(error))
        self._wait_for_migration_status(unleased, ['error'])
        unleased = self._wait_for_state_change(unleased, 'ACTIVE')
        self.assertEqual('host3', unleased['OS-EXT-SRV-ATTR:host'])

        # Evacuation of a reserved host: to the other reserved host.
        source = self._host(server)
        self.computes[source].stop()
        service = self.admin_api.get_services(
            host=source, binary='nova-compute')[0]
        self.admin_api.put_service_force_down(service['id'], True)
        # (>= 2.95 an evacuated server is stopped.)
        server = self._evacuate_server(server, expected_state='SHUTOFF')
        self.assertEqual(other(source), server['OS-EXT-SRV-ATTR:host'])
