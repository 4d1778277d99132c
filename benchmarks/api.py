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
"""Benchmark: what the nova_lease paste filter adds to nova-api requests.

Runs the real in-process Nova 34 API of the functional harness (SQLite,
the filter in api-paste.ini right after keystonecontext) and times, with
``time.perf_counter``:

* ``*_added_ms``: per request, the time spent in the filter itself: the
  filter's total time minus the time spent in the rest of the pipeline
  below it (Nova's router), measured in the same request, so Nova's own
  (noisy) cost cancels out. Reported as the median and p90 over the
  iterations, for ``GET /servers`` (pass-through), a plain ``POST
  /servers`` (no lease hints: parsed and passed on) and a leased ``POST
  /servers`` (hints validated, flavor looked up, lease recorded, metadata
  injected, server linked).
* ``*_added_cpu_ms_median``: the same in CPU time of the request's
  thread (``time.thread_time``): what the filter computes, without the
  time it waits for the GIL or a CPU (other threads of the process, other
  processes of the machine). Wall time above it is waiting.
* ``post_leased_phases_ms``: the medians, in wall time, of the phases of a
  leased boot: ``hints`` (lease hints parsed), ``policy`` (the
  ``nova_lease:leases:create`` check), ``record`` (the PENDING lease
  recorded, one transaction) and ``link`` (servers linked, one
  transaction).
* ``*_ab_ms``: the median latency of the whole request with the filter in
  the pipeline minus the median without it (the filter unlinked from the
  loaded pipeline), interleaved, as a cross-check; it carries Nova's noise.
  For the leased POST it also holds what Nova itself does more for a
  server with metadata (the ``lease_id``/``lease_status`` keys the filter
  adds): its ``metadata_items`` quota check, a few reads of Nova's
  databases, tens of milliseconds on the harness's in-memory SQLite.

The figures are CPU-bound and follow the machine's load: other processes
evict the filter's code and data from the CPU caches between requests.
Compare runs made under the same load (the JSON has the load average).

To time the API alone, the conductor's ``schedule_and_build_instances`` is
a no-op (servers stay build requests) and quotas are unlimited. Targets
(DESIGN.md): at most 10 ms (median) added to a leased POST /servers,
nothing measurable on other requests (``post_ok``: the leased POST's
median at most ``target_post_ms``, the plain POST's and GET's under a
millisecond). The last line printed is one JSON object.

    python benchmarks/api.py [--iterations 200]
"""

import argparse
import json
import os
import statistics
import sys
import time
import unittest

