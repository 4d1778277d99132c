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
"""Benchmark: admission of a future instance lease, by reservation count.

Each measured admission goes through the real path that a leased boot
with a future start takes in nova-api: ``create_instance_lease``
-> ``admission.allocate_instances`` (inside the side database's writer
transaction) -> the lease, its reservation, events and allocation
recorded in the side database, committed. Timed with
``time.perf_counter`` around that call; each measured lease is deleted
afterwards (untimed), so every admission of a size sees the same
promises.

What is real and what is synthetic:

* real: nova_lease's code; the side database (an SQLite file, or a
  MariaDB/MySQL database at $NOVA_LEASE_TEST_MYSQL_URL, default
  mysql+pymysql://root@127.0.0.1:3306/, created and dropped), migrated by
  alembic; Nova 34's API and cell databases (the functional harness's
  in-memory SQLite) read by admission through Nova's objects
  (ComputeNodeList, AggregateList, InstanceList), and Placement (the
  harness's in-process placement app) read by admission through Nova's
  placement client, as in nova-api;
* synthetic: the 1,000 compute nodes are ComputeNode records written
  with Nova's objects, and their resource providers and inventories are
  written through the placement API (what a nova-compute service would
  report), but no nova-compute service runs; the reservations are rows
  written in bulk into the side database (a lease, a virtual:instance
  reservation and its allocation each; no events), not admitted one by
  one; no leased server runs.

The hosts have 8 vCPUs, 32 GB of RAM and 500 GB of disk. Reservations
take 2 vCPUs, 4 GB and 20 GB for 1, 2, 4 or 8 hours, in three lanes per
host (so a host never holds more than 6 vCPUs of them). They come in
blocks of 10 per host (10,000 reservations with 1,000 hosts) over two
days: the first block is around
the window that every measured admission asks for (somewhere within a
day of W, 102 days from now), the others fill the days before it (back
to now) and after it, alternately. So 10,000, 100,000 and 1,000,000
reservations have the same promises near the window, and more and more
elsewhere in time: the cost should not grow with them. Each measured
admission asks for one 2-vCPU server for 1 to 8 hours starting within
20 hours of W; it always fits (2 vCPUs of each host are never promised).

For comparison, ``old_read_ms`` is the time of one call of what
admission read twice before (``snapshot_reads.read`` of every live
reservation and the window's allocations), for sizes up to
``--old-read-max``.

Between sizes the process's objects are frozen (``gc.freeze``): the
harness (Nova's services, placement, the fill) is a far bigger heap than a
nova-api's, and the collector's full passes over it would otherwise land
in timed calls. ``cpu_*`` are the same figures in CPU time of the calling
thread (``time.thread_time``; on SQLite and with the in-process placement
that includes the database and placement work), ``phases_median_ms``
the medians of the time spent reading Nova's databases (``nova_db``),
placement (``placement``), the windowed reads of the side database
(``side_db_window_reads``) and the ``rest`` (planning, locks, writing the
lease), and ``slowest`` the three slowest admissions by phase: on a
shared machine the wall-time tail is mostly waiting for a CPU. In
``slowest``, ``gc<N>_cpu`` is the CPU time of the cyclic garbage
collector's passes of generation N in the measuring thread during that
admission (wherever they landed, phases included: not subtracted from
``rest``); absent when none ran. ``slowest_cpu``: the same for the
three admissions that took the most CPU time (the tail that is the
product's own, whatever the machine's load).

The last line printed is one JSON object: ``hosts``, ``reservations``,
``median_ms``, ``p99_ms`` of the largest size, and ``sizes``: the same
for each size (plus ``max_ms``, ``first_ms``: the first admission, which
reads the compute nodes; ``old_read_ms``), ``backend``, ``admissions``,
``target_p99_ms`` (100) and ``p99_ok``::

    python benchmarks/admission.py [--db sqlite|mysql] \\
        [--sizes 10000,100000,1000000] [--hosts 1000] [--admissions 300]
"""

