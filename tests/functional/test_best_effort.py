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
"""Best-effort host leases on the in-process Nova (the migration hunt).

A best_effort host lease that cannot get enough free reservable hosts
takes ordinary compute hosts whose servers belong to no lease, and the
engine live-migrates their servers away (Nova's scheduler, LeaseFilter
included, picks where they go); the lease is IN_PROGRESS until its hosts
are empty, then ACTIVE. Refused up front (409, nothing left) when the
rest of the cloud cannot take the servers; TIMEDOUT after
``[nova_lease_engine] best_effort_timeout`` with every host released, no server
lost and none left migrating; a leased server is never moved.
"""

import threading
import time
import types

import fixtures
from nova.tests.functional.api import client as api_client
from oslo_serialization import jsonutils

from nova_lease.api_ext import nova_hosts
from nova_lease import audit
from nova_lease.db import api as db_api
from nova_lease.plugins.host import aggregates as host_aggregates
from tests.functional import base
from tests.functional import fixtures as lease_fixtures
from tests.functional import test_host_reservation
from tests.functional import test_lease_api

PREFIX = test_lease_api.PREFIX
HOST = (4, 8192, 100)
TINY, MEDIUM = '1', '3'


class BestEffortMixin(test_host_reservation.HostLeaseMixin):

    #: The aggregate of [nova_lease_api] best_effort_aggregate.
    HUNTING = 'best-effort'
    #: Hosts put in it at setUp (None: every host but host1, which the
    #: tests register).
    OPTED_IN = None

    def setUp(self):
        super().setUp()
        self.other = api_client.TestOpenStackClient(
            'other-admin', self.api_fixture.base_url,
            project_id=test_lease_api.OTHER_PROJECT,
            roles=['reader', 'member', 'admin'])
        self.other.microversion = 'latest'
        self.flags(best_effort_enabled=True,
                   best_effort_aggregate=self.HUNTING, group='nova_lease_api')
        opted_in = self.OPTED_IN
        if opted_in is None:
            opted_in = sorted(h for h in self.COMPUTES if h != 'host1')
        self._opt_in(*opted_in)

    def _opt_in(self, *hosts, name=None, metadata=None):
        """Put hosts in an aggregate (the best-effort one by default)."""
        name = name or self.HUNTING
        aggregate = self._aggregate(name)
        if aggregate is None:
            aggregate = self.admin_api.api_post('/os-aggregates', {
                'aggregate': {'name': name}}).body['aggregate']
        for host in hosts:
            self.admin_api.api_post(
                '/os-aggregates/%s/action' % aggregate['id'],
                {'add_host': {'host': host}})
        if metadata:
            self.admin_api.api_post(
                '/os-aggregates/%s/action' % aggregate['id'],
                {'set_metadata': {'metadata': metadata}})
        return aggregate

    def _server_on(self, host, name, flavor=TINY):
        """A server of another project, forced onto host (no lease)."""
        body = {'server': self._build_server(
            name=name, image_uuid=self.image_id, flavor_id=flavor,
            networks='none', az='nova:%s' % host)}
        server = self._wait_for_state_change(self.other.post_server(body),
                                             'ACTIVE')
        self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
        return server

    def _best_effort(self, count, status=201, name='hunt', api=None):
        """A best-effort lease, by an admin of the project unless ``api``
        (the rule nova_lease:leases:create:best_effort is admin-only).
        """
        return self._create(self._lease_body(
            'now', self._at(hours=2), name=name,
            reservations=[self._host_res(count)],
            lease_type='best_effort'), status=status,
            api=api or self.admin_api)

    def _settled(self, server):
        """The server as Nova shows it: ACTIVE, no task, its host."""
        server = self.admin_api.get_server(server['id'])
        self.assertEqual('ACTIVE', server['status'])
        self.assertIsNone(server['OS-EXT-STS:task_state'])
        return server['OS-EXT-SRV-ATTR:host']


