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
"""compute.py (exception translation), the instance plugin's decisions
and the notification payload. The instance plugin against the real Nova is
tested in tests/functional/test_engine_nova.py.
"""

from oslo_service import backend as _service_backend
if _service_backend.get_backend_type() is None:
    _service_backend.init_backend(_service_backend.BackendType.THREADING)

import datetime  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

from keystoneauth1 import exceptions as ks_exc  # noqa: E402
from keystoneauth1 import noauth  # noqa: E402
from keystoneauth1 import session as ks_session  # noqa: E402
from oslo_config import cfg  # noqa: E402
from oslo_utils import fixture as utils_fixture  # noqa: E402
from requests_mock.contrib import fixture as rm_fixture  # noqa: E402
import testtools  # noqa: E402

from nova_lease import compute  # noqa: E402
from nova_lease import conf as lease_conf  # noqa: E402
from nova_lease.db import api as db_api  # noqa: E402
from nova_lease.db import migration  # noqa: E402
from nova_lease import notifications  # noqa: E402
from nova_lease.plugins import base as plugin_base  # noqa: E402
from nova_lease.plugins.instance import plugin as instance  # noqa: E402

URL = 'http://nova.example.test/v2.1'
SERVER = '8a6e3c9e-6d3b-4f0a-9b1e-2f0c7f1d2a11'
T0 = datetime.datetime(2030, 1, 1, 12, 0)


class ComputeClientTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.http = self.useFixture(rm_fixture.Fixture())
        session = ks_session.Session(auth=noauth.NoAuth(endpoint=URL))
        self.client = compute.ComputeClient(session, timeout=5)

    def test_microversion_pinned(self):
        self.assertEqual('2.96', self.client.api_version)
        self.http.get(URL + '/servers/' + SERVER,
                      json={'server': {'id': SERVER, 'status': 'ACTIVE'}})
        self.assertEqual('ACTIVE', self.client.get_server(SERVER)['status'])
        self.assertEqual('compute 2.96', self.http.last_request.headers[
            'OpenStack-API-Version'])

    def test_errors_translated(self):
        path = URL + '/servers/%s/action' % SERVER
        for code, cls in ((500, compute.ComputeUnavailable),
                          (503, compute.ComputeUnavailable),
                          (409, compute.ComputeConflict),
                          (403, compute.ComputeForbidden),
                          (400, compute.ComputeError)):
            self.http.post(path, status_code=code, json={'x': {
                'code': code, 'message': 'nope %d' % code}})
            e = self.assertRaises(cls, self.client.unshelve_server, SERVER)
            self.assertEqual(code, e.status_code)
            self.assertIn('unshelve server %s' % SERVER, str(e))
        self.http.post(path, exc=ks_exc.ConnectTimeout)
        self.assertRaises(compute.ComputeTimeout, self.client.shelve_server,
                          SERVER)
        self.http.post(path, exc=ks_exc.ConnectFailure)
        self.assertRaises(compute.ComputeUnavailable,
                          self.client.shelve_server, SERVER)

    def test_not_found(self):
        self.http.get(URL + '/servers/' + SERVER, status_code=404,
                      json={'itemNotFound': {'code': 404, 'message': 'x'}})
        self.assertRaises(compute.ServerNotFound, self.client.get_server,
                          SERVER)
        self.http.delete(URL + '/servers/' + SERVER, status_code=404,
                         json={'itemNotFound': {'code': 404}})
        self.assertFalse(self.client.delete_server(SERVER))
        self.http.delete(URL + '/servers/%s/tags/reserved' % SERVER,
                         status_code=404, json={})
        self.assertFalse(self.client.delete_server_tag(SERVER, 'reserved'))

    def test_more_errors_translated(self):
        # 401 (a token refused) is refused like a 403; a 404 of an action
        # is "not found"; a catalog without compute is a plain error.
        path = URL + '/servers/%s/action' % SERVER
        for code, cls in ((401, compute.ComputeForbidden),
                          (404, compute.ComputeNotFound)):
            self.http.post(path, status_code=code, json={'x': {
                'code': code, 'message': 'nope %d' % code}})
            e = self.assertRaises(cls, self.client.migrate_server, SERVER)
            self.assertEqual(code, e.status_code)
            self.assertIn('nope %d' % code, str(e))
        self.http.get(URL + '/os-services', exc=ks_exc.RequestTimeout)
        self.assertRaises(compute.ComputeTimeout, self.client.list_services)
        no_catalog = compute.ComputeClient(ks_session.Session(
            auth=noauth.NoAuth()), timeout=5)
        e = self.assertRaises(compute.ComputeError, no_catalog.list_services)
        self.assertNotIsInstance(e, compute.ComputeUnavailable)

    def test_microversions_within_nova(self):
        from nova.api.openstack import api_version_request as nova_versions

        newest = nova_versions.APIVersionRequest(compute.MAX_MICROVERSION)
        self.assertEqual(nova_versions.max_api_version(), newest)
        for version in (compute.MICROVERSION, compute.HINTS_MICROVERSION):
            self.assertLessEqual(
                nova_versions.APIVersionRequest(version), newest)

    def test_paged_lists_follow_next_links(self):
        page2 = URL + '/servers/detail?all_tenants=1&marker=a'
        self.http.get(URL + '/servers/detail?all_tenants=1',
                      complete_qs=True, json={
                          'servers': [{'id': 'a'}],
                          'servers_links': [{'rel': 'next',
                                             'href': page2}]})
        self.http.get(page2, complete_qs=True,
                      json={'servers': [{'id': 'b'}]})
        self.assertEqual(['a', 'b'], [
            s['id'] for s in self.client.list_servers()])


