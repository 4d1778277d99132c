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
"""The auditor's pure checks: each one fires on a broken promise and stays
silent on a kept one."""

import datetime

import testtools

from nova_lease.audit import checks
from nova_lease import resource_types as types

NOW = datetime.datetime(2026, 11, 20, 10, 0)
CAP = {'VCPU': 4, 'MEMORY_MB': 8192, 'DISK_GB': 100}


def _at(hours):
    return NOW + datetime.timedelta(hours=hours)


def _lease(lease_id, status='PENDING', start=1, end=3, project='p1',
           reservations=(), events=()):
    return {'id': lease_id, 'project_id': project, 'status': status,
            'start_date': _at(start), 'end_date': _at(end),
            'reservations': list(reservations), 'events': list(events)}


def _res(res_id, rtype=types.SERVER, status='pending', server=None):
    return {'id': res_id, 'resource_type': rtype, 'resource_id': server,
            'status': status, 'properties': {}}


def _alloc(res_id, host='h1', start=1, end=3, vcpus=2, whole=False):
    return {'reservation_id': res_id, 'host': host, 'start_date': _at(start),
            'end_date': _at(end), 'vcpus': vcpus, 'memory_mb': 512,
            'disk_gb': 1, 'whole_host': whole}


def _server(server_id, host='h1', project='p1', status='ACTIVE', **meta):
    return {'id': server_id, 'tenant_id': project, 'status': status,
            'host': host, 'node': host, 'metadata': meta}


def _state(leases=(), allocations=(), servers=(), usages=None,
           registered=(), aggregates=(), **kwargs):
    providers = {'h1': checks.Provider('h1', dict(CAP), usages or {})}
    return checks.CloudState(
        now=NOW, leases=list(leases), allocations=list(allocations),
        registered=list(registered), servers=list(servers),
        aggregates=list(aggregates), providers=providers, **kwargs)


def _kinds(findings):
    return sorted(f.check for f in findings)


class OvercommitTest(testtools.TestCase):

    def test_promise_fits_beside_unleased_work(self):
        state = _state(leases=[_lease('l1', reservations=[_res('r1')])],
                       allocations=[_alloc('r1', vcpus=2)],
                       servers=[_server('s1')],
                       usages={'s1': {'VCPU': 2}})
        self.assertEqual([], checks.check(state))

    def test_unleased_work_past_a_promise(self):
        state = _state(leases=[_lease('l1', reservations=[_res('r1')])],
                       allocations=[_alloc('r1', vcpus=2)],
                       servers=[_server('s1')],
                       usages={'s1': {'VCPU': 3}})
        [finding] = checks.check(state)
        self.assertEqual('overcommit', finding.check)
        self.assertEqual('h1', finding.subject)
        self.assertIn('VCPU 5 > 4', finding.message)
        self.assertEqual(checks._fmt(_at(1)), finding.details['at'])

    def test_instance_reservation_servers_run_in_their_slots(self):
        # Two 2-vCPU slots fill the host; the servers booted with the
        # reservation's flavor run in them (not beside them).
        lease = _lease('l1', status='ACTIVE', start=-1, end=3,
                       reservations=[_res('r1', types.SLOTS, 'active')])
        servers = [dict(_server(s), reservation_flavor='r1')
                   for s in ('s1', 's2')]
        state = _state(leases=[lease],
                       allocations=[_alloc('r1', start=-1, vcpus=2),
                                    _alloc('r1', start=-1, vcpus=2)],
                       servers=servers,
                       usages={'s1': {'VCPU': 2}, 's2': {'VCPU': 2}})
        self.assertEqual([], checks.check(state))
        # A third one (two boots raced for the last slot) is beyond them.
        state.servers.append(dict(_server('s3'), reservation_flavor='r1'))
        state.providers['h1'].usages['s3'] = {'VCPU': 2}
        self.assertEqual(['overcommit'], _kinds(checks.check(state)))

    def test_leased_work_lent_before_a_promise(self):
        # A leased server that ends at 1h frees its capacity for the
        # promise that starts then.
        running = _lease('l0', status='ACTIVE', start=-1, end=1,
                         reservations=[_res('r0', status='active',
                                            server='s0')])
        later = _lease('l1', reservations=[_res('r1')])
        state = _state(leases=[running, later],
                       allocations=[_alloc('r1', vcpus=4)],
                       servers=[_server('s0')], usages={'s0': {'VCPU': 4}})
        self.assertEqual([], checks.check(state))
        # Extended past the promise's start: over-committed.
        running['end_date'] = _at(2)
        self.assertEqual(['overcommit'], _kinds(checks.check(state)))

    def test_whole_host_holds_its_own_servers(self):
        lease = _lease('l1', status='ACTIVE', start=-1, end=3,
                       reservations=[_res('r1', types.HOST, 'active')])
        own = _server('s1', lease_reservation_id='r1')
        state = _state(leases=[lease],
                       allocations=[_alloc('r1', start=-1, whole=True)],
                       servers=[own], usages={'s1': {'VCPU': 4}},
                       registered=[{'hypervisor_hostname': 'h1',
                                    'service_host': 'h1'}],
                       aggregates=[{'name': 'r1', 'hosts': ['h1'],
                                    'metadata': {}}])
        self.assertEqual([], checks.check(state))
        # The lease's own servers go at its end: a later host lease
        # there is no over-commitment.
        later = _lease('l2', reservations=[_res('r2', types.HOST)])
        state.leases.append(later)
        state.allocations.append(_alloc('r2', start=3, end=5, whole=True))
        self.assertEqual([], checks.check(state))
        state.servers.append(_server('s2', project='p2'))
        state.providers['h1'].usages['s2'] = {'VCPU': 1}
        self.assertEqual(['bystander', 'overcommit'],
                         _kinds(checks.check(state)))


