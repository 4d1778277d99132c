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
"""The engine's parts alone: Claims, Runner and Loop (see
nova_lease.periodic.engine), on an in-memory SQLite database.
"""

# Select oslo.service's threading backend before oslo.messaging (imported
# by the engine's notifications) loads the eventlet one.
from oslo_service import backend as _service_backend
if _service_backend.get_backend_type() is None:
    _service_backend.init_backend(_service_backend.BackendType.THREADING)

import datetime  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402

from oslo_config import cfg  # noqa: E402
from oslo_utils import fixture as utils_fixture  # noqa: E402
import testtools  # noqa: E402

from nova_lease import conf as lease_conf  # noqa: E402
from nova_lease.db import api as db_api  # noqa: E402
from nova_lease.db import migration  # noqa: E402
from nova_lease import lease_events  # noqa: E402
from nova_lease.periodic import actions  # noqa: E402
from nova_lease.periodic import claiming  # noqa: E402
from nova_lease.periodic import loop as engine_loop  # noqa: E402
from nova_lease.periodic import outcomes  # noqa: E402
from nova_lease.plugins import base as plugin_base  # noqa: E402

T0 = datetime.datetime(2030, 3, 1, 10, 0)


class _Base(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.clock = self.useFixture(utils_fixture.TimeFixture(T0))
        self.db = db_api.Database('sqlite://')
        self.addCleanup(self.db.dispose)
        migration.upgrade(self.db)

    def _lease(self, start=T0, minutes=60):
        end = start + datetime.timedelta(minutes=minutes)
        return db_api.lease_create(
            self.db, {'name': 'l', 'project_id': 'p', 'start_date': start,
                      'end_date': end, 'status': 'PENDING'},
            reservations=[{'resource_type': 'fake', 'resource_id': 'r'}],
            events=lease_events.lease_events(start, end))

    def _get(self, lease):
        return db_api.lease_get(self.db, lease['id'])


class ClaimsTest(_Base):

    def _claims(self, stats=None):
        return claiming.Claims(self.db, 'engine-1', 60, stats)

    def test_claim_moves_the_lease_and_counts(self):
        stats = {}
        claims = self._claims(stats)
        lease = self._lease()
        self._lease(start=T0 + datetime.timedelta(minutes=5))   # not due
        events = claims.claim(10)
        self.assertEqual([('start_lease', lease['id'], None)],
                         [(e['event_type'], e['lease_id'], e['_skip'])
                          for e in events])
        self.assertEqual('STARTING', self._get(lease)['status'])
        self.assertEqual({'claimed': 1}, stats)
        # Claimed: not claimable again, by this engine or another.
        self.assertEqual([], claims.claim(10))
        self.assertEqual([], claiming.Claims(self.db, 'engine-2',
                                             60).claim(10))

    def test_no_room_asks_nothing(self):
        claims = self._claims()
        claims.db = None        # any query would fail
        self.assertEqual([], claims.claim(0))

    def test_release_gives_the_claim_back(self):
        stats = {}
        claims = self._claims(stats)
        lease = self._lease()
        event = claims.claim(1)[0]
        self.assertTrue(claims.held(event['id'], event['attempts']))
        released = claims.release([event['id']], 'stopping')
        self.assertEqual([event['id']], list(released))
        self.assertEqual(1, stats['released'])
        self.assertFalse(claims.held(event['id'], event['attempts']))
        start = self._get(lease)['events'][0]
        self.assertEqual(('UNDONE', None), (start['status'],
                                            start['claimed_by']))
        self.assertEqual(1, len(claims.claim(1)))

    def test_complete_applies_only_its_own_claims(self):
        claims = self._claims()
        self._lease()
        event = claims.claim(1)[0]
        other = claiming.Claims(self.db, 'engine-2', 60)
        result, _ = outcomes.success(event, event['lease'])
        self.assertEqual(set(), other.complete([result]))
        self.assertEqual({event['id']}, claims.complete([result]))

    def test_refresh_asks_for_the_ids_only_when_due(self):
        claims = self._claims()
        asked = []
        self.assertFalse(claims.refresh(lambda: asked.append(1) or []))
        self.clock.advance_time_delta(datetime.timedelta(seconds=21))
        self.assertTrue(claims.refresh(lambda: asked.append(1) or []))
        self.assertEqual([1], asked)
        self.assertFalse(claims.refresh(lambda: asked.append(1) or []))

    def test_skip_reasons(self):
        event = {'event_type': 'start_lease'}
        self.assertIsNone(claiming.claim_status(event,
                                                {'status': 'ACTIVE'}))
        self.assertEqual('the lease is ACTIVE', event['_skip'])
        event = {'event_type': 'end_lease'}
        self.assertEqual('TERMINATING', claiming.claim_status(
            event, {'status': 'ACTIVE'}))
        self.assertIsNone(event['_skip'])


class _Plugin(plugin_base.ResourcePlugin):
    resource_type = 'fake'

    def __init__(self, conf, block=None):
        super().__init__(conf)
        self.calls = []
        self.block = block

    def on_start(self, lease, reservation):
        self.calls.append(lease['id'])
        if self.block is not None:
            self.block.wait(10)

    def on_end(self, lease, reservation):
        pass


def _conf(**overrides):
    conf = cfg.ConfigOpts()
    for name in ('nova_lease', 'nova_lease_auth'):
        conf.register_group(cfg.OptGroup(name))
    lease_conf.register_opts(conf)
    conf([])
    for key, value in overrides.items():
        conf.set_override(key, value, lease_conf.group_of(key))
    return conf


class RunnerTest(_Base):

    def _runner(self, plugin, **overrides):
        finished = threading.Event()
        runner = actions.Runner(
            _conf(**overrides), {'fake': plugin}, 'engine-1', db=self.db,
            claim_check=lambda event_id, attempts: True,
            on_finished=finished.set)
        self.addCleanup(runner.close)
        self.addCleanup(runner.drain, 0)
        return runner, finished

    def _claimed(self, count=1):
        for _ in range(count):
            self._lease()
        return db_api.engine_claim_events(self.db, 'engine-1', T0, count)

    def test_runs_a_job_and_hands_its_result(self):
        plugin = _Plugin(_conf())
        runner, finished = self._runner(plugin)
        events = self._claimed()
        self.assertEqual(1, runner.submit(events))
        self.assertTrue(finished.wait(10))
        self.assertEqual([events[0]['lease_id']], plugin.calls)
        self.assertEqual(1, runner.in_flight)    # until retired
        done = runner.take_finished()
        self.assertEqual(['DONE'], [j.result['status'] for j in done])
        self.assertEqual([], runner.take_finished())
        runner.retire(done, {events[0]['id']})
        self.assertEqual(0, runner.in_flight)
        self.assertEqual(1, runner.stats['done'])

    def test_put_back_results_are_taken_again(self):
        runner, finished = self._runner(_Plugin(_conf()))
        runner.submit(self._claimed())
        self.assertTrue(finished.wait(10))
        done = runner.take_finished()
        runner.put_back(done)
        self.assertTrue(runner.has_finished())
        self.assertEqual(done, runner.take_finished())

    def test_drain_cancels_the_queued_jobs_and_waits_for_the_running(self):
        block = threading.Event()
        plugin = _Plugin(_conf(), block=block)
        runner, _ = self._runner(plugin, engine_workers=1)
        events = self._claimed(2)
        runner.submit(events)
        deadline = time.monotonic() + 10
        while not plugin.calls and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertIsNotNone(runner.oldest_call())
        began = time.monotonic()
        runner.drain(0.2)
        self.assertGreaterEqual(time.monotonic() - began, 0.2)
        states = sorted(j.state for j in runner.unfinished())
        self.assertEqual(['cancelled', 'running'], states)
        block.set()
        self.assertEqual(1, len(plugin.calls))
        # Stopped: nothing more is run.
        self.assertEqual(0, runner.submit(self._claimed()))

    def test_room_waits_for_a_quarter_batch_while_workers_are_busy(self):
        runner, _ = self._runner(_Plugin(_conf()), engine_batch_size=8,
                                 engine_workers=1)
        runner._jobs = {i: object() for i in range(7)}
        self.assertEqual(0, runner.room())
        runner._jobs = {i: object() for i in range(6)}
        self.assertEqual(2, runner.room())
        runner._jobs = {}


class LoopTest(_Base):

    def _loop(self, **opts):
        values = {'engine_max_sleep': 30.0, 'plugin_call_timeout': 60.0,
                  'engine_probe_interval': 0.05}
        values.update(opts)
        return engine_loop.Loop(self.db, types.SimpleNamespace(**values))

    def test_full_batch_looks_again_at_once(self):
        self.assertEqual((0, None), self._loop().plan(5, 3))

    def test_no_room_sleeps_until_woken_or_the_oldest_call_times_out(self):
        loop = self._loop()
        self.assertEqual((30.0, None), loop.plan(0, 0))
        timeout, _ = loop.plan(0, 0, oldest_call=time.monotonic() - 55)
        self.assertTrue(4 < timeout <= 5, timeout)

    def test_sleeps_until_the_next_due_event(self):
        self._lease(start=T0 + datetime.timedelta(seconds=7))
        timeout, baseline = self._loop().plan(0, 10)
        self.assertEqual(7, timeout)
        self.assertIsNotNone(baseline)
        timeout, _ = self._loop().plan(0, 10)
        self.clock.advance_time_delta(datetime.timedelta(seconds=8))
        self.assertEqual(0.05, self._loop().plan(0, 10)[0])

    def test_nothing_due_sleeps_the_longest(self):
        self.assertEqual(30.0, self._loop().plan(0, 10)[0])

    def test_wake_ends_the_sleep(self):
        loop = self._loop(engine_probe_interval=0)
        threading.Timer(0.05, loop.wake).start()
        began = time.monotonic()
        self.assertTrue(loop.sleep(10))
        self.assertLess(time.monotonic() - began, 5)
        loop.clear()
        self.assertFalse(loop.sleep(0.01))

    def test_a_probe_sees_a_lease_created_meanwhile(self):
        stats = {}
        loop = engine_loop.Loop(self.db, types.SimpleNamespace(
            engine_max_sleep=30.0, plugin_call_timeout=60.0,
            engine_probe_interval=0.05), stats)
        _, baseline = loop.plan(0, 10)
        threading.Timer(0.1, self._lease,
                        kwargs={'start': T0}).start()
        began = time.monotonic()
        self.assertTrue(loop.sleep(10, baseline))
        self.assertLess(time.monotonic() - began, 5)
        self.assertEqual(1, stats['probe_wakeups'])

    def test_sleep_without_a_wake_up_times_out(self):
        loop = self._loop()
        _, baseline = loop.plan(0, 10)
        self.assertFalse(loop.sleep(0.15, baseline))