class BestEffortTest(BestEffortMixin, base.LeaseFunctionalBase):

    COMPUTES = {'host1': HOST, 'host2': HOST, 'host3': HOST, 'host4': HOST}

    def test_hunt_moves_unleased_servers_and_never_a_leased_one(self):
        self._register('host1')
        # One host runs a leased server (boot hints), alone: never moved,
        # so that host is no candidate although it is as cheap to empty
        # as the one taken.
        leased = self._boot(
            {'reserved': 'True', 'lease_params': jsonutils.dumps(
                {'name': 'mine', 'start': 'now', 'duration': '3h'})},
            name='leased')
        leased_host = self._host(leased)
        # The other hosts: unleased servers of another project.
        others = [h for h in ('host2', 'host3', 'host4')
                  if h != leased_host]
        lone = self._server_on(others[0], 'lone')
        crowd = [self._server_on(others[1], 'crowd-%d' % i)
                 for i in range(2)]

        lease = self._best_effort(2)
        self.assertEqual('IN_PROGRESS', lease['status'])
        self.assertEqual('best_effort', lease['lease_type'])
        self.assertEqual(1, lease['reservations'][0]['best_effort_hosts'])
        self.assertNotIn('best_effort', lease['reservations'][0])
        # The free reservable host, then the cheapest to empty.
        self.assertEqual(sorted(['host1', others[0]]), self._hosts_of(lease))
        rid = lease['reservations'][0]['id']

        self.engine.process_due()
        lease = self._lease(lease['id'])
        self.assertEqual('ACTIVE', lease['status'], lease['status_reason'])
        self.assertEqual(sorted(['host1', others[0]]),
                         self._aggregate(host_aggregates.aggregate_name(rid))[
                             'hosts'])
        self.assertEqual([], self._aggregate('freepool')['hosts'])
        # The lone server moved (live), not lost; nothing else moved.
        self.assertNotIn(self._settled(lone), ('host1', others[0]))
        self.assertEqual(leased_host, self._settled(leased))
        for server in crowd:
            self.assertEqual(others[1], self._settled(server))

        # The lease's project boots onto its hosts; nobody else does.
        mine = self._boot_hinted(rid, name='on-lease')
        self.assertIn(self._host(mine), ('host1', others[0]))

        # At the end, the host taken from the cloud goes back to the
        # cloud, the reservable one to the free pool.
        self.clock.advance(hours=2)
        self.engine.process_due()
        self.assertEqual('TERMINATED', self._lease(lease['id'])['status'])
        self.assertEqual(['host1'], self._aggregate('freepool')['hosts'])
        self.assertIsNone(self._aggregate(host_aggregates.aggregate_name(rid)))
        # The emptied host is back in the cloud: in no aggregate but the
        # operator's best-effort one.
        for aggregate in self.admin_api.api_get('/os-aggregates').body[
                'aggregates']:
            if aggregate['name'] != self.HUNTING:
                self.assertNotIn(others[0], aggregate['hosts'])

    def test_enough_free_hosts_is_an_immediate_start(self):
        self._register('host1')
        bystander = self._server_on('host2', 'bystander')
        lease = self._best_effort(1)
        self.assertEqual('PENDING', lease['status'])
        self.assertEqual(['host1'], self._hosts_of(lease))
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        self.assertEqual('host2', self._settled(bystander))

    def test_bad_requests(self):
        self._register('host1')
        for body, message in (
                (self._lease_body(self._at(hours=1), self._at(hours=2),
                                  lease_type='best_effort'),
                 'a best_effort lease starts now'),
                (self._lease_body('now', self._at(hours=2),
                                  lease_type='best_effort', retries=2),
                 'best_effort_timeout'),
                (self._lease_body('now', self._at(hours=2),
                                  lease_type='best_effort', reservations=[{
                                      'resource_type': 'virtual:instance',
                                      'amount': 1, 'vcpus': 1,
                                      'memory_mb': 512, 'disk_gb': 1,
                                      'affinity': False}]),
                 'host reservations (physical:host) only')):
            body = self._create(body, status=400, api=self.admin_api)
            self.assertIn(message, body['error_message'])
        error = self.assertRaises(
            api_client.OpenStackApiException, self._boot,
            {'reserved': 'True', 'lease_params': jsonutils.dumps(
                {'name': 'x', 'start': 'now', 'duration': '1h',
                 'type': 'best_effort'})}, wait=None, name='x')
        self.assertEqual(400, error.response.status_code)
        self.assertIn('best_effort applies to host reservations',
                      error.response.text)
        self.assertEqual([], db_api.lease_list(self.lease_db))
        self.assertEqual([], self.api.get_servers())