class HostsTest(testtools.TestCase):

    def _registered(self, **kwargs):
        return _state(registered=[{'hypervisor_hostname': 'h1',
                                   'service_host': 'h1'}], **kwargs)

    def test_free_pool_host(self):
        pool = {'name': 'freepool', 'hosts': ['h1'], 'metadata': {}}
        self.assertEqual([], checks.check(self._registered(
            aggregates=[pool])))
        state = self._registered(aggregates=[pool],
                                 servers=[_server('s1')])
        self.assertEqual(['free_pool_server'], _kinds(checks.check(state)))
        state = self._registered()
        self.assertEqual(['aggregate'], _kinds(checks.check(state)))

    def test_leftover_aggregate(self):
        lease = _lease('l1', status='TERMINATED',
                       reservations=[_res('r1', types.HOST, 'deleted')])
        pool = {'name': 'freepool', 'hosts': ['h1'], 'metadata': {}}
        # Named after the reservation, as in Blazar; known as ours by its
        # metadata (an operator's aggregate of that name is not).
        left = {'name': 'r1', 'hosts': [], 'metadata': {
            checks.META_AGGREGATE_RESERVATION: 'r1'}}
        state = self._registered(leases=[lease], aggregates=[pool, left])
        [finding] = checks.check(state)
        self.assertEqual(('aggregate', 'r1'),
                         (finding.check, finding.subject))
        left['metadata'] = {}
        self.assertEqual([], checks.check(state))


class LeasedServersTest(testtools.TestCase):

    def test_server_past_its_lease(self):
        lease = _lease('l1', status='ACTIVE', start=-3, end=-1,
                       reservations=[_res('r1', status='active',
                                          server='s1')])
        state = _state(leases=[lease], servers=[_server('s1', lease_id='l1')])
        self.assertEqual(['leased_server'], _kinds(checks.check(state)))
        lease['end_date'] = _at(1)
        self.assertEqual([], checks.check(state))

    def test_server_of_a_lease_that_is_gone(self):
        server = _server('s1', lease_id='gone', lease_status='active')
        self.assertEqual(['leased_server'],
                         _kinds(checks.check(_state(servers=[server]))))
        # Shelved at its end: it holds no host.
        server['status'] = 'SHELVED_OFFLOADED'
        self.assertEqual([], checks.check(_state(servers=[server])))

    def test_live_link_of_an_ended_lease(self):
        lease = _lease('l1', status='TERMINATED', start=-3, end=-1,
                       reservations=[_res('r1', status='active',
                                          server='s1')])
        self.assertEqual(['leased_server'],
                         _kinds(checks.check(_state(leases=[lease]))))


