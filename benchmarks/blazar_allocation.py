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
"""Host allocation: ours against Blazar 18.0.0's own code, same data.

Both sides answer the same request on the same data, on MariaDB, in one
run; the last line gives the ratio of their 99th percentiles.

The data: benchmarks/allocation.py's (same functions, same seed): 1,000
reservable hosts (availability zone ``nova`` for three in four, else
``az2``; vcpus 32/64/96/128; cpu_info ``{"arch": ...}``, x86_64 for three
in four, else aarch64; extra capabilities ``ssd``, ``gpu``, ``rack``) and
10,000 whole-host allocations (10 per host over 2030, none overlapping on
a host). Blazar gets the same hosts (``computehosts``), the same extra
capabilities (``resource_properties`` + ``computehost_extra_capabilities``)
and the same 10,000 allocations read back from our database: each one a
lease with its dates (Blazar takes a host's busy periods from its
leases' dates), its 3 events, a ``physical:host`` reservation, its
``computehost_reservations`` row and one ``computehost_allocations`` row.

The request, both sides, for each of the same windows (``[start, end)``:
a start at a random hour of 2030, 1 hour to 7 days long, drawn as
benchmarks/allocation.py draws them; 15 minutes of cleaning time): one
host (min 1, max 1) in availability zone ``nova`` with at least 64 vcpus,
an x86_64 CPU and the extra capability ``ssd`` = ``true``, free over the
window.

* Ours (``"side": "ours"``): exactly benchmarks/allocation.py's warm
  case, ``create_host_lease`` with ``HostRequest(min=1, max=1,
  availability_zone='nova', vcpus=64, extra_specs={'ssd': 'true',
  'capabilities:cpu_info:arch': 'x86_64'})`` and cleaning time 15: the
  whole writer transaction that chooses, locks and re-checks a host and
  records the lease, its reservation, allocation and events (deleted
  afterwards, untimed).
* Blazar (``"side": "blazar"``): ``PhysicalHostPlugin._matching_hosts(
  hypervisor_properties, resource_properties, '1-1', start, end)`` of
  Blazar 18.0.0 (``blazar.plugins.oshosts.host_plugin``), the step of a
  host reservation (``reserve_resource`` -> ``allocation_candidates``)
  that picks the hosts, with ``hypervisor_properties`` ``["and", [">=",
  "$vcpus", "64"], ["==", "$availability_zone", "nova"], ["==",
  "$cpu_info", "{\\"arch\\": \\"x86_64\\"}"]]`` (Blazar's queries have no
  operator to look inside cpu_info: the whole value is compared, which
  is the same test on this data), ``resource_properties`` ``["==",
  "$ssd", "true"]`` and ``[DEFAULT] cleaning_time = 15``. That is
  ``reservable_host_get_all_by_queries`` (the column terms in SQL; the
  ``ssd`` term by reading every ``ssd`` extra capability and comparing
  in Python), then, for every matching host,
  ``host_allocation_get_all_by_values`` and ``get_free_periods`` (its
  leases over the window). It only reads: it writes no lease (so the
  comparison favours Blazar). Timed as shipped, including the stray
  ``print(dir(host))`` that 18.0.0's ``host_get_all_by_queries`` runs
  for each extra capability row it compares (its output goes to
  /dev/null); ``blazar_noprint_*`` is the same call with that print
  made a no-op (timed right after the as-shipped call, on the first
  ``--noprint-repeat`` timed windows; 0 skips it). The plugin
  object is made without ``__init__`` (which only makes Nova, Placement
  and monitor clients, not used by ``_matching_hosts``).

Blazar is not part of this repository: ``blazar==18.0.0`` is installed
at run time, without its dependencies (those it needs on this path come
from this virtualenv), with ``pip install --no-deps --target DIR``
(``--blazar-dir DIR`` keeps and reuses it; by default a temporary
directory, removed at the end). Importing ``blazar`` imports eventlet
(``blazar/__init__`` selects oslo.service's threading backend, whose
futurist imports it; nothing is monkey-patched), so the Blazar side runs
in a subprocess of its own (same interpreter, with
OS_NOVA_DISABLE_EVENTLET_PATCHING=1, its own oslo.config: ``[database]
connection``, ``cleaning_time``) and reports back in JSON; this process
never imports eventlet nor Blazar. When Blazar cannot be installed, or
MariaDB cannot be reached, one line ``{"skipped": REASON}`` is printed
and the exit status is 0.

Databases: MariaDB/MySQL at $NOVA_LEASE_TEST_MYSQL_URL (default
mysql+pymysql://root@127.0.0.1:3306/); one database per side, created
with a unique name (ours by our migrations, Blazar's by its
``db.sqlalchemy.api.setup_db``, the ``create_all`` of its models) and
dropped at the end, also on failure.

Each side makes ``--warmup`` untimed calls, then ``--repeat`` timed calls
on the same windows (a garbage collection before each call, none during
it). Output: one JSON line per side, then the comparison::

    {"side": "ours", "db", "hosts", "allocations", "median_ms", "p99_ms",
     "runs", "refused", "free_hosts", "eventlet_imported"}
    {"side": "blazar", "version", "db", "hosts", "allocations",
     "median_ms", "p99_ms", "runs", "empty", "free_hosts",
     "blazar_noprint_median_ms", "blazar_noprint_p99_ms",
     "noprint_runs", "eventlet_imported", "eventlet_patched"}
    {"hosts", "allocations", "ours_p99_ms", "blazar_p99_ms", "ratio",
     "ours_median_ms", "blazar_median_ms", "median_ratio",
     "blazar_noprint_p99_ms", "noprint_ratio", "free_hosts_equal",
     "loadavg", "cpus"}

``p99_ms`` is the nearest-rank 99th percentile (with fewer than 100 runs,
the slowest run); ``ratio`` = ``blazar_p99_ms / ours_p99_ms`` (how many
times faster ours is; ``median_ratio``, ``noprint_ratio`` alike);
``refused``: our calls that found no free host; ``empty``: Blazar calls
that returned no host. ``free_hosts``: for the first ``--check`` timed
windows (untimed), how many hosts each side finds matching and free
(ours: the matching registered hosts less those our allocations hold
over ``[start, end + 15 min)``; Blazar: ``_matching_hosts`` with count
``1-<hosts>``, which returns them all); ``free_hosts_equal``: whether the
two lists are equal (Blazar also keeps the 15 minutes before the start
free, so a host busy until just before a start can differ).
``loadavg``: the machine's 1-minute load average when the run started
and when it ended, ``cpus`` its CPU count: the sides run one after the
other, so other work on the machine skews the ratio; run it on a quiet
machine::

    python benchmarks/blazar_allocation.py [--repeat 50] [--warmup 10]
        [--noprint-repeat 20] [--check 5] [--blazar-dir DIR]
"""

