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
"""Benchmark of host allocation (nova_lease.plugins.host.allocation).

Fills a side database with 1,000 reservable hosts (each with extra
capabilities) and 10,000 whole-host allocations (10 per host, spread over
a year with gaps), then times the allocation of one host lease: the whole
writer transaction that lists the candidate hosts, reads the overlapping
allocations, matches the request (availability zone, an unscoped and a
scoped extra spec, a minimum vcpus), locks and re-checks the chosen host,
and records the lease, its reservation, allocation and events. Each
measured lease is deleted afterwards (untimed), so every measurement sees
10,000 allocations.

Two cases: warm (``median_ms``, ``p99_ms``: the process's copy of the host
registry is current) and cold (``cold_median_ms``, ``cold_p99_ms``: each
allocation right after one host's capabilities were changed, untimed, as
an operator's ``os-hosts`` update or another process would: the copy is
stale and is brought up to date first).

Databases: ``sqlite`` (a file in a temporary directory) and ``mysql``
(MariaDB/MySQL at $NOVA_LEASE_TEST_MYSQL_URL, default
mysql+pymysql://root@127.0.0.1:3306/; a database is created and dropped).
One JSON line per database is printed, the SQLite one last::

    python benchmarks/allocation.py [--dbs mysql,sqlite] [--repeat 300]
                                    [--cold-repeat 100]
"""

import argparse
import datetime
import gc
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

from oslo_config import cfg
from oslo_utils import uuidutils
import sqlalchemy as sa

from nova_lease import conf as lease_conf
from nova_lease.db import api as db_api
from nova_lease.db import migration
from nova_lease.db import models
from nova_lease import lease_events
from nova_lease.plugins.host import allocation as host_allocation
from nova_lease.plugins.host import request as host_request
from nova_lease.plugins.host import rtype as host_rtype

CONF = cfg.ConfigOpts()
lease_conf.register_opts(CONF)
CONF([], project="nova")

START = datetime.datetime(2030, 1, 1)
HORIZON_DAYS = 365
MYSQL_ENV = 'NOVA_LEASE_TEST_MYSQL_URL'
MYSQL_DEFAULT = 'mysql+pymysql://root@127.0.0.1:3306/'


