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
"""Real nova-lease-engine processes: exactly-once, crashes, signals.

The engines are the installed console script, run with a config file,
the noop resource plugin recording every call (action, lease, pid) in a
shared file with O_APPEND writes. Times are real (processes cannot share
the test's clock override).
"""

import calendar
import collections
import os
import signal
import time

import fixtures
from oslotest import base as oslotest_base

from nova_lease.db import api as db_api
from nova_lease.db import migration
from tests.functional.db import fixtures as db_fixtures
from tests.functional import test_engine_helpers as helpers


class _ProcessTestBase(oslotest_base.BaseTestCase):
    BACKEND = None

    def setUp(self):
        super().setUp()
        backend = db_fixtures.BACKENDS[self.BACKEND]
        db_fixtures.require(self, backend)
        self.url = self.useFixture(db_fixtures.EmptyDatabase(backend)).url
        migration.upgrade(self.url)
        self.db = db_api.Database(self.url)
        self.addCleanup(self.db.dispose)
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.records = os.path.join(self.tmp, 'records.txt')

    def _config(self, name='engine.conf', noop=None, **options):
        nova_lease = {'connection': self.url, 'resource_plugins': 'noop',
                      'engine_max_sleep': 0.5, 'retry_interval': 1}
        nova_lease.update(options)
        noop_opts = {'record_file': self.records}
        noop_opts.update(noop or {})
        return helpers.write_config(
            os.path.join(self.tmp, name), nova_lease=nova_lease,
            noop=noop_opts, default={'debug': 'false'})

    def _engine(self, config, engine_id):
        return self.useFixture(helpers.EngineProcess(self, config, engine_id,
                                                     self.tmp))


class _TwoEngines(object):
    """Two engines fire each of 1,000 due events exactly once."""

    LEASES = 1000

    def test_two_engines_fire_each_event_once(self):
        now = helpers.utcnow()
        # Due over the next 3 s: the engines sleep until each is due.
        starts = [now + helpers.seconds((i % 30) / 10.0)
                  for i in range(self.LEASES)]
        ids = helpers.create_noop_leases(self.db, starts,
                                         helpers.seconds(3600))
        config = self._config(engine_batch_size=50, engine_workers=4,
                              noop={'delay': 0.002})
        engines = [self._engine(config, 'engine-a'),
                   self._engine(config, 'engine-b')]
        helpers.wait_for(
            lambda: helpers.count_events(self.db, 'DONE') >= self.LEASES,
            timeout=180, interval=0.5, message='1000 events DONE')
        for engine in engines:
            self.assertEqual(0, engine.stop())
        records = helpers.read_records(self.records)
        fired = collections.Counter((r.action, r.lease_id) for r in records)
        self.assertEqual(self.LEASES, len(fired))
        self.assertEqual({('on_start', i) for i in ids}, set(fired))
        duplicates = {k: n for k, n in fired.items() if n != 1}
        self.assertEqual({}, duplicates)
        # Both engines did part of the work.
        by_pid = collections.Counter(r.pid for r in records)
        self.assertEqual({e.pid for e in engines}, set(by_pid))
        events = db_api.event_list(self.db, statuses='DONE')
        self.assertEqual({'engine-a', 'engine-b'},
                         {e['claimed_by'] for e in events})
        self.assertEqual({1}, {e['attempts'] for e in events})
        statuses = collections.Counter(
            lease['status'] for lease in db_api.lease_list(self.db))
        self.assertEqual({'ACTIVE': self.LEASES}, dict(statuses))
        # Nothing left: no end was run before its time.
        self.assertEqual(self.LEASES, helpers.count_events(
            self.db, 'UNDONE', 'end_lease'))


class TwoEnginesMySQLTest(_TwoEngines, _ProcessTestBase):
    BACKEND = 'mysql'


class TwoEnginesPostgreSQLTest(_TwoEngines, _ProcessTestBase):
    BACKEND = 'postgresql'


