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
"""Benchmark of the event engine with no-op resource plugins.

    python benchmarks/engine.py [--events 20000] [--rate 20000] [--lead 1]
        [--late 100] [--scenario sqlite:1] [--scenario mysql:2] ...
        [--engine-option engine_workers=32] ...

For each scenario (backend:number of engine processes; default sqlite:1,
mysql:1, mysql:2, postgresql:1 and postgresql:2, servers only when
reachable) it creates a fresh database, starts that many real
``nova-lease-engine`` processes (default options, the noop plugin, which
records the time each action began; ``--engine-option NAME=VALUE`` sets
an option of theirs, in its group: ``[nova_lease_engine]`` or
``[nova_lease]``) and measures two things:

* **capacity**: once the engines run and sleep, ``--events`` leases whose
  start events fall due at ``--rate`` per second (20,000: more than the
  engines can take; the backlog shows their own pace) are inserted in one
  transaction. capacity_events_per_s = events / (last action began -
  first due time, or the commit if later).
  capacity_events_per_cpu_s divides by the CPU time the engines used
  meanwhile instead (it does not depend on what else runs on the
  machine).
  burst_lag_p50_s and burst_lag_p99_s: per burst event, from when it
  was due (or the commit, if later) to when its action began: with
  ``--rate`` under the capacity and the first event due after the
  insert (``--rate 2000 --events 20000 --lead 20``: ten seconds at 2,000
  events per second), the lag at that offered load.
* **late leases**: once that burst is done and the engines sleep (their
  next event is a day away), ``--late`` leases that start "now" are
  created one by one by this process, through the real writer
  (``db.api.lease_create``, as nova-api records a lease), at random
  intervals of 50 to 500 ms. late lag = action began - lease start.

Per scenario it prints one JSON line; the last line is the summary, each
key the worst over the scenarios run (sums for events, duplicates and
lost)::

    {"events": N, "capacity_events_per_s": ...,
     "capacity_events_per_cpu_s": ..., "burst_lag_p99_s": ...,
     "late_lag_p50_s": ...,
     "late_lag_p99_s": ..., "late_lag_max_s": ..., "duplicates": 0,
     "lost": 0}

Targets: capacity_events_per_s >= 2000 with one engine on each backend,
late_lag_p99_s < 1, burst_lag_p99_s < 1 at ``--rate 2000`` with two
engines on MariaDB and on PostgreSQL, no duplicates, nothing lost.
"""

import argparse
import calendar
import collections
import datetime
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import sqlalchemy as sa

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from nova_lease import conf as lease_conf  # noqa: E402
from nova_lease.db import api as db_api  # noqa: E402
from nova_lease.db import migration  # noqa: E402
from nova_lease.db import models  # noqa: E402
from nova_lease import lease_events  # noqa: E402

ENGINE_BIN = os.path.join(os.path.dirname(sys.executable),
                          'nova-lease-engine')
ENGINE_CMD = (os.environ['NOVA_LEASE_BENCH_ENGINE'].split()
              if os.environ.get('NOVA_LEASE_BENCH_ENGINE') else [ENGINE_BIN])
MYSQL_URL = os.environ.get('NOVA_LEASE_TEST_MYSQL_URL',
                           'mysql+pymysql://root@127.0.0.1:3306/')
POSTGRESQL_URL = os.environ.get(
    'NOVA_LEASE_TEST_POSTGRESQL_URL',
    'postgresql+psycopg2://postgres@127.0.0.1:5432/')
DEFAULT_SCENARIOS = ['sqlite:1', 'mysql:1', 'mysql:2', 'postgresql:1',
                     'postgresql:2']


def _admin(url, database=None):
    return sa.create_engine(sa.engine.make_url(url).set(database=database),
                            isolation_level='AUTOCOMMIT',
                            poolclass=sa.pool.NullPool,
                            connect_args={'connect_timeout': 3})


def _server(backend):
    return ((MYSQL_URL, None) if backend == 'mysql'
            else (POSTGRESQL_URL, 'postgres'))


