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

Builds --hosts (default 1,000) ``nova.scheduler.host_manager.HostState``
objects (64 vcpus, 256 GB RAM, 2 TB disk each, with 30 servers each, up
to a third of them leased) and a side database (SQLite file) holding N
instance reservations (default 100,000), each with one allocation on a
random host over the next 30 days; 10 % of them are leases that have
started, whose server runs on its host. 5 % of the hosts are registered
(os-hosts) in the free pool aggregate, with two future host leases each
(whole-host allocations), and 5 % are in the aggregates of started host
reservations (five hosts per reservation, whole-host allocations over
[now - 1 day, now + 2 days)); instance allocations use the other hosts,
as admission does. The database is filled in a child process (its memory
is not counted) and kept in --db-dir (reused by later runs with the same
hosts, size and seed) when given.

Then, in the same run, for one request (a 4-vcpu flavor leased for 6 h:
its lease is in the database and the request carries the
``lease_params`` hint and the lease's ``nova_lease_id``):

* ``nova_default_ms``: Nova's default ``enabled_filters`` plus its default
  ``weight_classes`` (all weighers) over the hosts, through Nova's
  own filter and weight handlers;
* ``lease_ms``: LeaseFilter + LeaseWeigher over the same hosts, for a
  request that must first bring the snapshot up to date after a
  change: each timed request follows one change made through
  nova_lease.db.api's writers (which write the change journal), in turn
  a lease admitted (``lease_create`` with its allocation) and a lease's
  end moved (``lease_update`` + ``allocation_update``). The median of
  both kinds; ``ratio = lease_ms / nova_default_ms``;
* ``lease_after_admission_ms``, ``lease_after_end_move_ms``: the same
  per kind of change; ``lease_after_change_p90_ms``: the 90th
  percentile of both; ``refresh_ms``: the snapshot refresh alone (probe,
  journal, re-read reservations, patched snapshot and calendar);
* ``lease_steady_ms``: the cached path (the probe finds the snapshot
  current: what every request pays between two changes);
  ``steady_ratio`` is it over ``nova_default_ms``;
* ``unleased_lease_ms``: the same for a request without a lease;
* ``lease_during_reload_ms``: a request while a full read of the
  snapshot runs in the background (the scheduler's threads share the
  interpreter with it), median; ``lease_during_reload_max_ms`` the
  slowest of them (requests run back to back during the read and the
  retirement of the old snapshot);
* ``cold_request_ms``: a request at cold start (the scheduler has no
  snapshot yet: the request reads its hosts' promises itself, or is
  refused when there are more than ``view.COLD_READ_LIMIT``);
  ``cold_request_hosts`` how many hosts passed it;
* ``cold_load_ms``: from the cold start until the first snapshot is in
  use (its full read, in the background); ``snapshot_load_ms``: a full
  read alone (SQL read plus calendar build);
* ``moves_ms``: LeaseFilter's read of the cell's recent live
  migrations alone (part of every request: :mod:`nova_lease.scheduler.
  moves`), on Nova's API and cell databases (SQLite files) holding
  ``OLD_MIGRATIONS_PER_HOST`` live migrations per host, none recent (a
  host a live migration reached lately costs one placement call more,
  not measured here);
* ``snapshot_rss_mb``: the resident memory one snapshot adds to the
  process; ``peak_rss_mb``: the process's peak resident memory (host
  states, snapshots, and two snapshots side by side during a reload).

Times are medians of --repeat runs (the Nova and the after-change
samples interleaved, so that both see the same machine load). Each
``--sizes`` entry prints one line; the last line is the JSON object for
100,000 reservations (or the last size), with the other sizes'
``lease_ms`` under ``lease_ms_by_reservations``.

    python benchmarks/scheduler.py [--sizes 10000,100000,1000000]
        [--hosts 1000] [--repeat 20] [--db-dir DIR]
