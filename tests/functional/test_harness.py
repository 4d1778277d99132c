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
"""The functional harness itself: Nova loads the plugin parts from its
configuration, the clients work, the clock drives Nova's time."""

import datetime
import difflib
import re
import threading
import time
from urllib import parse as urlparse

from nova.api import auth as nova_auth
from nova.tests.functional.api import client as api_client
from novaclient import exceptions as nova_exc
from oslo_serialization import jsonutils
from oslo_utils import timeutils
import testtools

from nova_lease.api_ext.lease_api import microversion
from nova_lease.api_ext import middleware
from nova_lease.db import api as db_api
from nova_lease.scheduler import filters as lease_filters
from nova_lease.scheduler import weights as lease_weights
from tests.functional import base
from tests.functional import fixtures as lease_fixtures

LEASE = {'name': 'lease1', 'start': 'now', 'end': '2030-12-01 16:07'}


def _api_time(value):
    """Parse a time from the API into a naive UTC datetime."""
    return timeutils.normalize_time(timeutils.parse_isotime(value))


def _table_value(output, prop):
    """Return the Value of a Property row of a novaclient table."""
    match = re.search(r'^\|\s*%s\s*\|\s*(.*?)\s*\|$' % re.escape(prop),
                      output, re.MULTILINE)
    return match.group(1) if match else None


class TestPluginLoadedByNova(base.LeaseFunctionalBase):

    COMPUTES = {'host1': (2, 4096, 50), 'host2': (8, 16384, 200)}

    def test_boot_runs_filter_weigher_and_middleware(self):
        # Both decide for all hosts of a request at once (one calendar
        # snapshot per request), so Nova calls filter_all / weigh_objects.
        filter_all = self.spy_on(lease_filters.LeaseFilter, 'filter_all',
                                 materialize=0)
        weigh = self.spy_on(lease_weights.LeaseWeigher, 'weigh_objects',
                            materialize=0)
        create = self.spy_on(middleware.LeaseMiddleware, '_create_server')

        server = self._boot(hints={'reserved': 'True',
                                   'lease_params': '{"duration": "1h"}'},
                            name='vm-a')
        self.assertEqual('ACTIVE', server['status'])
        self.assertIn(server['OS-EXT-SRV-ATTR:host'], self.COMPUTES)

        # The scheduler built its filters and weighers from nova.conf.
        host_manager = self.scheduler.manager.host_manager
        self.assertEqual(base.scheduler_flags()['enabled_filters'],
                         [type(f).__name__
                          for f in host_manager.enabled_filters])
        lease_filter = host_manager.enabled_filters[-1]
        self.assertIsInstance(lease_filter, lease_filters.LeaseFilter)
        weighers = [w for w in host_manager.weighers
                    if isinstance(w, lease_weights.LeaseWeigher)]
        self.assertEqual(1, len(weighers))
        self.assertGreater(len(host_manager.weighers), 1)  # Nova's own too

        # ... and ran them on every host for this boot, with its hints.
        filter_all.assert_called_once()
        call = filter_all.call_args
        self.assertIs(lease_filter, call.args[0])
        self.assertEqual(sorted(self.COMPUTES),
                         sorted(h.host for h in call.args[1]))
        self.assertEqual('True', call.args[2].get_scheduler_hint('reserved'))
        self.assertEqual(server['id'], call.args[2].instance_uuid)
        weigh.assert_called_once()
        self.assertIs(weighers[0], weigh.call_args.args[0])
        self.assertEqual(sorted(self.COMPUTES),
                         sorted(w.obj.host for w in weigh.call_args.args[1]))

        # The API ran the filter paste.deploy built from api-paste.ini,
        # after keystonecontext (the request context is there).
        create.assert_called_once()
        instance, req, ctx = create.call_args.args
        chain = self.api_pipeline('/v2.1')
        self.assertIn(instance, chain)
        self.assertEqual('POST', req.method)
        self.assertEqual(self.api.project_id, ctx.project_id)
        self.assertEqual('fake', ctx.user_id)

        # COMPUTES sizes are the hosts' Placement inventories.
        for host, (vcpus, memory_mb, disk_gb) in self.COMPUTES.items():
            inventory = self._get_provider_inventory(
                self._get_provider_uuid_by_host(host))
            self.assertEqual(
                (vcpus, memory_mb, disk_gb),
                (inventory['VCPU']['total'], inventory['MEMORY_MB']['total'],
                 inventory['DISK_GB']['total']))

    def test_lease_api_through_the_real_pipeline(self):
        lease_api = self.spy_on(middleware.LeaseMiddleware, '_lease_api')
        create = self.spy_on(middleware.LeaseMiddleware, '_create_server')

        # Right after keystonecontext in both composites.
        for prefix in ('/v2.1', '/v2'):
            names = [type(app).__name__ for app in self.api_pipeline(prefix)]
            self.assertEqual(
                'LeaseMiddleware',
                names[names.index(nova_auth.NovaKeystoneContext.__name__)
                      + 1], names)
            # The version document's filter comes before authtoken (and
            # so before keystonecontext).
            self.assertLess(
                names.index('VersionsMiddleware'),
                names.index(nova_auth.NovaKeystoneContext.__name__) - 1,
                names)

        root = self.api_fixture.base_url[:-len('/v2.1')]
        project = self.api.project_id
        for url in ('/v2.1', '/v2', '/v2.1/' + project, '/v2/' + project):
            api = api_client.TestOpenStackClient(
                'fake', root + url, project_id=project,
                roles=['reader', 'member'])
            body = api.api_get('/os-reservation').body
            href = body['versions'][0]['links'][0].pop('href')
            self.assertEqual(
                {'versions': [{'id': 'v1.0', 'status': 'CURRENT',
                               'min_version': '1.0',
                               'max_version': microversion.MAX_VERSION,
                               'version': microversion.MAX_VERSION,
                               'links': [{'rel': 'self'}]}]}, body)
            self.assertEqual(url + '/os-reservation',
                             urlparse.urlsplit(href).path)

        # Errors below the root are in the shape python-blazarclient reads.
        resp = self.api.api_get('/os-reservation/leases/nope',
                                check_response_status=[404])
        self.assertEqual(404, resp.body['error_code'])
        self.assertIn('nope', resp.body['error_message'])
        resp = self.api.api_post('/os-reservation', {},
                                 check_response_status=[405])
        # (The version documents were VersionsMiddleware's.)
        self.assertEqual(2, lease_api.call_count)
        ctx = lease_api.call_args.args[2]
        self.assertEqual(project, ctx.project_id)

        # The catalog's reservation endpoint (what python-blazarclient
        # uses) reaches the same API.
        sess = self.keystone.session('fake')
        resp = sess.get('', endpoint_filter={'service_type': 'reservation'})
        self.assertEqual('v1.0', resp.json()['versions'][0]['id'])

        # POST servers, with or without a project id in the URL, goes to
        # _create_server (an empty body: Nova answers 400, nothing boots).
        for url in ('/v2.1', '/v2.1/' + project):
            api = api_client.TestOpenStackClient(
                'fake', root + url, project_id=project,
                roles=['reader', 'member'])
            create.reset_mock()
            api.api_post('/servers', {}, check_response_status=[400])
            create.assert_called_once()

        # Everything else passes through without the handlers.
        lease_api.reset_mock()
        create.reset_mock()
        self.api.get_servers()
        self.api.get_flavors()
        self.api.api_get('/os-reservations', check_response_status=[404])
        self.api.api_post('/servers/action', {}, check_response_status=[404])
        lease_api.assert_not_called()
        create.assert_not_called()


