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
"""The event engine on an in-memory SQLite database, with the noop plugin.

(SQLite in memory is not a database server: these stay fast.)
"""

# Select oslo.service's threading backend before oslo.messaging (imported
# by the engine's notifications) loads the eventlet one.
from oslo_service import backend as _service_backend
if _service_backend.get_backend_type() is None:
    _service_backend.init_backend(_service_backend.BackendType.THREADING)

import datetime  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import fixtures  # noqa: E402
from oslo_config import cfg  # noqa: E402
from oslo_utils import fixture as utils_fixture  # noqa: E402
from oslo_utils import timeutils  # noqa: E402
import testtools  # noqa: E402

from nova_lease.compute_hook import hook  # noqa: E402
from nova_lease import conf as lease_conf  # noqa: E402
from nova_lease.db import api as db_api  # noqa: E402
from nova_lease.db import migration  # noqa: E402
from nova_lease import exception  # noqa: E402
from nova_lease import lease_events  # noqa: E402
from nova_lease.periodic import engine as lease_engine  # noqa: E402
from nova_lease.periodic import jobs  # noqa: E402
from nova_lease.plugins import base as plugin_base  # noqa: E402
from nova_lease.plugins.host import plugin as host_plugin  # noqa: E402
from nova_lease.plugins.instance import plugin as instance_plugin  # noqa
from nova_lease.plugins import noop  # noqa: E402

T0 = datetime.datetime(2030, 3, 1, 10, 0)


def _conf(**overrides):
    conf = cfg.ConfigOpts()
    for name in ('nova_lease', 'nova_lease_auth'):
        conf.register_group(cfg.OptGroup(name))
    lease_conf.register_opts(conf)
    noop.register_opts(conf)
    conf([])
    conf.set_override('resource_plugins', ['noop'], 'nova_lease_engine')
    conf.set_override('retry_interval', 10, 'nova_lease_engine')
    conf.set_override('max_retries', 2, 'nova_lease')
    for key, value in overrides.items():
        group = 'nova_lease_noop' if key in (
            'fail_first', 'delay', 'block_file') else lease_conf.group_of(key)
        conf.set_override(key, value, group)
    return conf


class LeaseEventsTest(testtools.TestCase):

    def test_start_before_end_end(self):
        events = lease_events.lease_events(
            T0, T0 + datetime.timedelta(hours=2),
            T0 + datetime.timedelta(hours=1))
        self.assertEqual(
            [('start_lease', T0),
             ('before_end_lease', T0 + datetime.timedelta(hours=1)),
             ('end_lease', T0 + datetime.timedelta(hours=2))],
            [(e['event_type'], e['time']) for e in events])
        self.assertEqual({'UNDONE'}, {e['status'] for e in events})

    def test_before_end_clamped_to_start_and_optional(self):
        events = lease_events.lease_events(
            T0, T0 + datetime.timedelta(minutes=30),
            T0 - datetime.timedelta(minutes=30))
        self.assertEqual(T0, events[1]['time'])
        self.assertEqual(['start_lease', 'end_lease'], [
            e['event_type'] for e in lease_events.lease_events(
                T0, T0 + datetime.timedelta(minutes=1))])
        self.assertRaises(ValueError, lease_events.lease_events, T0, T0)


class EngineTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.clock = self.useFixture(utils_fixture.TimeFixture(T0))
        self.db = db_api.Database('sqlite://')
        self.addCleanup(self.db.dispose)
        migration.upgrade(self.db)

    def _engine(self, **overrides):
        engine = lease_engine.Engine(_conf(**overrides), db=self.db)
        self.addCleanup(engine.close)
        return engine

    def _lease(self, start=T0, minutes=60, before_end=None, retries=None,
               reservations=('noop',)):
        end = start + datetime.timedelta(minutes=minutes)
        return db_api.lease_create(
            self.db, {'name': 'l', 'project_id': 'p', 'start_date': start,
                      'end_date': end, 'status': 'PENDING',
                      'retries': retries},
            reservations=[{'resource_type': t, 'resource_id': 'r%d' % i}
                          for i, t in enumerate(reservations)],
            events=lease_events.lease_events(start, end, before_end))

    def _get(self, lease):
        return db_api.lease_get(self.db, lease['id'])

    def _advance(self, **kwargs):
        self.clock.advance_time_delta(datetime.timedelta(**kwargs))

    def test_lifecycle(self):
        engine = self._engine()
        lease = self._lease(start=T0 + datetime.timedelta(minutes=1),
                            before_end=T0 + datetime.timedelta(minutes=50))
        self.assertEqual(0, engine.process_due())
        self._advance(minutes=1)
        self.assertEqual(1, engine.process_due())
        got = self._get(lease)
        self.assertEqual('ACTIVE', got['status'])
        self.assertEqual('active', got['reservations'][0]['status'])
        self._advance(minutes=60)
        # before_end then end, in one call: the end waited for it.
        self.assertEqual(2, engine.process_due())
        got = self._get(lease)
        self.assertEqual('TERMINATED', got['status'])
        self.assertEqual('deleted', got['reservations'][0]['status'])
        self.assertEqual(['DONE'] * 3, [e['status'] for e in got['events']])
        self.assertEqual(3, engine.stats['done'])

    def test_plugin_note_becomes_the_status_reason(self):
        class Noting(plugin_base.ResourcePlugin):
            resource_type = 'noop'

            def on_start(self, lease, reservation):
                return None

            def on_end(self, lease, reservation):
                return 'left server s1 alone'

        notices = []

        class Notifier(object):
            def notify(self, event_type, lease, reservations=None,
                       usage=None):
                notices.append((event_type, lease['status_reason']))

        engine = lease_engine.Engine(_conf(), db=self.db,
                                     plugins={'noop': Noting(_conf())},
                                     notifier=Notifier())
        self.addCleanup(engine.close)
        lease = self._lease(reservations=('noop', 'noop'))
        engine.process_due()
        self.assertIsNone(self._get(lease)['status_reason'])
        self._advance(minutes=60)
        engine.process_due()
        engine.close()
        got = self._get(lease)
        note = 'left server s1 alone; left server s1 alone'
        self.assertEqual(('TERMINATED', note),
                         (got['status'], got['status_reason']))
        end = [e for e in got['events'] if e['event_type'] == 'end_lease'][0]
        self.assertEqual(('DONE', note), (end['status'], end['last_error']))
        self.assertEqual([('lease.start', None), ('lease.end', note)],
                         notices)

    def test_retry_with_backoff_then_success(self):
        engine = self._engine(fail_first=2)
        lease = self._lease()
        engine.process_due()
        got = self._get(lease)
        self.assertEqual('PENDING', got['status'])
        self.assertIn('start_lease failed (attempt 1 of 3), retrying at '
                      '2030-03-01 10:00:10 UTC', got['status_reason'])
        start = got['events'][0]
        self.assertEqual(('UNDONE', 1, T0 + datetime.timedelta(seconds=10)),
                         (start['status'], start['attempts'],
                          start['next_attempt_at']))
        self._advance(seconds=10)
        engine.process_due()
        start = self._get(lease)['events'][0]
        self.assertEqual(T0 + datetime.timedelta(seconds=30),
                         start['next_attempt_at'])     # 10 s, then 20 s
        self._advance(seconds=19)
        self.assertEqual(0, engine.process_due())
        self._advance(seconds=1)
        self.assertEqual(1, engine.process_due())
        got = self._get(lease)
        self.assertEqual(('ACTIVE', None),
                         (got['status'], got['status_reason']))
        self.assertEqual(3, got['events'][0]['attempts'])

    def test_error_after_max_retries(self):
        engine = self._engine(fail_first=100)
        lease = self._lease(retries=1)     # the lease's own retries
        self.addCleanup(engine.conf.clear_override, 'fail_first',
                        'nova_lease_noop')
        engine.process_due()
        self._advance(seconds=10)
        engine.process_due()
        got = self._get(lease)
        self.assertEqual('ERROR', got['status'])
        self.assertEqual('error', got['reservations'][0]['status'])
        start = got['events'][0]
        self.assertEqual(('ERROR', 2), (start['status'], start['attempts']))
        self.assertIn('start_lease failed 2 time(s), giving up: on_start of '
                      'noop reservation', got['status_reason'])
        self.assertIn('failed on purpose', got['status_reason'])
        self.assertIn('setting event %s back to UNDONE' % start['id'],
                      got['status_reason'])
        # The end still runs and ends the lease.
        engine.conf.set_override('fail_first', 0, 'nova_lease_noop')
        self._advance(minutes=60)
        engine.process_due()
        self.assertEqual('TERMINATED', self._get(lease)['status'])

    def test_missing_plugin_is_an_actionable_error(self):
        engine = self._engine(max_retries=0)
        lease = self._lease(reservations=('physical:host',))
        engine.process_due()
        got = self._get(lease)
        self.assertEqual('ERROR', got['status'])
        self.assertIn('no resource plugin handles physical:host '
                      'reservations: add it to [nova_lease_engine] '
                      'resource_plugins', got['status_reason'])

    def test_plugin_call_timeout(self):
        engine = self._engine(plugin_call_timeout=1, delay=3.0,
                              max_retries=0)
        lease = self._lease()
        began = time.monotonic()
        engine.process_due()
        self.assertLess(time.monotonic() - began, 2.9)
        got = self._get(lease)
        self.assertEqual('ERROR', got['status'])
        self.assertIn('did not finish within 1 s ([nova_lease_engine] '
                      'plugin_call_timeout)', got['status_reason'])

    def test_deleted_lease_start_is_skipped(self):
        engine = self._engine()
        lease = self._lease()
        db_api.lease_update(self.db, lease['id'], {'status': 'TERMINATED'})
        engine.process_due()
        start = self._get(lease)['events'][0]
        self.assertEqual('DONE', start['status'])
        self.assertIn('skipped: the lease is TERMINATED',
                      start['last_error'])
        self.assertEqual(1, engine.stats['skipped'])

    def test_stale_claim_recovered(self):
        engine = self._engine(engine_claim_timeout=60,
                              plugin_call_timeout=30)
        lease = self._lease()
        db_api.engine_claim_events(self.db, 'dead-engine', T0, 10,
                                   on_claim=lambda event, lease: 'STARTING')
        self.assertEqual(0, engine.process_due())
        self._advance(seconds=61)
        self.assertEqual(1, engine.process_due())
        got = self._get(lease)
        self.assertEqual('ACTIVE', got['status'])
        self.assertEqual((engine.engine_id, 2),
                         (got['events'][0]['claimed_by'],
                          got['events'][0]['attempts']))

    def test_gives_up_on_an_event_that_kills_engines(self):
        # Claimed and abandoned over and over (the engines died).
        engine = self._engine(max_retries=2)
        lease = self._lease()
        start = self._get(lease)['events'][0]
        db_api.event_update(self.db, start['id'], {
            'attempts': 3, 'last_error': 'claim by e3 expired'})
        engine.process_due()
        got = self._get(lease)
        self.assertEqual('ERROR', got['status'])
        self.assertIn('started 3 times without finishing', got[
            'status_reason'])
        self.assertIn('claim by e3 expired', got['status_reason'])

    def test_run_sleeps_until_due_and_wakes(self):
        engine = self._engine(engine_max_sleep=30)
        thread = threading.Thread(target=engine.run, daemon=True)
        thread.start()
        self.addCleanup(thread.join, 10)
        self.addCleanup(engine.stop)
        lease = self._lease(start=T0 + datetime.timedelta(minutes=5))
        engine.wake()       # it looks again (as after its next probe)
        time.sleep(0.3)
        self.assertEqual('PENDING', self._get(lease)['status'])
        self._advance(minutes=5)
        engine.wake()
        deadline = time.monotonic() + 10
        while (self._get(lease)['status'] != 'ACTIVE'
               and time.monotonic() < deadline):
            time.sleep(0.05)
        self.assertEqual('ACTIVE', self._get(lease)['status'])
        engine.stop()
        thread.join(10)
        self.assertFalse(thread.is_alive())

    def test_claims_wait_for_a_quarter_batch_while_workers_are_busy(self):
        engine = self._engine(engine_batch_size=8, engine_workers=1)
        for count, room in ((0, 8), (1, 7), (5, 3), (6, 2), (7, 0), (8, 0)):
            engine.runner._jobs = {i: object() for i in range(count)}
            self.assertEqual(room, engine.runner.room(), count)
        engine.runner._jobs = {}
        # Fewer actions queued than twice the workers: claim what fits.
        engine = self._engine(engine_batch_size=8, engine_workers=4)
        engine.runner._jobs = {i: object() for i in range(7)}
        self.assertEqual(1, engine.runner.room())
        engine.runner._jobs = {}

    def test_stop_releases_running_claims(self):
        block = self.useFixture(fixtures.TempDir()).join('block')
        open(block, 'w').close()
        engine = self._engine(block_file=block, engine_shutdown_timeout=0)
        lease = self._lease()
        thread = threading.Thread(target=engine.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while (self._get(lease)['status'] != 'STARTING'
               and time.monotonic() < deadline):
            time.sleep(0.05)
        engine.stop()
        thread.join(10)
        start = self._get(lease)['events'][0]
        self.assertEqual(('UNDONE', None, 0),
                         (start['status'], start['claimed_by'],
                          start['attempts']))
        self.assertEqual(1, engine.stats['released'])


class HeartbeatTest(testtools.TestCase):
    """Engines watch each other's heartbeat counters by their own clock."""

    def setUp(self):
        super().setUp()
        self.db = db_api.Database('sqlite://')
        self.addCleanup(self.db.dispose)
        migration.upgrade(self.db)
        self.now = 1000.0
        self.useFixture(fixtures.MockPatch(
            'nova_lease.periodic.engine.time.monotonic',
            side_effect=lambda: self.now))
        self.dead = self._engine('engine-dead')
        self.alive = self._engine('engine-alive')
        start = datetime.datetime.utcnow() - datetime.timedelta(seconds=1)
        end = start + datetime.timedelta(hours=1)
        self.lease = db_api.lease_create(
            self.db, {'name': 'l', 'project_id': 'p', 'start_date': start,
                      'end_date': end, 'status': 'PENDING'},
            reservations=[{'resource_type': 'noop', 'resource_id': 'r'}],
            events=lease_events.lease_events(start, end))
        db_api.engine_claim_events(self.db, 'engine-dead',
                                   datetime.datetime.utcnow(), 10)

    def _engine(self, name):
        engine = lease_engine.Engine(
            _conf(engine_heartbeat_interval=1, engine_heartbeat_timeout=10),
            db=self.db, engine_id=name)
        self.addCleanup(engine.close)
        engine.liveness.register()
        engine.beat()
        return engine

    def _start(self):
        return [e for e in db_api.event_list(self.db,
                                             lease_id=self.lease['id'])
                if e['event_type'] == 'start_lease'][0]

    def _beat_at(self, now, *engines):
        self.now = now
        for engine in engines:
            engine.beat()

    def test_claims_of_a_silent_engine_are_released(self):
        self._beat_at(1001, self.alive)
        self._beat_at(1005, self.alive)
        self.assertEqual('IN_PROGRESS', self._start()['status'])
        self._beat_at(1009, self.alive)
        self._beat_at(1012, self.alive)
        start = self._start()
        self.assertEqual(('UNDONE', None), (start['status'],
                                            start['claimed_by']))
        self.assertIn('engine engine-dead died', start['last_error'])
        self.assertEqual(1, self.alive.stats['recovered'])
        row = [r for r in db_api.process_list(self.db)
               if r['name'] == 'engine-dead'][0]
        self.assertIsNotNone(row['stopped_at'])
        self.assertIn('no heartbeat', row['stop_reason'])
        # It was only cut off: its next beat says so and clears the mark.
        self.dead.beat()
        row = [r for r in db_api.process_list(self.db)
               if r['name'] == 'engine-dead'][0]
        self.assertIsNone(row['stopped_at'])

    def test_a_beating_engine_is_not_taken_for_dead(self):
        for now in range(1001, 1040, 3):
            self._beat_at(now, self.alive, self.dead)
        self.assertEqual(('IN_PROGRESS', 'engine-dead'),
                         (self._start()['status'],
                          self._start()['claimed_by']))

    def test_an_observer_that_stalled_does_not_judge(self):
        # The observer itself did not run for 30 s (process stopped, its
        # database unreachable): it starts counting again.
        self._beat_at(1030, self.alive)
        self.assertEqual('IN_PROGRESS', self._start()['status'])
        self._beat_at(1035, self.alive)
        self._beat_at(1039, self.alive)
        self.assertEqual('IN_PROGRESS', self._start()['status'])
        self._beat_at(1041, self.alive)
        self.assertEqual('UNDONE', self._start()['status'])

    def test_a_revived_engine_keeps_its_claims(self):
        self._beat_at(1006, self.alive)
        self._beat_at(1011, self.alive)
        # Compare-and-set: it beat after the observer's last look.
        self.dead.beat()
        row = [r for r in db_api.process_list(self.db)
               if r['name'] == 'engine-dead'][0]
        marked, released = db_api.engine_release_dead(
            self.db, row['id'], row['heartbeats'] - 1, 'test')
        self.assertEqual((False, []), (marked, released))
        self.assertEqual('IN_PROGRESS', self._start()['status'])


class EngineOptionsTest(testtools.TestCase):

    def test_claim_timeout_must_exceed_plugin_call_timeout(self):
        db = db_api.Database('sqlite://')
        self.addCleanup(db.dispose)
        for claim in (300, 600):
            error = self.assertRaises(
                exception.ConfigurationError, lease_engine.Engine,
                _conf(engine_claim_timeout=claim, plugin_call_timeout=600),
                db=db)
            self.assertIn('[nova_lease] engine_claim_timeout (%d s) must be '
                          'larger than [nova_lease_engine] '
                          'plugin_call_timeout (600 s)' % claim, str(error))
        lease_engine.Engine(_conf(engine_claim_timeout=601,
                                  plugin_call_timeout=600), db=db).close()

    def test_heartbeat_timeout_must_cover_three_beats(self):
        db = db_api.Database('sqlite://')
        self.addCleanup(db.dispose)
        error = self.assertRaises(
            exception.ConfigurationError, lease_engine.Engine,
            _conf(engine_heartbeat_interval=2, engine_heartbeat_timeout=5),
            db=db)
        self.assertIn('[nova_lease] engine_heartbeat_timeout (5.0 s) must be '
                      'at least three times [nova_lease_engine] '
                      'engine_heartbeat_interval (2.0 s)', str(error))

    def test_defaults_are_consistent(self):
        db = db_api.Database('sqlite://')
        self.addCleanup(db.dispose)
        lease_engine.Engine(_conf(), db=db).close()


class PluginLoadingTest(testtools.TestCase):

    def test_entry_points(self):
        conf = _conf()
        plugins = plugin_base.load_plugins(conf, ['noop',
                                                  'virtual:instance'])
        self.assertEqual({'noop', 'virtual:instance'}, set(plugins))
        self.assertIsInstance(plugins['noop'], noop.NoopPlugin)

    def test_resource_plugins_by_entry_point_name(self):
        # The installed entry points of nova_lease.resource_plugins name
        # the plugin classes where they are (a stale path fails here).
        plugins = plugin_base.load_plugins(
            _conf(), ['physical:host', 'virtual:instance'], strict=True)
        self.assertEqual({'physical:host', 'virtual:instance'},
                         set(plugins))
        self.assertIsInstance(plugins['physical:host'],
                              host_plugin.HostPlugin)
        self.assertIsInstance(plugins['virtual:instance'],
                              instance_plugin.InstancePlugin)
        for name, plugin in plugins.items():
            self.assertEqual(name, plugin.resource_type)

    def test_missing(self):
        conf = _conf()
        self.assertEqual({'noop'}, set(plugin_base.load_plugins(
            conf, ['noop', 'nonexistent'])))
        self.assertRaises(plugin_base.PluginNotFound,
                          plugin_base.load_plugins, conf, ['nonexistent'],
                          strict=True)


class _ListingCompute(object):
    """A compute client whose batched poll shows its servers ACTIVE."""

    poll_interval = 1.0

    def __init__(self, *server_ids):
        self.server_ids = server_ids

    def list_servers_changed_since(self, since):
        return {s: {'id': s, 'status': 'ACTIVE',
                    'OS-EXT-STS:task_state': None} for s in self.server_ids}

    def get_server(self, server_id):
        self.gets = getattr(self, 'gets', []) + [server_id]
        return {'id': server_id, 'status': 'ACTIVE',
                'OS-EXT-STS:task_state': None}


class _Plugin(object):
    def __init__(self, compute):
        self.compute = compute


class SafetyNetPollTest(testtools.TestCase):
    """While notifications reach the engine, its batched poll of waited
    servers runs every engine_max_sleep seconds; it runs every poll
    interval again once it finds a wait over that no notification
    announced, and not for one whose notification came meanwhile.
    """

    def setUp(self):
        super().setUp()
        self.db = db_api.Database('sqlite://')
        self.addCleanup(self.db.dispose)
        migration.upgrade(self.db)
        self.engine = lease_engine.Engine(_conf(engine_max_sleep=10),
                                          db=self.db)
        self.addCleanup(self.engine.close)

    def _waiting(self, server_id):
        job = jobs.Job({'id': 'e-' + server_id, 'lease_id': 'l',
                        'event_type': 'start_lease', 'attempts': 1})
        entry = jobs.Waiting(
            job, _Plugin(_ListingCompute(server_id)),
            plugin_base.Wait(server_id, ('ACTIVE',), None), 'a start', 60)
        self.engine.observer.waiting.append(entry)
        return entry

    def test_no_notification_yet_polls_every_interval(self):
        self.assertFalse(self.engine.notices_flow)
        self.assertEqual(1.0, self.engine.observer.poll_interval(1.0))

    def test_poll_is_a_safety_net_while_notifications_come(self):
        self.engine.observe_now('another-server')
        self.assertTrue(self.engine.notices_flow)
        self.assertEqual(10, self.engine.observer.poll_interval(1.0))

    def test_wait_over_without_its_notification_resumes_polling(self):
        self.engine.observe_now('another-server')
        self.engine.observer.poll([self._waiting('s1')])
        self.assertEqual([], self.engine.observer.waiting)
        self.assertFalse(self.engine.notices_flow)
        self.assertEqual(1.0, self.engine.observer.poll_interval(1.0))

    def _resumed(self):
        resumed = []
        pool = self.engine.runner.pool
        pool.submit_later = lambda func, entry, server, err: (
            resumed.append((entry.wait.server_id, server, err)))
        return resumed

    def test_notification_showing_the_wait_over_needs_no_look(self):
        entry = self._waiting('s1')
        resumed = self._resumed()
        shown = hook.server_of_payload({'uuid': 's1', 'state': 'active',
                                        'task_state': None})
        self.engine.observer.poll_notified([entry], {'s1': shown})
        self.assertEqual([], self.engine.observer.waiting)
        self.assertEqual([('s1', shown, None)], resumed)
        self.assertFalse(hasattr(entry.plugin.compute, 'gets'))

    def test_notification_not_showing_the_wait_over_is_looked_at(self):
        for shown in (None, hook.server_of_payload(
                {'uuid': 's1', 'state': 'active',
                 'task_state': 'spawning'})):
            entry = self._waiting('s1')
            resumed = self._resumed()
            self.engine.observer.poll_notified([entry], {'s1': shown})
            self.assertEqual(['s1'], entry.plugin.compute.gets)
            self.assertEqual('s1', resumed[0][0])

    def test_each_list_asks_for_what_changed_since_the_last(self):
        # A burst's waits are listed whole once; the next lists ask for
        # the servers changed since the last one (a margin before it),
        # not since the earliest wait: a hundred servers in a burst.
        compute = _ListingCompute()
        since = []
        compute.list_servers_changed_since = lambda t: since.append(t) or {}
        observer = self.engine.observer
        old = self._waiting('s1')
        old.plugin = _Plugin(compute)
        old.since -= datetime.timedelta(minutes=5)
        observer.poll([old])
        observer.poll([old])
        new = self._waiting('s2')
        new.plugin = old.plugin
        new.since += datetime.timedelta(minutes=5)
        observer.poll([old, new])
        self.assertEqual(old.since, since[0])
        self.assertGreater(since[1], old.since + datetime.timedelta(
            minutes=4))
        self.assertLessEqual(since[1], timeutils.utcnow() -
                             jobs.CHANGES_MARGIN)
        # A wait that began after the last list: since that list still.
        self.assertLessEqual(since[2], timeutils.utcnow() -
                             jobs.CHANGES_MARGIN)
        self.assertGreaterEqual(since[2], since[1])
        # A list that failed does not count.
        compute.list_servers_changed_since = lambda t: (
            since.append(t), 1 / 0)
        observer.poll([old])
        observer.poll([old])
        self.assertEqual(since[4], since[3])

    def test_server_of_payload(self):
        self.assertEqual(
            {'id': 's1', 'status': 'SHELVED_OFFLOADED',
             'OS-EXT-STS:task_state': None, 'tags': ['reserved']},
            hook.server_of_payload({'uuid': 's1',
                                    'state': 'shelved_offloaded',
                                    'task_state': None,
                                    'tags': ['reserved']}))
        self.assertIsNone(hook.server_of_payload({'uuid': 's1'}))
        self.assertIsNone(hook.server_of_payload({'state': 'active'}))
        self.assertIsNone(hook.server_of_payload(
            {'uuid': 's1', 'state': 'unknown'}))

    def test_wait_whose_notification_came_keeps_the_safety_net(self):
        # The notification arrived just before the batched poll, which
        # then saw the server first.
        self.engine.observe_now('s1')
        self.engine.observer.poll([self._waiting('s1')], notified={'s1'})
        self.assertEqual([], self.engine.observer.waiting)
        self.assertTrue(self.engine.notices_flow)


class WorkerPoolTest(testtools.TestCase):
    """The engine's workers: what is submitted later waits for what is
    submitted meanwhile, for max_defer seconds at most.
    """

    def _pool(self, size=1, max_defer=30.0):
        pool = jobs.WorkerPool(size, 'test', max_defer=max_defer)
        self.addCleanup(pool.join, 5)
        self.addCleanup(pool.shutdown)
        return pool

    def _blocked(self, pool):
        """Hold the pool's only worker until the returned event is set."""
        release = threading.Event()
        started = threading.Event()

        def block():
            started.set()
            release.wait(10)
        pool.submit(block)
        started.wait(5)
        self.addCleanup(release.set)
        return release

    def test_later_runs_after_what_was_submitted_meanwhile(self):
        pool = self._pool()
        release = self._blocked(pool)
        ran = []
        done = threading.Event()
        pool.submit_later(ran.append, 'resume 1')
        pool.submit(ran.append, 'event 1')
        pool.submit_later(ran.append, 'resume 2')
        pool.submit(ran.append, 'event 2')
        pool.submit_later(done.set)
        release.set()
        self.assertTrue(done.wait(5))
        self.assertEqual(['event 1', 'event 2', 'resume 1', 'resume 2'],
                         ran)

    def test_later_waits_at_most_max_defer(self):
        pool = self._pool(max_defer=0.2)
        release = self._blocked(pool)
        ran = []
        done = threading.Event()
        pool.submit_later(ran.append, 'resume')
        time.sleep(0.3)
        pool.submit(ran.append, 'event')
        pool.submit(done.set)
        release.set()
        self.assertTrue(done.wait(5))
        self.assertEqual(['resume', 'event'], ran)

    def test_shutdown_without_cancel_runs_what_is_queued(self):
        pool = jobs.WorkerPool(1, 'test')
        release = self._blocked(pool)
        ran = []
        pool.submit_later(ran.append, 'resume')
        pool.submit(ran.append, 'event')
        pool.shutdown(cancel=False)
        release.set()
        pool.join(5)
        self.assertEqual(['event', 'resume'], ran)
        self.assertRaises(RuntimeError, pool.submit, ran.append, 'late')

    def test_shutdown_drops_what_is_queued(self):
        pool = jobs.WorkerPool(1, 'test')
        release = self._blocked(pool)
        ran = []
        pool.submit_later(ran.append, 'resume')
        pool.submit(ran.append, 'event')
        pool.shutdown()
        release.set()
        pool.join(5)
        self.assertEqual([], ran)


class ClaimCheckerTest(testtools.TestCase):
    """Confirmations of claims: batched, each from a query that began
    after it was asked for, every worker answered once.
    """

    def setUp(self):
        super().setUp()
        self.queries = []
        self.release = threading.Event()
        self.release.set()
        self.fail = None
        self.useFixture(fixtures.MonkeyPatch(
            'nova_lease.db.api.engine_claims_held', self._held))
        self.checker = jobs.ClaimChecker(None, 'engine-1')

    def _held(self, db, engine_id, claims):
        claims = list(claims)
        self.queries.append(claims)
        self.release.wait(5)
        if self.fail:
            raise self.fail
        return {c for c in claims if c[0].startswith('mine')}

    def _ask_all(self, claims):
        answers = {}

        def ask(claim):
            try:
                answers[claim] = self.checker.held(*claim)
            except Exception as e:
                answers[claim] = e
        threads = [threading.Thread(target=ask, args=(c,)) for c in claims]
        for thread in threads:
            thread.start()
        return threads, answers

    def test_concurrent_confirmations_share_a_query(self):
        claims = [('mine%d' % i, 1) for i in range(8)] + [('lost', 2)]
        threads, answers = self._ask_all(claims)
        for thread in threads:
            thread.join(5)
        expected = {c: True for c in claims[:8]}
        expected[('lost', 2)] = False
        self.assertEqual(expected, answers)
        self.assertEqual(sorted(claims),
                         sorted(c for q in self.queries for c in q))
        self.assertLess(len(self.queries), len(claims))
        self.assertEqual(len(self.queries), self.checker.queries)

    def test_an_ask_during_a_query_waits_for_the_next_one(self):
        self.release.clear()
        threads, answers = self._ask_all([('mine-first', 1)])
        for _ in range(500):
            if self.queries:
                break
            time.sleep(0.01)
        late, late_answers = self._ask_all([('mine-late', 1)])
        time.sleep(0.05)
        # The running query began before the late ask: it cannot answer.
        self.assertEqual({}, late_answers)
        self.release.set()
        for thread in threads + late:
            thread.join(5)
        self.assertEqual({('mine-first', 1): True}, answers)
        self.assertEqual({('mine-late', 1): True}, late_answers)
        self.assertEqual([[('mine-first', 1)], [('mine-late', 1)]],
                         self.queries)

    def test_a_failed_query_raises_in_every_worker_it_answered(self):
        self.fail = RuntimeError('database unreachable')
        claims = [('mine%d' % i, 1) for i in range(4)]
        threads, answers = self._ask_all(claims)
        for thread in threads:
            thread.join(5)
        self.assertEqual(set(claims), set(answers))
        for answer in answers.values():
            self.assertIsInstance(answer, RuntimeError)
        # The next confirmation runs a query of its own.
        self.fail = None
        self.assertTrue(self.checker.held('mine-after', 1))