"""

import argparse
import datetime
import gc
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')

import nova.conf  # noqa: E402
from nova.db.api import api as nova_api_db  # noqa: E402
from nova.db.api import models as nova_api_models  # noqa: E402
from nova.db.main import api as nova_main_db  # noqa: E402
from nova.db.main import models as nova_main_models  # noqa: E402
from nova import objects  # noqa: E402
from nova.scheduler import filters as nova_filters  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402
from nova.scheduler import weights as nova_weights  # noqa: E402
import oslo_messaging  # noqa: E402
from oslo_utils import timeutils  # noqa: E402
from oslo_utils import uuidutils  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from nova_lease import conf as lease_conf  # noqa: E402
from nova_lease.db import api as db_api  # noqa: E402
from nova_lease.db import migration  # noqa: E402
from nova_lease.db import models  # noqa: E402
from nova_lease.scheduler import filters as lease_filters  # noqa: E402
from nova_lease.scheduler import hosts as lease_hosts  # noqa: E402
from nova_lease.scheduler import moves  # noqa: E402
from nova_lease.scheduler import snapshot_cache  # noqa: E402
from nova_lease.scheduler import snapshot_reads  # noqa: E402
from nova_lease.scheduler import view  # noqa: E402
from nova_lease.scheduler import weights as lease_weights  # noqa: E402

CONF = nova.conf.CONF
HOSTS = 1000
SERVERS_PER_HOST = 30
NOW = datetime.datetime(2030, 1, 1)
HOUR_ = datetime.timedelta(hours=1)
DAY = datetime.timedelta(days=1)
SEED = 42
#: Fractions of the hosts in the free pool and in host reservations.
FREEPOOL_SHARE = 0.05
HELD_SHARE = 0.05
HOSTS_PER_HOST_LEASE = 5
FREEPOOL = 'freepool'


def admit_lease(db, rng, hosts, within_minutes):
    """A 2-hour instance lease admitted by nova-api on one of ``hosts``,
    starting within ``within_minutes`` of NOW: one transaction of the
    real writer, which also writes the change journal (not timed).
    """
    start = NOW + datetime.timedelta(minutes=rng.randrange(within_minutes))
    host = hosts[rng.randrange(len(hosts))]
    return db_api.lease_create(db, {
        'name': 'new', 'project_id': 'p1', 'start_date': start,
        'end_date': start + 2 * HOUR_, 'status': 'PENDING'},
        reservations=[{
            'resource_type': 'virtual:instance', 'status': 'pending',
            'properties': {'vcpus': 2, 'memory_mb': 4096, 'disk_gb': 20},
            'allocations': [{
                'host': host, 'start_date': start,
                'end_date': start + 2 * HOUR_, 'vcpus': 2,
                'memory_mb': 4096, 'disk_gb': 20}]}])


def forget(db, admitted, tmp):
    """Leave a reused database as it was filled (the ``admitted`` leases
    gone), drop the cached snapshot and the temporary directory ``tmp``.
    """
    for lease in admitted:
        db_api.lease_destroy(db, lease['id'])
    db_api.reset_databases()
    snapshot_cache.CACHE.invalidate()
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)


def _name(k):
    return 'host%05d' % k


def _rss_mb():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE') / 2.0**20


def _peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _host_states(hosts, layout):
    """HostStates of the hosts, with their servers and aggregates."""
    states = []
    cell = layout['cell']
    leased_by_host = layout['leased_by_host']
    freepool = set(layout['freepool'])
    aggregates = {}
    if freepool:
        agg = objects.Aggregate(id=1, name=FREEPOOL, hosts=sorted(freepool),
                                metadata={})
        for host in freepool:
            aggregates[host] = [agg]
    for n, (rid, members) in enumerate(sorted(layout['held'].items())):
        agg = objects.Aggregate(id=n + 2, name='reservation-' + rid,
                                hosts=members,
                                metadata={lease_hosts.RESERVATION_KEY: rid})
        for host in members:
            aggregates[host] = [agg]
    for k in range(hosts):
        name = _name(k)
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
        hs.aggregates = aggregates.get(name, [])
        hs.service = host_manager.ReadOnlyDict({
            'host': name, 'binary': 'nova-compute', 'disabled': False,
            'forced_down': False, 'created_at': NOW, 'updated_at': NOW,
            'last_seen_up': NOW})
        instances = {}
        used = [0, 0, 0]
        leased = leased_by_host.get(name, [])
        servers = 0 if name in freepool else SERVERS_PER_HOST
        for n in range(servers):
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
        hs.num_instances = servers
        states.append(hs)
    return states


#: Live migrations per host in the cell database's history, all older
#: than nova_lease.scheduler.moves' window.
OLD_MIGRATIONS_PER_HOST = 10


def _nova_databases(db_dir, hosts, cell):
    """Nova's API and cell databases (SQLite files) as LeaseFilter reads
    them: the cell mapped, OLD_MIGRATIONS_PER_HOST live migrations per
    host long done (LeaseFilter reads a cell's recent live migrations on
    every request; none is recent here, so placement is not asked).
    """
    api_url = 'sqlite:///' + os.path.join(db_dir, 'nova_api.sqlite')
    cell_url = 'sqlite:///' + os.path.join(db_dir, 'nova_cell1.sqlite')
    for url, base in ((api_url, nova_api_models.BASE),
                      (cell_url, nova_main_models.BASE)):
        engine = sa.create_engine(url)
        base.metadata.drop_all(engine)
        base.metadata.create_all(engine)
        engine.dispose()
    CONF.set_override('connection', api_url, group='api_database')
    CONF.set_override('connection', cell_url, group='database')
    nova_api_db.context_manager.configure(connection=api_url)
    nova_main_db.context_manager.configure(connection=cell_url)
    engine = sa.create_engine(api_url)
    with engine.begin() as conn:
        conn.execute(nova_api_models.CellMapping.__table__.insert(), {
            'uuid': cell, 'name': 'cell1', 'transport_url': 'none:///',
            'database_connection': cell_url, 'disabled': False})
    engine.dispose()
    long_ago = NOW - 30 * DAY
    engine = sa.create_engine(cell_url)
    table = nova_main_models.Migration.__table__
    with engine.begin() as conn:
        conn.execute(table.insert(), [{
            'uuid': uuidutils.generate_uuid(), 'deleted': 0,
            'created_at': long_ago, 'updated_at': long_ago,
            'source_compute': _name(k), 'source_node': _name(k),
            'dest_compute': _name((k + j + 1) % hosts),
            'dest_node': _name((k + j + 1) % hosts),
            'instance_uuid': uuidutils.generate_uuid(),
            'status': 'completed', 'migration_type': 'live-migration',
            'hidden': False}
            for k in range(hosts) for j in range(OLD_MIGRATIONS_PER_HOST)])
    engine.dispose()


def _fill_database(url, n, hosts, rng):
    """n instance reservations (one lease each), each with one
    allocation; the registered hosts, their host leases; the lease of the
    benchmark's request.

    Returns the layout: {'leased_by_host': {host: [server uuids of the
    started leases on it]}, 'freepool': [hosts], 'held': {reservation
    id: [hosts]}, 'bench_lease': lease id}.
    """
    n_free = int(hosts * FREEPOOL_SHARE)
    n_held = int(hosts * HELD_SHARE) // HOSTS_PER_HOST_LEASE * \
        HOSTS_PER_HOST_LEASE
    order = list(range(hosts))
    rng.shuffle(order)
    freepool = sorted(_name(k) for k in order[:n_free])
    held_hosts = sorted(_name(k) for k in order[n_free:n_free + n_held])
    others = sorted(order[n_free + n_held:])
    leases, reservations, allocations, registry = [], [], [], []
    leased_by_host = {}
    held = {}

    def lease(start, end, status, project='p1', name='l'):
        lease_id = uuidutils.generate_uuid()
        leases.append({'id': lease_id, 'name': name, 'project_id': project,
                       'start_date': start, 'end_date': end,
                       'status': status, 'created_at': NOW})
        return lease_id

    def reservation(lease_id, rtype, status, resource_id=None,
                    properties=None):
        res_id = uuidutils.generate_uuid()
        reservations.append({
            'id': res_id, 'lease_id': lease_id, 'resource_type': rtype,
            'resource_id': resource_id, 'status': status,
            'properties': json.dumps(properties or {}), 'created_at': NOW})
        return res_id

    def allocation(res_id, host, start, end, vcpus=0, memory_mb=0,
                   disk_gb=0, whole=False):
        allocations.append({'reservation_id': res_id, 'host': host,
                            'start_date': start, 'end_date': end,
                            'vcpus': vcpus, 'memory_mb': memory_mb,
                            'disk_gb': disk_gb, 'whole_host': whole})

    for k in range(n):
        host = _name(others[rng.randrange(len(others))])
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
        lease_id = lease(start, end, status,
                         project='p%d' % rng.randrange(50), name='l%d' % k)
        res_id = reservation(
            lease_id, 'virtual:instance',
            'active' if server else 'pending', server,
            {'vcpus': vcpus, 'memory_mb': 4096, 'disk_gb': 20})
        allocation(res_id, host, start, end, vcpus, 4096, 20)
    for host in freepool:
        # Two future host leases each.
        for _n in range(2):
            start = NOW + datetime.timedelta(
                hours=rng.randrange(1, 30 * 24))
            end = start + datetime.timedelta(hours=rng.randint(1, 72))
            lease_id = lease(start, end, 'PENDING', name='host lease')
            res_id = reservation(lease_id, 'physical:host', 'pending')
            allocation(res_id, host, start, end, whole=True)
    for k in range(0, len(held_hosts), HOSTS_PER_HOST_LEASE):
        start, end = NOW - DAY, NOW + 2 * DAY
        lease_id = lease(start, end, 'ACTIVE', name='host lease')
        res_id = reservation(lease_id, 'physical:host', 'active')
        members = held_hosts[k:k + HOSTS_PER_HOST_LEASE]
        held[res_id] = members
        for host in members:
            allocation(res_id, host, start, end, whole=True)
    for host in freepool + held_hosts:
        registry.append({'hypervisor_hostname': host, 'service_host': host,
                         'reservable': True, 'vcpus': 64,
                         'memory_mb': 262144, 'local_gb': 2048,
                         'created_at': NOW})
    bench = lease(NOW, NOW + 6 * HOUR_, 'ACTIVE', name='bench')
    reservation(bench, 'virtual:instance', 'pending', None,
                {'vcpus': 4, 'memory_mb': 8192, 'disk_gb': 40})
    migration.create_schema(url)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for table, rows in ((models.LEASES, leases),
                            (models.RESERVATIONS, reservations),
                            (models.ALLOCATIONS, allocations),
                            (models.HOSTS, registry)):
            for i in range(0, len(rows), 20000):
                conn.execute(sa.insert(table), rows[i:i + 20000])
    engine.dispose()
    return {'leased_by_host': leased_by_host, 'freepool': freepool,
            'held': held, 'bench_lease': bench}


def _database(db_dir, n, hosts, seed):
    """(SQLite URL, layout, seconds spent filling) of the database for
    n reservations on ``hosts`` hosts: filled by a child process (its
    memory is not ours), or reused from db_dir.
    """
    base = os.path.join(db_dir, 'lease-%d-%d-%d' % (hosts, n, seed))
    path, layout_path = base + '.sqlite', base + '.json'
    fill_s = 0.0
    if not (os.path.exists(path) and os.path.exists(layout_path)):
        for stale in (path, layout_path):
            if os.path.exists(stale):
                os.unlink(stale)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, os.path.abspath(__file__),
                        '--fill', base, '--hosts', str(hosts),
                        '--sizes', str(n), '--seed', str(seed)],
                       check=True)
        fill_s = time.perf_counter() - t0
    with open(layout_path) as f:
        layout = json.load(f)
    return 'sqlite:///%s' % path, layout, fill_s


def _fill(base, n, hosts, seed):
    layout = _fill_database('sqlite:///%s.sqlite' % base, n, hosts,
                            random.Random(seed))
    with open(base + '.json.tmp', 'w') as f:
        json.dump(layout, f)
    os.rename(base + '.json.tmp', base + '.json')


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


def run(n, repeat, cell, hosts=HOSTS, db_dir=None, rng_seed=SEED):
    rng = random.Random(rng_seed + 1)
    tmp = None
    if db_dir is None:
        tmp = db_dir = tempfile.mkdtemp(prefix='nova_lease_bench_')
    url, layout, fill_s = _database(db_dir, n, hosts, rng_seed)
    CONF.set_override('connection', url, group='nova_lease_database')
    CONF.set_override('freepool_aggregate', FREEPOOL, group='nova_lease')
    CONF.set_override('scheduler_snapshot_ttl', 3600, group='nova_lease')
    others = [_name(k) for k in range(hosts)
              if _name(k) not in set(layout['freepool']) and not any(
                  _name(k) in m for m in layout['held'].values())]
    layout['cell'] = cell
    states = _host_states(hosts, layout)
    gc.collect()

    handler, filters, weigh_handler, weighers = _nova_default()
    lease_filter = lease_filters.LeaseFilter()
    lease_weigher = lease_weights.LeaseWeigher()
    end = NOW + datetime.timedelta(hours=6)
    hints = {'reserved': ['True'], 'lease_params': [json.dumps({
        'name': 'bench', 'start': 'now',
        'end': end.strftime('%Y-%m-%d %H:%M')})],
        'nova_lease_id': [layout['bench_lease']]}
    spec = _request(hints)
    plain = _request()

    def nova_default():
        chosen = handler.get_filtered_objects(filters, states, spec)
        return weigh_handler.get_weighed_objects(weighers, chosen, spec)

    def lease(req):
        def go():
            chosen = handler.get_filtered_objects([lease_filter], states,
                                                  req)
            return weigh_handler.get_weighed_objects([lease_weigher],
                                                     chosen, req)
        return go

    db = db_api.get_database(CONF)
    admitted = []

    def admit_one():
        admitted.append(admit_lease(db, rng, others, 3 * 24 * 60))

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
            timed(lease(spec), out)
            # The refresh alone, after another change of the same kind.
            change()
            timed(lambda: snapshot_cache.CACHE.get(db, NOW, 3600), refresh)
        return nova, steady, unleased, admit, move, refresh

    def first_snapshot():
        """Cold start: a request without a snapshot, then the time until
        the first full read (in the background) is in use.
        """
        snapshot_cache.CACHE.invalidate()
        gc.collect()
        before = _rss_mb()
        t0 = time.perf_counter()
        chosen = lease(spec)()
        request_ms = (time.perf_counter() - t0) * 1000
        while view.get_snapshot(NOW) is None:
            time.sleep(0.005)
        load_ms = (time.perf_counter() - t0) * 1000
        gc.collect()
        return request_ms, len(chosen), load_ms, _rss_mb() - before

    def during_reload():
        """Requests while a full read runs in the background, and until
        the old snapshot is taken apart.
        """
        samples = []
        old = view.get_snapshot(NOW)
        parts = old.parts()[1:6:2]     # the big mappings it shares
        del old
        CONF.set_override('scheduler_snapshot_ttl', 0.0, group='nova_lease')
        try:
            view.get_snapshot(NOW)      # starts the full read
        finally:
            CONF.set_override('scheduler_snapshot_ttl', 3600,
                              group='nova_lease')
        deadline = time.monotonic() + snapshot_cache.RETIRE_WAIT + 60
        while (snapshot_cache.CACHE.reading(db) or any(parts)) and \
                time.monotonic() < deadline:
            timed(lease(spec), samples)
            timed(lease(plain), samples)
        if not samples:
            return None, None
        return statistics.median(samples), max(samples)

    cold_request_ms, cold_passed, cold_ms, snapshot_mb = first_snapshot()
    chosen = lease(spec)()
    passed = len(chosen)
    if not passed:
        raise SystemExit('no host passes the leased request: the figures '
                         'would measure a refusal (see the log)')
    nova, steady, unleased, admit, move, refresh = after_change(repeat)
    nova_ms = statistics.median(nova)
    steady_ms = statistics.median(steady)
    unleased_ms = statistics.median(unleased)
    lease_ms = statistics.median(admit + move)
    during_ms, during_max_ms = during_reload()
    # Full reads are slow at 1,000,000: fewer samples.
    full_reads = 1 if n >= 1000000 else max(2, repeat // 10)
    load_ms = _time(lambda: snapshot_reads.load(db, NOW), full_reads)
    moves_ms = _time(lambda: moves.placement_usage(states, CONF), repeat)
    forget(db, admitted, tmp)
    return {
        'hosts': hosts, 'reservations': n,
        'nova_default_ms': round(nova_ms, 3),
        'lease_ms': round(lease_ms, 3),
        'ratio': round(lease_ms / nova_ms, 3),
        'lease_after_admission_ms': round(statistics.median(admit), 3),
        'lease_after_end_move_ms': round(statistics.median(move), 3),
        'lease_after_change_p90_ms': round(
            statistics.quantiles(admit + move, n=10)[-1], 3),
        'refresh_ms': round(statistics.median(refresh), 3),
        'lease_steady_ms': round(steady_ms, 3),
        'steady_ratio': round(steady_ms / nova_ms, 3),
        'unleased_lease_ms': round(unleased_ms, 3),
        'lease_during_reload_ms': (round(during_ms, 3)
                                   if during_ms is not None else None),
        'lease_during_reload_max_ms': (round(during_max_ms, 3)
                                       if during_max_ms is not None
                                       else None),
        'cold_request_ms': round(cold_request_ms, 3),
        'cold_request_hosts': cold_passed,
        'cold_load_ms': round(cold_ms, 3),
        'moves_ms': round(moves_ms, 3),
        'snapshot_load_ms': round(load_ms, 3),
        'snapshot_rss_mb': round(snapshot_mb, 1),
        'peak_rss_mb': round(_peak_rss_mb(), 1),
        'hosts_passing_lease': passed,
        'db_fill_s': round(fill_s, 1),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', default='10000,100000,1000000')
    parser.add_argument('--hosts', type=int, default=HOSTS)
    parser.add_argument('--repeat', type=int, default=20)
    parser.add_argument('--seed', type=int, default=SEED)
    parser.add_argument('--db-dir', default=None,
                        help='keep the filled databases there and reuse '
                             'them (default: a temporary directory)')
    parser.add_argument('--fill', default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(',') if s]
    if args.fill:
        _fill(args.fill, sizes[0], args.hosts, args.seed)
        return
    lease_conf.register_opts(CONF)
    CONF([], project='nova')
    # Nova's cell mappings read [DEFAULT] transport_url, which
    # oslo.messaging registers when it first parses it (nova-scheduler
    # has done so at its start).
    oslo_messaging.TransportURL.parse(CONF)
    objects.register_all()
    timeutils.set_time_override(NOW)
    nova_dir = tempfile.mkdtemp(prefix='nova_lease_bench_nova_')
    cell = uuidutils.generate_uuid()
    try:
        _nova_databases(nova_dir, args.hosts, cell)
        results = [_report(run(n, args.repeat, cell, args.hosts,
                               args.db_dir, args.seed)) for n in sizes]
    finally:
        shutil.rmtree(nova_dir, ignore_errors=True)
    main_result = next((r for r in results if r['reservations'] == 100000),
                       results[-1])
    main_result = dict(main_result)
    main_result['lease_ms_by_reservations'] = {
        str(r['reservations']): r['lease_ms'] for r in results}
    print(json.dumps(main_result))


def _report(result):
    """Print one line of a size's result; return it."""
    print('%(hosts)d hosts, %(reservations)d reservations: nova '
          '%(nova_default_ms).2f ms, lease after a change '
          '%(lease_ms).2f ms (ratio %(ratio).2f; admission '
          '%(lease_after_admission_ms).1f ms, end moved '
          '%(lease_after_end_move_ms).1f ms, refresh alone '
          '%(refresh_ms).1f ms), steady %(lease_steady_ms).2f ms, '
          'unleased %(unleased_lease_ms).2f ms, during a reload '
          '%(lease_during_reload_ms)s ms (max '
          '%(lease_during_reload_max_ms)s ms), cold request '
          '%(cold_request_ms).1f ms (%(cold_request_hosts)d hosts), '
          'cold start %(cold_load_ms).0f ms, live migrations read '
          '%(moves_ms).2f ms, snapshot '
          '%(snapshot_rss_mb).0f MB, peak %(peak_rss_mb).0f MB'
          % result)
    sys.stdout.flush()
    return result


if __name__ == '__main__':
    main()
