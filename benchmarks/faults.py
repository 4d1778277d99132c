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
"""Fault drill: short leases through real faults on the split sandbox.

Starts ``nova-lease-sandbox --split`` (:class:`nova_lease.sandbox.split.
SplitSandbox` with ``relays=True``): Keystone (SQLite), Placement,
nova-api under gunicorn (2 workers), nova-scheduler, the super conductor,
two cells with their conductors and computes (host1, host2; host3, the
fake driver), two nova-lease-engine processes, every Nova process and both
engines reaching MariaDB and RabbitMQ through a
:class:`nova_lease.sandbox.proxy.Relay` each on 127.0.0.1 (the sandbox's
own set-up queries and rabbitmqctl go direct). A cut relay is what the
processes see when the server stops (connections reset, new ones
refused); the machine's MariaDB and RabbitMQ are never touched.

Real: every process, the databases, the message queue, the HTTP APIs,
the signals. Synthetic: the fake compute driver, the relays standing for
a server outage, the short leases (starting 40-45 s ahead, lasting 60 s;
instance leases booted with the ``reserved``/``lease_params`` hints as the
demo does, and two host leases on host3, registered in the free pool).
The engines run with ``[nova_lease] engine_heartbeat_timeout = 5`` (the
split sandbox's setting; heartbeats every second), so the surviving
engine takes over a killed engine's claims within 5 s; the sandbox
restarts a killed engine a second later. ``retry_interval`` (30 s, then
60 s, 120 s) and ``max_retries`` (3) are the defaults.

The faults, in turn, each landing on real work:

1. ``engine_kill_mid_start``: SIGKILL of the engine that holds the claim
   of a ``start_lease`` event while it runs (IN_PROGRESS);
2. ``engine_kill_mid_end``: the same for an ``end_lease`` event;
3. ``rabbitmq_cut``: RabbitMQ cut for 30 s from just before several
   starts (three instance leases and a host lease);
4. ``mariadb_cut``: MariaDB cut for 30 s from just before the ends of
   those leases;
5. ``api_worker_kill``: a nova-api gunicorn worker SIGKILLed while boot
   requests are in flight (a failed request is retried as a user would:
   a server of that name is looked for first; gunicorn respawns the
   worker);
6. ``compute_restart``: nova-compute of the host of an ACTIVE leased
   server stopped (SIGTERM) and started again while another lease starts.

Then it waits until every event is DONE (or ERROR), or its time plus
``--grace`` (120 s) has passed, and measures, from the side database
(read directly, not through a relay), the compute API and the auditor:

``leases``
    leases created.
``lost_events``
    events whose time plus the grace has passed and that are not DONE
    (ERROR included).
``duplicate_events``
    events acted on twice with effect: groups of two or more ``done``
    rows of the engine's action journal (``engine_actions``) for the same
    lease, reservation, target, action and reason (the reason tells the
    aggregate of a host move: a host lease's host leaves the free pool
    and joins its aggregate at the start, and goes back at the end, two
    ``add_host`` and two ``remove_host`` rows), counted for the one-shot
    actions only (unshelve, delete, shelve, shelve_offload, migrate,
    live_migrate, add_host, remove_host, create, enable, disable; the
    idempotent set_metadata and tag changes are left out). Each counts
    once per surplus row. A lease has one event of each type and each of
    those actions once, so a surplus row is an event acted on twice.
``broken_promises``
    leases in ERROR; started instance leases whose server was seen, while
    the lease was ACTIVE and at least 3 s before its end, not ACTIVE or
    on another host than its allocation's (sampled every 3 s through the
    admin's server list; a sample that fails, during a cut, is skipped);
    started host leases whose host was seen in the free pool; plus the
    auditor's ``broken_promise`` findings.
``audit_findings``
    the findings of ``nova-lease-manage --config-file <split nova.conf>
    audit`` at the end.
``max_lag_s``
    the largest delay between an event's time and its being DONE (its
    ``updated_at``).

The last line printed is one JSON object with those keys, ``faults``
(the faults run, by name), ``fault_details`` (what each fault hit),
``samples`` and ``seconds``. Exit 0 only when every count is 0. About 8
minutes on a two-core machine (2 of them starting the sandbox);
``--quick`` runs faults 1, 3 and 5 only (each after the ends of the
leases of the fault before: about 7 minutes).

``--quick --overlap`` runs them back to back, so that the RabbitMQ cut
lands on the ends of the first leases and the nova-api worker is killed
the moment RabbitMQ comes back. That compound fault found a lost server
delete (nova-api died after setting task_state ``deleting`` and before
its cast reached RabbitMQ; Nova ignores every later delete of such a
server): the engine now resets the state of a server deleting for longer
than ``[nova_lease_engine] lost_delete_timeout`` (60 s in the split
sandbox) and deletes it again. It still loses events: an unshelve lost
the same way leaves the server ``unshelving`` for good, Nova refuses every
later unshelve (409) and has no API to clear it (see
doc/source/install/sandbox.rst).

Needs MariaDB (root, no password) and RabbitMQ (guest, rabbitmqctl) on
127.0.0.1::

    python benchmarks/faults.py [--quick [--overlap]] [--state-dir DIR]
                                [--keep]
"""