class BestEffortRefusedTest(BestEffortMixin, base.LeaseFunctionalBase):

    COMPUTES = {'host1': HOST, 'host2': HOST, 'host3': HOST}

    def test_refused_when_the_cloud_cannot_take_the_servers(self):
        self._register('host1')
        # 4 GB each on two 7.5 GB hosts: neither fits next to the other.
        a = self._server_on('host2', 'a', flavor=MEDIUM)
        b = self._server_on('host3', 'b', flavor=MEDIUM)
        body = self._best_effort(2, status=409)
        message = body['error_message']
        self.assertIn('best_effort', message)
        self.assertIn('fits on no other compute host', message)
        # Nothing left behind, nothing moved.
        self.assertEqual([], db_api.lease_list(self.lease_db))
        self.assertEqual([], db_api.allocation_list(self.lease_db))
        self.assertEqual('host2', self._settled(a))
        self.assertEqual('host3', self._settled(b))
        self.assertEqual(['host1'], self._aggregate('freepool')['hosts'])

    def test_f2_member_refusal_names_nothing_of_others(self):
        self._register('host1')
        a = self._server_on('host2', 'a', flavor=MEDIUM)
        b = self._server_on('host3', 'b', flavor=MEDIUM)
        self.set_policy({'nova_lease:leases:create:best_effort':
                         'rule:project_member_or_admin'})
        message = self._best_effort(2, status=409, api=self.api)[
            'error_message']
        self.assertIn('1 more host(s) needed, 0 could be emptied', message)
        for secret in (a['id'], b['id'], 'host2', 'host3',
                       test_lease_api.OTHER_PROJECT, 'fits on no other'):
            self.assertNotIn(secret, message)
        # The operator finds why in the log (and an admin in the 409).
        self.assertIn(a['id'], self.stdlog.logger.output)
        self.assertEqual([], db_api.lease_list(self.lease_db))

    def test_s1_no_nova_query_under_the_host_locks(self):
        """A refused best-effort request asks Nova nothing per host while
        it holds host locks (it surveys the opted-in hosts first).
        """
        self._register('host1')
        self._server_on('host2', 'a', flavor=MEDIUM)
        self._server_on('host3', 'b', flavor=MEDIUM)
        calls = []
        real_lock = db_api.lock_hosts

        def lock(session, names, *args, **kwargs):
            if names:
                calls.append(('lock', tuple(names)))
            return real_lock(session, names, *args, **kwargs)

        self.useFixture(fixtures.MockPatchObject(db_api, 'lock_hosts',
                                                 new=lock))
        for name in ('compute_node_facts', 'servers_to_move',
                     'aggregate_hosts', 'working_compute_hosts',
                     'dedicated_hosts'):
            real = getattr(nova_hosts, name, None)
            if real is None:
                continue

            def spy(*args, _real=real, _name=name, **kwargs):
                calls.append(('nova', _name))
                return _real(*args, **kwargs)

            self.useFixture(fixtures.MockPatchObject(nova_hosts, name,
                                                     new=spy))
        self._best_effort(2, status=409)
        self.assertIn(('nova', 'servers_to_move'), calls)
        first_lock = [i for i, c in enumerate(calls) if c[0] == 'lock']
        self.assertNotEqual([], first_lock)
        self.assertEqual([], [c for c in calls[first_lock[0]:]
                              if c[0] == 'nova'])

    def test_s4_anti_affinity_is_kept_by_the_fit(self):
        """Each server may only go where its anti-affinity sibling runs:
        no host can be emptied (Nova would refuse every migration).
        """
        self._register('host1')
        group = self.other.api_post('/os-server-groups', {
            'server_group': {'name': 'spread',
                             'policy': 'anti-affinity'}}).body[
            'server_group']
        servers = []
        for host in ('host2', 'host3'):
            body = {'server': self._build_server(
                name='spread-' + host, image_uuid=self.image_id,
                flavor_id=TINY, networks='none', az='nova:%s' % host),
                'os:scheduler_hints': {'group': group['id']}}
            servers.append(self._wait_for_state_change(
                self.other.post_server(body), 'ACTIVE'))
        body = self._best_effort(2, status=409)
        self.assertIn('fits on no other compute host', body['error_message'])
        self.assertEqual([], db_api.lease_list(self.lease_db))
        self.assertEqual('host2', self._settled(servers[0]))
        self.assertEqual('host3', self._settled(servers[1]))


