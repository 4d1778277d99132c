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

"""Cost of LeaseFilter + LeaseWeigher against Nova's default filters.

Builds 1,000 ``nova.scheduler.host_manager.HostState`` objects (64 vcpus,
256 GB RAM, 2 TB disk each, with 30 servers each, a third of them leased)
and a side database (SQLite file) holding N instance reservations (default
100,000), each with one allocation on a random host over the next 30 days;
10 % of them are leases that have started, whose server runs on its host.
Then, in the same run, for one request (a 4-vcpu flavor leased for 6 h
through the ``lease_params`` hint):

* ``nova_default_ms``: Nova's default ``enabled_filters`` plus its default
  ``weight_classes`` (all weighers) over the 1,000 hosts, through Nova's
  own filter and weight handlers;
* ``lease_ms``: LeaseFilter + LeaseWeigher over the same hosts, snapshot
  load included, for a request that must first bring the snapshot up to
  date after a change: each timed request follows one change made
  through nova_lease.db.api's writers (which write the change journal),
  in turn a lease admitted (``lease_create`` with its allocation) and a
  lease's end moved (``lease_update`` + ``allocation_update``). The
  median of both kinds; ``ratio = lease_ms / nova_default_ms``;
* ``lease_after_admission_ms``, ``lease_after_end_move_ms``: the same
  per kind of change; ``lease_after_change_p90_ms``: the 90th
  percentile of both; ``refresh_ms``: the snapshot refresh alone (probe,
  journal, re-read reservations, patched snapshot and calendar);
* ``lease_steady_ms``: the cached path (the probe finds the snapshot
  current: what every request pays between two changes);
* ``unleased_lease_ms``: the same for a request without a lease;
* ``cold_load_ms``: the first request after the scheduler starts (the
  snapshot read in full: SQL read plus calendar build); paid once, and
  again every ``scheduler_snapshot_ttl`` (the safety net);
* ``snapshot_load_ms``: that full read alone.

Times are medians of --repeat runs (the Nova and the after-change
samples interleaved, so that both see the same machine load). Each
``--sizes`` entry prints one line; the last line is the JSON object for
100,000 reservations (or the last size), with the other sizes'
``lease_ms`` under ``lease_ms_by_reservations``.

    python benchmarks/scheduler.py [--sizes 10000,100000,1000000]
"""

import argparse
import datetime
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')

import nova.conf  # noqa: E402
from nova import objects  # noqa: E402
from nova.scheduler import filters as nova_filters  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402
from nova.scheduler import weights as nova_weights  # noqa: E402
from oslo_utils import timeutils  # noqa: E402
from oslo_utils import uuidutils  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from nova_lease import conf as lease_conf  # noqa: E402
from nova_lease.db import api as db_api  # noqa: E402
from nova_lease.db import migration  # noqa: E402
from nova_lease.scheduler import filters as lease_filters  # noqa: E402
from nova_lease.scheduler import snapshot  # noqa: E402
from nova_lease.scheduler import weights as lease_weights  # noqa: E402

CONF = nova.conf.CONF
HOSTS = 1000
SERVERS_PER_HOST = 30
NOW = datetime.datetime(2030, 1, 1)
HOUR_ = datetime.timedelta(hours=1)
SEED = 42


