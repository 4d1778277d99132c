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
"""nova-lease-manage audit on the in-process Nova.

The auditor reads the side database, the compute API and placement (through
the Keystone catalog, as the engine's service user) and reports every
broken or endangered promise. Each test builds the broken state through the
real APIs -- what an admin can do behind nova_lease's back -- and shows that
the library function and the command report it; a cloud used only through
nova_lease reports nothing.
"""

import contextlib
import datetime
import io
import json
from unittest import mock

from oslo_utils import timeutils

from nova_lease import audit
from nova_lease.audit import checks
from nova_lease.cmd import manage
from nova_lease.db import api as db_api
from nova_lease.periodic import idle
from nova_lease.plugins.instance import plugin as instance_plugin
from tests.functional import base
from tests.functional import test_host_bystanders
from tests.functional import test_host_reservation
from tests.functional import test_lease_api

PREFIX = test_lease_api.PREFIX
SMALL = (2, 4096, 40)


class AuditTest(test_host_bystanders._ForcedBootMixin,
                test_host_reservation.HostLeaseMixin,
                base.LeaseFunctionalBase):

    COMPUTES = {'host1': SMALL, 'host2': SMALL, 'host3': SMALL}

    def _setup_services(self):
        # Placement's capacity is the hosts' own: a few servers fill one.
        self.flags(initial_cpu_allocation_ratio=1.0,
                   initial_ram_allocation_ratio=1.0,
                   initial_disk_allocation_ratio=1.0)
        super()._setup_services()

    def setUp(self):
        super().setUp()
        self.conf = self.engine_conf(resource_plugins='physical:host')

    def _engine(self, **overrides):
        engine, plugin = super()._engine(**overrides)
        engine.plugins[instance_plugin.RESOURCE_TYPE] = (
            instance_plugin.InstancePlugin(engine.conf))
        return engine, plugin

    def _audit(self):
        return audit.run(self.conf)

    def _checks(self, findings):
        return sorted({f.check for f in findings})

    def _manage(self, *args):
        out, err = io.StringIO(), io.StringIO()
        path = self.conf.config_file[0]
        with contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err), \
                mock.patch.object(manage.logging, 'setup'):
            code = manage.main(['--config-file', path, 'audit'] + list(args))
        return code, out.getvalue(), err.getvalue()

    def _future_lease(self, hours=2, name='later'):
        hints = {'reserved': 'True', 'lease_params': (
            '{"name": "%s", "start": "%s", "end": "%s"}'
            % (name, self._at(hours=hours), self._at(hours=hours + 1)))}
        return self._boot(hints, name=name, wait=None)

    def test_clean_cloud_reports_nothing(self):
        # Unleased and leased work, a future lease, a started host lease
        # with its owner's server: every promise kept. (The host is
        # registered first: one that runs a server cannot be.)
        self._register('host3')
        self._boot(None, name='plain')
        self._boot({'reserved': 'True', 'lease_params': (
            '{"name": "now", "start": "now", "duration": "2h"}')},
            name='leased')
        self._future_lease()
        lease = self._create(self._lease_body(
            'now', self._at(hours=2), reservations=[self._host_res()]))
        self.engine.process_due()
        self._boot_hinted(lease['reservations'][0]['id'])
        self.assertEqual([], self._audit())
        code, out, err = self._manage()
        self.assertEqual(0, code, err)
        self.assertIn('No broken or endangered promise', out)

    def test_journal_of_actions_outside_their_lease(self):
        # The engine's actions at a host lease's start and end are
        # journaled and all inside the lease: nothing reported. A row
        # that deleted another project's server (as an engine without
        # the gate did at the end of an instance reservation) is.
        self._register('host3')
        lease = self._create(self._lease_body(
            'now', self._at(hours=1), reservations=[self._host_res()]))
        self.engine.process_due()
        mine = self._boot_hinted(lease['reservations'][0]['id'])
        self.clock.advance(hours=1)
        self.engine.process_due()
        self._wait_until_deleted(mine)
        done = db_api.action_list(self.lease_db, lease_id=lease['id'],
                                  outcome='done')
        self.assertIn((mine['id'], 'delete'),
                      [(r['target_id'], r['action']) for r in done])
        self.assertEqual([], [f for f in self._audit()
                              if f.check == 'journal'])
        db_api.action_record(self.lease_db, {
            'lease_id': lease['id'],
            'reservation_id': lease['reservations'][0]['id'],
            'project_id': lease['project_id'], 'target_kind': 'server',
            'target_id': 'bystander-1',
            'target_project_id': test_lease_api.OTHER_PROJECT,
            'action': 'delete', 'outcome': 'done', 'reason': 'forged'})
        [finding] = [f for f in self._audit() if f.check == 'journal']
        self.assertEqual('server bystander-1', finding.subject)
        self.assertIn('server of project %s' % test_lease_api.OTHER_PROJECT,
                      finding.message)
        code, out, _err = self._manage()
        self.assertNotEqual(0, code)
        self.assertIn('journal', out)

    def _forge(self, lease, **values):
        row = {'lease_id': lease['id'],
               'reservation_id': lease['reservations'][0]['id'],
               'project_id': lease['project_id'], 'target_kind': 'server',
               'target_id': 'bystander-1',
               'target_project_id': test_lease_api.OTHER_PROJECT,
               'action': 'delete', 'outcome': 'done', 'reason': 'forged'}
        row.update(values)
        return db_api.action_record(self.lease_db, row)['id']

    def _journal_findings(self, **kwargs):
        return [f for f in audit.run(self.conf, **kwargs)
                if f.check == 'journal']

    def test_journal_cursor_checks_each_row_once(self):
        # With a cursor (the soak walk's, `audit --since`), each audit
        # checks only the rows journaled after the previous one: a
        # violating row after the cursor is found; the rows before it
        # are not read again.
        self._register('host3')
        lease = self._create(self._lease_body(
            'now', self._at(hours=2), reservations=[self._host_res()]))
        self.engine.process_due()
        journaled = [r['id'] for r in db_api.action_list(self.lease_db)]
        self.assertNotEqual([], journaled)
        cursor = audit.JournalCursor()
        self.assertEqual([], self._journal_findings(cursor=cursor))
        self.assertEqual(max(journaled), cursor.since)
        reads = []
        real = db_api.action_list

        def spy(db, *args, **kwargs):
            rows = real(db, *args, **kwargs)
            reads.append((kwargs, [r['id'] for r in rows]))
            return rows

        with mock.patch.object(audit.reader.db_api, 'action_list', spy):
            self.assertEqual([], self._journal_findings(cursor=cursor))
            self.assertEqual([({'since': max(journaled)}, [])], reads)
            bad = self._forge(lease)
            del reads[:]
            [finding] = self._journal_findings(cursor=cursor)
            self.assertEqual([({'since': max(journaled)}, [bad])], reads)
        self.assertEqual('server bystander-1', finding.subject)
        self.assertEqual(bad, cursor.since)
        # Checked once: the next audit with the cursor does not read it
        # again; an audit without one (the default) reads everything.
        self.assertEqual([], self._journal_findings(cursor=cursor))
        self.assertEqual(bad, cursor.since)
        self.assertEqual([finding], self._journal_findings())

    def test_journal_cursor_confirmation_of_an_earlier_migration(self):
        # A confirmation after the cursor is checked against the
        # migrations its lease journaled before it.
        self._register('host3')
        lease = self._create(self._lease_body(
            'now', self._at(hours=2), reservations=[self._host_res()]))
        self.engine.process_due()
        host = self._hosts_of(lease)[0]
        self._forge(lease, action='migrate', target_id='moved-1',
                    target_host=host)
        cursor = audit.JournalCursor()
        self.assertEqual([], self._journal_findings(cursor=cursor))
        self._forge(lease, action='confirm', target_id='moved-1',
                    target_host=host)
        self.assertEqual([], self._journal_findings(cursor=cursor))
        # One the lease never asked for is found.
        self._forge(lease, action='confirm', target_id='never-moved',
                    target_host=host)
        [finding] = self._journal_findings(cursor=cursor)
        self.assertIn('confirmed a migration the lease never asked for',
                      finding.message)

    def test_manage_audit_since(self):
        self._register('host3')
        lease = self._create(self._lease_body(
            'now', self._at(hours=2), reservations=[self._host_res()]))
        self.engine.process_due()
        bad = self._forge(lease)
        code, out, err = self._manage('--format', 'json')
        self.assertEqual(1, code, err)
        body = json.loads(out)
        self.assertEqual(bad, body['journal_last_id'])
        self.assertEqual(['journal'],
                         sorted({f['check'] for f in body['findings']}))
        code, out, err = self._manage('--since', str(bad - 1))
        self.assertEqual(1, code, err)
        self.assertIn('journal', out)
        self.assertIn('checked through action id %d (next: --since %d)'
                      % (bad, bad), out)
        code, out, err = self._manage('--since', str(bad))
        self.assertEqual(0, code, err)
        self.assertIn('No broken or endangered promise', out)
        code, out, err = self._manage('--since', '-1')
        self.assertEqual(2, code)
        self.assertIn('--since', err)

    def test_instance_reservation_servers_are_the_leases(self):
        # Blazar's instance reservations: servers booted with the
        # reservation's flavor run on free-pool hosts, within its slots:
        # neither strays in the free pool nor an over-commitment.
        from nova_lease.plugins.flavor import plugin as flavor_plugin

        self._register('host3')
        lease = self._create(self._lease_body(
            'now', self._at(hours=2), reservations=[{
                'resource_type': 'virtual:instance', 'amount': 1,
                'vcpus': 1, 'memory_mb': 1024, 'disk_gb': 10,
                'affinity': True}]))
        [res] = lease['reservations']
        engine, _plugin = self._engine()
        engine.plugins[flavor_plugin.RESOURCE_TYPE] = (
            flavor_plugin.FlavorPlugin(engine.conf))
        engine.process_due()
        self._boot({'group': res['server_group_id']}, name='a',
                   flavor=res['id'])
        self.assertEqual([], self._audit())
        # A server forced there without the flavor is still found.
        self._boot_forced('host3', 'stray')
        self.assertEqual(['free_pool_server'],
                         self._checks(self._audit()))

    def test_instance_reservation_flavor_belongs_to_its_project(self):
        # flavor_owner: the reservation's private flavor is given to its
        # project while the lease runs, to nobody else, and goes at the
        # end; an operator who gives it to another project is told.
        from nova_lease.plugins.flavor import plugin as flavor_plugin

        self._register('host3')
        lease = self._create(self._lease_body(
            'now', self._at(hours=2), reservations=[{
                'resource_type': 'virtual:instance', 'amount': 1,
                'vcpus': 1, 'memory_mb': 1024, 'disk_gb': 10,
                'affinity': None}]))
        [res] = lease['reservations']
        engine, _plugin = self._engine()
        engine.plugins[flavor_plugin.RESOURCE_TYPE] = (
            flavor_plugin.FlavorPlugin(engine.conf))
        engine.process_due()
        self.assertEqual([], self._audit())
        self.admin_api.api_post(
            '/flavors/%s/action' % res['id'],
            {'addTenantAccess': {'tenant': test_lease_api.OTHER_PROJECT}})
        [finding] = self._audit()
        self.assertEqual('flavor_owner', finding.check)
        self.assertIn(test_lease_api.OTHER_PROJECT, finding.message)
        self.admin_api.api_post(
            '/flavors/%s/action' % res['id'],
            {'removeTenantAccess': {'tenant': test_lease_api.OTHER_PROJECT}})
        self.assertEqual([], self._audit())
        # Over: the engine's end deleted the flavor.
        self.clock.advance(hours=2)
        engine.process_due()
        self.assertEqual([], self._audit())

    def test_server_forced_into_the_free_pool(self):
        self._register('host3')
        server = self._boot_forced('host3', 'intruder')
        findings = self._audit()
        self.assertEqual(['free_pool_server'], self._checks(findings))
        self.assertEqual(server['id'], findings[0].subject)
        code, out, err = self._manage('--format', 'json')
        self.assertEqual(1, code, err)
        body = json.loads(out)
        self.assertEqual(['free_pool_server'],
                         [f['check'] for f in body['findings']])
        self.assertEqual('host3', body['findings'][0]['details']['host'])
        code, out, err = self._manage()
        self.assertEqual(1, code, err)
        self.assertIn(server['id'], out)
        self.assertIn('1 finding(s).', out)

    def test_bystander_on_a_leased_host(self):
        self._register('host3')
        lease = self._create(self._lease_body(
            'now', self._at(hours=2), reservations=[self._host_res()]))
        self.assertEqual(1, self.engine.process_due())
        own = self._boot_hinted(lease['reservations'][0]['id'])
        intruder = self._boot_forced('host3', 'intruder')
        findings = self._audit()
        # It does not belong to the lease, and it takes capacity the
        # lease holds whole.
        self.assertEqual(['bystander', 'overcommit'], self._checks(findings))
        [bystander] = [f for f in findings if f.check == 'bystander']
        self.assertEqual(intruder['id'], bystander.subject)
        [overcommit] = [f for f in findings if f.check == 'overcommit']
        self.assertIn('server %s' % intruder['id'], overcommit.message)
        self.assertNotIn(own['id'], overcommit.message)

    def test_future_promise_overcommitted_by_forced_work(self):
        # A future lease holds host capacity at 2h; an admin forces
        # unleased work (which runs forever) onto the same host past it.
        self._future_lease()
        [allocation] = db_api.allocation_list(self.lease_db)
        host = allocation['host']
        for i in range(2):
            self._boot_forced(host, 'forced%d' % i)
        findings = self._audit()
        self.assertEqual(['overcommit'], self._checks(findings))
        self.assertEqual(host, findings[0].subject)
        self.assertIn('VCPU 3 > 2', findings[0].message)

    def test_host_in_the_wrong_aggregate_and_leftovers(self):
        self._register('host3')
        lease = self._create(self._lease_body(
            'now', self._at(hours=2), reservations=[self._host_res()]))
        self.assertEqual(1, self.engine.process_due())
        # An admin puts the leased host back into the free pool by hand,
        # and leaves an aggregate of a reservation that does not exist.
        pool = self._aggregate('freepool')
        self.admin_api.api_post('/os-aggregates/%s/action' % pool['id'],
                                {'add_host': {'host': 'host3'}})
        gone = '00000000-0000-0000-0000-000000000000'
        left = self.admin_api.api_post('/os-aggregates', {'aggregate': {
            'name': gone}}).body['aggregate']
        self.admin_api.api_post(
            '/os-aggregates/%s/action' % left['id'],
            {'set_metadata': {'metadata': {
                checks.META_AGGREGATE_RESERVATION: gone}}})
        findings = self._audit()
        self.assertEqual(['aggregate'], self._checks(findings))
        messages = ' '.join(f.message for f in findings)
        self.assertIn('still in the free pool', messages)
        self.assertIn('belongs to no live host reservation', messages)
        self.assertEqual(lease['id'], findings[0].details['lease_id'])

    def test_stuck_and_overdue_events(self):
        self._register('host3')
        lease = self._create(self._lease_body(
            self._at(minutes=1), self._at(hours=2),
            reservations=[self._host_res()]))
        events = {e['event_type']: e for e in db_api.event_list(
            self.lease_db, lease_id=lease['id'])}
        self.assertEqual([], self._audit())
        # No engine ran: the start is overdue once its grace has passed.
        self.clock.advance(minutes=5)
        findings = self._audit()
        self.assertEqual(['overdue_event'], self._checks(findings))
        self.assertEqual(events['start_lease']['id'], findings[0].subject)
        # An engine claimed it and died without a heartbeat mechanism.
        now = timeutils.utcnow()
        db_api.event_update(self.lease_db, events['start_lease']['id'], {
            'status': 'IN_PROGRESS', 'claimed_by': 'gone',
            'claimed_at': now - datetime.timedelta(hours=1)},
            expected_status='UNDONE')
        findings = self._audit()
        self.assertEqual(['stuck_event'], self._checks(findings))

    def test_leased_server_gone_while_lease_active(self):
        server = self._boot({'reserved': 'True', 'lease_params': (
            '{"name": "now", "start": "now", "duration": "2h"}')},
            name='leased')
        [lease] = db_api.lease_list(self.lease_db)
        # The start as the engine records it, without the instance
        # plugin (not loaded here): the lease ACTIVE with its server.
        for event in lease['events']:
            if event['event_type'] == 'start_lease':
                db_api.event_update(self.lease_db, event['id'], {
                    'status': 'IN_PROGRESS', 'claimed_by': 'test',
                    'claimed_at': timeutils.utcnow()},
                    expected_status='UNDONE')
                db_api.event_update(self.lease_db, event['id'],
                                    {'status': 'DONE'},
                                    expected_status='IN_PROGRESS')
        db_api.lease_update(self.lease_db, lease['id'],
                            {'status': 'STARTING'})
        db_api.lease_update(self.lease_db, lease['id'],
                            {'status': 'ACTIVE'})
        for reservation in lease['reservations']:
            db_api.reservation_update(self.lease_db, reservation['id'],
                                      {'status': 'active'})
        self.assertEqual([], self._audit())
        # The server vanishes behind the lease's back (no notification,
        # no reconcile pass yet).
        with mock.patch(
                'nova_lease.plugins.instance.leases.instance_deleted'):
            self._delete_server(server)
        findings = self._audit()
        self.assertEqual(['leased_server'], self._checks(findings))
        self.assertIn('is gone', findings[0].message)

    # -- the compute services under promises (A5, A6) -----------------------

    def _set_service(self, host, **body):
        """What an operator does with ``openstack compute service set``."""
        [service] = self.admin_api.api_get(
            '/os-services?binary=nova-compute&host=%s' % host).body[
                'services']
        self.admin_api.api_put('/os-services/%s' % service['id'], body)

    def _disable(self, host, reason='maintenance'):
        self._set_service(host, status='disabled', disabled_reason=reason)

    def _service_findings(self):
        return {f.subject: f for f in self._audit()
                if f.check == 'host_service'}

    def test_disabled_hosts_under_started_promises(self):
        # A started host lease (host3), a started VM lease (its server's
        # host): an operator disables both hosts' nova-compute.
        self._register('host3')
        lease = self._create(self._lease_body(
            'now', self._at(hours=2), reservations=[self._host_res()]))
        self.assertEqual(1, self.engine.process_due())
        vm = self._boot({'reserved': 'True', 'lease_params': (
            '{"name": "vm", "start": "now", "duration": "2h"}')},
            name='leased')
        [vm_lease] = [x for x in db_api.lease_list(self.lease_db)
                      if x['name'] == 'vm']
        vm_host = vm['OS-EXT-SRV-ATTR:host']
        plain = self._boot(None, name='plain')
        self.assertEqual([], self._audit())
        self._disable('host3')
        self._disable(vm_host, reason='disk swap')
        found = self._service_findings()
        self.assertEqual({'host3', vm_host}, set(found))
        self.assertIn(lease['id'], found['host3'].message)
        self.assertIn('disabled (maintenance)', found['host3'].message)
        self.assertEqual([lease['id']], [
            p['lease_id'] for p in found['host3'].details['promises']])
        self.assertIn(vm_lease['id'], found[vm_host].message)
        self.assertIn('disabled (disk swap)', found[vm_host].message)
        code, out, err = self._manage('--format', 'json')
        self.assertEqual(1, code, err)
        self.assertEqual(
            {'host_service'},
            {f['check'] for f in json.loads(out)['findings']})
        # Enabled again: nothing to report. A host under no promise may
        # be disabled (the unleased server's, if apart).
        for host in ('host3', vm_host):
            self._set_service(host, status='enabled')
        if plain['OS-EXT-SRV-ATTR:host'] not in ('host3', vm_host):
            self._disable(plain['OS-EXT-SRV-ATTR:host'])
        self.assertEqual([], self._audit())

    def test_instance_reservation_slot_host_disabled(self):
        from nova_lease.plugins.flavor import plugin as flavor_plugin

        self._register('host3')
        lease = self._create(self._lease_body(
            'now', self._at(hours=2), reservations=[{
                'resource_type': 'virtual:instance', 'amount': 1,
                'vcpus': 1, 'memory_mb': 1024, 'disk_gb': 10,
                'affinity': True}]))
        engine, _plugin = self._engine()
        engine.plugins[flavor_plugin.RESOURCE_TYPE] = (
            flavor_plugin.FlavorPlugin(engine.conf))
        engine.process_due()
        self.assertEqual('ACTIVE', db_api.lease_get(
            self.lease_db, lease['id'])['status'])
        [slot_host] = self._hosts_of(lease)
        self.assertEqual({}, self._service_findings())
        self._disable(slot_host)
        found = self._service_findings()
        self.assertEqual([slot_host], list(found))
        self.assertIn(lease['id'], found[slot_host].message)

    def test_down_and_forced_down_hosts(self):
        self._register('host3')
        lease = self._create(self._lease_body(
            'now', self._at(hours=2), reservations=[self._host_res()]))
        self.assertEqual(1, self.engine.process_due())
        self._set_service('host3', forced_down=True)
        found = self._service_findings()
        self.assertEqual(['host3'], list(found))
        self.assertIn('forced down', found['host3'].message)
        self.assertIn(lease['id'], found['host3'].message)
        self._set_service('host3', forced_down=False)
        self.assertEqual({}, self._service_findings())
        # host3's nova-compute stops reporting: down once
        # service_down_time has passed (the others report).
        self.computes.pop('host3').stop()
        self.clock.advance(minutes=5)
        found = self._service_findings()
        self.assertEqual(['host3'], list(found))
        self.assertIn('is down', found['host3'].message)

    def test_imminent_promises_and_the_idle_action(self):
        # A host lease from 30 minutes on: its host must be up and
        # enabled by then (an hour ahead counts).
        self._register('host3')
        lease = self._create(self._lease_body(
            self._at(minutes=30), self._at(hours=2),
            reservations=[self._host_res()]))
        self._disable('host3')
        found = self._service_findings()
        self.assertEqual(['host3'], list(found))
        self.assertIn('from %s' % self._at(minutes=30)[:16],
                      found['host3'].message)
        # The idle action disables hosts until just before their
        # promise, by design: not a finding before the start.
        self._disable('host3', reason='%s: idle until %s' % (
            idle.REASON_PREFIX, self._at(minutes=30)))
        self.assertEqual({}, self._service_findings())
        # The start enables it (an engine with the idle action on);
        # disabled by the idle action while the promise runs is a
        # finding.
        self.clock.advance(minutes=30)
        engine, _plugin = self._engine(idle_host_action='disable')
        self.assertEqual(1, engine.process_due())
        self.assertEqual({}, self._service_findings())
        self._disable('host3', reason='%s: idle' % idle.REASON_PREFIX)
        found = self._service_findings()
        self.assertEqual(['host3'], list(found))
        self.assertIn(lease['id'], found['host3'].message)
        # A promise more than an hour away is not imminent.
        self._set_service('host3', status='enabled')
        self._future_lease(hours=3)
        [later] = [x for x in db_api.lease_list(self.lease_db)
                   if x['name'] == 'later']
        [host] = self._hosts_of(later)
        self._disable(host)
        self.assertEqual({}, self._service_findings())

    def test_unreadable_cloud_exit_code(self):
        with mock.patch.object(audit.reader.PlacementClient, 'providers',
                               side_effect=audit.AuditReadError('down')):
            code, out, err = self._manage()
        self.assertEqual(3, code)
        self.assertIn('cannot read the cloud: down', err)
