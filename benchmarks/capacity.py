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

"""Cost of capacity over time (GET /os-reservation/capacity).

The cloud of benchmarks/scheduler.py (same database, built by it: --hosts
compute hosts, default 1,000, with 64 vcpus, 256 GB RAM and 2 TB disk
each and 30 servers each, a third of them leased at most; N instance
reservations over the next 30 days, default 100,000, 10 % of them
started with their server on its host; 5 % of the hosts registered in
the free pool with two future host leases each, 5 % in started host
reservations). The query is the default one users meet at that size: a
30-day window in one-hour steps (720 steps), every host, every
resource.

What is timed is what the API does once Nova's facts are read (they are
given here as nova-api reads them: compute nodes with their capacity and
usage, and the running leased servers): take the snapshot from the
scheduler's cache (its probe of the change journal, and the journal
patch when something changed), turn Nova's facts into the core's hosts
(``scheduler.capacity.capacity_hosts``) and compute the body
(``scheduler.capacity.report``), then serialise it to JSON as the API
does.

* ``median_ms``, ``p99_ms``: requests that each follow a change (a lease
  admitted through nova_lease.db.api's writer, which writes the change
  journal): the snapshot is patched first, as for a user who asks right
  after a lease was made -- the harder case (``steady_ms``: the snapshot
  already current);
* ``cold_ms``: the first request on a snapshot just read in full (its
  lazily built parts made then), median of a few full reads;
* ``detail_ms``: the same query with ``detail=hosts`` (every host's steps
  and bookings: what the picture draws), median;
* ``member_ms``: a project member's view (its own promises), median;
* ``cpu_median_ms``: the CPU time (``time.process_time``) of the
  ``median_ms`` requests, median: what a request costs whatever else
  runs on the machine (``load_average``: the 1-minute load average
  before and after the run; above the number of cores, the wall-clock
  figures include waiting for a core).

The last line printed is a JSON object (``target_ms``: 200, for the
median).

    python benchmarks/capacity.py [--hosts 1000] [--reservations 100000]
        [--repeat 30] [--db-dir DIR]
"""

import argparse
import datetime
import gc
import json
import os
import random
import statistics
import sys
import tempfile
import time

os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import nova.conf  # noqa: E402
from nova import objects  # noqa: E402
from oslo_serialization import jsonutils  # noqa: E402
from oslo_utils import timeutils  # noqa: E402

import scheduler as sched_bench  # noqa: E402

from nova_lease import calendar  # noqa: E402
from nova_lease import conf as lease_conf  # noqa: E402
from nova_lease.db import api as db_api  # noqa: E402
from nova_lease.scheduler import capacity as lease_capacity  # noqa: E402
from nova_lease.scheduler import snapshot_cache  # noqa: E402

CONF = nova.conf.CONF
NOW = sched_bench.NOW
WINDOW_DAYS = 30
STEP_HOURS = 1
TARGET_MS = 200.0
#: The hosts' usable size (64 vcpus at a ratio of 4, 256 GB less 512 MB
#: reserved, 2 TB) and the
#: servers each runs (their flavor).
HOST = calendar.HostCapacity(64 * 4, 262144 - 512, 2048)
SERVER = (2, 4096, 20)


def _facts(hosts, layout):
    """Nova's facts as nova-api reads them: ComputeFacts of every host
    and {server uuid: (host, Demand)} of the running leased servers.
    """
    computes, running = [], {}
    registered = set(layout['freepool']) | {
        h for members in layout['held'].values() for h in members}
    for k in range(hosts):
        name = sched_bench._name(k)
        leased = layout['leased_by_host'].get(name, [])
        servers = 0 if name in registered else sched_bench.SERVERS_PER_HOST
        used = tuple(v * servers for v in SERVER)
        computes.append(lease_capacity.ComputeFacts(name, name, HOST, used))
        for uuid in leased:
            running[uuid] = (name, calendar.Demand(*SERVER))
    zones = {c.service_host: 'nova' for c in computes}
    aggregates = {h: [sched_bench.FREEPOOL] for h in layout['freepool']}
    return computes, running, zones, aggregates


