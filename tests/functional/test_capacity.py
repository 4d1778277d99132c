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
"""GET /os-reservation/capacity and nova-lease-manage capacity on the
in-process Nova.

The scenario: host1 takes unleased work and instance leases; host2 and
host3 are registered (os-hosts) for host leases. An unleased server, a VM
lease that starts now and one that starts in an hour (boot hints), host
leases of two projects. Every step's figures are checked against a
brute-force count made here from what the APIs show -- the servers and
flavors (compute API), the leases and the registered hosts' allocations
(lease API) -- and the hosts' sizes, not from nova_lease's own code.
Lease boundaries fall on whole hours, as the steps do, so that a step's
peak is the sum of what overlaps it.
"""

import contextlib
import datetime
import io
import json
import math
import os
import threading
import time
from unittest import mock

import fixtures

from oslo_serialization import jsonutils

from nova_lease.api_ext.lease_api.handlers import capacity as handler
from nova_lease.cmd import manage
from nova_lease.scheduler import snapshot_cache
from tests.functional import base
from tests.functional import test_host_reservation
from tests.functional import test_lease_api

PREFIX = test_lease_api.PREFIX
CONF = base.CONF
HOUR = datetime.timedelta(hours=1)
SIZE = (4, 8192, 100)
RESOURCES = ('vcpus', 'memory_mb', 'disk_gb')


def _parse(text):
    """A date of the API (``2026-12-01T10:00:00Z``, or Blazar's
    ``2026-12-01T10:00:00.000000``).
    """
    return datetime.datetime.strptime(text[:19], '%Y-%m-%dT%H:%M:%S')


_lease_date = _parse


