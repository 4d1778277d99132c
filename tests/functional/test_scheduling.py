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
"""Future-aware scheduling on a real in-process Nova (issue 5).

Scheduled leases are booted through the API with the seed's hints: the
lease middleware admits and records them (``allocate_instances`` inside
its writer transaction); their servers are created shelved-offloaded.
What the engine does at the start (statuses, the unshelve) is done here
through the REST API and ``db_api``, so
that these tests do not depend on the engine's timing. Admissions without
a boot request are recorded the way the lease-recording code does it:
``allocate_instances`` and ``db_api.lease_create`` in one writer
transaction.
"""

import datetime

from unittest import mock

import nova.conf
from nova.scheduler.client import report
from nova.tests.functional.api import client as api_client
from nova.tests.unit import fake_requests
from oslo_serialization import jsonutils

from nova_lease.capacity import admission
from nova_lease.db import api as db_api
from tests.functional import base
from tests import threads

CONF = nova.conf.CONF
HOUR = datetime.timedelta(hours=1)
FLAVOR = {'vcpus': 4, 'memory_mb': 512, 'disk_gb': 1}


class _Base(base.LeaseFunctionalBase):

    # A host of N vcpus holds N vcpus (Nova's default CPU allocation
    # ratio is 4.0).
    ALLOCATION_RATIO = 1.0

    def setUp(self):
        super().setUp()
        # The scheduler keeps its snapshot for the default TTL (60 s, far
        # longer than a test): admissions reach it through the probe,
        # servers linked since it was read through their hints' lookup.
        # Let the lease weigher decide between otherwise equal hosts.
        self.flags(weigher_multiplier=10.0, group='nova_lease_scheduler')
        self.db = db_api.get_database(CONF)
        self.T = self.clock.now
        self._create_flavor(id='big', name='big', vcpu=4, memory_mb=512,
                            disk=1, ephemeral=0)

    def _admit(self, start, end, name='scheduled', flavor=FLAVOR):
        """Record a scheduled lease as the lease-recording code does.

        Admission and lease_create in one writer transaction.
        """
        with self.db.writer() as session:
            allocations = admission.allocate_instances(
                session, CONF, flavor, 1, start, end)
            lease = db_api.lease_create(session, {
                'name': name, 'project_id': 'other', 'user_id': 'fake',
                'start_date': start, 'end_date': end, 'status': 'PENDING',
            }, reservations=[{
                'resource_type': 'virtual:instance', 'status': 'pending',
                'properties': dict(flavor), 'allocations': allocations,
            }])
        return lease, allocations

    def _lease_count(self):
        return len(db_api.lease_list(self.db))

    def _hints(self, end, start=None):
        return {'reserved': 'True', 'lease_params': jsonutils.dumps({
            'name': 'l',
            'start': start.strftime('%Y-%m-%dT%H:%M:%S') if start else 'now',
            'end': end.strftime('%Y-%m-%dT%H:%M:%S')})}

    def _host(self, server):
        return server['OS-EXT-SRV-ATTR:host']

    def _delete(self, server):
        self._delete_server(server)

    def _book(self, start, end, name):
        """Boot a server for a scheduled lease through the API.

        The lease middleware admits and records it; the server is created
        shelved-offloaded, unscheduled. Returns (the server, its
        reservation, allocation).
        """
        server = self._boot(self._hints(end, start), name=name,
                            flavor='big', wait='SHELVED_OFFLOADED')
        [reservation] = db_api.reservation_list(self.db,
                                                resource_id=server['id'])
        allocations = db_api.allocation_list(
            self.db, reservation_id=reservation['id'])
        self.assertEqual(1, len(allocations))
        return server, reservation, allocations[0]

    def _start(self, reservation):
        """Start the lease as the engine does: STARTING, the server
        unshelved, then ACTIVE. Returns it.
        """
        lease_id = reservation['lease_id']
        db_api.lease_update(self.db, lease_id, {'status': 'STARTING'})
        self.admin_api.post_server_action(reservation['resource_id'],
                                          {'unshelve': None})
        server = self._wait_for_state_change(
            {'id': reservation['resource_id']}, 'ACTIVE')
        db_api.lease_update(self.db, lease_id, {'status': 'ACTIVE'})
        db_api.reservation_update(self.db, reservation['id'],
                                  {'status': 'active'})
        return server