import argparse
import datetime
import gc
import json
import os
import random
import statistics
import sys
import threading
import time
import unittest

os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')
sys.path.insert(0, os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

import nova.tests.functional  # noqa: E402,F401  (first, as in the tests)

import fixtures  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova import objects  # noqa: E402
from oslo_serialization import jsonutils  # noqa: E402
from oslo_utils import uuidutils  # noqa: E402

from nova_lease.capacity import admission  # noqa: E402
# Imported before Nova's fixtures forbid os.uname() (numpy calls it).
from nova_lease.capacity import inventory  # noqa: E402
from nova_lease.db import api as db_api  # noqa: E402
from nova_lease.db import migration  # noqa: E402
from nova_lease import params as lease_params  # noqa: E402
from nova_lease.plugins.instance import rtype as instance_rtype  # noqa: E402,E501
from nova_lease.scheduler import filters  # noqa: E402,F401
from nova_lease.scheduler import snapshot_reads  # noqa: E402
from tests.functional import base  # noqa: E402
from tests.functional.db import fixtures as db_fixtures  # noqa: E402

OPTIONS = argparse.Namespace(db='sqlite', sizes=[10000, 100000, 1000000],
                             hosts=1000, admissions=300, seed=42,
                             old_read_max=100000, profile=False)
RESULT = {}

PER_HOST = 10                      # reservations per host in a block
LANES = 3
HOST = {'vcpus': 8, 'memory_mb': 32768, 'disk_gb': 500}
FLAVOR = {'vcpus': 2, 'memory_mb': 4096, 'disk_gb': 20}
HOUR = datetime.timedelta(hours=1)
DAY = datetime.timedelta(days=1)
TARGET_P99_MS = 100.0


class _Phases(object):
    """Wall time spent in named functions, per admission."""

    TIMED = (
        ('nova_db', inventory.NovaInventory, 'compute_hosts'),
        ('nova_db', inventory.NovaInventory, 'freepool_members'),
        ('nova_db', inventory.NovaInventory, 'leased_servers'),
        ('placement', inventory.NovaInventory, 'placement_usage'),
        ('side_db_window_reads', db_api, 'window_allocation_items'),
    )

    def __init__(self, test):
        self.current = {}
        self.cpu = {}
        for name, owner, attr in self.TIMED:
            test.useFixture(fixtures.MockPatchObject(
                owner, attr, new=self._timed(name, getattr(owner, attr))))
        # The cyclic garbage collector's passes in the measuring thread
        # (wherever they land: inside a phase or in the rest), reported
        # beside the phases, not subtracted from the rest.
        self._thread = threading.get_ident()
        self._gc_start = None
        gc.callbacks.append(self._gc)
        test.addCleanup(gc.callbacks.remove, self._gc)

    def _gc(self, phase, info):
        if threading.get_ident() != self._thread:
            return
        if phase == 'start':
            self._gc_start = time.thread_time()
        elif self._gc_start is not None:
            key = 'gc%d_cpu' % info['generation']
            self.cpu[key] = self.cpu.get(key, 0.0) + (
                time.thread_time() - self._gc_start)
            self._gc_start = None

    def _timed(self, name, func):
        def timed(*args, **kwargs):
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                return func(*args, **kwargs)
            finally:
                self.current[name] = self.current.get(name, 0.0) + (
                    time.perf_counter() - t0)
                key = name + '_cpu'
                self.cpu[key] = self.cpu.get(key, 0.0) + (
                    time.thread_time() - c0)
        return timed

    def take(self):
        current, self.current = self.current, {}
        cpu, self.cpu = self.cpu, {}
        return current, cpu


def _ms(seconds):
    return round(seconds * 1000, 2)


def _p99(values):
    values = sorted(values)
    return values[max(0, int(len(values) * 0.99 + 0.5) - 1)]


class _BulkWriter(object):
    """Rows into the side database on its DBAPI cursor (fast)."""

    def __init__(self, db):
        self.db = db

    def insert(self, rows_by_table):
        with self.db.connection() as conn:
            sqlite = conn.dialect.name == 'sqlite'
            mark = '?' if sqlite else '%s'
            cursor = conn.connection.dbapi_connection.cursor()
            try:
                for table, columns, rows in rows_by_table:
                    if sqlite:
                        rows = [tuple(v.strftime('%Y-%m-%d %H:%M:%S.%f')
                                      if isinstance(v, datetime.datetime)
                                      else v for v in row) for row in rows]
                    sql = 'INSERT INTO %s (%s) VALUES (%s)' % (
                        table, ', '.join(columns),
                        ', '.join([mark] * len(columns)))
                    for i in range(0, len(rows), 5000):
                        cursor.executemany(sql, rows[i:i + 5000])
            finally:
                cursor.close()


def _block(rng, now, first_day, index, hosts):
    """One block: PER_HOST reservations per host over two days from
    first_day.
    """
    leases_, reservations, allocations = [], [], []
    properties = jsonutils.dumps(dict(FLAVOR, index=0))
    n = 0
    for host in hosts:
        count = PER_HOST
        lanes = [first_day + datetime.timedelta(minutes=rng.randrange(120))
                 for _lane in range(LANES)]
        for i in range(count):
            lane = i % LANES
            start = lanes[lane]
            end = start + HOUR * rng.choice((1, 2, 4, 8))
            lanes[lane] = end + datetime.timedelta(
                minutes=rng.randrange(180))
            lid = 'b%04d-%06d-l' % (index, n)
            rid = 'b%04d-%06d-r' % (index, n)
            n += 1
            leases_.append((lid, 'bench', 'p%d' % (n % 50), 'u', start, end,
                            'PENDING', now))
            reservations.append((rid, lid, 'virtual:instance', 'pending',
                                 properties, now))
            allocations.append((rid, host, start, end, FLAVOR['vcpus'],
                                FLAVOR['memory_mb'], FLAVOR['disk_gb'],
                                False))
    return [
        ('leases', ('id', 'name', 'project_id', 'user_id', 'start_date',
                    'end_date', 'status', 'created_at'), leases_),
        ('reservations', ('id', 'lease_id', 'resource_type', 'status',
                          'properties', 'created_at'), reservations),
        ('allocations', ('reservation_id', 'host', 'start_date', 'end_date',
                         'vcpus', 'memory_mb', 'disk_gb', 'whole_host'),
         allocations),
    ]


class AdmissionBench(base.LeaseFunctionalBase):

    COMPUTES = {}
    CLOCK_START = datetime.datetime(2030, 1, 1)

    def _setup_lease_db(self):
        if OPTIONS.db == 'sqlite':
            return super()._setup_lease_db()
        backend = db_fixtures.BACKENDS[OPTIONS.db]
        reason = backend.unavailable_reason()
        if reason:
            raise RuntimeError(reason)
        self.lease_db_url = backend.create()
        self.addCleanup(backend.drop, self.lease_db_url)
        self.flags(connection=self.lease_db_url, group='nova_lease_database')
        migration.upgrade(self.lease_db_url)
        self.addCleanup(db_api.reset_databases)
        self.addCleanup(admission.reset)

    def _inventory(self, n_hosts):
        """n_hosts compute nodes in cell1 and their resource providers."""
        ctxt = nova_context.get_admin_context()
        cell = [c for c in objects.CellMappingList.get_all(ctxt)
                if not c.is_cell0()][0]
        names = ['compute-%04d' % k for k in range(n_hosts)]
        with nova_context.target_cell(ctxt, cell) as cctxt:
            for name in names:
                rp = uuidutils.generate_uuid()
                objects.ComputeNode(
                    cctxt, host=name, hypervisor_hostname=name, uuid=rp,
                    vcpus=HOST['vcpus'], memory_mb=HOST['memory_mb'],
                    local_gb=HOST['disk_gb'], vcpus_used=0,
                    memory_mb_used=base.CONF.reserved_host_memory_mb,
                    local_gb_used=0, hypervisor_type='fake',
                    hypervisor_version=1, cpu_info='{}',
                    cpu_allocation_ratio=1.0, ram_allocation_ratio=1.0,
                    disk_allocation_ratio=1.0, free_ram_mb=0,
                    free_disk_gb=0, current_workload=0, running_vms=0,
                    disk_available_least=0, host_ip='127.0.0.1',
                    supported_hv_specs=[], pci_device_pools=None,
                    metrics='[]', extra_resources=None, stats={},
                    numa_topology=None).create()
                self.placement.post('/resource_providers', {
                    'name': name, 'uuid': rp}, version='1.20')
                self.placement.put(
                    '/resource_providers/%s/inventories' % rp, {
                        'resource_provider_generation': 0,
                        'inventories': {
                            'VCPU': {'total': HOST['vcpus']},
                            'MEMORY_MB': {
                                'total': HOST['memory_mb'],
                                'reserved':
                                    base.CONF.reserved_host_memory_mb},
                            'DISK_GB': {'total': HOST['disk_gb']}}})
        return names

    def _admit(self, rng, w, n):
        start = w + datetime.timedelta(minutes=rng.randrange(-1200, 1200))
        end = start + HOUR * rng.choice((1, 2, 4, 8))
        params = lease_params.LeaseParams(name='measured-%d' % n,
                                          start=start, end=end)
        self.phases.take()
        t0, c0 = time.perf_counter(), time.thread_time()
        lease = instance_rtype.create_instance_lease(
            self.db, base.CONF, params, 'bench-project', 'bench-user',
            dict(FLAVOR), 1, flavor_id='bench')
        elapsed, cpu = time.perf_counter() - t0, time.thread_time() - c0
        phases, phases_cpu = self.phases.take()
        phases['cpu'] = cpu
        phases['_cpu'] = phases_cpu
        db_api.lease_destroy(self.db, lease['id'])
        return elapsed, phases

    def test_bench(self):
        rng = random.Random(OPTIONS.seed)
        t0 = time.perf_counter()
        hosts = self._inventory(OPTIONS.hosts)
        RESULT['inventory_s'] = round(time.perf_counter() - t0, 1)
        self.db = db_api.get_database(base.CONF)
        self.phases = _Phases(self)
        writer = _BulkWriter(self.db)
        now = self.clock.now
        w = now + 102 * DAY
        blocks = 0
        block = PER_HOST * len(hosts)
        sizes = []
        for size in sorted(OPTIONS.sizes):
            t0 = time.perf_counter()
            while blocks * block < size:
                # Block 0 around W; then before and after it, alternately.
                if blocks == 0:
                    day = w - DAY
                elif blocks % 2:
                    day = w + DAY + (blocks // 2) * 2 * DAY
                else:
                    day = w - DAY - (blocks // 2) * 2 * DAY
                writer.insert(_block(rng, now, day, blocks, hosts))
                blocks += 1
            fill_s = time.perf_counter() - t0
            admission.reset()
            # The harness (Nova's services, placement, the fill) is a far
            # bigger heap than a nova-api's: keep it out of the garbage
            # collector's full passes, which would otherwise land in the
            # timed calls now and then.
            gc.collect()
            gc.freeze()
            profiler = None
            if OPTIONS.profile:
                import cProfile
                profiler = cProfile.Profile()
                profiler.enable()
            measured = [self._admit(rng, w, n)
                        for n in range(OPTIONS.admissions + 1)]
            if profiler is not None:
                import pstats
                profiler.disable()
                pstats.Stats(profiler, stream=sys.stderr).sort_stats(
                    'cumulative').print_stats('nova_lease', 60)
            first = measured[0][0]
            times = [t for t, _p in measured[1:]]
            cpus = [p.pop('cpu') for _t, p in measured]
            cpu_phases = [dict(p.pop('_cpu'), cpu=c)
                          for (_t, p), c in zip(measured, cpus)]
            names = sorted({n for _t, p in measured[1:] for n in p})
            phases = {n: _ms(statistics.median(
                [p.get(n, 0.0) for _t, p in measured[1:]])) for n in names}
            phases['rest'] = _ms(statistics.median(
                [t - sum(p.values()) for t, p in measured[1:]]))
            entry = {
                'cpu_median_ms': _ms(statistics.median(cpus[1:])),
                'cpu_p99_ms': _ms(_p99(cpus[1:])),
                'phases_median_ms': phases,
                'reservations': blocks * block,
                'median_ms': _ms(statistics.median(times)),
                'p99_ms': _ms(_p99(times)),
                'max_ms': _ms(max(times)),
                'first_ms': _ms(first),
                'fill_s': round(fill_s, 1),
            }
            if blocks * block <= OPTIONS.old_read_max:
                with self.db.reader() as session:
                    t0 = time.perf_counter()
                    snapshot_reads.read(session, now, w, w + 4 * HOUR)
                    entry['old_read_ms'] = _ms(time.perf_counter() - t0)
            for key, by in (('slowest', lambda m: -m[0][0]),
                            ('slowest_cpu', lambda m: -m[1]['cpu'])):
                slow = sorted(zip(measured[1:], cpu_phases[1:]),
                              key=by)[:3]
                entry[key] = [
                    dict({n: _ms(v) for n, v in list(p.items()) +
                          list(c.items())}, total=_ms(t))
                    for (t, p), c in slow]
            sizes.append(entry)
            print(json.dumps(entry, sort_keys=True), file=sys.stderr)
        RESULT['sizes'] = sizes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--db', choices=('sqlite', 'mysql'),
                        default=OPTIONS.db)
    parser.add_argument('--sizes', default='10000,100000,1000000',
                        help='reservation counts (rounded up to a multiple '
                             'of %d per host)' % PER_HOST)
    parser.add_argument('--hosts', type=int, default=OPTIONS.hosts)
    parser.add_argument('--admissions', type=int,
                        default=OPTIONS.admissions)
    parser.add_argument('--seed', type=int, default=OPTIONS.seed)
    parser.add_argument('--old-read-max', type=int,
                        default=OPTIONS.old_read_max)
    parser.add_argument('--profile', action='store_true',
                        help='print a profile of the admissions to stderr')
    args = parser.parse_args(argv)
    OPTIONS.profile = args.profile
    OPTIONS.db = args.db
    OPTIONS.sizes = [int(s) for s in args.sizes.split(',')]
    OPTIONS.hosts = args.hosts
    OPTIONS.admissions = args.admissions
    OPTIONS.seed = args.seed
    OPTIONS.old_read_max = args.old_read_max
    suite = unittest.TestSuite([AdmissionBench('test_bench')])
    result = unittest.TextTestRunner(stream=sys.stderr, verbosity=0).run(
        suite)
    if not result.wasSuccessful() or not RESULT.get('sizes'):
        return 1
    largest = RESULT['sizes'][-1]
    out = {'hosts': OPTIONS.hosts, 'reservations': largest['reservations'],
           'median_ms': largest['median_ms'], 'p99_ms': largest['p99_ms'],
           'backend': OPTIONS.db, 'admissions': OPTIONS.admissions,
           'sizes': RESULT['sizes'], 'inventory_s': RESULT['inventory_s'],
           'target_p99_ms': TARGET_P99_MS,
           'p99_ok': largest['p99_ms'] < TARGET_P99_MS,
           'load_average_1min': round(os.getloadavg()[0], 2)}
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == '__main__':
    sys.exit(main())