class _LateLeases(object):
    """Leases created by another process while the engine sleeps (as
    nova-api creates them) start on time, not at the engine's next look.
    """

    def test_leases_created_while_the_engine_sleeps_start_on_time(self):
        # The engine has nothing due for a long time: it sleeps its
        # longest (engine_max_sleep).
        helpers.create_noop_leases(self.db, [helpers.utcnow() +
                                             helpers.seconds(3600)],
                                   helpers.seconds(60), prefix='far')
        config = self._config(engine_max_sleep=30)
        engine = self._engine(config, 'engine-sleeper')
        helpers.wait_for(lambda: 'started' in engine.log(), timeout=60,
                         message='the engine to start')
        time.sleep(1)
        due = {}
        for i in range(5):
            time.sleep(0.3 + 0.2 * i)
            start = helpers.utcnow()
            lease_id, = helpers.create_noop_leases(
                self.db, [start], helpers.seconds(3600), prefix='late%d' % i)
            due[lease_id] = calendar.timegm(start.timetuple()) + (
                start.microsecond / 1e6)
        helpers.wait_for(
            lambda: len(helpers.read_records(self.records)) >= len(due),
            timeout=90, message='every late lease to start')
        self.assertEqual(0, engine.stop())
        lags = {r.lease_id: r.began - due[r.lease_id]
                for r in helpers.read_records(self.records)}
        self.assertEqual(set(due), set(lags))
        # The target is a p99 under 1 s (benchmarks/engine.py); here 5
        # leases each within 1.5 s (the engine sleeps 30 s between looks).
        slow = {k: round(v, 3) for k, v in lags.items() if v > 1.5}
        self.assertEqual({}, slow)


class LateLeasesSQLiteTest(_LateLeases, _ProcessTestBase):
    BACKEND = 'sqlite'


class LateLeasesMySQLTest(_LateLeases, _ProcessTestBase):
    BACKEND = 'mysql'


class LateLeasesPostgreSQLTest(_LateLeases, _ProcessTestBase):
    BACKEND = 'postgresql'


