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
"""Benchmark: drawing the capacity picture and page, by cloud size.

Times ``nova_lease.visibility.render.svg`` and ``html`` (the code behind
``nova-lease-manage capacity --format svg|html``) with
``time.perf_counter``, and reports the size of what they write.

What is real and what is synthetic:

* real: the renderer's code, on a body shaped as the capacity API's with
  ``host_details``;
* synthetic: the body. Each host is busy in random runs of steps (its free
  amounts change at a run's edges only, as a calendar's do) and holds
  ``--bookings`` random bookings of as many leases spread over the window
  (seeded); no Nova, no database: the time to gather the figures is
  ``nova-lease-manage capacity``'s, not measured here.

Prints one JSON line at the end: for the largest size, the median and
worst render time of the page in ms and its size in bytes.
"""

import argparse
import datetime
import json
import os
import random
import statistics
import sys
import time

from nova_lease.visibility import render

START = datetime.datetime(2030, 1, 1)
HOST = {'vcpus': 64, 'memory_mb': 262144, 'disk_gb': 2000}


def _iso(when):
    return when.strftime('%Y-%m-%dT%H:%M:%SZ')


def body(hosts, steps, bookings, step_seconds, rng):
    step = datetime.timedelta(seconds=step_seconds)
    end = START + steps * step
    totals = {'capacity': 1, 'used': 0, 'promised': 0, 'free': 1}
    details = []
    for h in range(hosts):
        host_steps, k = [], 0
        while k < steps:
            run = rng.randint(1, max(1, steps // 6))
            vcpus = rng.choice((0, 16, 32, 48, 64))
            for _ in range(min(run, steps - k)):
                host_steps.append({
                    'used': {}, 'promised': {},
                    'free': {'vcpus': vcpus, 'memory_mb': vcpus * 4096,
                             'disk_gb': 2000}})
            k += run
        items = []
        for b in range(bookings):
            first = rng.randrange(steps)
            last = min(steps, first + rng.randint(1, max(1, steps // 4)))
            lease = 'lease-%d-%d' % (h, b)
            items.append({
                'lease_id': lease, 'lease_name': 'training run %d' % b,
                'project_id': '%032x' % rng.getrandbits(128),
                'reservation_id': 'r-' + lease,
                'resource_type': 'virtual:instance',
                'start': _iso(START + first * step),
                'end': _iso(START + last * step), 'whole_host': False,
                'vcpus': 16, 'memory_mb': 65536, 'disk_gb': 100})
        details.append({
            'host': 'compute-%04d' % h, 'registered': h % 5 == 0,
            'availability_zone': 'az%d' % (h % 3), 'capacity': dict(HOST),
            'steps': host_steps, 'idle_until': None, 'bookings': items})
    return {'capacity': {
        'start': _iso(START), 'end': _iso(end),
        'step_seconds': step_seconds,
        'now': _iso(START + steps // 3 * step), 'hosts': hosts,
        'resources': ['vcpus', 'memory_mb', 'disk_gb', 'hosts'],
        'steps': [{'start': _iso(START + i * step),
                   'end': _iso(START + (i + 1) * step),
                   'vcpus': dict(totals), 'memory_mb': dict(totals),
                   'disk_gb': dict(totals), 'hosts': dict(totals)}
                  for i in range(steps)],
        'total': {r: dict(totals) for r in ('vcpus', 'memory_mb',
                                            'disk_gb', 'hosts')},
        'view': 'all', 'host_details': details}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--sizes', default='10,100,500',
                        help='comma-separated host counts')
    parser.add_argument('--steps', type=int, default=168,
                        help='steps of the window (default 168: a week '
                             'of hours)')
    parser.add_argument('--bookings', type=int, default=4,
                        help='bookings per host')
    parser.add_argument('--repeat', type=int, default=5)
    parser.add_argument('--seed', type=int, default=16)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    sizes = []
    for hosts in [int(s) for s in args.sizes.split(',')]:
        data = body(hosts, args.steps, args.bookings, 3600, rng)
        times, svg_times = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            svg = render.svg(data)
            svg_times.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            page = render.html(data)
            times.append((time.perf_counter() - t0) * 1000)
        sizes.append({'hosts': hosts, 'steps': args.steps,
                      'bookings': hosts * args.bookings,
                      'svg_median_ms': round(statistics.median(svg_times),
                                             1),
                      'html_median_ms': round(statistics.median(times), 1),
                      'html_max_ms': round(max(times), 1),
                      'svg_bytes': len(svg.encode('utf-8')),
                      'html_bytes': len(page.encode('utf-8'))})
        print(json.dumps(sizes[-1], sort_keys=True), file=sys.stderr)
    largest = sizes[-1]
    out = {'hosts': largest['hosts'], 'steps': args.steps,
           'bookings': largest['bookings'],
           'html_median_ms': largest['html_median_ms'],
           'html_max_ms': largest['html_max_ms'],
           'html_bytes': largest['html_bytes'], 'repeat': args.repeat,
           'sizes': sizes,
           'load_average_1min': round(os.getloadavg()[0], 2)}
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == '__main__':
    sys.exit(main())