def _host_states(rng, leased_by_host):
    states = []
    cell = uuidutils.generate_uuid()
    for k in range(HOSTS):
        name = 'host%04d' % k
        hs = host_manager.HostState(name, name, cell)
        hs.uuid = uuidutils.generate_uuid()
        hs.vcpus_total = 64
        hs.total_usable_ram_mb = 262144
        hs.total_usable_disk_gb = 2048
        hs.cpu_allocation_ratio = 1.0
        hs.ram_allocation_ratio = 1.0
        hs.disk_allocation_ratio = 1.0
        hs.hypervisor_type = 'QEMU'
        hs.hypervisor_version = 8002000
        hs.hypervisor_hostname = name
        hs.supported_instances = [('x86_64', 'kvm', 'hvm')]
        hs.stats = {}
        hs.limits = {}
        hs.updated = NOW
        hs.aggregates = []
        hs.service = host_manager.ReadOnlyDict({
            'host': name, 'binary': 'nova-compute', 'disabled': False,
            'forced_down': False, 'created_at': NOW, 'updated_at': NOW,
            'last_seen_up': NOW})
        instances = {}
        used = [0, 0, 0]
        leased = leased_by_host.get(name, [])
        for n in range(SERVERS_PER_HOST):
            uuid = leased[n] if n < len(leased) else \
                uuidutils.generate_uuid()
            inst = objects.Instance(uuid=uuid, vcpus=1, memory_mb=2048,
                                    root_gb=20, ephemeral_gb=0, host=name,
                                    node=name)
            instances[uuid] = inst
            used[0] += 1
            used[1] += 2048
            used[2] += 20
        hs.instances = instances
        hs.vcpus_used = used[0]
        hs.free_ram_mb = hs.total_usable_ram_mb - used[1]
        hs.disk_mb_used = used[2] * 1024
        hs.free_disk_mb = (hs.total_usable_disk_gb - used[2]) * 1024
        hs.num_instances = SERVERS_PER_HOST
        states.append(hs)
    return states


def _fill_database(url, n, rng):
    """n reservations (one lease each), each with one allocation.

    Returns {host: [server uuids of the started leases on it]}.
    """
    leases, reservations, allocations = [], [], []
    leased_by_host = {}
    for k in range(n):
        host = 'host%04d' % rng.randrange(HOSTS)
        lease_id = uuidutils.generate_uuid()
        res_id = uuidutils.generate_uuid()
        vcpus = rng.choice((1, 2, 4))
        if k % 10 == 0:
            # A started lease: its server runs on its host.
            start = NOW - datetime.timedelta(hours=rng.randint(1, 48))
            end = NOW + datetime.timedelta(hours=rng.randint(1, 72))
            server = uuidutils.generate_uuid()
            if len(leased_by_host.setdefault(host, [])) < \
                    SERVERS_PER_HOST // 3:
                leased_by_host[host].append(server)
            status = 'ACTIVE'
        else:
            start = NOW + datetime.timedelta(
                minutes=rng.randrange(30 * 24 * 60))
            end = start + datetime.timedelta(hours=rng.randint(1, 72))
            server = None
            status = 'PENDING'
        leases.append({'id': lease_id, 'name': 'l%d' % k,
                       'project_id': 'p%d' % rng.randrange(50),
                       'start_date': start, 'end_date': end,
                       'status': status, 'created_at': NOW})
        reservations.append({
            'id': res_id, 'lease_id': lease_id,
            'resource_type': 'virtual:instance', 'resource_id': server,
            'status': 'active' if server else 'pending',
            'properties': json.dumps({'vcpus': vcpus, 'memory_mb': 4096,
                                      'disk_gb': 20}),
            'created_at': NOW})
        allocations.append({'reservation_id': res_id, 'host': host,
                            'start_date': start, 'end_date': end,
                            'vcpus': vcpus, 'memory_mb': 4096,
                            'disk_gb': 20, 'whole_host': False})
    migration.create_schema(url)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for table, rows in ((db_api.LEASES, leases),
                            (db_api.RESERVATIONS, reservations),
                            (db_api.ALLOCATIONS, allocations)):
            for i in range(0, len(rows), 20000):
                conn.execute(sa.insert(table), rows[i:i + 20000])
    engine.dispose()
    return leased_by_host


def _request(hints=None, vcpus=4):
    flavor = objects.Flavor(vcpus=vcpus, memory_mb=8192, root_gb=40,
                            ephemeral_gb=0, swap=0, extra_specs={},
                            name='m1.large', flavorid='3')
    image = objects.ImageMeta.from_dict({
        'id': uuidutils.generate_uuid(), 'name': 'img',
        'properties': {'hw_architecture': 'x86_64'}})
    return objects.RequestSpec(
        instance_uuid=uuidutils.generate_uuid(), flavor=flavor,
        image=image, num_instances=1, project_id='p1', user_id='u1',
        scheduler_hints=hints or {}, ignore_hosts=None, force_hosts=None,
        force_nodes=None, instance_group=None, is_bfv=False,
        requested_destination=None, pci_requests=None,
        numa_topology=None, availability_zone=None,
        request_level_params=objects.RequestLevelParams())


