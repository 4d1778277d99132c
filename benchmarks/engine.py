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

    python benchmarks/engine.py [--leases 10000] [--window 5]
        [--scenario sqlite:1] [--scenario mysql:2] ...

For each scenario (backend:number of engine processes; default sqlite:1,
mysql:1 and mysql:2, MySQL/MariaDB only when reachable) it creates a
fresh database with ``--leases`` leases whose start events fall due
evenly over ``--window`` seconds (their end events are a day later), runs
that many real ``nova-lease-engine`` processes with the noop plugin, which
records the time each action began, and waits until every event is DONE.

Per scenario it prints one JSON line; the last line is the summary over
all scenarios (sum of events, lowest throughput, highest lags, sum of
duplicates and lost events)::

    {"events": N, "events_per_s": ..., "lag_p50_s": ..., "lag_p99_s": ...,
     "duplicates": 0, "lost": 0}

lag = (time the action began) - (event time); events_per_s = events /
(last action began - first event due). Targets: events_per_s >= 1000,
lag_p99_s < 1, no duplicates, nothing lost.
"""

import argparse
import calendar
import collections
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import sqlalchemy as sa

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from nova_lease.db import migration  # noqa: E402
from nova_lease.db import models  # noqa: E402

ENGINE_BIN = os.path.join(os.path.dirname(sys.executable),
                          'nova-lease-engine')
MYSQL_URL = os.environ.get('NOVA_LEASE_TEST_MYSQL_URL',
                           'mysql+pymysql://root@127.0.0.1:3306/')
POSTGRESQL_URL = os.environ.get(
    'NOVA_LEASE_TEST_POSTGRESQL_URL',
    'postgresql+psycopg2://postgres@127.0.0.1:5432/')


def _admin(url, database=None):
    return sa.create_engine(sa.engine.make_url(url).set(database=database),
                            isolation_level='AUTOCOMMIT',
                            poolclass=sa.pool.NullPool,
                            connect_args={'connect_timeout': 3})


def create_database(backend, tmp):
    """Return (url, drop callable) of a new empty database."""
    if backend == 'sqlite':
        return 'sqlite:///%s' % os.path.join(tmp, 'bench.sqlite'), None
    name = 'nova_lease_bench_%s' % uuid.uuid4().hex
    server = MYSQL_URL if backend == 'mysql' else POSTGRESQL_URL
    admin_db = None if backend == 'mysql' else 'postgres'
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
    server = MYSQL_URL if backend == 'mysql' else POSTGRESQL_URL
    try:
        engine = _admin(server, None if backend == 'mysql' else 'postgres')
        with engine.connect() as conn:
            conn.exec_driver_sql('SELECT 1')
        engine.dispose()
        return True
    except Exception:
        return False


def populate(url, leases, first_due, window):
    """Insert the leases, reservations and events; return due times."""
    engine = sa.create_engine(url)
    now = datetime.datetime.utcnow()
    due = {}
    lease_rows, reservation_rows, event_rows = [], [], []
    for i in range(leases):
        lease_id = str(uuid.uuid4())
        start = first_due + datetime.timedelta(
            seconds=window * i / max(leases, 1))
        end = start + datetime.timedelta(days=1)
        lease_rows.append({'id': lease_id, 'name': 'bench%d' % i,
                           'project_id': 'bench', 'user_id': 'bench',
                           'start_date': start, 'end_date': end,
                           'status': 'PENDING', 'created_at': now})
        reservation_rows.append({'id': str(uuid.uuid4()),
                                 'lease_id': lease_id,
                                 'resource_type': 'noop',
                                 'resource_id': 'noop%d' % i,
                                 'status': 'pending', 'properties': '{}',
                                 'created_at': now})
        for event_type, at in (('start_lease', start), ('end_lease', end)):
            event_rows.append({'id': str(uuid.uuid4()), 'lease_id': lease_id,
                               'event_type': event_type, 'time': at,
                               'status': 'UNDONE', 'attempts': 0,
                               'created_at': now})
        due[lease_id] = start
    with engine.begin() as conn:
        for table, rows in ((models.LEASES, lease_rows),
                            (models.RESERVATIONS, reservation_rows),
                            (models.EVENTS, event_rows)):
            for chunk in range(0, len(rows), 2000):
                conn.execute(sa.insert(table), rows[chunk:chunk + 2000])
    engine.dispose()
    return due


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


def run_scenario(backend, engines, leases, window, timeout):
    tmp = tempfile.mkdtemp(prefix='nova_lease_bench_')
    url, drop = create_database(backend, tmp)
    procs = []
    try:
        migration.upgrade(url)
        records = os.path.join(tmp, 'records.txt')
        config = os.path.join(tmp, 'engine.conf')
        with open(config, 'w') as f:
            f.write('[DEFAULT]\nlog_file = %s\n'
                    '[nova_lease]\nconnection = %s\n'
                    'resource_plugins = noop\n'
                    '[nova_lease_noop]\nrecord_file = %s\n'
                    % (os.path.join(tmp, 'engine.log'), url, records))
        # Due after the engines have started.
        first_due = (datetime.datetime.utcnow() +
                     datetime.timedelta(seconds=6))
        due = populate(url, leases, first_due, window)
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1',
                   PYTHONWARNINGS='ignore')
        for i in range(engines):
            procs.append(subprocess.Popen(
                [ENGINE_BIN, '--config-file', config,
                 '--engine-id', 'bench-%d' % i],
                env=env, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + timeout + 6 + window
        while count_done(url) < leases and time.monotonic() < deadline:
            time.sleep(0.5)
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(60)
        fired = collections.Counter()
        began = {}
        with open(records) as f:
            for line in f:
                action, lease_id, _, at, _ = line.split()
                fired[lease_id] += 1
                began.setdefault(lease_id, float(at))
        lags = [began[k] - _epoch(due[k]) for k in began if k in due]
        span = max(began.values()) - _epoch(min(due.values()))
        return {
            'backend': backend, 'engines': engines,
            'events': len(began),
            'events_per_s': round(len(began) / span, 1) if span > 0
            else None,
            'lag_p50_s': round(_percentile(lags, 0.5), 4),
            'lag_p99_s': round(_percentile(lags, 0.99), 4),
            'lag_max_s': round(max(lags), 4),
            'duplicates': sum(n - 1 for n in fired.values() if n > 1),
            'lost': leases - len([k for k in due if fired[k]]),
        }
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        if drop:
            drop()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--leases', type=int, default=10000)
    parser.add_argument('--window', type=float, default=5.0,
                        help='seconds over which the events fall due')
    parser.add_argument('--timeout', type=float, default=300.0)
    parser.add_argument('--scenario', action='append',
                        help='backend:engines, e.g. mysql:2')
    args = parser.parse_args(argv)
    scenarios = args.scenario or ['sqlite:1', 'mysql:1', 'mysql:2']
    results = []
    for scenario in scenarios:
        backend, _, engines = scenario.partition(':')
        if not reachable(backend):
            print(json.dumps({'backend': backend, 'skipped':
                              'database server unreachable'}))
            continue
        result = run_scenario(backend, int(engines or 1), args.leases,
                              args.window, args.timeout)
        results.append(result)
        print(json.dumps(result), flush=True)
    summary = {
        'events': sum(r['events'] for r in results),
        'events_per_s': min((r['events_per_s'] or 0) for r in results),
        'lag_p50_s': max(r['lag_p50_s'] for r in results),
        'lag_p99_s': max(r['lag_p99_s'] for r in results),
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