class TestFutureAwareScheduling(_Base):

    COMPUTES = {'host1': (4, 8192, 100), 'host2': (4, 8192, 100)}

    def test_reserved_capacity_is_lent_then_returned(self):
        T = self.T
        # A scheduled lease for 4 vcpus from T+2h to T+4h, admitted onto
        # one host. Its server is shelved-offloaded until its start.
        future, reservation, allocation = self._book(
            T + 2 * HOUR, T + 4 * HOUR, 'reserved')
        promised = allocation['host']
        self.assertIn(promised, self.COMPUTES)
        self.assertEqual((T + 2 * HOUR, T + 4 * HOUR, 4),
                         (allocation['start_date'], allocation['end_date'],
                          allocation['vcpus']))
        self.assertIsNone(self.admin_api.get_server(future['id'])[
            'OS-EXT-SRV-ATTR:host'])
        other = ({'host1', 'host2'} - {promised}).pop()

        # A server without a lease would still run at T+2h: not on the
        # promised host.
        unleased = self._boot(name='unleased', flavor='big')
        self.assertEqual(other, self._host(unleased))

        # A server leased until T+1h borrows the promised capacity.
        short = self._boot(self._hints(T + HOUR), name='short',
                           flavor='big')
        self.assertEqual(promised, self._host(short))
        self._delete(short)

        # One leased until T+3h would overlap the promise: the promised
        # host refuses it (and the other one is full).
        long_ = self._boot(self._hints(T + 3 * HOUR), name='long',
                           flavor='big', wait='ERROR')
        self.assertIn('No valid host', long_['fault']['message'])
        self._delete(long_)
        self._delete(unleased)

        # At T+2h the lease starts: its server is unshelved on its host,
        # the only one it may use, although both are empty.
        self.clock.advance_to(T + 2 * HOUR)
        reserved_vm = self._start(reservation)
        self.assertEqual(promised, self._host(reserved_vm))
        self.assertEqual(reserved_vm['id'],
                         self.api.get_server(future['id'])['id'])

        # Its capacity is not counted twice: the other host still takes an
        # unleased server.
        again = self._boot(name='unleased-2', flavor='big')
        self.assertEqual(other, self._host(again))

    def test_full_window_gets_409_and_leaves_nothing(self):
        T = self.T
        first = self._book(T + 2 * HOUR, T + 4 * HOUR, 'one')[2]
        second = self._book(T + 2 * HOUR, T + 4 * HOUR, 'two')[2]
        self.assertEqual({'host1', 'host2'},
                         {first['host'], second['host']})
        leases = self._lease_count()
        allocations = db_api.allocation_list(self.db)
        servers = len(self.api.get_servers())

        # Through the API: the boot of an overlapping scheduled lease.
        exc = self.assertRaises(
            api_client.OpenStackApiException, self._boot,
            self._hints(T + 5 * HOUR, T + 3 * HOUR), name='three',
            flavor='big')
        self.assertEqual(409, exc.response.status_code)
        self.assertIn('No host can hold 1 instance(s) of 4 vcpus',
                      exc.response.text)
        # Admission itself, in the lease-recording transaction.
        exc = self.assertRaises(admission.NoCapacity, self._admit,
                                T + 3 * HOUR, T + 5 * HOUR, 'four')
        self.assertEqual(409, exc.code)
        # Nothing left behind.
        self.assertEqual(leases, self._lease_count())
        self.assertEqual(allocations, db_api.allocation_list(self.db))
        self.assertEqual(servers, len(self.api.get_servers()))
        # After the window, the hosts are free again.
        self.assertEqual(1, len(self._admit(T + 4 * HOUR, T + 6 * HOUR,
                                            'after')[1]))

    def test_parallel_admissions_for_the_last_slot(self):
        T = self.T
        self._admit(T + 2 * HOUR, T + 4 * HOUR, 'one')
        before = self._lease_count()

        def attempt(n):
            try:
                self._admit(T + 3 * HOUR, T + 5 * HOUR, 'p%d' % n)
            except admission.NoCapacity:
                return 'conflict'
            return 'admitted'

        results = threads.race(10, attempt)
        self.assertEqual(['admitted'] + ['conflict'] * 9,
                         sorted(map(str, results)))
        self.assertEqual(before + 1, self._lease_count())