def _nova_default():
    names = _default('enabled_filters')
    handler = nova_filters.HostFilterHandler()
    classes = handler.get_matching_classes(_default('available_filters'))
    by_name = {cls.__name__: cls for cls in classes}
    filters = [by_name[name]() for name in names]
    weigh_handler = nova_weights.HostWeightHandler()
    weighers = [cls() for cls in weigh_handler.get_matching_classes(
        _default('weight_classes'))]
    return handler, filters, weigh_handler, weighers


def _default(name):
    from nova.conf import scheduler as sched_conf
    for group, opts in sched_conf.list_opts().items():
        if getattr(group, 'name', group) == 'filter_scheduler':
            for opt in opts:
                if opt.name == name:
                    return opt.default
    raise LookupError(name)


def _time(fn, repeat):
    samples = []
    for _n in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def run(n, repeat, rng_seed=SEED):
    rng = random.Random(rng_seed)
    tmp = tempfile.mkdtemp(prefix='nova_lease_bench_')
    url = 'sqlite:///%s' % os.path.join(tmp, 'lease.sqlite')
    t0 = time.perf_counter()
    leased_by_host = _fill_database(url, n, rng)
    fill_s = time.perf_counter() - t0
    CONF.set_override('connection', url, group='nova_lease')
    states = _host_states(rng, leased_by_host)

    handler, filters, weigh_handler, weighers = _nova_default()
    lease_filter = lease_filters.LeaseFilter()
    lease_weigher = lease_weights.LeaseWeigher()
    end = NOW + datetime.timedelta(hours=6)
    hints = {'reserved': ['True'], 'lease_params': [json.dumps({
        'name': 'bench', 'start': 'now',
        'end': end.strftime('%Y-%m-%d %H:%M')})]}
    spec = _request(hints)
    plain = _request()

    def nova_default():
        hosts = handler.get_filtered_objects(filters, states, spec)
        return weigh_handler.get_weighed_objects(weighers, hosts, spec)

    def lease(req):
        def go():
            hosts = handler.get_filtered_objects([lease_filter], states,
                                                 req)
            return weigh_handler.get_weighed_objects([lease_weigher], hosts,
                                                     req)
        return go

    def reload_and_lease():
        snapshot.CACHE.invalidate()
        return lease(spec)()

    db = db_api.get_database(CONF)
    admitted = []

    def admit_one():
        # A lease admitted by nova-api: one transaction of the real
        # writer, which also writes the change journal (not timed).
        start = NOW + datetime.timedelta(
            minutes=rng.randrange(3 * 24 * 60))
        host = 'host%04d' % rng.randrange(HOSTS)
        lease = db_api.lease_create(db, {
            'name': 'new', 'project_id': 'p1', 'start_date': start,
            'end_date': start + 2 * HOUR_, 'status': 'PENDING'},
            reservations=[{
                'resource_type': 'virtual:instance', 'status': 'pending',
                'properties': {'vcpus': 2, 'memory_mb': 4096,
                               'disk_gb': 20},
                'allocations': [{
                    'host': host, 'start_date': start,
                    'end_date': start + 2 * HOUR_, 'vcpus': 2,
                    'memory_mb': 4096, 'disk_gb': 20}]}])
        admitted.append(lease)

    def move_end():
        # The end of an admitted lease moved (lease and allocation).
        lease = admitted[rng.randrange(len(admitted))]
        end = lease['end_date'] + HOUR_
        lease['end_date'] = end
        db_api.lease_update(db, lease['id'], {'end_date': end})
        rid = lease['reservations'][0]['id']
        for alloc in db_api.allocation_list(db, reservation_id=rid):
            db_api.allocation_update(db, alloc['id'], {'end_date': end})

    def timed(fn, out):
        t0 = time.perf_counter()
        result = fn()
        out.append((time.perf_counter() - t0) * 1000)
        return result

    def after_change(count):
        """Samples, interleaved so that all see the same machine load."""
        nova, steady, unleased = [], [], []
        admit, move, refresh = [], [], []
        for k in range(count):
            timed(nova_default, nova)
            timed(lease(spec), steady)
            timed(lease(plain), unleased)
            change, out = ((admit_one, admit) if k % 2 == 0 or
                           not admitted else (move_end, move))
            change()
            t0 = time.perf_counter()
            lease(spec)()
            out.append((time.perf_counter() - t0) * 1000)
            # The refresh alone, after another change of the same kind.
            change()
            t0 = time.perf_counter()
            snapshot.CACHE.get(db, NOW, 3600)
            refresh.append((time.perf_counter() - t0) * 1000)
        return nova, steady, unleased, admit, move, refresh

    def load_only():
        snapshot.load(db, NOW)

    snapshot.CACHE.invalidate()
    cold_ms = _time(reload_and_lease, 1)
    chosen = lease(spec)()
    passed = len(chosen)
    nova, steady, unleased, admit, move, refresh = after_change(repeat)
    nova_ms = statistics.median(nova)
    steady_ms = statistics.median(steady)
    unleased_ms = statistics.median(unleased)
    lease_ms = statistics.median(admit + move)
    # Full reads are slow at 1,000,000: fewer samples.
    full_reads = 1 if n >= 1000000 else max(2, repeat // 10)
    reload_ms = _time(reload_and_lease, full_reads)
    load_ms = _time(load_only, full_reads)
    db_api.reset_databases()
    snapshot.CACHE.invalidate()
    shutil.rmtree(tmp, ignore_errors=True)
    return {
        'hosts': HOSTS, 'reservations': n,
        'nova_default_ms': round(nova_ms, 3),
        'lease_ms': round(lease_ms, 3),
        'ratio': round(lease_ms / nova_ms, 3),
        'lease_after_admission_ms': round(statistics.median(admit), 3),
        'lease_after_end_move_ms': round(statistics.median(move), 3),
        'lease_after_change_p90_ms': round(
            statistics.quantiles(admit + move, n=10)[-1], 3),
        'refresh_ms': round(statistics.median(refresh), 3),
        'lease_steady_ms': round(steady_ms, 3),
        'unleased_lease_ms': round(unleased_ms, 3),
        'cold_load_ms': round(min(cold_ms, reload_ms), 3),
        'snapshot_load_ms': round(load_ms, 3),
        'hosts_passing_lease': passed,
        'db_fill_s': round(fill_s, 1),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', default='10000,100000,1000000')
    parser.add_argument('--repeat', type=int, default=20)
    args = parser.parse_args(argv)
    lease_conf.register_opts(CONF)
    CONF([], project='nova')
    objects.register_all()
    CONF.set_override('scheduler_snapshot_ttl', 3600, group='nova_lease')
    timeutils.set_time_override(NOW)
    sizes = [int(s) for s in args.sizes.split(',') if s]
    results = []
    for n in sizes:
        result = run(n, args.repeat)
        results.append(result)
        print('%(reservations)d reservations: nova %(nova_default_ms).2f ms,'
              ' lease after a change %(lease_ms).2f ms (admission '
              '%(lease_after_admission_ms).1f ms, end moved '
              '%(lease_after_end_move_ms).1f ms, refresh alone '
              '%(refresh_ms).1f ms), steady %(lease_steady_ms).2f ms, '
              'unleased %(unleased_lease_ms).2f ms, cold load '
              '%(cold_load_ms).1f ms' % result)
        sys.stdout.flush()
    main_result = next((r for r in results if r['reservations'] == 100000),
                       results[-1])
    main_result = dict(main_result)
    main_result['lease_ms_by_reservations'] = {
        str(r['reservations']): r['lease_ms'] for r in results}
    print(json.dumps(main_result))


if __name__ == '__main__':
    main()