os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')
sys.path.insert(0, os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

import nova.tests.functional  # noqa: E402,F401  (first, as in the tests)

import fixtures  # noqa: E402
from oslo_serialization import jsonutils  # noqa: E402

from nova_lease.api_ext import middleware  # noqa: E402
# Imported before Nova's fixtures forbid os.uname() (numpy calls it).
from nova_lease.scheduler import filters  # noqa: E402,F401
from tests.functional import base  # noqa: E402

ITERATIONS = 200
PROFILE = False
RESULT = {}


class _Timed(object):
    """WSGI wrapper that adds its (wall, thread CPU) time to a list."""

    def __init__(self, app, sink):
        self.application = app
        self.sink = sink

    def __call__(self, environ, start_response):
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return self.application(environ, start_response)
        finally:
            self.sink.append((time.perf_counter() - t0,
                              time.thread_time() - c0))


def _phase(sink, name, func):
    """func, timed into sink[name] (wall seconds)."""
    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            sink.setdefault(name, []).append(time.perf_counter() - t0)
    return timed


def _median_ms(values):
    return round(statistics.median(values) * 1000, 3)


def _p90_ms(values):
    values = sorted(values)
    return round(values[int(len(values) * 0.9) - 1] * 1000, 3)


class ApiBench(base.LeaseFunctionalBase):

    COMPUTES = {'host1': (1000, 1024000, 100000)}

    def setUp(self):
        super().setUp()
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        self.useFixture(fixtures.MockPatch(
            'nova.conductor.api.ComputeTaskAPI.schedule_and_build_instances'))
        chain = self.api_pipeline('/v2.1')
        index = [i for i, app in enumerate(chain)
                 if isinstance(app, middleware.LeaseMiddleware)][0]
        self.before, self.filter = chain[index - 1], chain[index]
        self.router = self.filter.application
        self.total, self.below = [], []
        self.timed_filter = _Timed(self.filter, self.total)
        timed_router = _Timed(self.router, self.below)
        self.filter.application = timed_router
        self.filter._server_create.application = timed_router
        # Phases of a leased boot, timed where servers.py calls them.
        self.phases = {}
        for name, target in (('hints', 'nova_lease.api_ext.boot_hints.'
                                       'lease_request'),
                             ('policy', 'nova_lease.policy.authorize'),
                             ('record', 'nova_lease.plugins.instance.'
                                        'rtype.create_instance_lease'),
                             ('link', 'nova_lease.plugins.instance.'
                                      'leases.link_instances')):
            module, attr = target.rsplit('.', 1)
            original = getattr(sys.modules[module], attr)
            self.useFixture(fixtures.MonkeyPatch(
                target, _phase(self.phases, name, original)))

    def _with_filter(self, on):
        self.before.application = self.timed_filter if on else self.router

    def _body(self, leased):
        body = {'server': self._build_server(
            name='bench', image_uuid=self.image_id, flavor_id='1',
            networks='none')}
        if leased:
            body['os:scheduler_hints'] = {
                'reserved': 'True',
                'lease_params': jsonutils.dumps({'start': 'now',
                                                 'duration': '2h'})}
        return body

    def _measure(self, request, n):
        """[(added s)], [(added CPU s)], [(latency with filter)],
        [(latency without)].
        """
        added, added_cpu, with_f, without_f = [], [], [], []
        for i in range(n):
            for on in ((True, False) if i % 2 else (False, True)):
                self._with_filter(on)
                del self.total[:], self.below[:]
                t0 = time.perf_counter()
                request()
                elapsed = time.perf_counter() - t0
                if on:
                    with_f.append(elapsed)
                    added.append(self.total[0][0] -
                                 sum(b[0] for b in self.below))
                    added_cpu.append(self.total[0][1] -
                                     sum(b[1] for b in self.below))
                else:
                    without_f.append(elapsed)
        self._with_filter(True)
        return added, added_cpu, with_f, without_f

    def test_bench(self):
        n = ITERATIONS
        for _ in range(5):
            self.api.post_server(self._body(False))
        # warm-up (lazy imports, policy, DB connections)
        for leased in (False, True):
            self.api.post_server(self._body(leased))
        self.api.get_servers()

        results = {}
        get = self._measure(lambda: self.api.api_get('/servers'), n * 2)
        post = self._measure(lambda: self.api.post_server(self._body(False)),
                             n)
        if PROFILE:
            import cProfile
            import pstats
            self._with_filter(True)
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(n):
                self.api.post_server(self._body(True))
            profiler.disable()
            pstats.Stats(profiler, stream=sys.stderr).sort_stats(
                'cumulative').print_stats('nova_lease|sqlalchemy/engine/base'
                                          '|oslo_messaging', 40)
        self.phases.clear()
        leased = self._measure(
            lambda: self.api.post_server(self._body(True)), n)
        results['post_leased_phases_ms'] = {
            name: _median_ms(values)
            for name, values in sorted(self.phases.items())}
        for name, (added, added_cpu, with_f, without_f) in (
                ('get', get), ('post', post), ('post_leased', leased)):
            results[name + '_added_ms_median'] = _median_ms(added)
            results[name + '_added_ms_p90'] = _p90_ms(added)
            results[name + '_added_cpu_ms_median'] = _median_ms(added_cpu)
            results[name + '_ab_ms'] = round(
                (statistics.median(with_f) - statistics.median(without_f))
                * 1000, 3)
            results[name + '_ms_median_without_filter'] = _median_ms(
                without_f)
        results['iterations'] = n
        results['load_average_1min'] = round(os.getloadavg()[0], 2)
        results['get_iterations'] = n * 2
        RESULT.update(results)


def main(argv=None):
    global ITERATIONS, PROFILE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--iterations', type=int, default=ITERATIONS)
    parser.add_argument('--profile', action='store_true',
                        help='print a profile of the leased POST to stderr')
    args = parser.parse_args(argv)
    ITERATIONS = args.iterations
    PROFILE = args.profile
    suite = unittest.TestSuite([ApiBench('test_bench')])
    result = unittest.TextTestRunner(stream=sys.stderr, verbosity=0).run(
        suite)
    if not result.wasSuccessful() or not RESULT:
        return 1
    RESULT['target_post_ms'] = 10.0
    # The targets: at most 10 ms added to a leased POST, nothing
    # measurable (under a millisecond) to the others.
    RESULT['post_ok'] = (
        RESULT['post_leased_added_ms_median'] <= RESULT['target_post_ms']
        and max(RESULT['post_added_ms_median'],
                RESULT['get_added_ms_median']) < 1.0)
    print(json.dumps(RESULT, sort_keys=True))
    return 0


if __name__ == '__main__':
    sys.exit(main())