class TestWeigherPrefersTightestFit(_Base):

    COMPUTES = {'host1': (4, 8192, 100), 'host2': (4, 8192, 100),
                'host3': (4, 8192, 100)}

    def _place(self, hints, name):
        server = self._boot(hints, name=name, flavor='half')
        host = self._host(server)
        self._delete(server)
        return host

    def setUp(self):
        super().setUp()
        self._create_flavor(id='half', name='half', vcpu=2, memory_mb=512,
                            disk=1, ephemeral=0)

    def test_leased_work_goes_where_it_fits_tightest(self):
        T = self.T
        # host1 is fully promised from T+1h, host2 from T+3h, host3 never.
        self.promise('host1', T + HOUR, T + 10 * HOUR, 4)
        self.promise('host2', T + 3 * HOUR, T + 10 * HOUR, 4)
        # Ends 15 min before host1's promise, 2h15 before host2's.
        self.assertEqual('host1', self._place(
            self._hints(T + 45 * MINUTE), 'until-45min'))
        # host1 cannot take it; it ends 30 min before host2's promise.
        self.assertEqual('host2', self._place(
            self._hints(T + 150 * MINUTE), 'until-2h30'))
        # A negative multiplier inverts the preference.
        self.flags(weigher_multiplier=-10.0, group='nova_lease_scheduler')
        self.assertEqual('host3', self._place(
            self._hints(T + 45 * MINUTE), 'inverted'))

    def test_unleased_work_prefers_hosts_without_promises(self):
        T = self.T
        # Half of host1 is promised from T+1h, half of host2 from T+3h:
        # an unleased 2-vcpu server fits every host.
        self.promise('host1', T + HOUR, T + 10 * HOUR, 2)
        self.promise('host2', T + 3 * HOUR, T + 10 * HOUR, 2)
        self.assertEqual('host3', self._place(None, 'unleased'))
        # With host3 gone from the choice, the later promise wins.
        self.flags(freepool_aggregate='freepool', group='nova_lease')
        self._add_to_freepool('host3')
        self.assertEqual('host2', self._place(None, 'unleased-2'))

    def _add_to_freepool(self, host):
        agg = self.admin_api.post_aggregate(
            {'aggregate': {'name': 'freepool'}})
        self.admin_api.add_host_to_aggregate(agg['id'], host)


MINUTE = datetime.timedelta(minutes=1)


class TestUsageOfMovedServers(_Base):
    """A server moved onto a host counts there at once for LeaseFilter.

    The soak found an unleased server placed next to a future promise on
    the host a server had just been live-migrated to: an overcommit.
    LeaseFilter read a host's usage now from its HostState (the compute
    node's record) alone. Nova updates that record for a live migration
    only when the destination claims the server (libvirt does, through
    its NUMA-aware live migration; the fake driver does not) or at the
    resource tracker's next periodic pass. Placement knows at once:
    LeaseFilter now reads it for the hosts a live migration reached
    lately (nova_lease.scheduler.moves).
    """

    COMPUTES = {'host1': (2, 4096, 40), 'host2': (2, 4096, 40)}

    def _disable(self, host):
        [service] = self.admin_api.get_services(host=host,
                                                binary='nova-compute')
        self.admin_api.api_put('/os-services/%s' % service['id'],
                               {'status': 'disabled'})

    def test_live_migrated_server_counts_on_its_new_host(self):
        T = self.T
        first = self._boot(name='moved')
        source = self._host(first)
        other = {'host1': 'host2', 'host2': 'host1'}[source]
        # The other host has 1 of its 2 vcpus promised from T+10m.
        self.promise(other, T + 10 * MINUTE, T + 2 * HOUR, 1)
        first = self._live_migrate(first, api=self.admin_api, host=other)
        self.assertEqual(other, self._host(first))
        # Only the other host is left: it has room now, but not from
        # T+10m (the moved server and the promise fill it).
        self._disable(source)
        second = self._boot(name='unleased', wait='ERROR')
        self.assertIn('No valid host', second['fault']['message'])

    def test_a_host_placement_cannot_tell_of_passes_nothing(self):
        first = self._boot(name='moved')
        source = self._host(first)
        other = {'host1': 'host2', 'host2': 'host1'}[source]
        self._live_migrate(first, api=self.admin_api, host=other)
        self._disable(source)
        # The other host has room for one more 1-vcpu server, but
        # placement cannot tell its usage: failing closed.
        real_get = report.SchedulerReportClient.get

        def get(client, url, *args, **kwargs):
            if url.endswith('/usages'):
                return fake_requests.FakeResponse(503, 'unavailable')
            return real_get(client, url, *args, **kwargs)

        with mock.patch.object(report.SchedulerReportClient, 'get', get):
            refused = self._boot(name='unknown', wait='ERROR')
        self.assertIn('No valid host', refused['fault']['message'])
        self._boot(name='known')