def create_database(backend, tmp):
    """Return (url, drop callable) of a new empty database."""
    if backend == 'sqlite':
        return 'sqlite:///%s' % os.path.join(tmp, 'bench.sqlite'), None
    name = 'nova_lease_bench_%s' % uuid.uuid4().hex
    server, admin_db = _server(backend)
    engine = _admin(server, admin_db)
    with engine.connect() as conn:
        conn.exec_driver_sql('CREATE DATABASE %s' % name)
    engine.dispose()

    def drop():
        engine = _admin(server, admin_db)
        with engine.connect() as conn:
            conn.exec_driver_sql('DROP DATABASE IF EXISTS %s%s' % (
                name, ' WITH (FORCE)' if backend == 'postgresql' else ''))
        engine.dispose()
    url = sa.engine.make_url(server).set(database=name)
    return url.render_as_string(hide_password=False), drop


def reachable(backend):
    if backend == 'sqlite':
        return True
    server, admin_db = _server(backend)
    try:
        engine = _admin(server, admin_db)
        with engine.connect() as conn:
            conn.exec_driver_sql('SELECT 1')
        engine.dispose()
        return True
    except Exception:
        return False


def populate(url, leases, first_due, rate):
    """Insert the leases, reservations and events (bulk), their starts
    due from first_due on at ``rate`` per second; return {lease id: due
    time}.
    """
    engine = sa.create_engine(url)
    now = datetime.datetime.utcnow()
    result = {}
    lease_rows, reservation_rows, event_rows = [], [], []
    for i in range(leases):
        lease_id = str(uuid.uuid4())
        due = first_due + datetime.timedelta(seconds=i / rate)
        end = due + datetime.timedelta(days=1)
        lease_rows.append({'id': lease_id, 'name': 'bench%d' % i,
                           'project_id': 'bench', 'user_id': 'bench',
                           'start_date': due, 'end_date': end,
                           'status': 'PENDING', 'created_at': now})
        reservation_rows.append({'id': str(uuid.uuid4()),
                                 'lease_id': lease_id,
                                 'resource_type': 'noop',
                                 'resource_id': 'noop%d' % i,
                                 'status': 'pending', 'properties': '{}',
                                 'created_at': now})
        for event_type, at in (('start_lease', due), ('end_lease', end)):
            event_rows.append({'id': str(uuid.uuid4()), 'lease_id': lease_id,
                               'event_type': event_type, 'time': at,
                               'status': 'UNDONE', 'attempts': 0,
                               'created_at': now})
        result[lease_id] = due
    with engine.begin() as conn:
        for table, rows in ((models.LEASES, lease_rows),
                            (models.RESERVATIONS, reservation_rows),
                            (models.EVENTS, event_rows)):
            for chunk in range(0, len(rows), 2000):
                conn.execute(sa.insert(table), rows[chunk:chunk + 2000])
    engine.dispose()
    return result


def create_late_leases(db, count, rng):
    """Create ``count`` leases starting now, one by one, through the real
    writer; return {lease id: start}.
    """
    result = {}
    for i in range(count):
        time.sleep(rng.uniform(0.05, 0.5))
        start = datetime.datetime.utcnow()
        end = start + datetime.timedelta(days=1)
        lease = db_api.lease_create(
            db, {'name': 'late%d' % i, 'project_id': 'bench',
                 'user_id': 'bench', 'start_date': start, 'end_date': end,
                 'status': 'PENDING'},
            reservations=[{'resource_type': 'noop',
                           'resource_id': 'late%d' % i}],
            events=lease_events.lease_events(start, end))
        result[lease['id']] = start
    return result


def count_done(url):
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        value = conn.execute(
            sa.select(sa.func.count()).select_from(models.EVENTS)
            .where(models.EVENTS.c.status == 'DONE')).scalar()
    engine.dispose()
    return value


def _epoch(dt):
    return calendar.timegm(dt.timetuple()) + dt.microsecond / 1e6