class EventsTest(testtools.TestCase):

    def _event(self, etype='start_lease', status='UNDONE', hours=0,
               **extra):
        event = {'id': etype, 'event_type': etype, 'status': status,
                 'time': _at(hours), 'claimed_at': None,
                 'next_attempt_at': None}
        event.update(extra)
        return event

    def test_overdue_and_retry_time(self):
        late = self._event(hours=-1)
        state = _state(leases=[_lease('l1', events=[late])])
        self.assertEqual(['overdue_event'], _kinds(checks.check(state)))
        late['next_attempt_at'] = _at(0.5)     # backing off: not late
        self.assertEqual([], checks.check(state))

    def test_waiting_behind_a_start_that_is_retried(self):
        # The clock jumped past the before-end; the start then failed and
        # is retried in 5 minutes: the before-end waits for it (the engine
        # runs a lease's events in order), so neither is late yet.
        start = self._event(hours=-1, next_attempt_at=_at(1 / 12.0))
        before_end = self._event('before_end_lease', hours=-0.5)
        end = self._event('end_lease', hours=2)
        state = _state(leases=[_lease('l1', start=-1, events=[
            end, before_end, start])])
        self.assertEqual([], checks.check(state))
        # Once the retry is past due, the start is late, and so is what
        # waits for it.
        start['next_attempt_at'] = _at(-0.5)
        findings = checks.check(state)
        self.assertEqual(['overdue_event', 'overdue_event'],
                         _kinds(findings))
        self.assertEqual({'start_lease', 'before_end_lease'},
                         {f.subject for f in findings})
        # Behind a start an engine holds: late only once that claim
        # could be stuck.
        start.update(status='IN_PROGRESS', claimed_at=_at(-0.25))
        state.claim_timeout = 3600
        self.assertEqual([], checks.check(state))
        state.claim_timeout = 600
        self.assertEqual(['overdue_event', 'stuck_event'],
                         sorted(_kinds(checks.check(state))))

    def test_stuck_claim(self):
        claimed = self._event(status='IN_PROGRESS', hours=-1,
                              claimed_at=_at(-0.5))
        state = _state(leases=[_lease('l1', status='STARTING',
                                      events=[claimed])],
                       claim_timeout=900)
        self.assertEqual(['stuck_event'], _kinds(checks.check(state)))
        state.claim_timeout = 3600
        self.assertEqual([], checks.check(state))

    def test_status_disagrees_with_events(self):
        lease = _lease('l1', status='ACTIVE', start=-1,
                       events=[self._event(status='ERROR', hours=-1)])
        self.assertEqual(['lease_status'],
                         _kinds(checks.check(_state(leases=[lease]))))


class BrokenPromiseTest(testtools.TestCase):

    def test_admitted_lease_in_error(self):
        res = _res('r1')
        res['properties'] = {'shelved_until_start': True}
        lease = _lease('l1', status='ERROR', reservations=[res])
        lease['status_reason'] = 'No valid host'
        [finding] = checks.check(_state(leases=[lease]))
        self.assertEqual('broken_promise', finding.check)
        self.assertIn('No valid host', finding.message)
        # A lease started now was never admitted: Nova's own failure.
        res['properties'] = {}
        self.assertEqual([], checks.check(_state(leases=[lease])))