class FakeCompute(object):
    """Servers whose actions complete at once (like CastAsCall)."""

    def __init__(self, status):
        self.servers = {SERVER: {'id': SERVER, 'status': status,
                                 'tenant_id': 'p1',
                                 'OS-EXT-STS:task_state': None,
                                 'metadata': {}, 'tags': {'reserved'}}}
        self.calls = []
        self.gets = 0

    def get_server(self, server_id):
        self.gets += 1
        if server_id not in self.servers:
            raise compute.ServerNotFound(server_id=server_id)
        return dict(self.servers[server_id])

    def wait_for_server(self, server_id, wanted, timeout, gone_ok=False,
                        fail_statuses=('ERROR',)):
        try:
            server = self.get_server(server_id)
        except compute.ServerNotFound:
            if gone_ok:
                return None
            raise
        if server['status'] in fail_statuses:
            raise compute.ServerInErrorState(
                server_id=server_id, status=server['status'],
                wanted='/'.join(wanted), fault='')
        if server['status'] not in wanted:
            raise compute.ServerStatusTimeout(
                server_id=server_id, wanted='/'.join(wanted),
                timeout=timeout, status=server['status'], task=None)
        return server

    def _act(self, name, server_id, status=None):
        self.calls.append(name)
        if status:
            self.servers[server_id]['status'] = status

    def unshelve_server(self, server_id):
        # As Nova: 404 for a missing server, 409 for one not shelved.
        if server_id not in self.servers:
            raise compute.ComputeNotFound(reason=server_id)
        if not self.servers[server_id]['status'].startswith('SHELVED'):
            raise compute.ComputeConflict(reason='not shelved')
        self._act('unshelve', server_id, 'ACTIVE')

    def shelve_server(self, server_id):
        self._act('shelve', server_id, 'SHELVED_OFFLOADED')

    def shelve_offload_server(self, server_id):
        self._act('shelve_offload', server_id, 'SHELVED_OFFLOADED')

    def delete_server(self, server_id):
        self.calls.append('delete')
        return self.servers.pop(server_id, None) is not None

    def set_server_metadata(self, server_id, metadata):
        if self.servers[server_id]['status'].startswith('SHELVED'):
            raise compute.ComputeConflict(reason='shelved')
        self.calls.append('metadata %s' % metadata)
        self.servers[server_id]['metadata'].update(metadata)

    def delete_server_tag(self, server_id, tag):
        self.calls.append('untag %s' % tag)
        self.servers[server_id]['tags'].discard(tag)
        return True

    def list_servers(self, all_projects=True, **filters):
        return [dict(s) for s in self.servers.values()]


