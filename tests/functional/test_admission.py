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
"""Admission control of future instance leases on the in-process Nova.

Leased boots go through the REST API and the nova_lease paste filter;
hosts are registered and leased through the lease API and started by
the engine with the physical:host plugin; what admission promised is
read back from the side database.
"""

import collections
import threading
import time

from nova.compute import resource_tracker

from nova_lease.db import api as db_api
from tests.functional import test_host_reservation
from tests.functional import test_scheduling
from tests import threads

HOUR = test_scheduling.HOUR


class _AdmissionBase(test_host_reservation.HostLeaseMixin,
                     test_scheduling._Base):

    def _future_boot(self, flavor, start, end, name='future'):
        """A leased boot for [start, end): (HTTP status, JSON body)."""
        body = {'server': self._build_server(
            name=name, image_uuid=self.image_id, flavor_id=flavor,
            networks='none')}
        body['os:scheduler_hints'] = self._hints(end, start)
        resp = self.api.api_post('/servers', body,
                                 check_response_status=[202, 400, 403,
                                                        409])
        return resp.status, resp.body

    def _promised_hosts(self):
        return sorted(a['host'] for a in db_api.allocation_list(self.db)
                      if not a['whole_host'])

    def overcommitted(self):
        """Every (host, instant, demand, capacity) where what runs for
        ever plus what is promised exceeds the host's capacity.

        Computed from placement (capacity and usage of each compute
        node), Nova's servers and the side database: a server linked to
        a live lease counts until its lease ends (or starts, if it runs
        before its start), any other server for ever; an allocation
        counts over its interval. Checked at now and at every
        allocation's start after now.
        """
        now = self.clock.now
        leases = {}
        for lease in db_api.lease_list(self.db):
            if lease['status'] in ('TERMINATED', 'ERROR') or \
                    lease['end_date'] <= now:
                continue
            for res in lease['reservations']:
                if res['resource_id'] and res['status'] in ('pending',
                                                            'active'):
                    leases[res['resource_id']] = lease
        running = collections.defaultdict(list)   # host -> [(until, v)]
        for server in self.admin_api.get_servers(
                detail=True, search_opts={'all_tenants': 1}):
            host = server['OS-EXT-SRV-ATTR:hypervisor_hostname']
            if not host or server['status'] in ('SHELVED_OFFLOADED',):
                continue
            flavor = server['flavor']
            lease = leases.get(server['id'])
            until = None
            if lease is not None:
                until = (lease['start_date'] if lease['start_date'] > now
                         else lease['end_date'])
            running[host].append((until, flavor['vcpus']))
        promised = collections.defaultdict(list)
        for lease in db_api.lease_list(self.db):
            if lease['status'] in ('TERMINATED', 'ERROR'):
                continue
            for a in db_api.allocation_list(self.db, lease_id=lease['id']):
                if a['end_date'] > now:
                    promised[a['host']].append(a)
        found = []
        for host in self.COMPUTES:
            rp = self._get_provider_uuid_by_host(host)
            inv = self._get_provider_inventory(rp)['VCPU']
            capacity = int((inv['total'] - inv['reserved']) *
                           inv['allocation_ratio'])
            usage = self._get_provider_usages(rp)['VCPU']
            known = sum(v for _u, v in running[host])
            # Usage placement holds for servers not listed yet (being
            # built) runs for ever.
            forever = max(usage - known, 0)
            instants = {now} | {a['start_date'] for a in promised[host]
                                if a['start_date'] > now}
            for t in sorted(instants):
                demand = forever + sum(
                    v for until, v in running[host]
                    if until is None or until > t) + sum(
                    a['vcpus'] for a in promised[host]
                    if a['start_date'] <= t < a['end_date'])
                if demand > capacity:
                    found.append((host, t, demand, capacity, {
                        'usage': usage, 'running': running[host],
                        'promised': [(a['start_date'], a['end_date'],
                                      a['vcpus'])
                                     for a in promised[host]]}))
        return found

    def _host_lease_now(self, hours=6):
        """A started host lease on the (one) registered host."""
        lease = self._create(self._lease_body('now', self._at(hours=hours)))
        self.assertEqual(1, self.engine.process_due())
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        return lease