class BestEffortTimeoutTest(BestEffortMixin, base.LeaseFunctionalBase):

    COMPUTES = {'host1': HOST, 'host2': HOST, 'host3': HOST, 'host4': HOST,
                'host5': HOST}

    def test_timeout_half_way_restores_everything(self):
        sent = []
        self.engine.notifier = types.SimpleNamespace(
            notify=lambda event_type, lease, *args, **kwargs: sent.append(
                (event_type, lease['status'])))
        lease, movable, stuck, _faults = self._hunting()
        self.assertEqual('IN_PROGRESS', lease['status'])
        self.assertEqual(['host1', 'host2', 'host3'], self._hosts_of(lease))
        rid = lease['reservations'][0]['id']

        self.engine.process_due()
        lease = self._lease(lease['id'])
        # Half-way: one host emptied, one not; still hunting.
        self.assertEqual('IN_PROGRESS', lease['status'])
        # (The server in the way is named in the engine's log only: F2.)
        self.assertIn('still being moved', lease['status_reason'])
        self.assertIn(stuck['id'], self.stdlog.logger.output)
        self.assertNotIn(self._settled(movable), ('host1', 'host2', 'host3'))
        self.assertEqual('host3', self._settled(stuck))
        # The auditor knows a hunt: the server in its way is being moved,
        # no over-commitment.
        self.assertEqual([], [f for f in audit.run(self.engine.conf)
                              if f.check == 'overcommit'])
        [start] = [e for e in lease['events']
                   if e['event_type'] == 'start_lease']
        self.assertEqual('UNDONE', start['status'])
        self.assertIsNotNone(start['next_attempt_at'])

        # Past best_effort_timeout (60 minutes): TIMEDOUT, all restored.
        self.clock.advance(minutes=61)
        self.engine.process_due()
        lease = self._lease(lease['id'])
        self.assertEqual('TIMEDOUT', lease['status'])
        self.assertIn('best_effort_timeout', lease['status_reason'])
        self.assertEqual('deleted', lease['reservations'][0]['status'])
        # Each phase is notified (by the engine's notification pool).
        for _i in range(100):
            if ('lease.timedout', 'TIMEDOUT') in sent:
                break
            time.sleep(0.1)
        self.assertEqual([('lease.in_progress', 'IN_PROGRESS'),
                          ('lease.timedout', 'TIMEDOUT')],
                         sorted(set(sent)))
        self.assertEqual([], self._hosts_of(lease))
        self.assertEqual(['host1'], self._aggregate('freepool')['hosts'])
        self.assertIsNone(self._aggregate(host_aggregates.aggregate_name(rid)))
        # No server lost, none migrating; the moved one stays moved.
        servers = self.admin_api.get_servers(search_opts={
            'all_tenants': 1})
        self.assertEqual(7, len(servers))
        for server in servers:
            self._settled(server)
        self.assertEqual('host3', self._settled(stuck))
        # The hosts it took take unleased work again.
        again = self._boot(name='again')
        self.assertIsNotNone(self._host(again))
        # Its end still comes, and changes nothing more.
        self.clock.advance(hours=2)
        self.engine.process_due()
        self.assertEqual('TERMINATED', self._lease(lease['id'])['status'])
        self.assertEqual(['host1'], self._aggregate('freepool')['hosts'])

    def _assert_nothing_of_others(self, lease_id, *secrets):
        """A member of the lease's project sees none of ``secrets`` in
        the lease (status_reason, events' last_error).
        """
        shown = self._lease(lease_id)
        texts = [shown['status_reason']] + [e['last_error']
                                            for e in shown['events']]
        texts = [t for t in texts if t]
        self.assertNotEqual([], texts)
        for text in texts:
            for secret in secrets:
                self.assertNotIn(secret, text)
        return shown

    def test_f2_member_sees_no_server_host_or_fault_of_others(self):
        lease, stuck, _faults = self._half_way()
        secrets = (stuck['id'], 'host2', 'host3', 'injected fault',
                   test_lease_api.OTHER_PROJECT)
        shown = self._assert_nothing_of_others(lease['id'], *secrets)
        self.assertEqual('IN_PROGRESS', shown['status'])
        self.assertIn('still being moved', shown['status_reason'])
        # The details are the operator's: in the engine's log.
        self.assertIn(stuck['id'], self.stdlog.logger.output)
        self.assertIn('injected fault', self.stdlog.logger.output)
        # Timed out: the same.
        self.clock.advance(minutes=61)
        self.engine.process_due()
        shown = self._assert_nothing_of_others(lease['id'], *secrets)
        self.assertEqual('TIMEDOUT', shown['status'])
        self.assertIn('best_effort_timeout', shown['status_reason'])

    def _half_way(self):
        """A lease IN_PROGRESS: host2 emptied, host3's server refused."""
        lease, _movable, stuck, faults = self._hunting()
        self.engine.process_due()
        self.assertEqual('IN_PROGRESS', self._lease(lease['id'])['status'])
        return lease, stuck, faults

    def _hunting(self):
        """A best-effort lease for host1 (free), host2 and host3, whose
        server Nova refuses to live-migrate.
        """
        self._register('host1')
        movable = self._server_on('host2', 'movable')
        stuck = self._server_on('host3', 'stuck')
        for host, n in (('host4', 2), ('host5', 3)):
            for i in range(n):
                self._server_on(host, '%s-%d' % (host, i))
        faults = lease_fixtures.FaultInjector(self.keystone.nova_app)
        self.keystone.nova_app = faults
        faults.fail('live', 'POST', r'/servers/%s/action$' % stuck['id'],
                    body='"os-migrateLive"', status=409)
        # Nova refuses to live-migrate one of them.
        return self._best_effort(3), movable, stuck, faults

    def test_deleted_while_hunting(self):
        lease, stuck, _faults = self._half_way()
        self.api.api_delete(PREFIX + '/leases/%s' % lease['id'])
        self.engine.process_due()
        self.assertEqual('TERMINATED', self._lease(lease['id'])['status'])
        # The reservable host stays in the free pool; the hosts taken
        # from the cloud do not join it.
        self.assertEqual(['host1'], self._aggregate('freepool')['hosts'])
        self.assertEqual('host3', self._settled(stuck))

    def test_cold_migration_when_live_is_refused_and_allowed(self):
        self.flags(best_effort_cold_migration=True, group='nova_lease')
        self.engine, self.plugin = self._engine(
            best_effort_cold_migration=True)
        lease, _movable, stuck, faults = self._hunting()
        # It cold-migrates the server live migration cannot move, and
        # confirms it.
        self.engine.process_due()
        lease = self._lease(lease['id'])
        self.assertEqual('ACTIVE', lease['status'], lease['status_reason'])
        self.assertNotIn(self._settled(stuck), ('host1', 'host2', 'host3'))
        self.assertGreater(faults.faults['live'], 0)