class JournalTest(testtools.TestCase):
    """The ``journal`` check: no journaled engine action touched anything
    outside its lease.
    """

    def _row(self, action, target='s1', kind='server', outcome='done',
             target_project='p1', host='h1', row_id=1):
        return {'id': row_id, 'lease_id': 'l1', 'reservation_id': 'r1',
                'project_id': 'p1', 'target_kind': kind,
                'target_id': target, 'target_project_id': target_project,
                'target_host': host, 'action': action, 'outcome': outcome,
                'engine': 'e', 'created_at': NOW}

    def _check(self, *rows):
        lease = _lease('l1', status='ACTIVE', start=-1, reservations=[
            dict(_res('r1', rtype=types.HOST, status='active'),
                 properties={'flavor_id': 'f1'})])
        state = _state(leases=[lease], allocations=[
            _alloc('r1', start=-1, whole=True)], actions=list(rows))
        return checks.check_journal(state)

    def test_actions_inside_the_lease(self):
        self.assertEqual([], self._check(
            self._row('delete'),
            self._row('migrate', target='b1', target_project='p2',
                      row_id=2),
            self._row('confirm', target='b1', target_project=None,
                      host=None, row_id=3),
            self._row('remove_access', kind='flavor', target='f1',
                      row_id=4),
            # A refusal touched nothing.
            self._row('delete', target='x', target_project='p2',
                      outcome='refused', row_id=5)))

    def test_another_projects_server_deleted(self):
        [finding] = self._check(self._row('delete', target_project='p2'))
        self.assertEqual('journal', finding.check)
        self.assertEqual('server s1', finding.subject)
        self.assertIn('server of project p2', finding.message)

    def test_migration_off_another_host_and_unasked_confirm(self):
        findings = self._check(
            self._row('live_migrate', target='b1', target_project='p2',
                      host='h9'),
            self._row('confirm', target='b2', target_project=None,
                      row_id=2))
        self.assertEqual(['journal', 'journal'], _kinds(findings))
        self.assertIn('not one of reservation r1', findings[0].message)
        self.assertIn('never asked for', findings[1].message)

    def test_not_the_reservations_flavor(self):
        [finding] = self._check(self._row('delete', kind='flavor',
                                          target='f2'))
        self.assertIn('not the flavor of reservation r1', finding.message)

    def test_no_journal_read_no_check(self):
        self.assertEqual([], checks.check_journal(_state()))


class PlacementReadTest(testtools.TestCase):

    def test_no_placement_in_the_catalog_is_a_read_error(self):
        # A session whose catalog has no placement endpoint (the
        # commands then say so and exit 3, instead of a traceback).
        from keystoneauth1 import noauth
        from keystoneauth1 import session as ks_session

        from nova_lease.audit import reader

        client = reader.PlacementClient(ks_session.Session(
            auth=noauth.NoAuth()))
        e = self.assertRaises(reader.AuditReadError, client.providers)
        self.assertIn('placement GET /resource_providers', str(e))


def _service(host, status='enabled', state='up', forced_down=False,
             reason=None):
    return {'host': host, 'binary': 'nova-compute', 'status': status,
            'state': state, 'forced_down': forced_down,
            'disabled_reason': reason}