class TestRegisteredHosts(_AdmissionBase):
    """Issue 11 item 4 and issue 12 item 8: instance admission never
    promises a registered host, and says so when only those are left.
    """

    COMPUTES = {'host1': (8, 16384, 200), 'host2': (2, 4096, 100)}

    def setUp(self):
        super().setUp()
        self._create_flavor(id='four', name='four', vcpu=4,
                            memory_mb=1024, disk=1, ephemeral=0)
        self._create_flavor(id='two', name='two', vcpu=2, memory_mb=1024,
                            disk=1, ephemeral=0)

    def test_host_under_host_lease_is_never_promised(self):
        # host1 is registered and held by an active host lease until
        # T+2h: it is in the reservation's aggregate, not in the free
        # pool, and goes back to the free pool when that lease ends.
        self._register('host1')
        self._host_lease_now(hours=2)
        self.assertEqual([], self._aggregate('freepool')['hosts'])
        T = self.clock.now

        # 4 vcpus from T+3h (after the host lease): only host1 is big
        # enough, and host1 is not for instances: 409, nothing promised.
        code, body = self._future_boot('four', T + 3 * HOUR, T + 5 * HOUR,
                                       name='big')
        self.assertEqual(409, code, body)
        # (N1: counted, never named: members read it.)
        message = body['conflictingRequest']['message']
        self.assertIn('1 more registered for host reservations', message)
        self.assertNotIn('host1', message)
        self.assertEqual([], self._promised_hosts())

        # 2 vcpus fit host2 (and host1): promised on host2.
        code, body = self._future_boot('two', T + 3 * HOUR, T + 5 * HOUR,
                                       name='small')
        self.assertEqual(202, code, body)
        self.assertEqual(['host2'], self._promised_hosts())

    def test_all_hosts_registered_409_says_why(self):
        self._register('host1')
        self._register('host2')
        T = self.clock.now
        code, body = self._future_boot('two', T + HOUR, T + 3 * HOUR)
        self.assertEqual(409, code, body)
        message = body['conflictingRequest']['message']
        self.assertIn('every one (2) is registered for host '
                      'reservations', message)
        self.assertNotIn('host1', message)
        self.assertNotIn('host2', message)
        self.assertEqual([], self._promised_hosts())
        self.assertEqual(0, self._lease_count())