import argparse
import collections
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')
# This tree's nova_lease for this process and every child it starts.
sys.path.insert(0, TOP)
os.environ['PYTHONPATH'] = os.pathsep.join(
    [TOP] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep)
             if p and p != TOP])

from nova_lease.sandbox import demo as demo_mod  # noqa: E402
from nova_lease.sandbox import openrc  # noqa: E402
from nova_lease.sandbox import split  # noqa: E402

CUT_SECONDS = 30
GRACE = 120
SAMPLE_EVERY = 3.0
LEASE_SECONDS = 60
ONE_SHOT = ('unshelve', 'delete', 'shelve', 'shelve_offload', 'migrate',
            'live_migrate', 'add_host', 'remove_host', 'create', 'enable',
            'disable')
HOST_LEASE_HOST = 'host3'


def _free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _utcnow():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def _fmt(dt):
    return dt.strftime('%Y-%m-%d %H:%M:%S')


def say(text, *args):
    sys.stderr.write('[faults %s] %s\n' % (time.strftime('%H:%M:%S'),
                                           text % args if args else text))
    sys.stderr.flush()


#: Requests that failed and were tried again: (what, error).
RETRIED = []


def _retry(what, call, attempts=20, delay=2.0):
    """``call()`` until it works, as a user would try again."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as e:
            if attempt == attempts:
                raise
            RETRIED.append((what, '%s: %s' % (type(e).__name__,
                                              str(e)[:200])))
            say('%s failed (%s: %s); again in %.0f s', what,
                type(e).__name__, str(e)[:200], delay)
            time.sleep(delay)


class Drill(object):

    def __init__(self, sandbox):
        self.sb = sandbox
        self.env = openrc.read_openrc(sandbox.openrc_path('demo'))
        self.admin_env = openrc.read_openrc(sandbox.openrc_path('admin'))
        self.compute = demo_mod.Compute(self.env)
        self.admin = demo_mod.Compute(self.admin_env)
        self.api = demo_mod.Reservation(self.env)
        self.names = []
        self.details = collections.OrderedDict()
        self.faults = []
        self.broken = collections.defaultdict(list)
        self.samples = {'taken': 0, 'failed': 0}
        self._stop = threading.Event()
        self._sampler = None
        self._lock = threading.Lock()

    # -- the side database, directly -------------------------------------

    def q(self, sql, *args):
        conn = self.sb.backends._mysql()
        try:
            conn.select_db(self.sb.backends.db_name('nova_lease'))
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return cur.fetchall()
        finally:
            conn.close()

    def lease_ids(self, names):
        if not names:
            return {}
        rows = self.q('SELECT name, id FROM leases WHERE name IN (%s)'
                      % ','.join(['%s'] * len(names)), *names)
        return dict(rows)

    # -- making leases -----------------------------------------------------

    def boot_leased(self, name, start, seconds=LEASE_SECONDS,
                    compute=None):
        compute = compute or self.compute
        params = {'name': name, 'start': _fmt(start),
                  'duration': '%ds' % seconds}
        hints = {'reserved': 'True', 'lease_params': json.dumps(params)}

        tries = []

        def _boot():
            # A retry looks for the server first: the failed request may
            # have made it.
            if tries:
                found = compute.nova.servers.list(search_opts={
                    'name': '^%s$' % name})
                if found:
                    return found[0]
            tries.append(1)
            return compute.boot(name, self.env['NOVA_LEASE_IMAGE'],
                                self.env['NOVA_LEASE_FLAVOR'], hints)

        server = _retry('boot %s' % name, _boot)
        with self._lock:
            self.names.append(name)
        return server.id

    def host_lease(self, name, start, seconds=LEASE_SECONDS):
        body = {'name': name, 'start_date': _fmt(start),
                'end_date': _fmt(start + datetime.timedelta(
                    seconds=seconds)),
                'reservations': [{'resource_type': 'physical:host',
                                  'min': 1, 'max': 1,
                                  'hypervisor_properties': '[]',
                                  'resource_properties': '[]'}],
                'events': []}

        def _create():
            if self.lease_ids([name]):
                return
            self.api.create_lease(body)

        _retry('lease create %s' % name, _create)
        with self._lock:
            self.names.append(name)

    # -- waiting for events ---------------------------------------------------

    def wait_in_progress(self, names, event_type, timeout):
        """(event id, lease id, claimed_by) of the first ``event_type``
        of these leases seen IN_PROGRESS, or None.
        """
        ids = self.lease_ids(names)
        deadline = time.monotonic() + timeout
        marks = ','.join(['%s'] * len(ids))
        while time.monotonic() < deadline:
            rows = self.q(
                'SELECT id, lease_id, claimed_by FROM events WHERE '
                "status = 'IN_PROGRESS' AND event_type = %%s AND lease_id "
                'IN (%s)' % marks, event_type, *ids.values())
            if rows:
                return rows[0]
            time.sleep(0.02)
        return None

    def wait_until(self, when):
        delay = (when - _utcnow()).total_seconds()
        if delay > 0:
            time.sleep(delay)

    # -- faults ---------------------------------------------------------

    def _engine_of(self, claimed_by):
        for engine in self.sb.engines:
            if engine.engine_id and claimed_by and (
                    claimed_by == engine.engine_id or
                    claimed_by.startswith(engine.engine_id)):
                return engine
        return None

    def kill_claimer(self, fault, names, event_type, timeout):
        self.faults.append(fault)
        hit = self.wait_in_progress(names, event_type, timeout)
        if hit is None:
            self.details[fault] = {'landed': False,
                                   'why': 'no %s seen IN_PROGRESS' %
                                   event_type}
            say('%s: no %s seen IN_PROGRESS', fault, event_type)
            return
        event_id, lease_id, claimed_by = hit
        engine = self._engine_of(claimed_by)
        pid = engine.running_pid if engine else None
        if pid is None:
            self.details[fault] = {'landed': False, 'event': event_id,
                                   'why': 'claimer %s not found' %
                                   claimed_by}
            return
        os.kill(pid, signal.SIGKILL)
        say('%s: SIGKILL %s (pid %d) holding %s %s of lease %s', fault,
            engine.name, pid, event_type, event_id, lease_id)
        self.details[fault] = {'landed': True, 'engine': engine.name,
                               'pid': pid, 'event': event_id,
                               'lease': lease_id}

    def cut(self, fault, relay_name, seconds=CUT_SECONDS):
        self.faults.append(fault)
        relay = self.sb.relays[relay_name]
        reset = relay.reset
        relay.cut()
        say('%s: %s cut for %d s', fault, relay_name, seconds)
        time.sleep(seconds)
        relay.restore()
        self.details[fault] = {'landed': True, 'seconds': seconds,
                               'connections_reset': relay.reset - reset,
                               'refused': relay.refused}
        say('%s: %s restored (%d connections reset)', fault, relay_name,
            relay.reset - reset)

    def api_workers(self):
        master = self.sb.api.pid
        workers = []
        for pid in os.listdir('/proc'):
            if not pid.isdigit():
                continue
            try:
                with open('/proc/%s/stat' % pid) as f:
                    fields = f.read().rsplit(')', 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == master:
                workers.append(int(pid))
        return sorted(workers)

    def _busy_worker(self, workers):
        """A worker holding an established client connection, if known."""
        try:
            import psutil
        except ImportError:
            return None
        port = self.sb.layout.nova_port
        for pid in workers:
            try:
                conns = psutil.Process(pid).net_connections('tcp')
            except Exception:
                continue
            if any(c.status == 'ESTABLISHED' and c.laddr and
                   c.laddr.port == port for c in conns):
                return pid
        return None

    def kill_api_worker(self, fault, boots):
        """Run ``boots`` (callables) in threads; SIGKILL a worker that
        serves one of them.
        """
        self.faults.append(fault)
        retried = len(RETRIED)
        before = self.api_workers()
        errors = []

        def _run(call):
            try:
                call()
            except Exception as e:
                errors.append('%s: %s' % (type(e).__name__, e))

        threads = [threading.Thread(target=_run, args=(b,), daemon=True)
                   for b in boots]
        for thread in threads:
            thread.start()
        time.sleep(0.2)
        victim = None
        deadline = time.monotonic() + 10
        while victim is None and time.monotonic() < deadline:
            victim = self._busy_worker(before)
            if victim is None:
                time.sleep(0.01)
        busy = victim is not None
        if victim is None:
            victim = before[0]
        os.kill(victim, signal.SIGKILL)
        say('%s: SIGKILL nova-api worker %d (serving a request: %s)',
            fault, victim, busy)
        for thread in threads:
            thread.join(300)
        deadline = time.monotonic() + 60
        after = self.api_workers()
        while len(after) < len(before) and time.monotonic() < deadline:
            time.sleep(0.5)
            after = self.api_workers()
        self.details[fault] = {'landed': busy, 'pid': victim,
                               'workers_before': before,
                               'workers_after': after,
                               'failed_boots': errors,
                               'retried': RETRIED[retried:]}

    def restart_compute(self, fault, host, down=3.0):
        self.faults.append(fault)
        child = [c for c in self.sb.children
                 if c.name == 'nova-compute-%s' % host][0]
        old = child.pid
        child.stop()
        say('%s: nova-compute-%s (pid %d) stopped (SIGTERM)', fault, host,
            old)
        time.sleep(down)
        child.start()
        say('%s: nova-compute-%s started again (pid %d)', fault, host,
            child.pid)
        self.details[fault] = {'landed': True, 'host': host,
                               'old_pid': old, 'new_pid': child.pid}

    # -- sampling the promises ---------------------------------------------

    def _sample(self):
        now = _utcnow()
        leases = self.q(
            'SELECT l.id, l.name, l.end_date, r.id, r.resource_type FROM '
            'leases l JOIN reservations r ON r.lease_id = l.id WHERE '
            "l.status = 'ACTIVE' AND l.start_date <= %s AND "
            'l.end_date > %s', now, now + datetime.timedelta(seconds=3))
        if not leases:
            return
        allocs = collections.defaultdict(set)
        for rid, host in self.q(
                'SELECT reservation_id, host FROM allocations WHERE '
                'start_date <= %s AND end_date > %s', now, now):
            allocs[rid].add(host)
        try:
            servers = self.admin.nova.servers.list(
                search_opts={'all_tenants': 1})
            pools = [a for a in self.admin.nova.aggregates.list()
                     if a.name == 'freepool']
        except Exception:
            self.samples['failed'] += 1
            return
        self.samples['taken'] += 1
        by_lease = {}
        for server in servers:
            lease_id = (server.metadata or {}).get('lease_id')
            if lease_id:
                by_lease[lease_id] = server
        freepool = set(pools[0].hosts) if pools else set()
        for lease_id, name, _end, rid, rtype in leases:
            if rtype == 'physical:host':
                for host in allocs.get(rid, ()):
                    if host in freepool:
                        self.broken[lease_id].append(
                            '%s: host %s in the free pool' % (
                                _fmt(now), host))
                continue
            server = by_lease.get(lease_id)
            if server is None:
                self.broken[lease_id].append('%s: no server' % _fmt(now))
                continue
            host = getattr(server, 'OS-EXT-SRV-ATTR:host', None)
            if server.status != 'ACTIVE':
                self.broken[lease_id].append('%s: server %s %s' % (
                    _fmt(now), server.id, server.status))
            elif allocs.get(rid) and host not in allocs[rid]:
                self.broken[lease_id].append(
                    '%s: server %s on %s, promised %s' % (
                        _fmt(now), server.id, host, sorted(allocs[rid])))

    def _sampling(self):
        while not self._stop.wait(SAMPLE_EVERY):
            try:
                self._sample()
            except Exception as e:
                self.samples['failed'] += 1
                say('sample failed: %s: %s', type(e).__name__, e)

    def start_sampling(self):
        self._sampler = threading.Thread(target=self._sampling, daemon=True)
        self._sampler.start()

    def stop_sampling(self):
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join(60)

    # -- the end -------------------------------------------------------------

    def wait_settled(self, grace):
        ids = list(self.lease_ids(self.names).values())
        marks = ','.join(['%s'] * len(ids))
        while True:
            rows = self.q('SELECT status, time FROM events WHERE lease_id '
                          'IN (%s)' % marks, *ids)
            now = _utcnow()
            pending = [t for status, t in rows
                       if status not in ('DONE', 'ERROR')]
            if not pending:
                return
            if all(t + datetime.timedelta(seconds=grace) < now
                   for t in pending):
                return
            time.sleep(2)

    def measure(self, grace):
        ids = self.lease_ids(self.names)
        values = list(ids.values())
        marks = ','.join(['%s'] * len(values))
        now = _utcnow()
        events = self.q('SELECT id, lease_id, event_type, time, status, '
                        'updated_at, attempts, last_error FROM events '
                        'WHERE lease_id IN (%s)' % marks, *values)
        lost = [e for e in events if e[4] != 'DONE' and
                e[3] + datetime.timedelta(seconds=grace) < now]
        lags = [(e[5] - e[3]).total_seconds() for e in events
                if e[4] == 'DONE' and e[5] is not None]
        dup_rows = self.q(
            'SELECT lease_id, reservation_id, target_kind, target_id, '
            'action, reason, COUNT(*) FROM engine_actions WHERE outcome = '
            '%%s AND action IN (%s) AND lease_id IN (%s) GROUP BY '
            'lease_id, reservation_id, target_kind, target_id, action, '
            'reason HAVING COUNT(*) > 1' % (
                ','.join(['%s'] * len(ONE_SHOT)), marks),
            'done', *(list(ONE_SHOT) + values))
        in_error = self.q('SELECT id, name, status_reason FROM leases WHERE '
                          "status = 'ERROR' AND id IN (%s)" % marks,
                          *values)
        broken = {lease_id: ['ERROR: %s' % reason]
                  for lease_id, _name, reason in in_error}
        for lease_id, seen in self.broken.items():
            broken.setdefault(lease_id, []).extend(seen[:3])
        findings = self.audit()
        for f in findings:
            if f.get('check') == 'broken_promise':
                broken.setdefault(f.get('subject'), []).append(
                    'audit: %s' % f.get('message'))
        return {
            'leases': len(ids),
            'lost_events': len(lost),
            'lost': [{'event': e[0], 'lease': e[1], 'type': e[2],
                      'time': _fmt(e[3]), 'status': e[4],
                      'attempts': e[6], 'error': (e[7] or '')[:300]}
                     for e in lost],
            'duplicate_events': sum(r[6] - 1 for r in dup_rows),
            'duplicates': [list(r) for r in dup_rows],
            'broken_promises': len(broken),
            'broken': broken,
            'audit_findings': len(findings),
            'findings': [{'check': f.get('check'),
                          'subject': f.get('subject'),
                          'message': f.get('message')} for f in findings],
            'max_lag_s': round(max(lags), 2) if lags else None,
        }

    def audit(self):
        proc = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable),
                          'nova-lease-manage'), '--config-file',
             self.sb.layout.conf_path, 'audit', '--format', 'json'],
            capture_output=True, text=True, stdin=subprocess.DEVNULL,
            env=self.sb._env(), timeout=300)
        try:
            return json.loads(proc.stdout)['findings']
        except (ValueError, KeyError):
            return [{'check': 'audit_failed', 'subject': 'audit',
                     'message': (proc.stdout + proc.stderr)[-500:]}]


# -- the phases ------------------------------------------------------------

def _ahead(seconds):
    return _utcnow() + datetime.timedelta(seconds=seconds)


#: --overlap: the quick drill's faults do not wait for the ends of the
#: leases of the fault before (see the module docstring).
quick_overlap = False


def _towards_the_end(drill, quick, start, after, before):
    """Wait towards the end of a phase's leases (started at ``start``,
    ``LEASE_SECONDS`` long). The full drill: until ``before`` seconds
    before it, and True (its fault at the ends comes next). The quick
    drill: until ``after`` seconds past it (at once with --overlap), and
    False (no fault at the ends).
    """
    end = start + datetime.timedelta(seconds=LEASE_SECONDS)
    if quick:
        if not quick_overlap:
            drill.wait_until(end + datetime.timedelta(seconds=after))
        return False
    drill.wait_until(end - datetime.timedelta(seconds=before))
    return True


def phase_engine_kills(drill, quick):
    """Faults 1 and 2: four instance leases start together; the engine
    that runs one of the starts is killed; then the same at their ends.
    """
    start = _ahead(40)
    names = ['drill-a%d' % i for i in range(4)]
    for name in names:
        drill.boot_leased(name, start)
    drill.wait_until(start - datetime.timedelta(seconds=2))
    drill.kill_claimer('engine_kill_mid_start', names, 'start_lease', 40)
    if _towards_the_end(drill, quick, start, after=10, before=2):
        drill.kill_claimer('engine_kill_mid_end', names, 'end_lease', 40)


def phase_cuts(drill, quick):
    """Faults 3 and 4: RabbitMQ cut across three instance starts and a
    host lease's start; MariaDB cut across their ends.
    """
    start = _ahead(45)
    names = []
    for i in range(3):
        name = 'drill-c%d' % i
        drill.boot_leased(name, start + datetime.timedelta(seconds=2 * i))
        names.append(name)
    drill.host_lease('drill-host-c', start + datetime.timedelta(seconds=2))
    drill.wait_until(start - datetime.timedelta(seconds=3))
    drill.cut('rabbitmq_cut', 'rabbit')
    if _towards_the_end(drill, quick, start, after=15, before=3):
        drill.cut('mariadb_cut', 'mysql')


def phase_api_worker(drill, quick):
    """Fault 5: a nova-api worker killed while boots are in flight."""
    start = _ahead(45)
    names = ['drill-e%d' % i for i in range(4)]
    clients = [demo_mod.Compute(drill.env) for _ in names]
    for client in clients:
        client.session.get_token()      # authenticated before the fault
    boots = [(lambda n=name, c=client: drill.boot_leased(n, start,
                                                         compute=c))
             for name, client in zip(names, clients)]
    drill.kill_api_worker('api_worker_kill', boots)


def phase_compute_restart(drill, quick):
    """Fault 6: nova-compute of an active leased server's host restarted
    while a second lease starts.
    """
    start = _ahead(40)
    drill.boot_leased('drill-f0', start)
    drill.boot_leased('drill-f1', start + datetime.timedelta(seconds=10))
    drill.host_lease('drill-host-f', start + datetime.timedelta(seconds=5))
    drill.wait_until(start)
    lease_id = drill.lease_ids(['drill-f0']).get('drill-f0')
    host = None
    deadline = time.monotonic() + 60
    while host is None and time.monotonic() < deadline:
        try:
            for server in drill.admin.nova.servers.list(
                    search_opts={'all_tenants': 1, 'name': '^drill-f0$'}):
                if (server.status == 'ACTIVE' and
                        server.metadata.get('lease_id') == lease_id):
                    host = getattr(server, 'OS-EXT-SRV-ATTR:host', None)
        except Exception as e:
            say('listing servers failed: %s', e)
        if host is None:
            time.sleep(0.5)
    if host is None:
        drill.faults.append('compute_restart')
        drill.details['compute_restart'] = {
            'landed': False, 'why': 'drill-f0 never ACTIVE'}
        return
    drill.wait_until(start + datetime.timedelta(seconds=8))
    drill.restart_compute('compute_restart', host)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true',
                        help='faults 1, 3 and 5 only')
    parser.add_argument('--state-dir', help='default: a temporary one')
    parser.add_argument('--overlap', action='store_true',
                        help='with --quick: each fault right after the '
                        'one before, on the ends of its leases')
    parser.add_argument('--grace', type=int, default=GRACE)
    parser.add_argument('--keep', action='store_true',
                        help='keep the state directory (logs)')
    args = parser.parse_args(argv)
    global quick_overlap
    quick_overlap = args.overlap
    t0 = time.monotonic()
    state = args.state_dir or tempfile.mkdtemp(prefix='nova-lease-faults-')
    sandbox = split.SplitSandbox(
        state, keystone_port=_free_port(), nova_port=_free_port(),
        placement_port=_free_port(), standins_port=_free_port(),
        relays=True, out=sys.stderr, err=sys.stderr)
    result = {'faults': []}
    code = 1
    drill = None

    def _on_signal(signum, frame):
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, _on_signal)
    try:
        sandbox.start()
        say('sandbox ready after %.0f s; state %s', time.monotonic() - t0,
            state)
        drill = Drill(sandbox)
        _retry('register %s' % HOST_LEASE_HOST, lambda: demo_mod.Reservation(
            drill.admin_env).register_host(HOST_LEASE_HOST))
        drill.start_sampling()
        phases = [phase_engine_kills, phase_cuts, phase_api_worker]
        if not args.quick:
            phases.append(phase_compute_restart)
        for phase in phases:
            say('phase %s', phase.__name__)
            phase(drill, args.quick)
        say('faults done; waiting for every event (grace %d s)',
            args.grace)
        drill.wait_settled(args.grace)
        time.sleep(SAMPLE_EVERY)
        drill.stop_sampling()
        result = {'fault_details': drill.details,
                  'samples': drill.samples}
        result.update(drill.measure(args.grace))
        result['faults'] = drill.faults
        counts = [result[k] for k in ('lost_events', 'duplicate_events',
                                      'broken_promises', 'audit_findings')]
        code = 0 if not any(counts) else 1
    except KeyboardInterrupt:
        say('interrupted')
    except Exception as e:
        import traceback
        traceback.print_exc()
        say('drill failed: %s: %s', type(e).__name__, e)
        result['error'] = '%s: %s' % (type(e).__name__, e)
        if drill is not None:
            result.update(faults=drill.faults, fault_details=drill.details)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sandbox.stop()
        if not args.keep and not args.state_dir:
            import shutil
            shutil.rmtree(state, ignore_errors=True)
        else:
            result['state_dir'] = state
    result['seconds'] = round(time.monotonic() - t0, 1)
    ordered = {k: result[k] for k in sorted(result) if k not in (
        'faults', 'leases', 'lost_events', 'duplicate_events',
        'broken_promises', 'audit_findings', 'max_lag_s')}
    for key in ('faults', 'leases', 'lost_events', 'duplicate_events',
                'broken_promises', 'audit_findings', 'max_lag_s'):
        ordered[key] = result.get(key)
    print(json.dumps(ordered, default=str))
    return code


if __name__ == '__main__':
    sys.exit(main())
