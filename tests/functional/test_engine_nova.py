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
"""The engine and the virtual:instance plugin against the real Nova.

The engine runs in the test process exactly as nova-lease-engine builds
it: its own ConfigOpts read from a config file, a keystoneauth password
session from [nova_lease_auth] (against the harness's Keystone),
openstacksdk's compute proxy. Faults are injected by a WSGI wrapper
around Nova's API application (the requests still reach Nova's real API,
which answers 500 for the matched ones before Nova sees them), and time
is moved with the harness clock.
"""

import datetime
import threading

from nova_lease.db import api as db_api
from nova_lease.db import migration
from nova_lease import lease_events
from nova_lease.periodic import engine as lease_engine
from nova_lease.plugins.instance import plugin as instance
from tests.functional import base
from tests.functional import fixtures as lease_fixtures


class EngineNovaTest(base.LeaseFunctionalBase):

    def setUp(self):
        super().setUp()
        self.faults = lease_fixtures.FaultInjector(self.keystone.nova_app)
        self.keystone.nova_app = self.faults
        migration.upgrade(self.lease_db_url)
        self.addCleanup(db_api.reset_databases)
        self.engine = self._engine()

    def _engine(self, **overrides):
        options = {
            'resource_plugins': 'virtual:instance',
            'max_retries': 3,
            'retry_interval': 1,
            'plugin_call_timeout': 30,
        }
        options.update(overrides)
        conf = self.engine_conf(**options)
        engine = lease_engine.Engine(conf)
        self.addCleanup(engine.close)
        self.clock.add_listener(lambda old, new: engine.wake())
        return engine

    def _reserved_server(self):
        server = self._boot(name='leased')
        return self._shelve_server(server, 'SHELVED_OFFLOADED')

    def _lease(self, server, start_in=60, hours=2, on_end=None):
        now = self.clock.now
        start = now + datetime.timedelta(seconds=start_in)
        end = start + datetime.timedelta(hours=hours)
        return db_api.lease_create(
            self.engine.db,
            {'name': 'lease-%s' % server['name'], 'project_id':
             self.api.project_id, 'user_id': 'fake', 'start_date': start,
             'end_date': end, 'status': 'PENDING', 'on_end': on_end},
            reservations=[{'resource_type': instance.RESOURCE_TYPE,
                           'resource_id': server['id']}],
            events=lease_events.lease_events(start, end, None))

    def _event(self, lease, event_type):
        events = db_api.event_list(self.engine.db, lease_id=lease['id'])
        return [e for e in events if e['event_type'] == event_type][0]

    def _lease_now(self, lease):
        return db_api.lease_get(self.engine.db, lease['id'])

    def _unshelve_fails(self, server, times):
        self.faults.fail('unshelve', 'POST',
                         r'/servers/%s/action$' % server['id'],
                         body='"unshelve"', times=times)

    def test_start_and_end_delete(self):
        server = self._reserved_server()
        lease = self._lease(server)
        self.assertEqual(0, self.engine.process_due())
        self.clock.advance(seconds=61)
        self.assertEqual(1, self.engine.process_due())
        self.assertEqual('ACTIVE', self._lease_now(lease)['status'])
        server = self.api.get_server(server['id'])
        self.assertEqual('ACTIVE', server['status'])
        self.assertEqual('active', server['metadata']['lease_status'])
        self.assertEqual('active',
                         self._lease_now(lease)['reservations'][0]['status'])
        self.clock.advance(hours=2)
        self.assertEqual(1, self.engine.process_due())
        self._wait_until_deleted(server)
        lease = self._lease_now(lease)
        self.assertEqual('TERMINATED', lease['status'])
        self.assertEqual(['DONE', 'DONE'],
                         [e['status'] for e in lease['events']])

    def test_start_is_idempotent_and_end_of_deleted_server(self):
        # An ACTIVE server is a successful start; a server deleted before
        # the end is a successful end.
        server = self._boot(name='already-active')
        lease = self._lease(server)
        self.clock.advance(seconds=61)
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease_now(lease)['status'])
        self._delete_server(server)
        self.clock.advance(hours=2)
        self.engine.process_due()
        self.assertEqual('TERMINATED', self._lease_now(lease)['status'])

    def test_end_shelve(self):
        server = self._reserved_server()
        lease = self._lease(server, on_end='shelve')
        self.clock.advance(seconds=61)
        self.engine.process_due()
        self.clock.advance(hours=2)
        self.engine.process_due()
        server = self.api.get_server(server['id'])
        self.assertEqual('SHELVED_OFFLOADED', server['status'])
        self.assertEqual('terminated', server['metadata']['lease_status'])
        self.assertEqual('TERMINATED', self._lease_now(lease)['status'])

    def test_500_twice_then_success(self):
        server = self._reserved_server()
        lease = self._lease(server)
        self._unshelve_fails(server, times=2)
        self.clock.advance(seconds=61)
        self.engine.process_due()
        event = self._event(lease, 'start_lease')
        self.assertEqual('UNDONE', event['status'])
        self.assertIn('HTTP 500', event['last_error'])
        self.assertEqual('PENDING', self._lease_now(lease)['status'])
        # retry_interval=1: first retry after 1 s, second after 2 s more.
        self.clock.advance(seconds=1)
        self.engine.process_due()
        self.assertEqual(2, self.faults.faults['unshelve'])
        self.assertEqual('UNDONE', self._event(lease, 'start_lease')['status'])
        self.clock.advance(seconds=1)
        self.assertEqual(0, self.engine.process_due())   # back-off: 2 s
        self.clock.advance(seconds=1)
        self.assertEqual(1, self.engine.process_due())
        event = self._event(lease, 'start_lease')
        self.assertEqual('DONE', event['status'])
        self.assertEqual(3, event['attempts'])
        self.assertEqual(3, self.faults.calls['unshelve'])
        lease = self._lease_now(lease)
        self.assertEqual('ACTIVE', lease['status'])
        self.assertIsNone(lease['status_reason'])
        self.assertEqual('ACTIVE', self.api.get_server(server['id'])['status'])

    def test_always_500_is_error_with_reason(self):
        server = self._reserved_server()
        lease = self._lease(server)
        self._unshelve_fails(server, times=None)
        self.clock.advance(seconds=61)
        for delay in (0, 1, 2, 4):     # max_retries=3: 4 attempts
            self.clock.advance(seconds=delay)
            self.assertEqual(1, self.engine.process_due())
        self.assertEqual(4, self.faults.calls['unshelve'])
        event = self._event(lease, 'start_lease')
        self.assertEqual('ERROR', event['status'])
        lease = self._lease_now(lease)
        self.assertEqual('ERROR', lease['status'])
        reason = lease['status_reason']
        for part in ('start_lease failed 4 time(s)', server['id'],
                     'unshelve server', 'HTTP 500', 'injected fault',
                     event['id']):
            self.assertIn(part, reason)
        self.assertEqual('error', lease['reservations'][0]['status'])
        # The end still runs: the server is deleted, the lease ends.
        self.clock.advance(hours=2)
        self.assertEqual(1, self.engine.process_due())
        self._wait_until_deleted(server)
        self.assertEqual('TERMINATED', self._lease_now(lease)['status'])

    def test_timed_out_call_sends_nothing_when_it_returns(self):
        # Nova unshelves the server at the start's first request, but its
        # answer hangs past plugin_call_timeout; the retry starts the
        # lease, the end shelves the server; then the answer comes. The
        # abandoned call must not go on with the start: no metadata, no
        # unshelve, no request at all from its thread.
        self.engine.close()
        # (Long enough for the retry's real unshelve on a busy machine:
        # the plugin waits for ACTIVE at most this long too.)
        engine = self._engine(plugin_call_timeout=8)
        server = self._reserved_server()
        lease = self._lease(server, on_end='shelve')
        hung = self.faults.hang('first unshelve', 'POST',
                                r'/servers/%s/action$' % server['id'],
                                body='"unshelve"', answered=True)
        self.addCleanup(hung.release)
        self.clock.advance(seconds=61)
        self.assertEqual(1, engine.process_due())
        self.assertTrue(hung.reached.is_set())
        event = self._event(lease, 'start_lease')
        self.assertEqual('UNDONE', event['status'])
        self.assertIn('plugin_call_timeout', event['last_error'])
        self.clock.advance(seconds=1)
        self.assertEqual(1, engine.process_due())
        self.assertEqual('ACTIVE', self._lease_now(lease)['status'])
        self.clock.advance(hours=2)
        self.assertEqual(1, engine.process_due())
        self.assertEqual('TERMINATED', self._lease_now(lease)['status'])
        self.assertEqual('SHELVED_OFFLOADED',
                         self.api.get_server(server['id'])['status'])
        seen = len(self.faults.requests)
        hung.release()
        self.assertTrue(hung.done.wait(60))
        hung.thread.join(120)     # the abandoned worker retires
        self.assertFalse(hung.thread.is_alive())
        late = [(method, path, body) for thread, method, path, body
                in self.faults.requests[seen:] if thread is hung.thread]
        self.assertEqual([], late)
        server = self.api.get_server(server['id'])
        self.assertEqual('SHELVED_OFFLOADED', server['status'])
        self.assertEqual('terminated', server['metadata']['lease_status'])

    def test_engine_thread_wakes_on_clock(self):
        # The engine as a service: a thread sleeping up to
        # engine_max_sleep (60 s here) is woken when the clock moves.
        engine = self._engine(engine_max_sleep=60)
        self.engine.close()
        server = self._reserved_server()
        lease = self._lease(server)
        thread = threading.Thread(target=engine.run, daemon=True)
        thread.start()
        self.addCleanup(thread.join, 30)
        self.addCleanup(engine.stop)
        self.clock.advance(seconds=61)
        for i in range(200):
            if self._lease_now(lease)['status'] == 'ACTIVE':
                break
            threading.Event().wait(0.1)
        self.assertEqual('ACTIVE', self._lease_now(lease)['status'])
        engine.stop()
        thread.join(30)
        self.assertFalse(thread.is_alive())