class TestUnleasedBootsRaceAdmissions(_AdmissionBase):
    """Issue 11 item 6: admission sees the scheduler's claims as soon as
    placement has them, not when the compute node reports them.
    """

    COMPUTES = {'host1': (4, 8192, 100), 'host2': (4, 8192, 100)}

    def setUp(self):
        super().setUp()
        self._create_flavor(id='two', name='two', vcpu=2, memory_mb=512,
                            disk=1, ephemeral=0)

    def _hold_builds(self):
        """Builds stop after the scheduler's claim, before the compute
        node's usage is updated, until released. Returns (reached,
        release) events.
        """
        reached = threading.Event()
        release = threading.Event()
        original = resource_tracker.ResourceTracker.instance_claim

        def instance_claim(tracker, *args, **kwargs):
            reached.set()
            release.wait(60)
            return original(tracker, *args, **kwargs)

        self.stub_out('nova.compute.resource_tracker.ResourceTracker.'
                      'instance_claim', instance_claim)
        self.addCleanup(release.set)
        return reached, release

    def _settled(self, server, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.admin_api.get_server(server['id'])
            if found['status'] in ('ACTIVE', 'ERROR'):
                return found['status']
            time.sleep(0.1)
        return 'still %s' % found['status']

    def _wait_no_build(self, timeout=60):
        """Wait until no server is being built (any flow)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            servers = self.admin_api.get_servers(
                detail=True, search_opts={'all_tenants': 1})
            if all(s['status'] != 'BUILD' for s in servers):
                return
            time.sleep(0.1)
        self.fail('servers still building: %s' % servers)

    def test_claimed_but_not_built_is_seen(self):
        T = self.clock.now
        reached, release = self._hold_builds()
        booted = []
        booting = [threading.Thread(
            target=lambda n=n: booted.append(self._boot(
                name='unleased%d' % n, flavor='big', wait=None)))
            for n in range(2)]
        for thread in booting:
            thread.start()
            # Claimed in placement (one host each), not built yet.
            self.assertTrue(reached.wait(30))
            reached.clear()
        results = [self._future_boot('big', T + HOUR, T + 3 * HOUR,
                                     name='future')]
        release.set()
        for thread in booting:
            thread.join(60)
        for server in booted:
            self._wait_for_state_change(server, 'ACTIVE')
        self._wait_no_build()
        self.assertEqual(409, results[0][0], results)
        self.assertEqual([], self._promised_hosts())
        self.assertEqual([], self.overcommitted())

    def test_parallel_unleased_builds_and_admissions(self):
        T = self.clock.now
        # Four unleased 2-vcpu servers take both hosts (8 vcpus): each is
        # claimed in placement, then its build waits.
        claimed = threading.Semaphore(0)
        gates = {}
        original = resource_tracker.ResourceTracker.instance_claim

        def instance_claim(tracker, context, instance, *args, **kwargs):
            gate = gates.setdefault(instance.uuid, threading.Event())
            claimed.release()
            gate.wait(60)
            return original(tracker, context, instance, *args, **kwargs)

        self.stub_out('nova.compute.resource_tracker.ResourceTracker.'
                      'instance_claim', instance_claim)
        self.addCleanup(lambda: [g.set() for g in list(gates.values())])
        booted = []
        for n in range(4):
            thread = threading.Thread(target=lambda n=n: booted.append(
                self._boot(name='u%d' % n, flavor='two', wait=None)))
            thread.start()
            self.assertTrue(claimed.acquire(timeout=30))
            self.addCleanup(thread.join, 60)
        # Then, in parallel: the builds finish (the compute nodes'
        # usage follows one by one) while four future leases of 2 vcpus
        # for [T+1h, T+2h) are admitted.
        waiting = sorted(gates.values(), key=id)

        def attempt(n):
            if n < 4:
                time.sleep(0.05 * n)
                waiting[n].set()
                return 'built'
            code, _body = self._future_boot('two', T + HOUR, T + 2 * HOUR,
                                            name='f%d' % n)
            return code

        results = threads.race(8, attempt)
        self.assertEqual([], threads.errors(results))
        self._wait_no_build()
        self.assertEqual(['ACTIVE'] * 4, [self._settled(s) for s in booted])
        self.assertEqual([], self.overcommitted(), results)
        self.assertEqual(['built'] * 4 + [409] * 4, results)


class TestSpreading(_AdmissionBase):
    """Leases over the same period are promised on every host that takes
    them equally well, not piled on the first by name: at their common
    start their servers are then built on many computes at once
    (benchmarks/wakeup.py), not one after the other on one.
    """

    COMPUTES = {'host1': (4, 8192, 100), 'host2': (4, 8192, 100)}

    def setUp(self):
        super().setUp()
        self._create_flavor(id='two', name='two', vcpu=2, memory_mb=512,
                            disk=1, ephemeral=0)

    def test_equal_hosts_share_the_promises(self):
        T = self.clock.now
        for n in range(4):
            code, body = self._future_boot('1', T + 2 * HOUR, T + 4 * HOUR,
                                           name='f%d' % n)
            self.assertEqual(202, code, body)
        self.assertEqual(['host1', 'host1', 'host2', 'host2'],
                         self._promised_hosts())

    def test_the_host_with_more_room_left_comes_first(self):
        T = self.clock.now
        code, body = self._future_boot('two', T + 1 * HOUR, T + 3 * HOUR,
                                       name='first')
        self.assertEqual(202, code, body)
        self.assertEqual(['host1'], self._promised_hosts())
        # Over [T+2h, T+4h) host1 has half its vcpus promised: the 1-vcpu
        # leases go to host2 until it has no more room left than host1
        # (the first by name then).
        for n in range(3):
            code, body = self._future_boot('1', T + 2 * HOUR, T + 4 * HOUR,
                                           name='f%d' % n)
            self.assertEqual(202, code, body)
        self.assertEqual(['host1', 'host1', 'host2', 'host2'],
                         self._promised_hosts())