class CapacityTest(test_host_reservation.HostLeaseMixin,
                   base.LeaseFunctionalBase):

    COMPUTES = {'host1': SIZE, 'host2': SIZE, 'host3': SIZE}
    CLOCK_START = datetime.datetime(2026, 12, 1, 10, 0, 0)

    def _url(self, **query):
        query.setdefault('start', self.clock.now.strftime('%Y-%m-%dT%H:%MZ'))
        query.setdefault('end', (self.clock.now + 6 * HOUR).strftime(
            '%Y-%m-%dT%H:%MZ'))
        query.setdefault('step', '1h')
        return PREFIX + '/capacity?' + '&'.join(
            '%s=%s' % kv for kv in sorted(query.items()))

    def _get(self, api=None, status=200, **query):
        api = api or self.admin_api
        resp = api.api_get(self._url(**query),
                           check_response_status=[status])
        return resp.body

    def _capacity_of_host(self):
        """What placement offers on each host: (total - reserved) x
        ratio, from the test's sizes and Nova's options.
        """
        cpu = CONF.cpu_allocation_ratio or CONF.initial_cpu_allocation_ratio
        ram = CONF.ram_allocation_ratio or CONF.initial_ram_allocation_ratio
        disk = CONF.disk_allocation_ratio or \
            CONF.initial_disk_allocation_ratio
        vcpus, memory_mb, disk_gb = SIZE
        return {
            'vcpus': int((vcpus - CONF.reserved_host_cpus) * cpu),
            'memory_mb': int((memory_mb - CONF.reserved_host_memory_mb) *
                             ram),
            'disk_gb': int((disk_gb - math.ceil(
                CONF.reserved_host_disk_mb / 1024.0)) * disk)}

    def _scenario(self):
        self._register('host2')
        self._register('host3')
        self.unleased = self._boot(name='plain', flavor='1')
        self.now_vm = self._boot({'reserved': 'True', 'lease_params': (
            '{"name": "now", "start": "now", "end": "%s"}'
            % self._at(hours=3))}, name='now', flavor='2')
        self._boot({'reserved': 'True', 'lease_params': (
            '{"name": "later", "start": "%s", "end": "%s"}'
            % (self._at(hours=1), self._at(hours=4)))}, name='later',
            flavor='3', wait=None)
        self.host_lease = self._create(self._lease_body(
            self._at(hours=2), self._at(hours=5), name='hosts'))
        self.other = self._other_api()
        self.other_lease = self._create(self._lease_body(
            self._at(hours=1), self._at(hours=2), name='theirs'),
            api=self.other)

    # -- the brute force -----------------------------------------------------

    def _observed(self):
        """What the APIs show, gathered for the brute force."""
        flavors = {f['id']: f for f in self.admin_api.api_get(
            '/flavors/detail').body['flavors']}
        servers = self.admin_api.get_servers(
            search_opts={'all_tenants': 1})
        leases = self.admin_api.api_get(
            PREFIX + '/leases?all_projects=1').body['leases']
        registered = {h['id']: h['hypervisor_hostname'] for h in
                      self.admin_api.api_get(PREFIX + '/os-hosts').body[
                          'hosts']}
        held = {}
        for entry in self.admin_api.api_get(
                PREFIX + '/os-hosts/allocations').body['allocations']:
            for res in entry['reservations']:
                held.setdefault(res['id'], []).append(
                    registered[entry['resource_id']])
        return flavors, servers, leases, set(registered.values()), held

    def _flavor_size(self, flavor):
        return {'vcpus': flavor['vcpus'], 'memory_mb': flavor['ram'],
                'disk_gb': flavor['disk'] + flavor.get(
                    'OS-FLV-EXT-DATA:ephemeral', 0)}

    def _expected(self, start, steps, project=None):
        """Per step {resource: {figure: value}} by brute force."""
        flavors, servers, leases, registered, held = self._observed()
        by_name = {f['name']: f for f in flavors.values()}
        per_host = self._capacity_of_host()
        hosts = sorted(self.COMPUTES)
        leased_servers = {r['resource_id'] for lease in leases
                          for r in lease['reservations']
                          if r.get('resource_id')}
        # The VM leases' sizes: their server's flavor, else the flavor
        # this test booted them with (the later one has no server yet).
        booted = {'now': '2', 'later': '3'}
        vm_leases = []
        for lease in leases:
            for res in lease['reservations']:
                if res['resource_type'] != 'virtual:instance':
                    continue
                size = self._flavor_size(flavors[booted[lease['name']]])
                vm_leases.append((lease, size))
        host_leases = [(lease, held.get(res['id'], []))
                       for lease in leases for res in lease['reservations']
                       if res['resource_type'] == 'physical:host']
        unleased = [s for s in servers if s['id'] not in leased_servers]
        running_on = {s['OS-EXT-SRV-ATTR:hypervisor_hostname']
                      for s in unleased
                      if s['OS-EXT-SRV-ATTR:hypervisor_hostname']
                      not in registered}
        used = {r: sum(by_name[s['flavor']['original_name']][
            {'vcpus': 'vcpus', 'memory_mb': 'ram', 'disk_gb': 'disk'}[r]]
            for s in unleased) for r in RESOURCES}
        out = []
        for k in range(steps):
            a, b = start + k * HOUR, start + (k + 1) * HOUR
            step = {}

            def active(lease):
                return (_lease_date(lease['start_date']) < b and
                        _lease_date(lease['end_date']) > a)

            mine = (lambda lease: project is None or
                    lease['project_id'] == project)
            held_now = {h for lease, hs in host_leases if active(lease)
                        for h in hs}
            held_mine = {h for lease, hs in host_leases
                         if active(lease) and mine(lease) for h in hs}
            promised_vm = {r: sum(size[r] for lease, size in vm_leases
                                  if active(lease)) for r in RESOURCES}
            promised_vm_mine = {r: sum(size[r] for lease, size in vm_leases
                                       if active(lease) and mine(lease))
                                for r in RESOURCES}
            for r in RESOURCES:
                capacity = per_host[r] * len(hosts)
                promised = promised_vm[r] + per_host[r] * len(held_now)
                step[r] = {'capacity': capacity, 'used': used[r],
                           'promised': promised,
                           'free': capacity - used[r] - promised}
                if project is not None:
                    step[r] = {'capacity': capacity,
                               'promised': promised_vm_mine[r] +
                               per_host[r] * len(held_mine),
                               'free': capacity - used[r] - promised}
            # host1 takes the VM leases and the unleased server; a
            # registered host is free when no host lease holds it.
            busy = set(running_on) | held_now
            if any(promised_vm.values()):
                busy.add('host1')
            step['hosts'] = {'capacity': len(hosts),
                             'used': len(running_on - held_now),
                             'promised': len(held_now),
                             'free': len(set(hosts) - busy)}
            if project is not None:
                step['hosts'] = {'capacity': len(hosts),
                                 'promised': len(held_mine),
                                 'free': len(set(hosts) - busy)}
            out.append(step)
        return out

    def _assert_steps(self, body, start, project=None):
        cap = body['capacity']
        expected = self._expected(start, 6, project)
        self.assertEqual(6, len(cap['steps']))
        for k, (got, want) in enumerate(zip(cap['steps'], expected)):
            self.assertEqual(start + k * HOUR, _parse(got['start']))
            self.assertEqual(start + (k + 1) * HOUR, _parse(got['end']))
            for r in RESOURCES + ('hosts',):
                self.assertEqual(want[r], got[r], 'step %d, %s' % (k, r))
        return cap

    # -- the tests ---------------------------------------------------------

    def test_figures_step_by_step(self):
        self._scenario()
        start = self.clock.now
        body = self._get()
        cap = self._assert_steps(body, start)
        self.assertEqual(3, cap['hosts'])
        self.assertEqual(['vcpus', 'memory_mb', 'disk_gb', 'hosts'],
                         cap['resources'])
        self.assertEqual(3600, cap['step_seconds'])
        self.assertEqual('all', cap['view'])
        # Totals: one-hour steps, so unit-hours are the steps' sums.
        for r in RESOURCES + ('hosts',):
            for f in ('capacity', 'used', 'promised', 'free'):
                self.assertEqual(sum(s[r][f] for s in cap['steps']),
                                 cap['total'][r][f], (r, f))
        # Something is promised, used and free at step 2 (10 + 2 h).
        step = cap['steps'][2]
        self.assertGreater(step['vcpus']['promised'], 0)
        self.assertGreater(step['vcpus']['used'], 0)
        self.assertEqual(1, step['hosts']['promised'])

        # When the clock moves on, the steps now in the past count no
        # unleased work; the others stay.
        self.clock.advance(hours=2)
        body = self._get(start=start.strftime('%Y-%m-%dT%H:%MZ'),
                         end=(start + 6 * HOUR).strftime('%Y-%m-%dT%H:%MZ'))
        steps = body['capacity']['steps']
        self.assertEqual([0, 0], [s['vcpus']['used'] for s in steps[:2]])
        self.assertEqual(cap['steps'][2:], steps[2:])

    def test_filters_and_host_details(self):
        self._scenario()
        held = self._hosts_of(self.host_lease)
        body = self._get(host='host1', resource='vcpus,hosts')
        cap = body['capacity']
        self.assertEqual(1, cap['hosts'])
        self.assertEqual(['vcpus', 'hosts'], cap['resources'])
        self.assertNotIn('memory_mb', cap['steps'][0])
        # (No host lease has started: both registered hosts are in the
        # free pool.)
        self.assertEqual(2, self._get(aggregate='freepool')['capacity'][
            'hosts'])
        self.assertEqual(3, self._get(availability_zone='nova')[
            'capacity']['hosts'])

        body = self._get(detail='hosts')
        details = {h['host']: h for h in body['capacity']['host_details']}
        self.assertEqual({'host1', 'host2', 'host3'}, set(details))
        [held_host] = held
        self.assertTrue(details[held_host]['registered'])
        self.assertFalse(details['host1']['registered'])
        self.assertEqual(self._capacity_of_host(),
                         details['host1']['capacity'])
        self.assertEqual(6, len(details['host1']['steps']))
        # A registered host is idle until its first host lease starts.
        [theirs] = self._hosts_of(self.other_lease)
        for host in ('host2', 'host3'):
            first = min([self.clock.now + 2 * HOUR] * (host == held_host) +
                        [self.clock.now + HOUR] * (host == theirs) +
                        [_parse(body['capacity']['end'])])
            self.assertEqual(first, _parse(details[host]['idle_until']),
                             host)
        self.assertIsNone(details['host1']['idle_until'])
        bookings = details[held_host]['bookings']
        self.assertEqual(['hosts'], [b['lease_name'] for b in bookings
                                     if b['lease_id'] ==
                                     self.host_lease['id']])
        self.assertTrue(all(b['whole_host'] for b in bookings))
        names = sorted(b['lease_name'] for b in details['host1'][
            'bookings'])
        self.assertEqual(['later', 'now'], names)
        self.assertEqual(
            {'virtual:instance'},
            {b['resource_type'] for b in details['host1']['bookings']})

    def test_member_view(self):
        self._scenario()
        start = self.clock.now
        body = self._get(api=self.api)
        cap = self._assert_steps(body, start, project=self.api.project_id)
        self.assertEqual('project', cap['view'])
        self.assertNotIn('host_details', cap)
        text = json.dumps(body)
        self.assertNotIn(self.other_lease['id'], text)
        self.assertNotIn(self.other.project_id, text)
        for host in self.COMPUTES:
            self.assertNotIn(host, text)
        # The stranger sees its own promise (a whole host from 11:00).
        theirs = self._get(api=self.other)['capacity']['steps']
        self.assertEqual([0, 1, 0], [s['hosts']['promised']
                                     for s in theirs[:3]])
        self.assertNotIn(self.host_lease['id'], json.dumps(theirs))
        # Host names, aggregates and details are the admin's.
        for query in ({'detail': 'hosts'}, {'host': 'host1'},
                      {'aggregate': 'freepool'}):
            self._get(api=self.api, status=403, **query)
        # An operator may take the members' view away.
        self.set_policy({'nova_lease:capacity:project': 'rule:admin_api'})
        self._get(api=self.api, status=403)

    def _zone(self, name, *hosts):
        agg = self.admin_api.api_post('/os-aggregates', {'aggregate': {
            'name': name, 'availability_zone': name}}).body['aggregate']
        for host in hosts:
            self.admin_api.api_post('/os-aggregates/%s/action' % agg['id'],
                                    {'add_host': {'host': host}})

    def test_member_cannot_narrow_the_view_to_a_few_hosts(self):
        # host3 alone in a zone: through it, a member would see exactly
        # when another project holds that host (its free capacity drops
        # by a whole host's). Below [nova_lease_api] capacity_member_min_hosts
        # hosts, a zone is the admin's; so is the other zone when what it
        # leaves out is below it (the difference with the unfiltered view
        # would show host3 alone).
        self.flags(capacity_member_min_hosts=2, group='nova_lease_api')
        self._register('host3')
        self._zone('small', 'host3')
        theirs = self._create(self._lease_body(
            self._at(hours=1), self._at(hours=2), name='theirs'),
            api=self._other_api())
        self.assertEqual(['host3'], self._hosts_of(theirs))
        for zone in ('small', 'nova'):
            body = self._get(api=self.api, status=403,
                             availability_zone=zone)
            text = json.dumps(body)
            self.assertIn('availability_zone', text)
            self.assertIn('capacity_member_min_hosts', text)
            self.assertNotIn('host3', text)
        # The whole cloud is not narrowed: the member's view as before.
        self.assertEqual(3, self._get(api=self.api)['capacity']['hosts'])
        # The admin's view is unchanged: the zone alone, held from 11:00.
        small = self._get(availability_zone='small')['capacity']
        self.assertEqual(1, small['hosts'])
        self.assertEqual([1, 0, 1], [s['hosts']['free']
                                     for s in small['steps'][:3]])
        self.assertEqual(2, self._get(availability_zone='nova')[
            'capacity']['hosts'])
        # An operator who allows single hosts gives members every zone.
        self.flags(capacity_member_min_hosts=1, group='nova_lease_api')
        small = self._get(api=self.api, availability_zone='small')[
            'capacity']
        self.assertEqual((1, 'project'), (small['hosts'], small['view']))

    # -- what a member's request may cost nova-api (S6) -----------------------

    def test_member_never_waits_for_the_first_calendar_read(self):
        # Right after nova-api starts, the calendar is read in full in the
        # background (here: until the test lets it finish). A member's
        # request waits for it a few seconds, not a minute (an API worker
        # held per request): then a 503, with Retry-After. An admin's
        # waits, as tools expect.
        self.useFixture(fixtures.MockPatchObject(handler, 'MEMBER_WAIT',
                                                 1.0))
        snapshot_cache.CACHE.invalidate()
        self.addCleanup(snapshot_cache.CACHE.invalidate)
        go = threading.Event()
        real = snapshot_cache.snapshot_reads.load

        def slow_load(*args, **kwargs):
            go.wait(120)
            return real(*args, **kwargs)

        self.useFixture(fixtures.MockPatchObject(
            snapshot_cache.snapshot_reads, 'load', slow_load))
        started = time.monotonic()
        resp = self.api.api_get(self._url(), check_response_status=[503])
        self.assertLess(time.monotonic() - started, 10)
        self.assertIn('retry', resp.body['error_message'])
        self.assertTrue(resp.headers.get('Retry-After'))
        threading.Timer(1.0, go.set).start()
        self.assertEqual('all', self._get()['capacity']['view'])
        self.assertEqual('project', self._get(api=self.api)['capacity'][
            'view'])

    def test_members_compute_one_at_a_time(self):
        # Members' figures are computed one request at a time in a
        # nova-api process (each costs CPU time in proportion to hosts x
        # steps): a second one waits its turn a few seconds, then gets a
        # 503; an admin's is not held back.
        self._get(api=self.api)       # the calendar read once
        entered, release = threading.Event(), threading.Event()
        real = handler.lease_capacity.report
        calls = []

        def slow_report(*args, **kwargs):
            calls.append(kwargs.get('project_id'))
            if len(calls) == 1:
                entered.set()
                release.wait(60)
            return real(*args, **kwargs)

        self.useFixture(fixtures.MockPatchObject(
            handler.lease_capacity, 'report', slow_report))
        self.useFixture(fixtures.MockPatchObject(handler, 'MEMBER_WAIT',
                                                 1.0))
        first = {}

        def member():
            first['body'] = self._get(api=self.api)

        runner = threading.Thread(target=member, daemon=True)
        runner.start()
        self.addCleanup(runner.join, 60)
        self.addCleanup(release.set)
        self.assertTrue(entered.wait(30))
        started = time.monotonic()
        resp = self.api.api_get(self._url(), check_response_status=[503])
        self.assertLess(time.monotonic() - started, 10)
        self.assertIn('retry', resp.body['error_message'])
        self.assertTrue(resp.headers.get('Retry-After'))
        self.assertEqual('all', self._get()['capacity']['view'])
        release.set()
        runner.join(60)
        self.assertEqual('project', first['body']['capacity']['view'])
        # Its turn over, the next member is served.
        self.assertEqual('project', self._get(api=self.api)['capacity'][
            'view'])

    def test_bad_input_names_the_field(self):
        now = self.clock.now

        def refused(field, **query):
            body = self._get(status=400, **query)
            text = json.dumps(body)
            self.assertIn(field, text, body)
            return body

        iso = '%Y-%m-%dT%H:%MZ'
        refused('end', end=now.strftime(iso))
        refused('end', end=(now - HOUR).strftime(iso))
        refused('end', end='tomorrow')
        refused('start', start='yesterday')
        refused('step', step='0')
        refused('step', step='-1h')
        refused('step', step='soon')
        refused('step', step='9' * 40)
        refused('step', step='1m', end=(now + 100 * 24 * HOUR).strftime(
            iso))
        refused('resource', resource='gpus')
        refused('resource', resource='vcpus,bogus')
        refused('detail', detail='servers')
        refused('host', host='nowhere')
        refused('aggregate', aggregate='nothing')
        refused('availability_zone', availability_zone='mars')
        # The cap itself is accepted: 2000 steps.
        body = self._get(step='3m', end=(now + 100 * HOUR).strftime(iso))
        self.assertEqual(2000, len(body['capacity']['steps']))

    def test_dates_at_the_end_of_time_are_a_400(self):
        # A date the parser takes (years up to 9999) from which the
        # default window, or a step, runs past the last date Python has:
        # a 400 naming the field, never a 500.
        def refused(path, field, **query):
            url = PREFIX + path + '?' + '&'.join(
                '%s=%s' % kv for kv in sorted(query.items()))
            body = self.admin_api.api_get(
                url, check_response_status=[400]).body
            self.assertIn("'%s'" % field, json.dumps(body), body)

        late = '9999-12-31T23:00Z'
        refused('/capacity', 'start', start=late)
        refused('/capacity', 'start', start=late, step='1h')
        refused('/os-hosts/idle', 'start', start=late)
        refused('/os-hosts/idle', 'start', start=late, min_hours='999999')
        # Given an end, the same start is a window like any other.
        body = self._get(start=late, end='9999-12-31T23:59Z', step='1h')
        self.assertEqual(1, len(body['capacity']['steps']))
        body = self.admin_api.api_get(
            PREFIX + '/os-hosts/idle?start=%s&end=9999-12-31T23:59Z'
            % late).body
        self.assertEqual('9999-12-31T23:00:00.000000', body['start'])
        # The command names its own option.
        code, out, err = self._manage('--start', '9999-12-31 23:00')
        self.assertEqual(2, code, err)
        self.assertIn('--start', err)

    # -- nova-lease-manage capacity ------------------------------------------

    def _manage(self, *args):
        out, err = io.StringIO(), io.StringIO()
        conf = self.engine_conf()
        path = conf.config_file[0]
        with contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err), \
                mock.patch.object(manage.logging, 'setup'):
            code = manage.main(['--config-file', path, 'capacity'] +
                               list(args))
        return code, out.getvalue(), err.getvalue()

    def test_manage_command_gives_the_api_body(self):
        self._scenario()
        start, end = self.clock.now, self.clock.now + 6 * HOUR
        window = ['--start', start.strftime('%Y-%m-%d %H:%M'),
                  '--end', end.strftime('%Y-%m-%d %H:%M')]
        code, out, err = self._manage(*window, '--format', 'json')
        self.assertEqual(0, code, err)
        body = jsonutils.loads(out)
        api = self._get()
        # The same figures (read through the compute API and placement
        # rather than Nova's databases).
        self.assertEqual(api['capacity']['steps'],
                         body['capacity']['steps'])
        self.assertEqual(api['capacity']['total'], body['capacity']['total'])
        self._assert_steps(body, start)

        path = os.path.join(self.useFixture(
            test_host_reservation.fixtures.TempDir()).path, 'cap.txt')
        code, out, err = self._manage(*window, '--output', path)
        self.assertEqual(0, code, err)
        self.assertEqual('', out)
        with open(path) as f:
            table = f.read()
        lines = table.splitlines()
        self.assertIn('VCPUS', lines[1])
        self.assertIn('capacity', lines[2])
        self.assertEqual(6 + 6, len(lines))   # title, 2 heads, 3 rules
        self.assertTrue(lines[-1].startswith('TOTAL'))
        first = lines[4].split()
        self.assertEqual(start.strftime('%Y-%m-%d'), first[0])
        self.assertEqual(str(body['capacity']['steps'][0]['vcpus'][
            'capacity']), first[2])

        code, out, err = self._manage(*window, '--step', '0')
        self.assertEqual(2, code)
        self.assertIn('--step', err)
        code, out, err = self._manage(*window, '--resource', 'gpus')
        self.assertEqual(2, code)
        self.assertIn('--resource', err)
