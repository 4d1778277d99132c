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
"""Benchmark: a burst of N lease starts due at the same second.

Runs the in-process Nova 34 of the functional harness with Nova's RPC casts
asynchronous (as in a deployment: an unshelve or a boot returns before the
compute has done it), Nova's versioned notifications delivered to the
compute hook, and the engine as nova-lease-engine builds it (its default
``engine_workers`` and poll interval). For each N it times, from the due
instant to each server ACTIVE (seen by a watcher reading Nova's database
every 100 ms), two paths side by side, each against its floor -- the same
Nova actions sent by hand, with no engine:

* ``unshelve``: N leased servers, shelved (offloaded) and marked
  reserved (tag and metadata), whose leases start at the same second,
  each with the host admission control promised it (recorded in the side
  database as the lease middleware records a scheduled lease: at the
  start each unshelve may only go to that host); floor: the N unshelves
  sent one after the other by a script;
* ``create``: N future instance leases booted with ``nova boot --hint
  lease_params=...``, whose servers the engine creates at their start;
  floor: the N boots sent one after the other.

The clock of the harness follows real time. Floor and engine run
alternately, ``--rounds`` pairs per path and N (floor then engine, then
engine then floor, ...): the in-process Nova's
pace drifts by a third between runs of one process, so one run of each
says little. ``--warmup`` untimed floor runs come first: the first run
after the servers are built is faster than the later ones. Per pair:
``p50_s``, ``p99_s``, ``max_s``; the floor's ``floor_p50_s``,
``floor_p99_s``, ``floor_max_s``; ``ratio`` (p99 over the floor's p99);
``engine_requests``, the compute API requests the engine sent, per kind
(the watcher's and the floor's are not counted); and ``engine_sent_s``,
from the due instant to the last of the engine's unshelves or creates
answered; ``engine_done_s``, from the due instant to every lease
ACTIVE, the metadata and tag of its servers updated (the engine does
that bookkeeping once the burst's unshelves or creates are sent);
``cpu_load`` and ``floor_cpu_load``, the process's CPU time
over the wall time until every server was ACTIVE; ``hosts`` and
``floor_hosts``, how many servers each compute host got. Per path and N:
the median over the pairs of ``p99_s``, ``floor_p99_s`` and ``ratio``,
and every pair's ratio (``ratios``). The last line is one JSON object
with ``n`` (the largest N), and ``p99_s``, ``floor_p99_s``, ``ratio``,
``ratios`` and ``path`` of the worse path at that N, with every figure
under ``runs``, and ``compute_hosts`` (``--hosts``). Target: ``ratio``
at most 1.5 at N = 100.

    python benchmarks/wakeup.py [--sizes 20,100] [--spawn-seconds 0]
                                [--paths unshelve,create] [--rounds 2]
                                [--warmup 1] [--hosts 2] [--timeout 600]

``--spawn-seconds`` adds that much time to each spawn of the fake virt
driver (a hypervisor's own time), for engine and floor alike.
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
from nova.compute import vm_states  # noqa: E402
import nova.conf  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova import objects  # noqa: E402
from nova.virt import fake as fake_virt  # noqa: E402
from oslo_serialization import jsonutils  # noqa: E402

# Imported before Nova's fixtures forbid os.uname() (numpy calls it).
from nova_lease.capacity import admission  # noqa: E402
from nova_lease import compute  # noqa: E402
from nova_lease.conf import engine as engine_conf  # noqa: E402
from nova_lease.conf import lease as lease_conf  # noqa: E402
from nova_lease.db import api as db_api  # noqa: E402
from nova_lease import lease_events  # noqa: E402
from nova_lease.scheduler import filters  # noqa: E402,F401
from tests.functional import base  # noqa: E402
from tests.functional import test_instance_lease  # noqa: E402

CONF = nova.conf.CONF
ARGS = None
RESULT = {}


#: The ComputeClient methods that send one request each.
_REQUESTS = ('get_server', 'list_servers_changed_since', 'unshelve_server',
             'set_server_metadata', 'delete_server_tag')


def _pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


class _Watcher(object):
    """Records when each server is first ACTIVE with no task.

    It reads Nova's cell database every 100 ms (what the compute API
    shows, at a fraction of its cost: a watcher listing the servers
    through the API ten times a second would take most of the process's
    CPU, and slow the engine and the floor alike).
    """

    def __init__(self, interval=0.1):
        self.interval = interval
        self.active = {}
        self.hosts = collections.Counter()  # servers per compute host
        self._context = nova_context.get_admin_context()

    def run(self, expected, timeout):
        cpu, wall = time.process_time(), time.monotonic()
        try:
            self._run(expected, timeout)
        finally:
            # The process's CPU time over the wall time (1.0: one core
            # busy all along, which is all the GIL allows Python code).
            self.cpu_load = round((time.process_time() - cpu) /
                                  (time.monotonic() - wall), 2)

    def _run(self, expected, timeout):
        deadline = time.monotonic() + timeout
        while len(self.active) < expected:
            if time.monotonic() > deadline:
                raise AssertionError('only %d of %d servers ACTIVE after '
                                     '%d s' % (len(self.active), expected,
                                               timeout))
            now = time.monotonic()
            for instance in objects.InstanceList.get_by_filters(
                    self._context, {'deleted': False}, expected_attrs=[]):
                if (instance.vm_state == vm_states.ACTIVE and
                        not instance.task_state):
                    if instance.uuid not in self.active:
                        self.active[instance.uuid] = now
                        self.hosts[instance.host] += 1
            time.sleep(self.interval)


class WakeupBench(test_instance_lease.InstanceLeaseTest):

    CAST_AS_CALL = False
    LISTEN = True

    def setUp(self):
        # --hosts compute hosts, big enough for every server of a run.
        self.COMPUTES = {'host%d' % (i + 1): (128, 262144, 4000)
                         for i in range(ARGS.hosts)}
        super().setUp()
        # Time moves as in a deployment, for engine and floor alike.
        self.clock.follow_real_time()
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        if ARGS.spawn_seconds:
            original = fake_virt.FakeDriver.spawn

            def spawn(driver, *args, **kwargs):
                time.sleep(ARGS.spawn_seconds)
                return original(driver, *args, **kwargs)
            self.useFixture(fixtures.MonkeyPatch(
                'nova.virt.fake.FakeDriver.spawn', spawn))
        # Every compute API request of the engine (its ComputeClient).
        self.requests = collections.Counter()
        self.answered = {}      # request kind: when the last one returned
        for name in _REQUESTS:
            self.useFixture(fixtures.MonkeyPatch(
                'nova_lease.compute.ComputeClient.' + name,
                self._counted(name, getattr(compute.ComputeClient, name))))

    def _counted(self, name, method):
        def counted(client, *args, **kwargs):
            self.requests[name] += 1
            try:
                return method(client, *args, **kwargs)
            finally:
                self.answered[name] = time.monotonic()
        return counted

    def _engine(self, **overrides):
        # The production time-out and retries (tests use 30 s and 1): a
        # wait of a burst's last server may take longer than 30 s.
        defaults = {opt.dest: opt.default
                    for opts in (lease_conf.LEASE_OPTS,
                                 engine_conf.ENGINE_OPTS) for opt in opts}
        for name in ('plugin_call_timeout', 'max_retries', 'retry_interval'):
            overrides.setdefault(name, defaults[name])
        # A wait may last as long as a run may (--timeout); the claims
        # outlast it, as nova-lease-engine requires.
        overrides['plugin_call_timeout'] = int(max(
            overrides['plugin_call_timeout'], ARGS.timeout))
        overrides.setdefault('engine_claim_timeout', max(
            defaults['engine_claim_timeout'],
            overrides['plugin_call_timeout'] + 60))
        engine = super()._engine(**overrides)
        # The production poll interval (tests use 0.1 s).
        engine.plugins['virtual:instance'].compute.poll_interval = 1.0
        return engine

    def _clean(self):
        for server in self.admin_api.get_servers(
                search_opts={'all_tenants': 1}):
            self.admin_api.delete_server(server['id'])
        self._wait_for(lambda: not self.admin_api.get_servers(
            search_opts={'all_tenants': 1}), 'no server left', timeout=300)

    def _times(self, t0, watcher):
        self.cpu_load = watcher.cpu_load
        self.hosts = dict(watcher.hosts)
        return [t - t0 for t in watcher.active.values()]

    # The setup (untimed) builds and shelves servers SETUP_BATCH at a
    # time: a hundred builds at once pile up on the in-process Nova's
    # shared compute lock and its thread pools, and took over 20 minutes.
    SETUP_BATCH = 10

    def _batches(self, items):
        for first in range(0, len(items), self.SETUP_BATCH):
            yield items[first:first + self.SETUP_BATCH]

    def _active(self, n):
        ids = []
        for names in self._batches(['s%d' % i for i in range(n)]):
            batch = [self._boot(name=name, wait=None)['id']
                     for name in names]
            self._all_in(batch, vm_states.ACTIVE)
            ids.extend(batch)
        return ids

    def _shelve(self, ids):
        for batch in self._batches(ids):
            for server_id in batch:
                # Marked as a reserved server is (its start removes both).
                self.admin_api.put_server_tags(server_id, ['reserved'])
                self.admin_api.post_server_metadata(
                    server_id, {'lease_status': 'reserved'})
                self.admin_api.post_server_action(server_id,
                                                  {'shelve': None})
            self._all_in(batch, vm_states.SHELVED_OFFLOADED)

    def _all_in(self, ids, vm_state, timeout=1200):
        # From Nova's database, every half second: listing a hundred
        # servers through the API ten times a second took most of the
        # process's CPU and slowed the builds it waited for.
        context = nova_context.get_admin_context()
        wanted = set(ids)

        def done():
            time.sleep(0.4)
            return wanted <= {
                i.uuid for i in objects.InstanceList.get_by_filters(
                    context, {'uuid': list(wanted), 'deleted': False},
                    expected_attrs=[])
                if i.vm_state == vm_state and not i.task_state}
        self._wait_for(done, 'every server %s' % vm_state, timeout=timeout)

    def _floor_unshelve(self, ids):
        self._shelve(ids)
        watcher = _Watcher()
        t0 = time.monotonic()
        for server_id in ids:
            self.admin_api.post_server_action(server_id, {'unshelve': None})
        watcher.run(len(ids), ARGS.timeout)
        return self._times(t0, watcher)

    def _engine_unshelve(self, ids):
        self._shelve(ids)
        start = self._admitted_server_leases(ids)
        times = self._run_engine(start, len(ids))
        # The servers serve the next round: their leases go (before
        # their end, which would shelve them).
        for lease in db_api.lease_list(self.db):
            db_api.lease_destroy(self.db, lease['id'])
        return times

    def _admitted_server_leases(self, server_ids):
        """One PENDING lease per shelved server, all due at the same
        minute an hour on, each with the host admission control promised
        it, recorded as the lease middleware records a scheduled lease
        (admission and lease in one writer transaction): at the start,
        each unshelve may go only to its promised host. That start.
        """
        start = (self.clock.now + datetime.timedelta(hours=1)).replace(
            second=0, microsecond=0)
        end = start + datetime.timedelta(hours=2)
        size = {'vcpus': 1, 'memory_mb': 512, 'disk_gb': 1}
        for server_id in server_ids:
            with self.db.writer() as session:
                allocations = admission.allocate_instances(
                    session, CONF, size, 1, start, end)
                db_api.lease_create(session, {
                    'name': 'shelved', 'project_id': self.api.project_id,
                    'user_id': 'fake', 'start_date': start,
                    'end_date': end, 'status': 'PENDING'}, reservations=[{
                        'resource_type': 'virtual:instance',
                        'resource_id': server_id, 'status': 'pending',
                        'properties': dict(size),
                        'allocations': allocations}],
                    events=lease_events.lease_events(start, end))
        return start

    def _run_engine(self, start, n):
        watcher = _Watcher()
        self.requests.clear()
        self.answered.clear()
        self.clock.advance_to(start)
        t0 = time.monotonic()
        done = threading.Thread(target=self.engine.process_due,
                                kwargs={'timeout': ARGS.timeout})
        done.start()
        watcher.run(n, ARGS.timeout)
        done.join(ARGS.timeout)
        # Every lease ACTIVE, its servers' metadata and tag updated too
        # (that bookkeeping waits for the burst's placing requests).
        self.engine_done_s = round(time.monotonic() - t0, 3)
        times = self._times(t0, watcher)
        self.engine_requests = dict(self.requests)
        # From the due instant to the last unshelve answered.
        self.engine_sent_s = round(
            self.answered.get('unshelve_server', t0) - t0, 3)
        leases = [lease for lease in db_api.lease_list(self.db)
                  if lease['status'] == 'ACTIVE']
        self.assertEqual(n, len(leases))
        return times

    def _floor_create(self, n):
        watcher = _Watcher()
        t0 = time.monotonic()
        for i in range(n):
            self._boot(name='c%d' % i, wait=None)
        watcher.run(n, ARGS.timeout)
        times = self._times(t0, watcher)
        self._clean()
        return times

    def _engine_create(self, n):
        start = (self.clock.now + datetime.timedelta(hours=1)).replace(
            second=0, microsecond=0)
        params = jsonutils.dumps({'start': start.strftime('%Y-%m-%d %H:%M'),
                                  'duration': '2h'})
        for i in range(n):
            self._boot(hints={'lease_params': params}, name='f%d' % i,
                       wait=None)
        times = self._run_engine(start, n)
        self._clean()
        for lease in db_api.lease_list(self.db):
            db_api.lease_destroy(self.db, lease['id'])
        return times

    def _figures(self, times, floor):
        out = {'p50_s': round(statistics.median(times), 3),
               'p99_s': round(_pct(times, 0.99), 3),
               'max_s': round(max(times), 3),
               'floor_p50_s': round(statistics.median(floor), 3),
               'floor_p99_s': round(_pct(floor, 0.99), 3),
               'floor_max_s': round(max(floor), 3)}
        out['ratio'] = round(out['p99_s'] / out['floor_p99_s'], 2)
        # What the engine asked of Nova's API, per kind of request.
        out['engine_requests'] = self.engine_requests
        out['engine_sent_s'] = self.engine_sent_s
        out['engine_done_s'] = self.engine_done_s
        return out

    def _rounds(self, path, n):
        """``ARGS.rounds`` pairs of a floor run and an engine run, in the
        order floor, engine, then engine, floor, and so on (a slow drift
        of the process weighs on both alike); one figure set per pair.
        """
        if path == 'unshelve':
            # The same servers serve every round: shelved before each.
            ids = self._active(n)
            runs = {'floor': lambda: self._floor_unshelve(ids),
                    'engine': lambda: self._engine_unshelve(ids)}
        else:
            runs = {'floor': lambda: self._floor_create(n),
                    'engine': lambda: self._engine_create(n)}
        # The first run after the servers are built is faster than every
        # later one (a floor run first took half the time of the three
        # after it, which stayed level): one untimed floor run first.
        for _ in range(ARGS.warmup):
            runs['floor']()
        pairs = []
        for i in range(ARGS.rounds):
            measured = {}
            for kind in ('floor', 'engine')[::1 if i % 2 == 0 else -1]:
                measured[kind] = runs[kind]()
                measured[kind + '_cpu_load'] = self.cpu_load
                measured[kind + '_hosts'] = self.hosts
            pair = dict(self._figures(measured['engine'], measured['floor']),
                        n=n, path=path, round=i + 1,
                        first='floor' if i % 2 == 0 else 'engine',
                        cpu_load=measured['engine_cpu_load'],
                        floor_cpu_load=measured['floor_cpu_load'],
                        hosts=measured['engine_hosts'],
                        floor_hosts=measured['floor_hosts'])
            print(json.dumps(pair), flush=True)
            pairs.append(pair)
        if path == 'unshelve':
            self._clean()
        return {
            'n': n, 'path': path,
            'p99_s': statistics.median(p['p99_s'] for p in pairs),
            'floor_p99_s': statistics.median(p['floor_p99_s']
                                             for p in pairs),
            'ratio': round(statistics.median(p['ratio'] for p in pairs), 2),
            'ratios': [p['ratio'] for p in pairs], 'pairs': pairs}

    def test_bench(self):
        runs = {}
        for n in ARGS.sizes:
            for path in ('unshelve', 'create'):
                if path in ARGS.paths:
                    runs['%s_%d' % (path, n)] = self._rounds(path, n)
        n = max(ARGS.sizes)
        worst = max((r for r in runs.values() if r['n'] == n),
                    key=lambda r: r['ratio'])
        RESULT.update({
            'n': n, 'path': worst['path'], 'p99_s': worst['p99_s'],
            'floor_p99_s': worst['floor_p99_s'], 'ratio': worst['ratio'],
            'ratios': worst['ratios'], 'rounds': ARGS.rounds,
            'runs': runs, 'engine_workers': self.engine.opts.engine_workers,
            'spawn_seconds': ARGS.spawn_seconds, 'compute_hosts': ARGS.hosts,
            'load_average_1min': round(os.getloadavg()[0], 2)})


def main(argv=None):
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--sizes', default='20,100',
                        type=lambda v: [int(x) for x in v.split(',')])
    parser.add_argument('--spawn-seconds', type=float, default=0.0)
    parser.add_argument('--paths', default='unshelve,create',
                        type=lambda v: v.split(','),
                        help='the paths to run (default: both)')
    parser.add_argument('--rounds', type=int, default=2,
                        help='pairs of floor and engine runs per path and '
                             'N (default: 2)')
    parser.add_argument('--hosts', type=int, default=2,
                        help='compute hosts (default: 2)')
    parser.add_argument('--timeout', type=float, default=600,
                        help='seconds a run may take until every server '
                             'is ACTIVE (default: 600)')
    parser.add_argument('--warmup', type=int, default=1,
                        help='untimed floor runs before the pairs '
                             '(default: 1)')
    ARGS = parser.parse_args(argv)
    if not base.run_case(WakeupBench('test_bench')) or not RESULT:
        return 1
    print(json.dumps(RESULT, sort_keys=True))
    return 0


if __name__ == '__main__':
    sys.exit(main())