class TestClients(base.LeaseFunctionalBase):

    COMPUTES = {'host1': (4, 8192, 100), 'host2': (4, 8192, 100)}

    def test_nova_cli_boot_with_hints_list_and_show(self):
        filter_all = self.spy_on(lease_filters.LeaseFilter, 'filter_all',
                                 materialize=0)
        end = self.clock.now + datetime.timedelta(days=10)
        lease_params = jsonutils.dumps(
            dict(LEASE, end=end.strftime('%Y-%m-%d %H:%M')))

        # The seed workflow, verbatim but for the image name.
        out = self.nova_cli(
            'boot', '--flavor', '1', '--image', 'fakeimage7',
            '--hint', 'reserved=True', '--hint',
            'lease_params=' + lease_params, 'vm1')
        server_id = _table_value(out, 'id')
        self.assertEqual('vm1', _table_value(out, 'name'))
        self.assertTrue(server_id)
        server = self._wait_for_state_change({'id': server_id}, 'ACTIVE')

        # Both hints reached the filter as Nova hands them over.
        self.assertTrue(filter_all.called)
        for call in filter_all.call_args_list:
            spec = call.args[2]
            self.assertEqual(server_id, spec.instance_uuid)
            self.assertEqual('True', spec.get_scheduler_hint('reserved'))
            self.assertEqual(lease_params,
                             spec.get_scheduler_hint('lease_params'))
        # and Nova kept them (>= 2.100 shows them; novaclient stops at 2.96),
        # with the first-boot hint that the filter adds.
        [lease] = db_api.lease_list(db_api.get_database(base.CONF))
        self.assertEqual(
            {'reserved': ['True'], 'lease_params': [lease_params],
             'nova_lease_id': [lease['id']]},
            server['scheduler_hints'])

        listing = self.nova_cli('list')
        row = [line for line in listing.splitlines() if server_id in line]
        self.assertEqual(1, len(row), listing)
        self.assertEqual(['vm1', 'ACTIVE'],
                         [c.strip() for c in row[0].split('|')[2:4]])

        shown = self.nova_cli('show', 'vm1')
        self.assertEqual(server_id, _table_value(shown, 'id'))
        self.assertEqual('ACTIVE', _table_value(shown, 'status'))
        self.assertEqual(
            'fakeimage7 (%s)' % self.glance.auto_disk_config_enabled_image[
                'id'], _table_value(shown, 'image'))
        self.assertEqual(server['OS-EXT-SRV-ATTR:host'],
                         _table_value(self.nova_cli('show', 'vm1',
                                                    user='admin'),
                                      'OS-EXT-SRV-ATTR:host'))

        # Bad credentials fail like the real CLI does.
        result = self.nova_cli_result('list', user='nobody')
        self.assertEqual(1, result.exit_code)
        self.assertIn('ERROR (Unauthorized)', result.stderr)

    def test_novaclient_library_client(self):
        server = self._boot(name='api-vm')
        self.assertEqual('2.96', self.nova.api_version.get_string())
        servers = self.nova.servers.list()
        self.assertEqual([(server['id'], 'api-vm', 'ACTIVE')],
                         [(s.id, s.name, s.status) for s in servers])
        # The admin variant is an admin (sees the host).
        srv = self.admin_nova.servers.get(server['id'])
        self.assertEqual(server['OS-EXT-SRV-ATTR:host'],
                         getattr(srv, 'OS-EXT-SRV-ATTR:host'))
        self.assertEqual(sorted(self.COMPUTES), sorted(
            h.service['host'] for h in self.admin_nova.hypervisors.list()))
        # A plain member is not.
        self.assertRaises(nova_exc.Forbidden, self.nova.hypervisors.list)
        # The lease API is reachable through the same client.
        resp, body = self.nova.client.get('/os-reservation')
        self.assertEqual(200, resp.status_code)
        self.assertEqual('v1.0', body['versions'][0]['id'])