class BestEffortAdmissionTest(BestEffortMixin, base.LeaseFunctionalBase):
    """Who may ask for a best-effort lease, and which hosts it may empty
    (issue 28: F1, F3, F4).
    """

    COMPUTES = {'host1': HOST, 'host2': HOST, 'host3': HOST, 'host4': HOST}
    OPTED_IN = ('host3', 'host4')

    def _nothing_happened(self, *servers):
        self.assertEqual([], db_api.lease_list(self.lease_db))
        self.assertEqual([], db_api.allocation_list(self.lease_db))
        for server, host in servers:
            self.assertEqual(host, self._settled(server))

    def test_f1_member_cannot_create_a_best_effort_lease(self):
        self._register('host1')
        bystander = self._server_on('host3', 'bystander')
        body = self._best_effort(2, status=403, api=self.api)
        self.assertIn('nova_lease:leases:create:best_effort',
                      body['error_message'])
        self._nothing_happened((bystander, 'host3'))
        # An operator may grant it (Nova's policy file).
        self.set_policy({'nova_lease:leases:create:best_effort':
                         'rule:project_member_or_admin'})
        lease = self._best_effort(2, api=self.api)
        self.assertEqual('IN_PROGRESS', lease['status'])

    def test_f1_off_unless_enabled(self):
        self.flags(best_effort_enabled=False, group='nova_lease_api')
        self._register('host1')
        bystander = self._server_on('host3', 'bystander')
        body = self._best_effort(2, status=400)
        self.assertIn('best_effort_enabled', body['error_message'])
        self._nothing_happened((bystander, 'host3'))

    def test_f1_only_hosts_of_the_opted_in_aggregate(self):
        self._register('host1')
        # host2 is the cheapest to empty, but not opted in.
        cheap = self._server_on('host2', 'cheap')
        crowd = [self._server_on('host3', 'crowd-%d' % i) for i in range(2)]
        lease = self._best_effort(2)
        self.assertEqual(['host1', 'host4'], self._hosts_of(lease))
        self.api.api_delete(PREFIX + '/leases/%s' % lease['id'])
        self.engine.process_due()
        # No aggregate named: no candidate at all, whatever runs where.
        self.flags(best_effort_aggregate=None, group='nova_lease_api')
        body = self._best_effort(2, status=409, name='none')
        self.assertIn('best_effort_aggregate', body['error_message'])
        self.flags(best_effort_aggregate='no-such-aggregate',
                   group='nova_lease_api')
        self._best_effort(2, status=409, name='missing')
        self.assertEqual('host2', self._settled(cheap))
        for server in crowd:
            self.assertEqual('host3', self._settled(server))

    def test_f1_hunted_hosts_count_against_max_promised_hosts(self):
        self.flags(max_promised_hosts=1, group='nova_lease_enforcement')
        self._register('host1')
        bystander = self._server_on('host3', 'bystander')
        body = self._best_effort(2, status=403)
        self.assertIn('max_promised_hosts', body['error_message'])
        self._nothing_happened((bystander, 'host3'))

    def test_f4_a_host_with_a_locked_server_is_no_candidate(self):
        self._register('host1')
        # host3 is the cheaper to empty, but its server's owner locked it.
        locked = self._server_on('host3', 'locked')
        self.other.post_server_action(locked['id'], {'lock': None})
        crowd = [self._server_on('host4', 'crowd-%d' % i) for i in range(2)]
        lease = self._best_effort(2)
        self.assertEqual(['host1', 'host4'], self._hosts_of(lease))
        self.engine.process_due()
        lease = self._lease(lease['id'])
        self.assertEqual('ACTIVE', lease['status'], lease['status_reason'])
        self.assertEqual('host3', self._settled(locked))
        self.assertTrue(self.admin_api.get_server(locked['id'])['locked'])
        for server in crowd:
            self.assertNotIn(self._settled(server), ('host1', 'host4'))
        # Only locked servers left: no candidate at all.
        self.api.api_delete(PREFIX + '/leases/%s' % lease['id'])
        self.engine.process_due()
        self.assertEqual('TERMINATED', self._lease(lease['id'])['status'])
        body = self._best_effort(3, status=409, name='again')
        self.assertIn('locked', body['error_message'])
        self.assertEqual('host3', self._settled(locked))