class ServicesTest(testtools.TestCase):
    """``host_service``: the nova-compute services under promises."""

    IDLE = 'nova_lease idle host'

    def _state(self, leases, allocations, services, **kwargs):
        kwargs.setdefault('idle_reason_prefix', self.IDLE)
        return _state(leases=leases, allocations=allocations,
                      services=services, **kwargs)

    def _found(self, state):
        return {f.subject: f for f in checks.check_services(state)}

    def test_not_read_no_check(self):
        lease = _lease('l1', status='ACTIVE', start=-1,
                       reservations=[_res('r1', types.HOST, 'active')])
        state = _state(leases=[lease], allocations=[_alloc('r1', start=-1)])
        self.assertIsNone(state.services)
        self.assertEqual([], checks.check_services(state))

    def test_started_promise(self):
        lease = _lease('l1', status='ACTIVE', start=-1,
                       reservations=[_res('r1', types.HOST, 'active')])
        alloc = _alloc('r1', start=-1, whole=True)
        self.assertEqual({}, self._found(self._state(
            [lease], [alloc], [_service('h1')])))
        for service, word in (
                (_service('h1', status='disabled', reason='fan'),
                 'disabled (fan)'),
                (_service('h1', state='down'), 'is down'),
                (_service('h1', state='down', forced_down=True),
                 'forced down'),
                (_service('h1', status='disabled', reason=self.IDLE + ':'),
                 'disabled (nova_lease idle host:)')):
            found = self._found(self._state([lease], [alloc], [service]))
            self.assertEqual(['h1'], list(found))
            self.assertIn(word, found['h1'].message)
            self.assertIn('lease l1 (started)', found['h1'].message)
        # Its service gone.
        found = self._found(self._state([lease], [alloc],
                                        [_service('h2')]))
        self.assertIn('without a nova-compute service',
                      found['h1'].message)

    def test_imminent_window_and_the_idle_action(self):
        lease = _lease('l1', start=0.5, reservations=[_res('r1')])
        alloc = _alloc('r1', start=0.5)
        maintenance = _service('h1', status='disabled', reason='fan')
        found = self._found(self._state([lease], [alloc], [maintenance]))
        self.assertIn('lease l1 (from %s)' % checks._fmt(_at(0.5)),
                      found['h1'].message)
        # Beyond the hour: not yet.
        alloc['start_date'] = _at(1.5)
        self.assertEqual({}, self._found(self._state(
            [lease], [alloc], [maintenance])))
        self.assertEqual(['h1'], list(self._found(self._state(
            [lease], [alloc], [maintenance], imminent=2 * 3600))))
        # Disabled by the idle action before the start: by design.
        alloc['start_date'] = _at(0.5)
        idle = _service('h1', status='disabled', reason=self.IDLE + ': x')
        self.assertEqual({}, self._found(self._state([lease], [alloc],
                                                     [idle])))
        # A lease over, or ended allocations: nothing promised.
        lease['status'] = 'TERMINATED'
        self.assertEqual({}, self._found(self._state([lease], [alloc],
                                                     [maintenance])))

    def test_running_leased_server_and_multi_node_service(self):
        # A VM lease's server on node n2 of service "ironic" (two nodes):
        # the service's state is the node's.
        lease = _lease('l1', status='PENDING', start=-1, reservations=[
            _res('r1', status='pending', server='s1')])
        server = dict(_server('s1', host='ironic'), node='n2')
        state = self._state([lease], [], [_service(
            'ironic', state='down')], servers=[server],
            hypervisors={'n1': 'ironic', 'n2': 'ironic'})
        found = self._found(state)
        self.assertEqual(['n2'], list(found))
        self.assertIn('nova-compute on ironic', found['n2'].message)
        self.assertEqual('ironic', found['n2'].details['service_host'])
        # Shelved away: it holds no host.
        server['status'] = 'SHELVED_OFFLOADED'
        self.assertEqual({}, self._found(state))


class FlavorOwnerTest(testtools.TestCase):
    """flavor_owner: an instance reservation's flavor is its project's."""

    def _check(self, status='ACTIVE', end=3, **flavor):
        lease = _lease('l1', status=status, start=-1, end=end,
                       reservations=[_res('r1', rtype=types.SLOTS,
                                          status='active')])
        item = {'id': 'r1', 'reservation': 'r1', 'is_public': False,
                'access': ['p1']}
        item.update(flavor)
        return checks.check_flavors(_state(leases=[lease], flavors=[item]))

    def test_the_projects_private_flavor(self):
        self.assertEqual([], self._check())
        self.assertEqual([], self._check(status='PENDING', access=[]))

    def test_not_read_is_not_checked(self):
        self.assertEqual([], checks.check_flavors(_state()))

    def test_public_or_given_to_another_project(self):
        [finding] = self._check(is_public=True, access=None)
        self.assertEqual('flavor_owner', finding.check)
        self.assertIn('is public', finding.message)
        [finding] = self._check(access=['p1', 'p2'])
        self.assertIn('is given to project(s) p2', finding.message)

    def test_started_lease_without_its_flavor(self):
        [finding] = self._check(access=[])
        self.assertIn('not given to the project', finding.message)

    def test_flavor_outlives_its_lease(self):
        self.assertEqual([], self._check(status='TERMINATED', end=0,
                                         access=[]))
        [finding] = self._check(status='TERMINATED', end=-1, access=[])
        self.assertIn('outlives its reservation', finding.message)
        [finding] = checks.check_flavors(_state(flavors=[
            {'id': 'x', 'reservation': 'gone', 'is_public': False,
             'access': []}]))
        self.assertIn('outlives', finding.message)
