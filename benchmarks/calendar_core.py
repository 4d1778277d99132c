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

"""Benchmark of the capacity calendar core (nova_lease.calendar).

Builds 1,000 hosts and N items (default N = 10,000, 100,000, 1,000,000)
with a fixed random seed, then times:

* build_ms: building the snapshot (Calendar(capacities, items));
* change_ms: Calendar.with_changes() adding one item and removing
  another, each change from the previous calendar (the two hosts' runs
  rebuilt and written into the arrays' free space, which is copied when
  full; median of at least 50);
* rebuild_ms: the same change through a full build;
* fit_ms: one hosts_that_fit() over all hosts, leased request [now, +7d);
* fit_forever_ms: the same for an unleased request [now, forever);
* fit_loop_ms: fits() called once per host for the leased request;
* slack_ms: slack_seconds() over the hosts that fit (the weigher's query);
* next_start_ms: next_demand_starts() over all hosts;
* whole_host_ms: hosts_that_fit() for a whole-host demand next month.

Query times are the best of --repeat runs. Starts are spread over a horizon
proportional to N (one year per 100,000 items), so the load at any instant
is similar for every N and what grows is the history each host holds.
The last line printed is one JSON object.

    python benchmarks/calendar_core.py [--sizes 10000,100000] [--repeat 20]
"""

import argparse
import datetime
import gc
import json
import random
import statistics
import sys
import time

from nova_lease import calendar

NOW = datetime.datetime(2026, 6, 1, 12, 0)
DAY = datetime.timedelta(days=1)
FLAVORS = [(1, 2048, 20), (2, 4096, 40), (4, 8192, 80), (8, 16384, 160),
           (16, 32768, 320)]


def make_hosts(n_hosts, rng):
    caps = {}
    for k in range(n_hosts):
        caps['compute-%04d' % k] = calendar.HostCapacity.from_inventory(
            vcpus=rng.choice([32, 64, 96, 128]),
            memory_mb=rng.choice([262144, 524288]),
            disk_gb=rng.choice([2000, 4000]),
            cpu_allocation_ratio=4.0, ram_allocation_ratio=1.0,
            disk_allocation_ratio=1.0, reserved_memory_mb=4096)
    return caps


def make_items(hosts, n_items, rng):
    """Leased VMs, 2% unleased VMs (open-ended), 0.2% whole-host
    reservations on a tenth of the hosts (the free pool).
    """
    horizon_s = int(365 * 86400 * n_items / 100000)
    freepool = hosts[:max(1, len(hosts) // 10)]
    items = []
    for k in range(n_items):
        x = rng.random()
        if x < 0.002:
            start = NOW + datetime.timedelta(
                seconds=rng.randrange(-horizon_s // 10, horizon_s))
            end = start + datetime.timedelta(
                seconds=rng.randrange(86400, 7 * 86400))
            items.append(calendar.Item(rng.choice(freepool), start, end,
                                       whole_host=True, ref=k))
            continue
        vcpus, mem, disk = rng.choice(FLAVORS)
        if x < 0.022:
            start = NOW - datetime.timedelta(
                seconds=rng.randrange(1, 90 * 86400))
            end = None
        else:
            start = NOW + datetime.timedelta(
                seconds=rng.randrange(-horizon_s // 10, horizon_s))
            end = start + datetime.timedelta(
                seconds=rng.randrange(3600, 14 * 86400))
        items.append(calendar.Item(rng.choice(hosts), start, end, vcpus,
                                   mem, disk, ref=k))
    return items


def best_ms(func, repeat):
    best = None
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = func()
        elapsed = time.perf_counter() - t0
        best = elapsed if best is None else min(best, elapsed)
    return round(best * 1000, 3), result


def median_ms(func, repeat):
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        func()
        samples.append(time.perf_counter() - t0)
    return round(statistics.median(samples) * 1000, 3)


def run(n_hosts, n_items, repeat, seed):
    rng = random.Random(seed)
    caps = make_hosts(n_hosts, rng)
    items = make_items(list(caps), n_items, rng)
    gc.collect()
    build_ms, cal = best_ms(lambda: calendar.Calendar(caps, items),
                            max(1, min(repeat, 3)))
    extra = calendar.Item(next(iter(caps)), NOW, NOW + DAY, 1, 512, 1)
    cal.with_changes()  # the per-host index, built once
    # Each change from the previous calendar, as the scheduler's snapshot
    # does (the new runs go into the free space of the shared arrays; the
    # arrays are copied when it is full).
    state = [cal, 0]

    def change():
        state[1] += 1
        state[0] = state[0].with_changes(
            add=[extra._replace(ref=state[1])], remove=[items[state[1]]])
    change_ms = median_ms(change, max(repeat, 50))
    rebuild_ms, _ = best_ms(
        lambda: calendar.Calendar(caps, items[:1] + items[2:] + [extra]),
        1)

    demand = calendar.Demand(4, 8192, 80)
    end = NOW + 7 * DAY
    fit_ms, fit = best_ms(
        lambda: cal.hosts_that_fit(demand, NOW, end), repeat)
    fit_forever_ms, fit_forever = best_ms(
        lambda: cal.hosts_that_fit(demand, NOW, None), repeat)
    loop_ms, loop = best_ms(
        lambda: [h for h in caps if cal.fits(h, demand, NOW, end)],
        max(1, repeat // 4))
    if loop != fit:
        raise AssertionError('hosts_that_fit and fits() disagree')
    slack_ms, _ = best_ms(
        lambda: cal.slack_seconds(demand, NOW, end, hosts=fit), repeat)
    next_start_ms, _ = best_ms(lambda: cal.next_demand_starts(end), repeat)
    whole_ms, whole = best_ms(
        lambda: cal.hosts_that_fit(calendar.Demand.whole(), NOW + 30 * DAY,
                                   NOW + 37 * DAY), repeat)
    return {
        'reservations': n_items,
        'boundaries': int(cal._used),
        'snapshot_mb': round(sum(
            v.nbytes for v in vars(cal).values()
            if hasattr(v, 'nbytes')) / 2 ** 20, 1),
        'build_ms': round(build_ms, 1),
        'change_ms': change_ms,
        'rebuild_ms': round(rebuild_ms, 1),
        'fit_ms': fit_ms,
        'fit_forever_ms': fit_forever_ms,
        'fit_loop_ms': loop_ms,
        'slack_ms': slack_ms,
        'next_start_ms': next_start_ms,
        'whole_host_ms': whole_ms,
        'hosts_fit': len(fit),
        'hosts_fit_forever': len(fit_forever),
        'hosts_fit_whole': len(whole),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=1000)
    parser.add_argument('--sizes', default='10000,100000,1000000')
    parser.add_argument('--repeat', type=int, default=20)
    parser.add_argument('--seed', type=int, default=20260601)
    args = parser.parse_args(argv)
    results = []
    for size in (int(s) for s in args.sizes.split(',')):
        res = run(args.hosts, size, args.repeat, args.seed)
        print('%(reservations)9d items: build %(build_ms)8.1f ms, '
              'change %(change_ms)6.2f ms, '
              'hosts_that_fit %(fit_ms)6.3f ms (forever %(fit_forever_ms)'
              '6.3f ms), fits() loop %(fit_loop_ms)7.2f ms, slack '
              '%(slack_ms)6.3f ms' % res, file=sys.stderr)
        results.append(res)
    print(json.dumps({'benchmark': 'calendar_core', 'hosts': args.hosts,
                      'results': results}))


if __name__ == '__main__':
    main()
