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

"""Cost of an offer search (GET /offers) against the client-side scan.

Builds the calendar the lease API searches (the scheduler's snapshot
holds it: a ``nova_lease.calendar.Calendar``) with --reservations
(default 1,000,000) allocations on --hosts (default 1,000) registered
hosts over the 30 days before and the 60 days after now: 70 % of the
hosts carry host leases (whole-host allocations back to back with random
gaps), the others instance slots (four lanes per host, each a quarter of
it). Then, for a mix of requests (1 to 16 whole hosts, or 1 to 8
instances of a quarter-host size with every affinity; 1 hour to 2 days;
starts over the next 30 days, 5 offers):

* ``median_ms``, ``p99_ms``: nova_lease.calendar.offers.find_offers over
  that calendar (what the handler runs once it has the matching hosts),
  over every request;
* ``client_scan_ms``: the client-side way (python-chi's
  ``next_free_timeslot``): the allocations of the window as the API
  lists them (JSON), decoded, then scanned host by host for the first
  start where enough hosts are free; the median over the host requests;
* ``ratio``: client_scan_ms / the median of the same host requests.

``repack_acceptance_gain`` is null: repacking is not built.

    python benchmarks/offers.py [--hosts 1000] [--reservations 1000000]
"""

import argparse
import datetime
import json
import statistics
import time

import numpy as np

from nova_lease import calendar
from nova_lease.calendar import offers

NOW = datetime.datetime(2030, 1, 1)
HOUR = 3600 * 10 ** 6
SIZE = (64, 262144, 2000)


def _build(n_hosts, n_res, rng):
    """(Calendar, whole-host names, slot-host names, {host: [(s, e)]})."""
    now = calendar.to_us(NOW)
    lo, hi = now - 30 * 24 * HOUR, now + 60 * 24 * HOUR
    n_whole = int(n_hosts * 0.7)
    names = ['compute-%04d' % k for k in range(n_hosts)]
    per_host = n_res // n_hosts
    items = []
    busy = {}
    for k, name in enumerate(names):
        whole = k < n_whole
        lanes = 1 if whole else 4
        count = per_host // lanes
        span = (hi - lo) // lanes
        for lane in range(lanes):
            # Back to back: lengths and gaps that fill ~80 % of the time.
            length = rng.integers(1, 9, count) * (span // (count * 5))
            gap = rng.integers(0, 3, count) * length // 4
            starts = lo + np.cumsum(length + gap) - length
            ends = starts + length
            for s, e in zip(starts.tolist(), ends.tolist()):
                if whole:
                    items.append((name, s, e, 0, 0, 0, True, None))
                    busy.setdefault(name, []).append((s, e))
                else:
                    items.append((name, s, e, 16, 65536, 500, False,
                                  None))
    return (calendar.Calendar({}, items), names[:n_whole],
            names[n_whole:], busy)


def _requests(rng, count):
    out = []
    for _n in range(count):
        duration = datetime.timedelta(
            hours=int(rng.choice([1, 2, 4, 8, 24, 48])))
        earliest = NOW + datetime.timedelta(hours=int(rng.integers(0, 72)))
        if rng.random() < 0.6:
            n = int(rng.choice([1, 2, 4, 8, 16]))
            out.append((offers.HostsRequest(n, n), duration, earliest))
        else:
            # (At most four on one host: a quarter host each.)
            affinity = [True, False, None][int(rng.integers(0, 3))]
            amount = int(rng.integers(1, 5 if affinity else 9))
            out.append((offers.SlotsRequest(16, 65536, 500, amount,
                                            affinity), duration, earliest))
    return out


def _client_scan(busy, hosts, count, duration, earliest, latest):
    """python-chi's way: every allocation listed (JSON), then scanned."""
    lo, hi = calendar.to_us(earliest), calendar.to_us(latest)
    length = int(duration.total_seconds() * 10 ** 6)
    body = json.dumps({'allocations': [
        {'resource_id': h, 'reservations': [
            {'start_date': s, 'end_date': e} for s, e in busy.get(h, ())
            if e > lo and s < hi + length]} for h in hosts]})
    listed = json.loads(body)['allocations']
    free_from = []
    for host in listed:
        spans = sorted((r['start_date'], r['end_date'])
                       for r in host['reservations'])
        free = []
        t = lo
        for s, e in spans:
            if s - t >= length:
                free.append((t, s - length))
            t = max(t, e)
        free.append((t, hi))
        free_from.append(free)
    candidates = sorted({a for free in free_from for a, _b in free
                         if a <= hi})
    for t in candidates:
        ok = sum(1 for free in free_from
                 if any(a <= t <= b for a, b in free))
        if ok >= count:
            return t
    return None


def run(n_hosts, n_res, n_requests, seed=1):
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    cal, whole, slots, busy = _build(n_hosts, n_res, rng)
    build_s = time.perf_counter() - t0
    sizes = dict.fromkeys(slots, SIZE)
    # (Warm-up: the first query pays numpy's first calls.)
    for req, hosts in ((offers.HostsRequest(1, 1), whole),
                       (offers.SlotsRequest(1, 1, 1, 1, None), slots)):
        offers.find_offers(cal, hosts, req, datetime.timedelta(hours=1),
                           NOW, NOW + datetime.timedelta(days=30), 5,
                           sizes=sizes)
    times, host_times, scans = [], [], []
    for i, (req, duration, earliest) in enumerate(
            _requests(rng, n_requests)):
        latest = earliest + datetime.timedelta(days=30)
        hosts = whole if isinstance(req, offers.HostsRequest) else slots
        t = time.perf_counter()
        found = offers.find_offers(cal, hosts, req, duration, earliest,
                                   latest, 5, sizes=sizes)
        ms = (time.perf_counter() - t) * 1000
        times.append(ms)
        if isinstance(req, offers.HostsRequest):
            host_times.append(ms)
            if len(scans) < 10:
                t = time.perf_counter()
                first = _client_scan(busy, hosts, req.min, duration,
                                     earliest, latest)
                scans.append((time.perf_counter() - t) * 1000)
                if found and first is not None:
                    assert calendar.to_us(found[0].start) == first, (
                        i, found[0].start, first)
    times.sort()
    median = statistics.median(times)
    client = statistics.median(scans)
    return {
        'hosts': n_hosts, 'reservations': len(cal.items),
        'window_days': 30, 'requests': n_requests,
        'median_ms': round(median, 2),
        'p99_ms': round(times[min(len(times) - 1,
                                  int(len(times) * 0.99))], 2),
        'host_median_ms': round(statistics.median(host_times), 2),
        'client_scan_ms': round(client, 1),
        'ratio': round(client / statistics.median(host_times), 1),
        'repack_acceptance_gain': None,
        'build_s': round(build_s, 1),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, default=1000)
    parser.add_argument('--reservations', type=int, default=1000000)
    parser.add_argument('--requests', type=int, default=200)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.hosts, args.reservations, args.requests)))


if __name__ == '__main__':
    main()