class TestClock(base.LeaseFunctionalBase):

    COMPUTES = {'host1': (4, 8192, 100)}
    CLOCK_START = datetime.datetime(2030, 1, 1, 12, 0, 0)

    def test_nova_follows_the_clock(self):
        start = self.clock.now
        self.assertEqual(self.CLOCK_START, start)
        server = self._boot(name='t1')
        self.assertEqual(start, _api_time(server['created']))

        later = self.clock.advance(days=3, minutes=7)
        self.assertEqual(start + datetime.timedelta(days=3, minutes=7),
                         later)
        self.api.post_server_action(server['id'], {'os-stop': None})
        server = self._wait_for_state_change(server, 'SHUTOFF')
        self.assertEqual(start, _api_time(server['created']))
        self.assertEqual(later, _api_time(server['updated']))
        actions = {a['action']: _api_time(a['start_time'])
                   for a in self.api.get_instance_actions(server['id'])}
        self.assertEqual({'create': start, 'stop': later}, actions)

        # A month later the compute is still up for the scheduler (the
        # base class reports service heartbeats when the clock moves).
        much_later = self.clock.advance(datetime.timedelta(days=30))
        server2 = self._boot(name='t2')
        self.assertEqual(much_later, _api_time(server2['created']))
        services = self.admin_api.get_services(binary='nova-compute')
        self.assertEqual(['up'], [s['state'] for s in services])