def run(n, hosts, repeat, db_dir=None, seed=sched_bench.SEED):
    tmp = None
    if db_dir is None:
        tmp = db_dir = tempfile.mkdtemp(prefix='nova_lease_bench_')
    url, layout, fill_s = sched_bench._database(db_dir, n, hosts, seed)
    CONF.set_override('connection', url, group='nova_lease_database')
    CONF.set_override('scheduler_snapshot_ttl', 3600, group='nova_lease')
    db = db_api.get_database(CONF)
    rng = random.Random(seed + 2)
    others = [sched_bench._name(k) for k in range(hosts)
              if sched_bench._name(k) not in set(layout['freepool'])]
    computes, running, zones, aggregates = _facts(hosts, layout)
    start, end = NOW, NOW + datetime.timedelta(days=WINDOW_DAYS)
    step = datetime.timedelta(hours=STEP_HOURS)
    admitted = []

    def request(**kwargs):
        snap = snapshot_cache.CACHE.get(db, NOW, 3600, wait=600)
        found = {u: running[u] for u in snap.servers.keys() & running}
        host_list = lease_capacity.capacity_hosts(
            snap, computes, found, zones, aggregates, NOW)
        body = lease_capacity.report(snap, host_list, start, end, step,
                                     NOW, **kwargs)
        return jsonutils.dump_as_bytes(body)

    def admit_one():
        # A lease admitted by nova-api (not timed).
        admitted.append(sched_bench.admit_lease(db, rng, others,
                                                WINDOW_DAYS * 24 * 60))

    cpu = []

    def timed(fn, out, **kwargs):
        c0, t0 = time.process_time(), time.perf_counter()
        fn(**kwargs)
        out.append((time.perf_counter() - t0) * 1000)
        if out is after_change:
            cpu.append((time.process_time() - c0) * 1000)

    load_before = os.getloadavg()[0]
    after_change, steady, detail, member = [], [], [], []
    # Cold: the first request on a snapshot just read in full.
    cold = []
    for _n in range(3):
        snapshot_cache.CACHE.invalidate()
        gc.collect()
        snapshot_cache.CACHE.get(db, NOW, 3600, wait=600)
        timed(request, cold)
    for k in range(repeat):
        admit_one()
        timed(request, after_change)
        timed(request, steady)
        if k % 5 == 0:
            timed(request, detail, detail=True)
            timed(request, member, project_id='p7')
    body = json.loads(request())['capacity']
    sched_bench.forget(db, admitted, tmp)
    p99 = (statistics.quantiles(after_change, n=100)[-1]
           if len(after_change) > 1 else after_change[0])
    return {
        'hosts': hosts, 'reservations': n, 'window_days': WINDOW_DAYS,
        'step_hours': STEP_HOURS, 'steps': len(body['steps']),
        'median_ms': round(statistics.median(after_change), 3),
        'p99_ms': round(p99, 3),
        'steady_ms': round(statistics.median(steady), 3),
        'cold_ms': round(statistics.median(cold), 3),
        'detail_ms': round(statistics.median(detail), 3),
        'member_ms': round(statistics.median(member), 3),
        'target_ms': TARGET_MS,
        'cpu_median_ms': round(statistics.median(cpu), 3),
        'load_average': [round(load_before, 2),
                         round(os.getloadavg()[0], 2)],
        'promised_vcpu_hours': body['total']['vcpus']['promised'],
        'repeat': repeat, 'db_fill_s': round(fill_s, 1),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, default=sched_bench.HOSTS)
    parser.add_argument('--reservations', type=int, default=100000)
    parser.add_argument('--repeat', type=int, default=30)
    parser.add_argument('--seed', type=int, default=sched_bench.SEED)
    parser.add_argument('--db-dir', default=None,
                        help='keep the filled database there and reuse it '
                             '(shared with benchmarks/scheduler.py)')
    args = parser.parse_args(argv)
    lease_conf.register_opts(CONF)
    CONF([], project='nova')
    objects.register_all()
    timeutils.set_time_override(NOW)
    result = run(args.reservations, args.hosts, args.repeat, args.db_dir,
                 args.seed)
    print('%(hosts)d hosts, %(reservations)d reservations, %(window_days)d '
          'days in %(step_hours)d h steps: median %(median_ms).1f ms after '
          'a change (p99 %(p99_ms).1f ms), steady %(steady_ms).1f ms, '
          'cold %(cold_ms).1f ms, detail=hosts %(detail_ms).1f ms, member '
          '%(member_ms).1f ms (target %(target_ms).0f ms); CPU '
          '%(cpu_median_ms).1f ms, load average %(load_average)s' % result)
    print(json.dumps(result))


if __name__ == '__main__':
    main()