import argparse
import datetime
import importlib.util
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile

BLAZAR = 'blazar==18.0.0'
CLEANING_MINUTES = 15       # as benchmarks/allocation.py allocates
HYPERVISOR_PROPERTIES = json.dumps([
    'and', ['>=', '$vcpus', '64'], ['==', '$availability_zone', 'nova'],
    ['==', '$cpu_info', json.dumps({'arch': 'x86_64'})]])
RESOURCE_PROPERTIES = json.dumps(['==', '$ssd', 'true'])
WORKER = '--blazar-worker'


def _load_allocation_benchmark():
    """benchmarks/allocation.py as a module (benchmarks is no package)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        'allocation.py')
    spec = importlib.util.spec_from_file_location('nl_bench_allocation',
                                                  path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- Blazar, in its own process ------------------------------------------

def _blazar_fill(url, data):
    """Blazar's schema and the same hosts and allocations, in Blazar's
    tables (bulk inserts; how the rows get there is not measured).
    """
    from blazar.db.sqlalchemy import api as blazar_api
    from blazar.db.sqlalchemy import models as bm
    from oslo_utils import uuidutils
    import sqlalchemy as sa

    blazar_api.setup_db()
    engine = sa.create_engine(url)
    host_ids = {}
    hosts, props, caps = [], {}, []
    for h in data['hosts']:
        host_id = host_ids[h['hypervisor_hostname']] = (
            uuidutils.generate_uuid())
        hosts.append({
            'id': host_id, 'vcpus': h['vcpus'],
            'cpu_info': h['cpu_info'],
            'hypervisor_type': h['hypervisor_type'],
            'hypervisor_version': 8002000,
            'hypervisor_hostname': h['hypervisor_hostname'],
            'service_name': h['service_host'],
            'memory_mb': h['memory_mb'], 'local_gb': h['local_gb'],
            'availability_zone': h['availability_zone'],
            'trust_id': uuidutils.generate_uuid(), 'reservable': True})
        for name, value in sorted(h['capabilities'].items()):
            if name not in props:
                props[name] = uuidutils.generate_uuid()
            caps.append({'id': uuidutils.generate_uuid(),
                         'computehost_id': host_id,
                         'property_id': props[name],
                         'capability_value': value})
    leases, reservations, host_reservations = [], [], []
    events, allocations = [], []
    for k, a in enumerate(data['allocations']):
        start = datetime.datetime.fromisoformat(a['start_date'])
        end = datetime.datetime.fromisoformat(a['end_date'])
        lease_id = uuidutils.generate_uuid()
        reservation_id = uuidutils.generate_uuid()
        host_reservation_id = uuidutils.generate_uuid()
        leases.append({
            'id': lease_id, 'name': 'fill-%d' % k,
            'user_id': 'bench', 'project_id': 'bench', 'start_date': start,
            'end_date': end, 'trust_id': uuidutils.generate_uuid(),
            'status': 'PENDING', 'degraded': False})
        reservations.append({
            'id': reservation_id, 'lease_id': lease_id,
            'resource_id': host_reservation_id,
            'resource_type': 'physical:host', 'status': 'pending',
            'missing_resources': False, 'resources_changed': False})
        host_reservations.append({
            'id': host_reservation_id,
            'reservation_id': reservation_id, 'aggregate_id': k,
            'resource_properties': '', 'count_range': '1-1',
            'hypervisor_properties': '', 'before_end': 'default'})
        for event_type, when in (('start_lease', start),
                                 ('before_end_lease', end),
                                 ('end_lease', end)):
            events.append({
                'id': uuidutils.generate_uuid(),
                'lease_id': lease_id, 'event_type': event_type,
                'time': when, 'status': 'UNDONE'})
        allocations.append({
            'id': uuidutils.generate_uuid(),
            'compute_host_id': host_ids[a['host']],
            'reservation_id': reservation_id})
    with engine.begin() as conn:
        for model, rows in (
                (bm.ResourceProperty, [
                    {'id': prop_id,
                     'resource_type': 'physical:host',
                     'property_name': name, 'private': False}
                    for name, prop_id in props.items()]),
                (bm.ComputeHost, hosts),
                (bm.ComputeHostExtraCapability, caps),
                (bm.Lease, leases), (bm.Reservation, reservations),
                (bm.ComputeHostReservation, host_reservations),
                (bm.Event, events),
                (bm.ComputeHostAllocation, allocations)):
            for i in range(0, len(rows), 2000):
                conn.execute(sa.insert(model.__table__), rows[i:i + 2000])
    with engine.connect() as conn:
        count = conn.execute(sa.select(sa.func.count()).select_from(
            bm.ComputeHostAllocation.__table__)).scalar()
    engine.dispose()
    return count, {v: k for k, v in host_ids.items()}


def _blazar_worker(data_path, result_path):
    """The Blazar side (run as its own process): writes its JSON result."""
    with open(data_path) as f:
        data = json.load(f)
    url = data['url']
    from oslo_config import cfg

    from blazar import config as blazar_config  # noqa: F401 (options)
    from blazar.db.sqlalchemy import api as blazar_api
    from blazar.plugins.oshosts import host_plugin

    cfg.CONF([], project='blazar', default_config_files=[],
             default_config_dirs=[])
    cfg.CONF.set_override('connection', url, group='database')
    cfg.CONF.set_override('cleaning_time', CLEANING_MINUTES)

    # (Its timing and percentile, in this process too: it imports no
    # eventlet nor oslo.service backend.)
    bench = _load_allocation_benchmark()
    count, host_names = _blazar_fill(url, data)
    plugin = host_plugin.PhysicalHostPlugin.__new__(
        host_plugin.PhysicalHostPlugin)
    windows = [(datetime.datetime.fromisoformat(s),
                datetime.datetime.fromisoformat(e))
               for s, e in data['windows']]

    def match(start, end, count_range='1-1'):
        return plugin._matching_hosts(
            HYPERVISOR_PROPERTIES, RESOURCE_PROPERTIES, count_range, start,
            end)

    def quiet(*args, **kwargs):
        pass

    warmup = data['warmup']
    times, empty, noprint = [], 0, []
    for i, (start, end) in enumerate(windows):
        elapsed, chosen = bench._timed(lambda: match(start, end))
        if i >= warmup:
            times.append(elapsed)
            empty += not chosen
        if warmup <= i < warmup + data['noprint_repeat']:
            # Right after, the same call with 18.0.0's stray debug print
            # made a no-op (a module global shadows the builtin).
            blazar_api.print = quiet
            try:
                noprint.append(bench._timed(lambda: match(start, end))[0])
            finally:
                del blazar_api.print
    free_hosts = [
        sorted(host_names[h] for h in match(start, end, '1-%d'
                                            % len(data['hosts'])))
        for start, end in windows[warmup:warmup + data['check']]]
    patched = False
    if 'eventlet' in sys.modules:
        from eventlet import patcher
        patched = any(patcher.is_monkey_patched(m)
                      for m in ('socket', 'thread', 'time', 'select'))
    import blazar.version
    result = {
        'side': 'blazar',
        'version': blazar.version.version_info.version_string(),
        'db': 'mysql', 'hosts': len(data['hosts']), 'allocations': count,
        'median_ms': round(statistics.median(times), 2),
        'p99_ms': round(bench._p99(sorted(times)), 2),
        'runs': len(times),
        'empty': empty, 'free_hosts': [len(h) for h in free_hosts],
        'blazar_noprint_median_ms': (
            round(statistics.median(noprint), 2) if noprint else None),
        'blazar_noprint_p99_ms': (
            round(bench._p99(sorted(noprint)), 2) if noprint else None),
        'noprint_runs': len(noprint),
        'eventlet_imported': 'eventlet' in sys.modules,
        'eventlet_patched': patched,
        '_free_host_names': free_hosts,
    }
    with open(result_path, 'w') as f:
        json.dump(result, f)


def _install_blazar(target):
    """Install Blazar into target unless it is there: None or a reason."""
    if os.path.isdir(os.path.join(target, 'blazar-18.0.0.dist-info')):
        return None
    try:
        proc = subprocess.run(
            [sys.executable, '-m', 'pip', 'install', '--quiet', '--no-deps',
             '--disable-pip-version-check', '--target', target, BLAZAR],
            capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 'cannot install %s: %s' % (BLAZAR, e)
    if proc.returncode:
        lines = [line for line in proc.stderr.splitlines()
                 if line.startswith('ERROR')] or proc.stderr.splitlines()
        return 'cannot install %s: %s' % (
            BLAZAR, ' '.join(lines[-2:]) or 'pip exit %d' % proc.returncode)
    return None


def _run_blazar(url, data, workdir, target):
    data_path = os.path.join(workdir, 'blazar_data.json')
    result_path = os.path.join(workdir, 'blazar_result.json')
    with open(data_path, 'w') as f:
        json.dump(dict(data, url=url), f)
    env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1',
               PYTHONPATH=os.pathsep.join(
                   [target] + [p for p in [os.environ.get('PYTHONPATH')]
                               if p]),
               PYTHONWARNINGS='ignore')
    # Its stdout (18.0.0's debug print) goes to /dev/null.
    subprocess.run([sys.executable, os.path.abspath(__file__), WORKER,
                    data_path, result_path], env=env, check=True,
                   stdout=subprocess.DEVNULL, cwd=workdir)
    with open(result_path) as f:
        return json.load(f)


# --- Ours, in this process -------------------------------------------------

def _run_ours(bench, url, args, rng):
    """Fill our database as benchmarks/allocation.py does, time its warm
    case; returns (result, the data for Blazar).
    """
    from nova_lease.db import api as db_api
    from nova_lease.db import migration
    from nova_lease.plugins.host import allocation as host_allocation
    from nova_lease.plugins.host import registry

    migration.create_schema(url)
    db = db_api.Database(url)
    try:
        host_rows = bench._hosts(db, args.hosts, rng)
        count = bench._allocations(db, host_rows, args.allocations, rng)
        # The same draws as benchmarks/allocation.py's run() from here.
        leases = [bench._lease_values(i, rng)
                  for i in range(args.warmup + args.repeat)]
        times, refused = [], 0
        for i, lease in enumerate(leases):
            elapsed, was_refused = bench._allocate(db, i, rng, lease)
            if i >= args.warmup:
                times.append(elapsed)
                refused += was_refused
        allocations = db_api.allocation_list(db)
        assert len(allocations) == count
        request = bench._request()
        free_hosts = []
        with db.reader() as session:
            hosts, _fingerprint = registry.read_registry(session)
            names = [h['hypervisor_hostname']
                     for h in registry.matching_hosts(hosts, request)]
            for values, _events in leases[
                    args.warmup:args.warmup + args.check]:
                busy = {host for host, _r in db_api.allocation_busy(
                    session, names, values['start_date'],
                    host_allocation.booked_end(values['end_date'],
                                               CLEANING_MINUTES))}
                free_hosts.append(sorted(set(names) - busy))
    finally:
        db.dispose()
    result = {'side': 'ours', 'db': 'mysql', 'hosts': args.hosts,
              'allocations': count,
              'median_ms': round(statistics.median(times), 2),
              'p99_ms': round(bench._p99(sorted(times)), 2),
              'runs': len(times),
              'refused': refused,
              'free_hosts': [len(h) for h in free_hosts],
              'eventlet_imported': 'eventlet' in sys.modules}
    data = {
        'hosts': [{k: h[k] for k in (
            'hypervisor_hostname', 'service_host', 'availability_zone',
            'vcpus', 'memory_mb', 'local_gb', 'cpu_info', 'hypervisor_type',
            'capabilities')} for h in host_rows],
        'allocations': [{'host': a['host'],
                         'start_date': a['start_date'].isoformat(),
                         'end_date': a['end_date'].isoformat()}
                        for a in allocations],
        'windows': [(v['start_date'].isoformat(), v['end_date'].isoformat())
                    for v, _events in leases],
        'warmup': args.warmup, 'check': args.check,
        'noprint_repeat': args.noprint_repeat,
    }
    return result, data, free_hosts


def _skip(reason):
    print(json.dumps({'skipped': reason}))
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [WORKER]:
        _blazar_worker(*argv[1:3])
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog='See the module docstring for what is timed and printed.')
    parser.add_argument('--hosts', type=int, default=1000,
                        help='reservable hosts (default: 1000)')
    parser.add_argument('--allocations', type=int, default=10000,
                        help='whole-host allocations (default: 10000)')
    parser.add_argument('--repeat', type=int, default=50,
                        help='timed calls per side (default: 50)')
    parser.add_argument('--warmup', type=int, default=10,
                        help='untimed calls first, per side (default: 10)')
    parser.add_argument('--noprint-repeat', type=int, default=20,
                        help="timed Blazar calls with 18.0.0's debug print "
                             "made a no-op (default: 20; 0: none)")
    parser.add_argument('--check', type=int, default=5,
                        help='windows whose free hosts both sides list, '
                             'untimed (default: 5)')
    parser.add_argument('--blazar-dir', metavar='DIR',
                        help='where Blazar is installed and kept (default: '
                             'a temporary directory, removed at the end)')
    parser.add_argument('--seed', type=int, default=20300101,
                        help="the data's and windows' random seed "
                             '(default: 20300101, as allocation.py)')
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error('--repeat must be at least 1')
    args.check = min(args.check, args.repeat)

    os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')
    load_before = os.getloadavg()[0]
    workdir = tempfile.mkdtemp(prefix='nl_blazar_bench_')
    try:
        target = args.blazar_dir or os.path.join(workdir, 'blazar')
        reason = _install_blazar(target)
        if reason:
            return _skip(reason)
        bench = _load_allocation_benchmark()
        try:
            ours_url, ours_drop = bench._mysql_database()
        except Exception as e:
            return _skip('MariaDB unreachable: %s' % str(e).splitlines()[0])
        try:
            ours, data, our_free = _run_ours(
                bench, ours_url, args, random.Random(args.seed))
        finally:
            ours_drop()
        blazar_url, blazar_drop = bench._mysql_database()
        try:
            blazar = _run_blazar(blazar_url, data, workdir, target)
        finally:
            blazar_drop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    blazar_free = blazar.pop('_free_host_names')
    print(json.dumps(ours))
    print(json.dumps(blazar))
    noprint = blazar['blazar_noprint_p99_ms']
    print(json.dumps({
        'hosts': ours['hosts'], 'allocations': ours['allocations'],
        'ours_p99_ms': ours['p99_ms'], 'blazar_p99_ms': blazar['p99_ms'],
        'ratio': round(blazar['p99_ms'] / ours['p99_ms'], 1),
        'ours_median_ms': ours['median_ms'],
        'blazar_median_ms': blazar['median_ms'],
        'median_ratio': round(blazar['median_ms'] / ours['median_ms'], 1),
        'blazar_noprint_p99_ms': noprint,
        'noprint_ratio': (round(noprint / ours['p99_ms'], 1)
                          if noprint else None),
        'free_hosts_equal': our_free == blazar_free,
        'loadavg': [round(load_before, 2), round(os.getloadavg()[0], 2)],
        'cpus': os.cpu_count()}))
    return 0


if __name__ == '__main__':
    main()
