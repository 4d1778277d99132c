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
"""Benchmark: what a future instance lease costs the cloud before its start.

Runs the in-process Nova 34 of the functional harness with nova_lease as an
operator runs it (the paste filter, LeaseFilter/LeaseWeigher, the compute
hook fed by Nova's real versioned notifications, the engine), boots
``--leases`` servers with a lease that starts in an hour (``nova boot
--hint lease_params=...``, flavor m1.tiny: 1 vCPU, 512 MB, 1 GB root
disk), waits until each shows ``SHELVED_OFFLOADED`` (what ``nova show``
prints until the start), then moves the clock to the start and lets the
engine start the leases, and counts, per lease:

* ``before_start``: from the boot until the lease's start -- Nova's
  scheduling requests (``select_destinations``), builds
  (``build_and_run_instance``), shelves and shelve-offloads on the
  computes, snapshot images created in the image service (with a real
  virt driver each is an upload of the server's whole root disk), the
  requests the compute hook and the engine made to nova-api (``GET``:
  mostly the engine polling a server it waits for; other: actions,
  metadata, tags, creations), and the wall time from the boot request to
  ``SHELVED_OFFLOADED`` (in this harness Nova runs RPC casts as calls, so
  the boot request itself returns after the build);
* ``at_start``: the same counters from the start event to ``ACTIVE``
  (unshelves included).

The fake virt driver uploads no bytes and builds in milliseconds: the
counts are the point, and the times are what the control plane needs.
The last line printed is one JSON object.

    python benchmarks/future_lease.py [--leases 10]
"""

import argparse
import collections
import datetime
import json
import os
import statistics
import sys
import threading
import time

os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')
sys.path.insert(0, os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

import nova.tests.functional  # noqa: E402,F401  (first, as in the tests)

import fixtures  # noqa: E402
from nova.compute import manager as compute_manager  # noqa: E402
from nova.scheduler import manager as scheduler_manager  # noqa: E402
from oslo_serialization import jsonutils  # noqa: E402

# Imported before Nova's fixtures forbid os.uname() (numpy calls it).
from nova_lease.scheduler import filters  # noqa: E402,F401
from tests.functional import base  # noqa: E402
from tests.functional import test_instance_lease  # noqa: E402

LEASES = 10
RESULT = {}

_COMPUTE_OPS = ('build_and_run_instance', 'shelve_instance',
                'shelve_offload_instance', 'unshelve_instance')


class _Counter(object):
    """WSGI wrapper counting requests by method and path shape."""

    def __init__(self, app):
        self.app = app
        self.counts = collections.Counter()
        self._lock = threading.Lock()

    def __call__(self, environ, start_response):
        path = environ.get('PATH_INFO', '')
        parts = [p for p in path.split('/') if p]
        shape = '/'.join('{id}' if len(p) >= 32 else p for p in parts)
        with self._lock:
            self.counts['%s /%s' % (environ['REQUEST_METHOD'], shape)] += 1
        return self.app(environ, start_response)


class FutureLeaseBench(test_instance_lease.InstanceLeaseTest):

    COMPUTES = {'host1': (64, 131072, 2000), 'host2': (64, 131072, 2000)}

    def setUp(self):
        super().setUp()
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        self.calls = collections.Counter()
        for name in _COMPUTE_OPS:
            self._count(compute_manager.ComputeManager, name, name)
        self._count(scheduler_manager.SchedulerManager,
                    'select_destinations', 'select_destinations')
        self._count(type(self.glance), 'create', 'image_creates')
        self.requests = _Counter(self.keystone.nova_app)
        self.keystone.nova_app = self.requests

    def _count(self, cls, method, name):
        original = getattr(cls, method)
        calls = self.calls

        def counted(*args, **kwargs):
            calls[name] += 1
            return original(*args, **kwargs)

        self.useFixture(fixtures.MockPatchObject(cls, method, new=counted))
        calls[name] = 0

    def _counts(self):
        counts = dict(self.calls)
        requests = self.requests.counts
        counts['api_requests_get'] = sum(
            n for key, n in requests.items() if key.startswith('GET '))
        counts['api_requests_other'] = sum(
            n for key, n in requests.items() if not key.startswith('GET '))
        return counts

    def _zero(self):
        for name in self.calls:
            self.calls[name] = 0
        self.requests.counts.clear()

    def _shown(self, server_id):
        return self.api.get_server(server_id)

    def test_bench(self):
        n = LEASES
        start = (self.clock.now + datetime.timedelta(hours=1)).replace(
            second=0)
        params = jsonutils.dumps({'start': start.strftime('%Y-%m-%d %H:%M'),
                                  'duration': '2h'})
        boot_s, offloaded_s, ids = [], [], []
        self._zero()
        for i in range(n):
            t0 = time.perf_counter()
            server = self._boot(hints={'lease_params': params},
                                name='future-%d' % i, wait=None)
            boot_s.append(time.perf_counter() - t0)
            self._wait_for(
                lambda: (lambda s: s['status'] == 'SHELVED_OFFLOADED' and
                         not s['OS-EXT-STS:task_state'])(
                    self._shown(server['id'])),
                'server %s SHELVED_OFFLOADED' % server['id'], timeout=60)
            offloaded_s.append(time.perf_counter() - t0)
            ids.append(server['id'])
        shown = self._shown(ids[0])
        before = self._counts()
        requests_before = dict(self.requests.counts)

        self._zero()
        self.clock.advance_to(start)
        t0 = time.perf_counter()
        self.engine.process_due()
        self._wait_for(lambda: all(
            lease['status'] == 'ACTIVE' for lease in
            test_instance_lease.db_api.lease_list(self.db)),
            'every lease ACTIVE', timeout=120)
        started_s = time.perf_counter() - t0
        servers = [s for s in self.admin_api.get_servers(
            search_opts={'all_tenants': 1})]
        self.assertEqual(n, len(servers))
        self.assertTrue(all(s['status'] == 'ACTIVE' for s in servers))
        at_start = self._counts()

        RESULT.update({
            'leases': n,
            'flavor': {'vcpus': 1, 'memory_mb': 512, 'root_gb': 1},
            'shown_before_start': {'status': shown['status'],
                                   'metadata': shown['metadata'],
                                   'tags': shown.get('tags')},
            'before_start_per_lease': {k: round(v / n, 2)
                                       for k, v in sorted(before.items())},
            'before_start_api_requests': dict(sorted(
                requests_before.items())),
            'boot_ms_median': round(statistics.median(boot_s) * 1000, 1),
            'boot_to_shelved_offloaded_ms_median': round(
                statistics.median(offloaded_s) * 1000, 1),
            'root_disk_uploaded_gb_per_lease_with_a_real_driver': (
                before['image_creates'] / n * 1),
            'at_start_per_lease': {k: round(v / n, 2)
                                   for k, v in sorted(at_start.items())},
            'start_to_all_active_s': round(started_s, 2),
            'load_average_1min': round(os.getloadavg()[0], 2),
        })


def main(argv=None):
    global LEASES
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--leases', type=int, default=LEASES)
    args = parser.parse_args(argv)
    LEASES = args.leases
    if not base.run_case(FutureLeaseBench('test_bench')) or not RESULT:
        return 1
    print(json.dumps(RESULT, sort_keys=True))
    return 0


if __name__ == '__main__':
    sys.exit(main())