class InstancePluginTest(testtools.TestCase):

    def _plugin(self, status, on_end='delete'):
        conf = cfg.ConfigOpts()
        lease_conf.register_opts(conf)
        conf([])
        conf.set_override('on_end', on_end, 'nova_lease_engine')
        self.fake = FakeCompute(status)
        # The side database the engine's gate reads (nova_lease.gate).
        self.useFixture(utils_fixture.TimeFixture(T0))
        db = db_api.Database('sqlite://')
        self.addCleanup(db.dispose)
        migration.upgrade(db)
        db_api.lease_create(db, {
            'id': 'lease-1', 'name': 'l1', 'project_id': 'p1',
            'start_date': T0, 'end_date': T0 + datetime.timedelta(hours=1),
            'status': 'STARTING'})
        for rid, server in (('res-1', SERVER), ('res-2', None)):
            db_api.reservation_create(db, {
                'id': rid, 'lease_id': 'lease-1', 'resource_id': server,
                'resource_type': 'virtual:instance', 'status': 'pending'})
        plugin = instance.InstancePlugin(conf, compute_client=self.fake)
        plugin._db = db
        return plugin

    lease = {'id': 'lease-1', 'name': 'l1', 'on_end': None,
             'project_id': 'p1'}
    reservation = {'id': 'res-1', 'resource_id': SERVER,
                   'resource_type': 'virtual:instance'}

    def test_start_unshelves(self):
        plugin = self._plugin('SHELVED_OFFLOADED')
        # It asks Nova, then returns what to wait for (the engine watches
        # it without holding a worker); the rest follows once ACTIVE.
        wait = plugin.on_start(self.lease, self.reservation)
        self.assertIsInstance(wait, plugin_base.Wait)
        self.assertEqual(('ACTIVE',), wait.wanted)
        self.assertEqual(['unshelve'], self.fake.calls)
        # A burst of starts costs Nova no look before the unshelves.
        self.assertEqual(0, self.fake.gets)
        self.assertIsNone(plugin_base.resolve(wait, self.fake, 5))
        self.assertEqual(['unshelve', "metadata {'lease_status': 'active'}",
                          'untag reserved'], self.fake.calls)

    def test_failed_unshelve_fails_the_start(self):
        plugin = self._plugin('SHELVED_OFFLOADED')
        wait = plugin.on_start(self.lease, self.reservation)
        server = dict(self.fake.servers[SERVER], status='SHELVED_OFFLOADED',
                      fault={'message': 'No valid host'})
        self.assertEqual('failed', wait.outcome(server))
        self.assertIn('No valid host', str(wait.failure(server)))
        self.assertIsNone(wait.outcome(dict(
            server, **{'OS-EXT-STS:task_state': 'unshelving'})))
        self.assertEqual('failed', wait.outcome(None))

    def test_start_of_active_server_is_success(self):
        plugin = self._plugin('ACTIVE')
        plugin.on_start(self.lease, self.reservation)
        plugin.on_start(self.lease, self.reservation)
        self.assertNotIn('unshelve', self.fake.calls)
        self.assertEqual('active', self.fake.servers[SERVER]['metadata'][
            'lease_status'])

    def test_start_of_missing_server_fails_with_reason(self):
        plugin = self._plugin('ACTIVE')
        del self.fake.servers[SERVER]
        e = self.assertRaises(plugin_base.ResourceGone, plugin.on_start,
                              self.lease, self.reservation)
        self.assertIn('server %s of lease lease-1 (l1) no longer exists'
                      % SERVER, str(e))
        self.assertEqual(SERVER, e.resource_id)

    def test_end_delete_idempotent(self):
        plugin = self._plugin('ACTIVE')
        plugin.on_end(self.lease, self.reservation)
        plugin.on_end(self.lease, self.reservation)
        self.assertEqual(['delete', 'delete'], self.fake.calls)
        self.assertEqual({}, self.fake.servers)

    def test_end_shelve_from_lease_or_config(self):
        plugin = self._plugin('ACTIVE', on_end='shelve')
        plugin.on_end(self.lease, self.reservation)
        plugin.on_end(self.lease, self.reservation)
        self.assertEqual(["metadata {'lease_status': 'terminated'}",
                          'shelve'], self.fake.calls)
        plugin = self._plugin('ACTIVE')
        plugin.on_end(dict(self.lease, on_end='shelve'), self.reservation)
        self.assertEqual('SHELVED_OFFLOADED',
                         self.fake.servers[SERVER]['status'])

    def test_no_server_id(self):
        plugin = self._plugin('ACTIVE')
        e = self.assertRaises(plugin_base.PluginError, plugin.on_start,
                              self.lease, {'id': 'res-1',
                                           'resource_id': None})
        self.assertIn('has no server id', str(e))