def _hosts(db, n_hosts, rng):
    rows = []
    for k in range(n_hosts):
        rows.append({
            'hypervisor_hostname': 'compute-%04d' % k,
            'service_host': 'compute-%04d' % k,
            'availability_zone': 'nova' if k % 4 else 'az2',
            'vcpus': rng.choice([32, 64, 96, 128]),
            'memory_mb': rng.choice([262144, 524288]),
            'local_gb': rng.choice([2000, 4000]),
            'cpu_info': json.dumps({'arch': rng.choice(
                ['x86_64', 'x86_64', 'x86_64', 'aarch64'])}),
            'hypervisor_type': 'QEMU',
            'capabilities': {'ssd': rng.choice(['true', 'false']),
                             'gpu': rng.choice(['true', 'false', 'false']),
                             'rack': 'r%02d' % (k // 40)},
        })
    for row in rows:
        db_api.host_create(db, row)
    return rows


def _allocations(db, host_rows, n_allocations, rng):
    """n_allocations whole-host allocations, none overlapping per host."""
    per_host = max(1, n_allocations // len(host_rows))
    slot = datetime.timedelta(days=HORIZON_DAYS) / per_host
    reservations = []
    count = 0
    for host in host_rows:
        # Each host's schedule has its own phase, so that hosts are not
        # all busy at the same instants.
        phase = slot * rng.random()
        for i in range(per_host):
            if count == n_allocations:
                break
            slot_start = START + phase + slot * i
            begin = slot_start + datetime.timedelta(hours=rng.randint(0, 48))
            length = datetime.timedelta(hours=rng.randint(12, 24 * 20))
            end = min(begin + length, slot_start + slot)
            reservations.append({
                'resource_type': host_allocation.RESOURCE_TYPE,
                'status': 'pending',
                'properties': {'min': 1, 'max': 1},
                'allocations': [{
                    'host': host['hypervisor_hostname'], 'start_date': begin,
                    'end_date': end, 'vcpus': host['vcpus'],
                    'memory_mb': host['memory_mb'],
                    'disk_gb': host['local_gb'], 'whole_host': True}]})
            count += 1
    # Many reservations per lease keeps the fill fast; what is measured
    # only depends on the allocations.
    for i in range(0, len(reservations), 500):
        db_api.lease_create(db, {
            'name': 'fill-%d' % i, 'project_id': 'bench', 'user_id': 'bench',
            'start_date': START,
            'end_date': START + datetime.timedelta(days=HORIZON_DAYS),
            'status': 'PENDING'}, reservations[i:i + 500])
    return count


def _request():
    return host_request.HostRequest(
        min=1, max=1, availability_zone='nova', vcpus=64,
        extra_specs={'ssd': 'true', 'capabilities:cpu_info:arch': 'x86_64'})


def _lease_values(i, rng):
    begin = START + datetime.timedelta(
        hours=rng.randint(0, 24 * (HORIZON_DAYS - 10)))
    end = begin + datetime.timedelta(hours=rng.randint(1, 24 * 7))
    return ({'name': 'bench-%d' % i, 'project_id': 'p', 'user_id': 'u',
             'start_date': begin, 'end_date': end, 'status': 'PENDING',
             'id': uuidutils.generate_uuid()},
            lease_events.lease_events(begin, end))


def _timed(call):
    """(milliseconds, result) of ``call()``, a garbage collection before
    it and none during it (as timeit does).
    """
    gc.collect()
    gc.disable()
    t0 = time.perf_counter()
    try:
        result = call()
    finally:
        elapsed = (time.perf_counter() - t0) * 1000.0
        gc.enable()
    return elapsed, result


def _allocate(db, i, rng, lease=None):
    """One timed allocation (deleted afterwards, untimed): (ms, refused).

    ``lease``: ``(values, events)`` as ``_lease_values`` makes them (drawn
    here from ``rng`` by default).
    """
    values, events = lease or _lease_values(i, rng)

    def allocate():
        try:
            host_rtype.create_host_lease(
                db, CONF, values, [('reservations[0]', _request())],
                events, 15)
        except host_allocation.NotEnoughHosts:
            return True
        return False
    elapsed, refused = _timed(allocate)
    try:
        db_api.lease_destroy(db, values['id'])
    except db_api.LeaseNotFound:
        pass
    return elapsed, refused


def _cold(db, host_rows, repeat, rng):
    """Allocations each right after a host changed (untimed): the host
    registry cached by the process is stale, as it is for the first
    allocation after an operator's os-hosts update in any process.
    """
    hosts = db_api.host_list(db)
    times = []
    for i in range(repeat):
        host = hosts[rng.randrange(len(hosts))]
        db_api.host_update(db, host['id'], {'capabilities': {
            'rack': 'r%02d' % rng.randrange(100)}})
        elapsed, _refused = _allocate(db, 100000 + i, rng)
        times.append(elapsed)
    return sorted(times)


def _p99(times):
    return times[min(len(times) - 1, int(round(0.99 * len(times))) - 1)]


def run(url, name, n_hosts, n_allocations, repeat, seed, cold_repeat=100):
    rng = random.Random(seed)
    migration.create_schema(url)
    db = db_api.Database(url)
    try:
        host_rows = _hosts(db, n_hosts, rng)
        count = _allocations(db, host_rows, n_allocations, rng)
        times = []
        refused = 0
        for i in range(repeat + 10):
            elapsed, was_refused = _allocate(db, i, rng)
            refused += was_refused
            if i >= 10:                     # warm-up
                times.append(elapsed)
        cold = _cold(db, host_rows, cold_repeat, rng)
        assert len(db_api.allocation_list(db)) == count
        # Context: the cost of the smallest write transaction on this
        # database and machine (one UPDATE, then the commit).
        base = []
        for i in range(len(times)):
            gc.disable()
            t0 = time.perf_counter()
            with db.writer() as session:
                session.execute(sa.update(models.HOSTS).where(
                    models.HOSTS.c.id == 1).values(reservable=True))
            base.append((time.perf_counter() - t0) * 1000.0)
            gc.enable()
        base.sort()
        times.sort()
        return {'hosts': n_hosts, 'allocations': count, 'db': name,
                'median_ms': round(statistics.median(times), 2),
                'p99_ms': round(_p99(times), 2), 'runs': len(times),
                'cold_median_ms': round(statistics.median(cold), 2),
                'cold_p99_ms': round(_p99(cold), 2),
                'cold_runs': len(cold),
                'p90_ms': round(times[int(0.9 * len(times)) - 1], 2),
                'max_ms': round(times[-1], 2),
                'commit_median_ms': round(statistics.median(base), 2),
                'commit_p99_ms': round(base[min(len(base) - 1, int(round(
                    0.99 * len(base))) - 1)], 2),
                'refused': refused}
    finally:
        db.dispose()


def _mysql_database():
    server = sa.engine.make_url(os.environ.get(MYSQL_ENV) or MYSQL_DEFAULT)
    name = 'nl_bench_%s' % uuidutils.generate_uuid(dashed=False)[:12]
    admin = sa.create_engine(server, isolation_level='AUTOCOMMIT')
    with admin.connect() as conn:
        conn.exec_driver_sql('CREATE DATABASE %s CHARACTER SET utf8mb4'
                             % name)
    url = server.set(database=name).render_as_string(hide_password=False)

    def drop():
        with admin.connect() as conn:
            conn.exec_driver_sql('DROP DATABASE IF EXISTS %s' % name)
        admin.dispose()
    return url, drop


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=1000)
    parser.add_argument('--allocations', type=int, default=10000)
    parser.add_argument('--repeat', type=int, default=300)
    parser.add_argument('--dbs', default='mysql,sqlite',
                        help='comma-separated: mysql, sqlite (run in this '
                             'order; put sqlite last)')
    parser.add_argument('--cold-repeat', type=int, default=100,
                        help='allocations timed right after a host '
                             'changed (default: 100)')
    parser.add_argument('--seed', type=int, default=20300101)
    args = parser.parse_args(argv)
    lines = []
    for name in args.dbs.split(','):
        if name == 'sqlite':
            tmp = tempfile.mkdtemp(prefix='nl_bench_')
            url = 'sqlite:///%s' % os.path.join(tmp, 'bench.sqlite')

            def drop(tmp=tmp):
                shutil.rmtree(tmp, ignore_errors=True)
        elif name == 'mysql':
            url, drop = _mysql_database()
        else:
            parser.error('unknown database %s' % name)
        try:
            result = run(url, name, args.hosts, args.allocations,
                         args.repeat, args.seed, args.cold_repeat)
        finally:
            drop()
        print('%(db)s: %(hosts)d hosts, %(allocations)d allocations: '
              'median %(median_ms).2f ms, p90 %(p90_ms).2f ms, p99 '
              '%(p99_ms).2f ms, max %(max_ms).2f ms '
              '(%(runs)d runs, %(refused)d refused); cold (a host '
              'changed just before): median %(cold_median_ms).2f ms, p99 '
              '%(cold_p99_ms).2f ms (%(cold_runs)d runs); an empty write '
              'transaction: median %(commit_median_ms).2f ms, p99 '
              '%(commit_p99_ms).2f ms' % result,
              file=sys.stderr)
        lines.append(result)
    for result in lines:
        print(json.dumps({k: result[k] for k in (
            'hosts', 'allocations', 'db', 'median_ms', 'p99_ms',
            'cold_median_ms', 'cold_p99_ms')}))


if __name__ == '__main__':
    main()