#: A project that is neither the lease's nor the bystanders'.
THIRD_PROJECT = 'c0ffee00c0ffee00c0ffee00c0ffee00'


class BestEffortHostStateTest(BestEffortMixin, base.LeaseFunctionalBase):
    """Candidates and destinations are enabled, up and not dedicated to
    another project (issue 28: F3).
    """

    COMPUTES = {'host1': HOST, 'host2': HOST, 'host3': HOST, 'host4': HOST,
                'host5': HOST, 'host6': HOST}

    def _set_service(self, host, **body):
        [service] = self.admin_api.api_get(
            '/os-services?binary=nova-compute&host=%s' % host).body[
                'services']
        self.admin_api.api_put('/os-services/%s' % service['id'], body)

    def _maintenance(self):
        """host2 disabled, host3 dedicated to another project, host6
        forced down: each is empty, so each would be the first taken.
        """
        self._set_service('host2', status='disabled',
                          disabled_reason='maintenance')
        self._opt_in('host3', name='dedicated',
                     metadata={'filter_tenant_id': THIRD_PROJECT})
        self._set_service('host6', forced_down=True)

    def test_f3_no_disabled_down_or_dedicated_candidate(self):
        self._register('host1')
        lone = self._server_on('host4', 'lone')
        crowd = [self._server_on('host5', 'crowd-%d' % i) for i in range(2)]
        self._maintenance()
        lease = self._best_effort(2)
        self.assertEqual(['host1', 'host4'], self._hosts_of(lease))
        self.engine.process_due()
        lease = self._lease(lease['id'])
        self.assertEqual('ACTIVE', lease['status'], lease['status_reason'])
        # (Nova's scheduler picks where it goes: never a disabled or
        # down host.)
        self.assertNotIn(self._settled(lone),
                         ('host1', 'host2', 'host4', 'host6'))
        for server in crowd:
            self.assertEqual('host5', self._settled(server))

    def test_f3_no_disabled_down_or_dedicated_destination(self):
        self._register('host1')
        # host4's server fits on no enabled, up, shared host: host5 is
        # full (4 GB each on 7.5 GB hosts).
        moved = self._server_on('host4', 'moved', flavor=MEDIUM)
        full = self._server_on('host5', 'full', flavor=MEDIUM)
        self._maintenance()
        # Only host4 may be taken: the others are destinations only.
        aggregate = self._aggregate(self.HUNTING)
        for host in ('host2', 'host3', 'host5', 'host6'):
            self.admin_api.api_post(
                '/os-aggregates/%s/action' % aggregate['id'],
                {'remove_host': {'host': host}})
        body = self._best_effort(2, status=409)
        self.assertIn('fits on no other compute host', body['error_message'])
        self.assertEqual([], db_api.lease_list(self.lease_db))
        self.assertEqual('host4', self._settled(moved))
        self.assertEqual('host5', self._settled(full))