def _percentile(values, q):
    values = sorted(values)
    if not values:
        return None
    k = (len(values) - 1) * q
    low = int(k)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (k - low)


def _records(path):
    fired = collections.Counter()
    began = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                action, lease_id, _, at, _ = line.split()
                fired[lease_id] += 1
                began.setdefault(lease_id, float(at))
    return fired, began


def _cpu_seconds(pids):
    """CPU time (user + system) used so far by these processes (Linux),
    or None.
    """
    total = 0
    try:
        for pid in pids:
            with open('/proc/%d/stat' % pid) as f:
                fields = f.read().rsplit(')', 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None
    return total / os.sysconf('SC_CLK_TCK')


def _wait_done(url, count, deadline):
    while count_done(url) < count and time.monotonic() < deadline:
        time.sleep(0.5)


def run_scenario(backend, engines, events, rate, late, timeout, seed,
                 lead=1.0, options=()):
    tmp = tempfile.mkdtemp(prefix='nova_lease_bench_')
    url, drop = create_database(backend, tmp)
    procs = []
    db = None
    try:
        migration.upgrade(url)
        db = db_api.Database(url)
        records = os.path.join(tmp, 'records.txt')
        config = os.path.join(tmp, 'engine.conf')
        groups = {lease_conf.group_of('resource_plugins'):
                  ['resource_plugins = noop\n']}
        for option in options:
            groups.setdefault(lease_conf.group_of(
                option.partition('=')[0].strip()), []).append(
                    '%s\n' % option)
        with open(config, 'w') as f:
            f.write('[DEFAULT]\nlog_file = %s\n'
                    '[nova_lease_database]\nconnection = %s\n'
                    '%s'
                    '[nova_lease_noop]\nrecord_file = %s\n'
                    % (os.path.join(tmp, 'engine.log'), url,
                       ''.join('[%s]\n%s' % (group, ''.join(lines))
                               for group, lines in sorted(groups.items())),
                       records))
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1',
                   PYTHONWARNINGS='ignore')
        for i in range(engines):
            procs.append(subprocess.Popen(
                ENGINE_CMD + ['--config-file', config,
                              '--engine-id', 'bench-%d' % i],
                env=env, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL))
        # The burst falls due once the engines run (registered) and sleep.
        deadline = time.monotonic() + 120
        while len(db_api.process_list(db, binary='nova-lease-engine',
                                      running=True)) < engines:
            if time.monotonic() > deadline:
                raise RuntimeError('the engines did not start')
            time.sleep(0.2)
        time.sleep(1)
        cpu_before = _cpu_seconds([p.pid for p in procs])
        due_at = datetime.datetime.utcnow() + datetime.timedelta(
            seconds=lead)
        due = populate(url, events, due_at, rate)
        committed = time.time()
        # From when they are due and visible (the insert may take longer).
        since = max(_epoch(due_at), committed)
        _wait_done(url, events, time.monotonic() + timeout)
        cpu_after = _cpu_seconds([p.pid for p in procs])
        fired, began = _records(records)
        burst = [began[k] for k in due if k in began]
        # Lag of each burst event, from when it was due and visible.
        burst_lags = [began[k] - max(_epoch(due[k]), committed)
                      for k in due if k in began]
        span = (max(burst) - since) if burst else None
        cpu = (cpu_after - cpu_before
               if None not in (cpu_before, cpu_after) else None)
        # Late leases, while the engines sleep.
        time.sleep(2)
        late_due = create_late_leases(db, late, random.Random(seed))
        _wait_done(url, events + late, time.monotonic() + 60)
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(60)
        fired, began = _records(records)
        lags = [began[k] - _epoch(late_due[k])
                for k in late_due if k in began]
        # Where the lag goes: from the start to the claim (seeing it).
        claimed = {e['lease_id']: e['claimed_at'] for e in db_api.event_list(
            db, statuses='DONE') if e['lease_id'] in late_due and
            e['event_type'] == 'start_lease'}
        claim_lags = [_epoch(claimed[k]) - _epoch(late_due[k])
                      for k in claimed]
        every = dict(due, **late_due)
        return {
            'backend': backend, 'engines': engines,
            'events': len([k for k in every if k in began]),
            'capacity_events_per_s': (round(len(burst) / span, 1)
                                      if span and span > 0 else None),
            'capacity_s': round(span, 3) if span else None,
            # Load-independent: events per CPU second of the engines
            # (this machine may be shared; the wall figure depends on it).
            'capacity_events_per_cpu_s': (round(len(burst) / cpu, 1)
                                          if cpu else None),
            'offered_events_per_s': rate,
            'burst_lag_p50_s': (round(_percentile(burst_lags, 0.5), 4)
                                if burst_lags else None),
            'burst_lag_p99_s': (round(_percentile(burst_lags, 0.99), 4)
                                if burst_lags else None),
            'late_leases': len(lags),
            'late_lag_p50_s': (round(_percentile(lags, 0.5), 4)
                               if lags else None),
            'late_lag_p99_s': (round(_percentile(lags, 0.99), 4)
                               if lags else None),
            'late_lag_max_s': round(max(lags), 4) if lags else None,
            'late_claim_p99_s': (round(_percentile(claim_lags, 0.99), 4)
                                 if claim_lags else None),
            'duplicates': sum(n - 1 for n in fired.values() if n > 1),
            'lost': len([k for k in every if not fired[k]]),
        }
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        if db is not None:
            db.dispose()
        if drop:
            drop()