class NotificationPayloadTest(testtools.TestCase):

    def test_payload(self):
        lease = {'id': 'l1', 'name': 'n', 'project_id': 'p', 'user_id': 'u',
                 'start_date': datetime.datetime(2030, 1, 2, 3, 4, 5),
                 'end_date': datetime.datetime(2030, 1, 3),
                 'status': 'ACTIVE', 'status_reason': None,
                 'reservations': [{'id': 'r1', 'lease_id': 'l1',
                                   'resource_type': 'virtual:instance',
                                   'resource_id': 's1', 'status': 'active',
                                   'properties': {'secret': 'x'}}]}
        payload = notifications.lease_payload(lease)
        self.assertEqual('LeasePayload', payload['nova_object.name'])
        data = payload['nova_object.data']
        self.assertEqual('2030-01-02T03:04:05Z', data['start_date'])
        self.assertEqual(['id', 'lease_id', 'resource_type', 'resource_id',
                          'status', 'created_at', 'updated_at', 'amount',
                          'hosts', 'vcpus', 'memory_mb', 'disk_gb'],
                         list(data['reservations'][0]))
        # What it holds: its flavor's sizes (none given here), never the
        # other properties.
        self.assertEqual((1, [], 0), (data['reservations'][0]['amount'],
                                      data['reservations'][0]['hosts'],
                                      data['reservations'][0]['vcpus']))
        self.assertIsNone(data['usage'])
        lease['reservations'].append({
            'id': 'r2', 'resource_type': 'physical:host', 'status': 'active',
            'properties': {'vcpus': 1},
            'hosts': [{'hypervisor_hostname': 'h1', 'vcpus': 8,
                       'memory_mb': 4096, 'local_gb': 40},
                      {'hypervisor_hostname': 'h2', 'vcpus': 4,
                       'memory_mb': 2048, 'local_gb': 20}]})
        figures = {'reserved': {'lease_hours': 1.0}, 'used': {}}
        data = notifications.lease_payload(
            lease, usage=figures)['nova_object.data']
        self.assertEqual(
            {'amount': 2, 'hosts': ['h1', 'h2'], 'vcpus': 12,
             'memory_mb': 6144, 'disk_gb': 60},
            {k: data['reservations'][1][k] for k in (
                'amount', 'hosts', 'vcpus', 'memory_mb', 'disk_gb')})
        self.assertEqual(figures, data['usage'])

    def test_disabled_without_driver(self):
        conf = cfg.ConfigOpts()
        conf([])
        notifier = notifications.LeaseNotifier(conf)
        self.addCleanup(notifier.close)
        self.assertFalse(notifier.enabled)
        self.assertFalse(notifier.notify(notifications.START, {'id': 'x'}))
        self.assertRaises(ValueError, notifier.notify, 'lease.bogus', {})


class PacerTest(testtools.TestCase):
    """The engine's requests that make Nova's scheduler place a server:
    one at a time, but one that hangs holds the next back only so long.
    """

    def test_one_at_a_time(self):
        pacer = instance._Pacer(1, 5.0)
        inside = []
        peak = []

        def request():
            with pacer():
                inside.append(1)
                peak.append(len(inside))
                time.sleep(0.05)
                inside.pop()
        threads = [threading.Thread(target=request) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual([1, 1, 1, 1], peak)

    def test_a_hung_request_holds_the_next_back_at_most_hold(self):
        pacer = instance._Pacer(1, 0.2)
        hung = threading.Event()
        entered = threading.Event()

        def hang():
            with pacer():
                entered.set()
                hung.wait(10)
        thread = threading.Thread(target=hang)
        # The hold counts from when the hung request was let in: time the
        # wait from before that (not from after, which is later).
        t0 = time.monotonic()
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(hung.set)
        entered.wait(5)
        with pacer():
            waited = time.monotonic() - t0
        self.assertGreaterEqual(waited, 0.2)
        self.assertLess(waited, 5)

    def test_behind_slow_requests_the_next_go_one_per_hold(self):
        # Requests that each take longer than the hold: the waiters go
        # one after the other, one hold apart, not all at once when the
        # first hold is over (sixteen unshelves sent within 0.2 s on the
        # in-process Nova: benchmarks/wakeup.py).
        hold = 0.3
        pacer = instance._Pacer(1, hold)
        release = threading.Event()
        entered = []
        lock = threading.Lock()

        def slow():
            with pacer():
                with lock:
                    entered.append(time.monotonic())
                release.wait(10)
        threads = [threading.Thread(target=slow) for _ in range(4)]
        for t in threads:
            t.start()
        self.addCleanup(release.set)
        time.sleep(hold * 3.5)
        with lock:
            started = sorted(entered)
        release.set()
        for t in threads:
            t.join()
        # 0, hold, 2 * hold, 3 * hold: four in 3.5 holds, not four at
        # once after one.
        self.assertEqual(4, len(started), started)
        gaps = [b - a for a, b in zip(started, started[1:])]
        for gap in gaps:
            self.assertGreaterEqual(gap, hold * 0.9, gaps)

    def test_an_ended_request_lets_the_next_go_at_once(self):
        pacer = instance._Pacer(1, 5.0)
        with pacer():
            pass
        t0 = time.monotonic()
        with pacer():
            self.assertLess(time.monotonic() - t0, 0.5)

    def test_zero_is_no_limit(self):
        pacer = instance._Pacer(0, 5.0)
        with pacer():
            t0 = time.monotonic()
            with pacer():
                self.assertLess(time.monotonic() - t0, 1)