class BestEffortGateTest(BestEffortMixin, base.LeaseFunctionalBase):
    """The hunt acts through the engine's gate (nova_lease.gate): it
    re-reads the lease and checks each server before each action.
    """

    COMPUTES = {'host1': HOST, 'host2': HOST, 'host3': HOST, 'host4': HOST,
                'host5': HOST}

    def _three_hosts(self):
        """host1 free; host2 and host3 each run one bystander (the
        cheapest to empty); host4 and host5 run more.
        """
        self._register('host1')
        first = self._server_on('host2', 'first')
        second = self._server_on('host3', 'second')
        for host, n in (('host4', 2), ('host5', 3)):
            for i in range(n):
                self._server_on(host, '%s-%d' % (host, i))
        faults = lease_fixtures.FaultInjector(self.keystone.nova_app)
        self.keystone.nova_app = faults
        return first, second, faults

    def _journal(self, lease):
        return [(r['target_id'], r['action'], r['outcome'])
                for r in db_api.action_list(self.lease_db,
                                            lease_id=lease['id'])]

    def test_delete_during_the_hunt_stops_it(self):
        # F6: DELETE while the hunt migrates the first bystander: the
        # hunt moves nothing more and never starts the deleted lease.
        first, second, faults = self._three_hosts()
        hung = faults.hang('first migration', 'POST',
                           r'/servers/%s/action$' % first['id'],
                           body='"os-migrateLive"')
        self.addCleanup(hung.release)
        lease = self._best_effort(3)
        self.assertEqual(['host1', 'host2', 'host3'], self._hosts_of(lease))
        rid = lease['reservations'][0]['id']
        runner = threading.Thread(target=self.engine.process_due,
                                  daemon=True)
        runner.start()
        self.assertTrue(hung.reached.wait(60))
        self.api.api_delete(PREFIX + '/leases/%s' % lease['id'])
        hung.release()
        runner.join(180)
        self.assertFalse(runner.is_alive())
        self.engine.process_due()
        self.assertEqual('TERMINATED', self._lease(lease['id'])['status'])
        # The bystander not yet asked for stays where it was.
        self.assertEqual('host3', self._settled(second))
        self.assertEqual(
            0, len([r for r in faults.requests
                    if r[1] == 'POST' and second['id'].encode() in
                    r[2].encode() + r[3]]))
        # The deleted lease was never started: no aggregate, its hosts
        # are where they were.
        self.assertIsNone(self._aggregate(host_aggregates.aggregate_name(rid)))
        self.assertEqual(['host1'], self._aggregate('freepool')['hosts'])
        self.assertIn((second['id'], 'live_migrate', 'refused'),
                      self._journal(lease))

    def test_a_server_its_owner_locked_is_never_moved(self):
        # F4: the engine's admin credentials would bypass the lock; the
        # hunt never moves a locked server, its host is not emptied. (A
        # server locked before the lease is asked for keeps its host out
        # of the candidates: test_f4_a_host_with_a_locked_server_is_no_
        # candidate; here its owner locks it after the admission.)
        first, second, _faults = self._three_hosts()
        lease = self._best_effort(2)
        self.assertEqual(['host1', 'host2'], self._hosts_of(lease))
        self.other.api_post('/servers/%s/action' % first['id'],
                            {'lock': {}})
        self.engine.process_due()
        lease = self._lease(lease['id'])
        self.assertEqual('IN_PROGRESS', lease['status'])
        # The member-safe reason (F2): the locked server is not named.
        self.assertNotIn(first['id'], lease['status_reason'])
        self.assertEqual('host2', self._settled(first))
        self.assertEqual('host3', self._settled(second))
        self.assertEqual([], [row for row in self._journal(lease)
                              if row[2] == 'done'])

    def test_user_metadata_does_not_make_a_server_leased(self):
        # S5: lease_id / lease_reservation_id in a server's metadata are
        # its owner's to write: they do not stall a hunt (the side
        # database says which servers are leased).
        first, second, _faults = self._three_hosts()
        self.other.api_post('/servers/%s/metadata' % first['id'],
                            {'metadata': {'lease_id': 'not-a-lease',
                                          'lease_reservation_id': 'x'}})
        lease = self._best_effort(2)
        self.assertEqual(['host1', 'host2'], self._hosts_of(lease))
        self.engine.process_due()
        lease = self._lease(lease['id'])
        self.assertEqual('ACTIVE', lease['status'], lease['status_reason'])
        self.assertNotIn(self._settled(first), ('host1', 'host2'))
        self.assertEqual('host3', self._settled(second))
        self.assertIn((first['id'], 'live_migrate', 'done'),
                      self._journal(lease))

    def _cold_hunt_with_a_failed_confirm(self):
        """host1 free, host2's server live-migrates, host3's only
        cold-migrates; Nova fails the first confirmation of that cold
        migration. Returns (lease, first, second) after one attempt.
        """
        self.flags(best_effort_cold_migration=True, group='nova_lease')
        self.engine, self.plugin = self._engine(
            best_effort_cold_migration=True)
        first, second, faults = self._three_hosts()
        faults.fail('live', 'POST', r'/servers/%s/action$' % second['id'],
                    body='"os-migrateLive"', status=409)
        faults.fail('confirm', 'POST', r'/servers/%s/action$' % second['id'],
                    body='"confirmResize"', status=500, times=1)
        lease = self._best_effort(3)
        self.assertEqual(['host1', 'host2', 'host3'], self._hosts_of(lease))
        self.engine.process_due()
        self.assertEqual(1, faults.faults['confirm'])
        return lease, first, second

    def _assert_confirmed(self, server):
        server = self.admin_api.get_server(server['id'])
        self.assertEqual('ACTIVE', server['status'])
        self.assertIsNone(server['OS-EXT-STS:task_state'])
        self.assertNotIn(server['OS-EXT-SRV-ATTR:host'],
                         ('host1', 'host2', 'host3'))
        migrations = self.admin_api.api_get(
            '/os-migrations?instance_uuid=%s' % server['id']).body[
            'migrations']
        self.assertEqual(['confirmed'], [m['status'] for m in migrations])

    def test_failed_confirm_is_confirmed_before_the_host_counts(self):
        # F5: the next attempt confirms the pending migration (journaled)
        # before the host counts as empty.
        lease, first, second = self._cold_hunt_with_a_failed_confirm()
        self.clock.advance(seconds=31)
        self.engine.process_due()
        lease = self._lease(lease['id'])
        self.assertEqual('ACTIVE', lease['status'], lease['status_reason'])
        self._assert_confirmed(second)
        self.assertNotIn(self._settled(first), ('host1', 'host2', 'host3'))
        self.assertIn((second['id'], 'confirm', 'done'), self._journal(lease))

    def test_pending_migration_is_confirmed_on_timeout(self):
        # F5: at the time-out too, no bystander is left VERIFY_RESIZE.
        lease, _first, second = self._cold_hunt_with_a_failed_confirm()
        self.clock.advance(minutes=61)
        self.engine.process_due()
        lease = self._lease(lease['id'])
        self.assertEqual('TIMEDOUT', lease['status'])
        self._assert_confirmed(second)