class _Crash(object):

    def test_sigkill_mid_event_is_recovered(self):
        # With the default claim time-out (longer than any plugin call):
        # the killed engine's heartbeat stops, and its claims are released
        # a few seconds later.
        block = os.path.join(self.tmp, 'block')
        open(block, 'w').close()
        now = helpers.utcnow()
        lease_id, = helpers.create_noop_leases(
            self.db, [now - helpers.seconds(1)], helpers.seconds(20))
        config = self._config(engine_heartbeat_interval=0.5,
                              engine_heartbeat_timeout=3,
                              noop={'block_file': block})
        first = self._engine(config, 'engine-killed')
        # The start is claimed and the plugin is blocked in it.
        helpers.wait_for(lambda: helpers.read_records(self.records),
                         timeout=60, message='the start to begin')
        event = [e for e in db_api.event_list(self.db, lease_id=lease_id)
                 if e['event_type'] == 'start_lease'][0]
        self.assertEqual(('IN_PROGRESS', 'engine-killed'),
                         (event['status'], event['claimed_by']))
        self.assertEqual('STARTING',
                         db_api.lease_get(self.db, lease_id)['status'])
        first.kill()
        os.unlink(block)
        second = self._engine(config, 'engine-second')
        helpers.wait_for(
            lambda: db_api.lease_get(self.db, lease_id)['status'] ==
            'ACTIVE', timeout=30, message='the lease to start')
        helpers.wait_for(
            lambda: db_api.lease_get(self.db, lease_id)['status'] ==
            'TERMINATED', timeout=60, message='the lease to end')
        lease = db_api.lease_get(self.db, lease_id)
        self.assertEqual(0, second.stop())
        start, end = lease['events']
        self.assertEqual(('start_lease', 'DONE', 'engine-second', 2),
                         (start['event_type'], start['status'],
                          start['claimed_by'], start['attempts']))
        self.assertEqual(('end_lease', 'DONE', 'engine-second', 1),
                         (end['event_type'], end['status'],
                          end['claimed_by'], end['attempts']))
        records = helpers.read_records(self.records)
        self.assertEqual(
            [('on_start', first.pid), ('on_start', second.pid),
             ('on_end', second.pid)],
            [(r.action, r.pid) for r in records])
        # The end ran at its time, not before.
        end_date = lease['end_date']
        self.assertGreaterEqual(
            records[-1].began,
            calendar.timegm(end_date.timetuple())
            + end_date.microsecond / 1e6)
        self.assertIn('Released 1 claim(s) of engine engine-killed',
                      second.log())

    def test_sigkill_claims_taken_over_by_a_running_engine(self):
        block = os.path.join(self.tmp, 'block')
        open(block, 'w').close()
        now = helpers.utcnow()
        lease_id, = helpers.create_noop_leases(
            self.db, [now - helpers.seconds(1)], helpers.seconds(3600))
        config = self._config(engine_heartbeat_interval=0.5,
                              engine_heartbeat_timeout=3,
                              noop={'block_file': block})
        first = self._engine(config, 'engine-killed')
        helpers.wait_for(lambda: helpers.read_records(self.records),
                         timeout=60, message='the start to begin')
        second = self._engine(config, 'engine-running')
        helpers.wait_for(lambda: 'started' in second.log(), timeout=60,
                         message='the second engine to start')
        first.kill()
        killed = time.monotonic()
        os.unlink(block)
        helpers.wait_for(
            lambda: db_api.lease_get(self.db, lease_id)['status'] ==
            'ACTIVE', timeout=30, message='the lease to start')
        # engine_heartbeat_timeout (3 s), not engine_claim_timeout.
        self.assertLess(time.monotonic() - killed, 15)
        self.assertEqual(0, second.stop())
        start = [e for e in db_api.event_list(self.db, lease_id=lease_id)
                 if e['event_type'] == 'start_lease'][0]
        self.assertEqual(('DONE', 'engine-running', 2),
                         (start['status'], start['claimed_by'],
                          start['attempts']))
        self.assertIn('Released 1 claim(s) of engine engine-killed',
                      second.log())

    def test_sigterm_releases_claims(self):
        block = os.path.join(self.tmp, 'block')
        open(block, 'w').close()
        now = helpers.utcnow()
        lease_id, = helpers.create_noop_leases(
            self.db, [now - helpers.seconds(1)], helpers.seconds(3600))
        config = self._config(engine_claim_timeout=3600,
                              engine_shutdown_timeout=1,
                              noop={'block_file': block})
        first = self._engine(config, 'engine-stopped')
        helpers.wait_for(lambda: helpers.read_records(self.records),
                         timeout=60, message='the start to begin')
        self.assertEqual(0, first.stop())
        event = [e for e in db_api.event_list(self.db, lease_id=lease_id)
                 if e['event_type'] == 'start_lease'][0]
        self.assertEqual(('UNDONE', None, 0),
                         (event['status'], event['claimed_by'],
                          event['attempts']))
        self.assertIn('engine-stopped stopped', event['last_error'])
        self.assertIn('Released 1 unfinished claims', first.log())
        # Another engine takes it at once (no claim time-out to wait).
        os.unlink(block)
        second = self._engine(config, 'engine-next')
        helpers.wait_for(
            lambda: db_api.lease_get(self.db, lease_id)['status'] ==
            'ACTIVE', timeout=30, message='the lease to start')
        self.assertEqual(0, second.stop())

    def test_sigint_with_nothing_running(self):
        config = self._config()
        engine = self._engine(config, 'engine-idle')
        helpers.wait_for(lambda: 'started' in engine.log(), timeout=60,
                         message='the engine to start')
        engine.signal(signal.SIGINT)
        self.assertEqual(0, engine.proc.wait(30))
        self.assertIn('Lease engine engine-idle stopped', engine.log())


class SignalsTest(_ProcessTestBase):
    """SIGHUP and the option values at start (one backend: neither
    depends on the database).
    """
    BACKEND = 'sqlite'

    def test_sighup_applies_the_mutable_options(self):
        config = self._config(engine_max_sleep=0.5)
        engine = self._engine(config, 'engine-hup')
        helpers.wait_for(lambda: 'started' in engine.log(), timeout=60,
                         message='the engine to start')
        # The option values at start (secrets masked).
        self.assertIn('nova_lease_engine.engine_max_sleep', engine.log())
        self._config(engine_max_sleep=7, engine_workers=3)
        engine.signal(signal.SIGHUP)
        helpers.wait_for(
            lambda: 'Option nova_lease_engine.engine_max_sleep changed from '
            '[0.5] to [7]' in engine.log(), timeout=30,
            message='the option to change')
        # An immutable option is not changed (a warning says so).
        self.assertIn('Ignoring change to immutable option '
                      'nova_lease_engine.engine_workers', engine.log())
        self.assertEqual(0, engine.stop())


class CrashSQLiteTest(_Crash, _ProcessTestBase):
    BACKEND = 'sqlite'


class CrashMySQLTest(_Crash, _ProcessTestBase):
    BACKEND = 'mysql'


class CrashPostgreSQLTest(_Crash, _ProcessTestBase):
    BACKEND = 'postgresql'