class TestClockFixture(testtools.TestCase):
    """The clock on its own (no Nova)."""

    START = datetime.datetime(2031, 5, 6, 7, 8, 9)

    def test_advance_and_listeners(self):
        clock = self.useFixture(lease_fixtures.ClockFixture(self.START))
        self.assertEqual(self.START, clock.now)
        self.assertEqual(self.START, timeutils.utcnow())
        moves = []
        remove = clock.add_listener(lambda old, new: moves.append((old, new)))
        t1 = clock.advance(90)
        t2 = clock.advance(hours=2)
        t3 = clock.advance(datetime.timedelta(days=1), minutes=1)
        t4 = clock.advance_to(t3 + datetime.timedelta(seconds=5))
        self.assertEqual(
            [self.START + datetime.timedelta(seconds=90),
             t1 + datetime.timedelta(hours=2),
             t2 + datetime.timedelta(days=1, minutes=1),
             t3 + datetime.timedelta(seconds=5)],
            [t1, t2, t3, t4])
        self.assertEqual([(self.START, t1), (t1, t2), (t2, t3), (t3, t4)],
                         moves)
        self.assertEqual(4, clock.generation)
        remove()
        clock.advance(1)
        self.assertEqual(4, len(moves))
        self.assertRaises(ValueError, clock.advance, -1)
        self.assertEqual(timeutils.utcnow(), clock.now)

    def test_follow_real_time(self):
        clock = self.useFixture(lease_fixtures.ClockFixture(self.START))
        stop = clock.follow_real_time(interval=0.01)
        t0 = time.monotonic()
        time.sleep(0.3)
        moved = (clock.now - self.START).total_seconds()
        self.assertGreaterEqual(moved, 0.2)
        self.assertLessEqual(moved, time.monotonic() - t0 + 0.01)
        # Jumps still jump, and the clock goes on from there.
        jumped = clock.advance(hours=1)
        time.sleep(0.05)
        self.assertGreater(clock.now, jumped)
        stop()
        frozen = clock.now
        time.sleep(0.05)
        self.assertEqual(frozen, clock.now)

    def test_wait_until_wakes_on_advance(self):
        clock = self.useFixture(lease_fixtures.ClockFixture(self.START))
        due = self.START + datetime.timedelta(minutes=10)
        self.assertFalse(clock.wait_until(due, timeout=0.01))
        results = []
        waiter = threading.Thread(
            target=lambda: results.append(clock.wait_until(due, timeout=10)))
        waiter.start()
        clock.advance(minutes=5)
        self.assertEqual([], results)
        clock.advance(minutes=5)
        waiter.join(10)
        self.assertEqual([True], results)

    def test_default_start_and_cleanup(self):
        fixture = lease_fixtures.ClockFixture()
        with fixture:
            self.assertEqual(0, fixture.now.microsecond)
            fixture.advance(days=400)
            frozen = timeutils.utcnow()
            self.assertGreater(frozen - datetime.datetime.now(
                datetime.timezone.utc).replace(tzinfo=None),
                datetime.timedelta(days=399))
        # Real time again after cleanup.
        self.assertLess(abs(timeutils.utcnow() - datetime.datetime.now(
            datetime.timezone.utc).replace(tzinfo=None)),
            datetime.timedelta(seconds=5))

    def test_aware_start_is_normalized(self):
        aware = datetime.datetime(
            2031, 5, 6, 9, 8, 9,
            tzinfo=datetime.timezone(datetime.timedelta(hours=2)))
        clock = self.useFixture(lease_fixtures.ClockFixture(aware))
        self.assertEqual(self.START, clock.now)


class TestPasteEdit(testtools.TestCase):
    """The operator's api-paste.ini edit, on Nova's packaged file."""

    def test_only_the_two_pipelines_and_a_section_change(self):
        with open(lease_fixtures.nova_packaged_paste_ini()) as f:
            original = f.read()
        edited = lease_fixtures.add_filter_to_paste_ini(original)
        changes = [line for line in difflib.unified_diff(
            original.splitlines(), edited.splitlines(), lineterm='', n=0)
            if line[:1] in '+-' and line[:3] not in ('+++', '---')]
        removed = [line[1:] for line in changes if line.startswith('-')]
        added = [line[1:] for line in changes if line.startswith('+')]
        self.assertEqual(2, len(removed))
        self.assertEqual(
            [line.replace('keystonecontext', 'keystonecontext nova_lease')
             .replace('authtoken', 'nova_lease_versions authtoken')
             for line in removed],
            added[:2])
        self.assertEqual(
            ['', '[filter:nova_lease]', 'paste.filter_factory = '
             'nova_lease.api_ext.middleware:LeaseMiddleware.factory',
             '', '[filter:nova_lease_versions]', 'paste.filter_factory = '
             'nova_lease.api_ext.middleware:VersionsMiddleware.factory'],
            added[2:])
        # Idempotent for the pipelines.
        self.assertEqual(
            edited.count(' nova_lease '),
            lease_fixtures.add_filter_to_paste_ini(edited).count(
                ' nova_lease '))

    def test_missing_pipeline_is_an_error(self):
        self.assertRaises(ValueError, lease_fixtures.add_filter_to_paste_ini,
                          '[composite:openstack_compute_api_v21]\n'
                          'keystone = authtoken keystonecontext app\n')
        self.assertRaises(ValueError, lease_fixtures.add_filter_to_paste_ini,
                          '[composite:openstack_compute_api_v21]\n'
                          'keystone = authtoken app\n'
                          '[composite:openstack_compute_api_v21_legacy_v2_'
                          'compatible]\nkeystone = keystonecontext app\n')