def _worst(results, key, pick):
    values = [r[key] for r in results if r.get(key) is not None]
    return pick(values) if values else None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--events', type=int, default=20000,
                        help='start events of the capacity burst')
    parser.add_argument('--rate', type=float, default=20000.0,
                        help='events per second falling due in the burst '
                             '(more than the engines can take)')
    parser.add_argument('--lead', type=float, default=1.0,
                        help='seconds from the insert of the burst to its '
                             'first due event (default 1; give the insert '
                             'time or more for --rate under the capacity)')
    parser.add_argument('--late', type=int, default=100,
                        help='leases created one by one afterwards')
    parser.add_argument('--timeout', type=float, default=300.0)
    parser.add_argument('--seed', type=int, default=12)
    parser.add_argument('--scenario', action='append',
                        help='backend:engines, e.g. mysql:2')
    parser.add_argument('--engine-option', action='append', default=[],
                        metavar='NAME=VALUE',
                        help='an option of the engines\' [nova_lease] or '
                             '[nova_lease_engine] section (written in its '
                             'group), e.g. engine_workers=32 (repeatable)')
    args = parser.parse_args(argv)
    results = []
    for scenario in args.scenario or DEFAULT_SCENARIOS:
        backend, _, engines = scenario.partition(':')
        if not reachable(backend):
            print(json.dumps({'backend': backend, 'skipped':
                              'database server unreachable'}))
            continue
        result = run_scenario(backend, int(engines or 1), args.events,
                              args.rate, args.late, args.timeout, args.seed,
                              args.lead, args.engine_option)
        results.append(result)
        print(json.dumps(result), flush=True)
    summary = {
        'events': sum(r['events'] for r in results),
        'capacity_events_per_s': _worst(results, 'capacity_events_per_s',
                                        min),
        'capacity_events_per_cpu_s': _worst(
            results, 'capacity_events_per_cpu_s', min),
        'burst_lag_p99_s': _worst(results, 'burst_lag_p99_s', max),
        'late_lag_p50_s': _worst(results, 'late_lag_p50_s', max),
        'late_lag_p99_s': _worst(results, 'late_lag_p99_s', max),
        'late_lag_max_s': _worst(results, 'late_lag_max_s', max),
        'duplicates': sum(r['duplicates'] for r in results),
        'lost': sum(r['lost'] for r in results),
    }
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == '__main__':
    # No SystemExit on success: tox -e bench runs every benchmark with
    # runpy in one interpreter.
    if main():
        sys.exit(1)
