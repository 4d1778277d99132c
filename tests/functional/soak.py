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
"""The soak walk: a seeded random walk of everything users and operators
do, on the in-process Nova, with the promise auditor after every step.

Shared by tests/functional/test_soak.py (a bounded run in the suite) and
benchmarks/soak.py (long runs). A few small fake hosts (placement's
allocation ratios 1.0, so that they fill up); each step is one of:
unleased boots (two projects), leased boots starting now or later,
host registrations, host leases (now or later) and boots onto them,
Blazar's instance reservations (now or later) and boots with their
flavors (several servers in one request too), reservation updates and
date changes of every kind of lease, server deletes, lease deletes,
early ends, extensions, shelve and unshelve, cold migrations, the
engine's idle-host pass (the idle action is on), an operator's
best-effort host leases (on, over an aggregate of two compute hosts: the
engine empties them by live migration), their DELETE while they hunt,
engine restarts (hunts in flight or not), clock advances; after
each step Nova is let
settle, the compute hook's reconcile pass and the engine run (what
nova-lease-engine does between two steps), and ``nova-lease-manage
audit`` (:func:`nova_lease.audit.run`) must find nothing (its journal
check on the engine actions journaled since the previous step's audit,
as ``--since`` does). Refusals (4xx)
are ordinary steps; a 5xx, a step that cannot settle or an auditor
finding stops the walk at that step, which the same seed replays.
"""

import datetime
import json
import random
import time

from nova.tests.functional.api import client as api_client
from oslo_utils import timeutils

from nova_lease import audit
from nova_lease.db import api as db_api
from nova_lease import resource_types as types
from tests.functional import test_instance_lease
from tests.functional import test_lease_api

PREFIX = test_lease_api.PREFIX
HOSTS = {'host%d' % i: (2, 4096, 40) for i in range(1, 5)}
#: Ordinary compute hosts the operator opts in to best-effort hunts (the
#: walk never registers them) and the aggregate that names them.
BEST_EFFORT_HOSTS = ('host1', 'host2')
BEST_EFFORT_AGGREGATE = 'soak-best-effort'
#: The project of the operators' best-effort leases.
OPS_PROJECT = 'c0ffee00c0ffee00c0ffee00c0ffee00'
DURATIONS = (30, 60, 120, 180)
MAX_SERVERS = 24
_SETTLED = ('ACTIVE', 'SHUTOFF', 'ERROR', 'SHELVED_OFFLOADED',
            'VERIFY_RESIZE')


class StepFailed(Exception):
    pass


def _fmt(when):
    return when.strftime('%Y-%m-%d %H:%M')


class SoakCase(test_lease_api.LeaseAPIMixin,
               test_instance_lease.InstanceLeaseTest):
    """The in-process cloud the walk runs on (no test of its own)."""

    COMPUTES = HOSTS
    LISTEN = False      # the reconcile pass, between steps, instead

    def setUp(self):
        super().setUp()
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        # One host registered before anything runs (a host that runs
        # servers cannot be registered: the walk registers a second one
        # when it can).
        self._register(sorted(HOSTS)[-1])
        self.other_api = self._other_api()
        # Best-effort leases: on, for an operators' project, on the
        # hosts of one aggregate.
        self.flags(best_effort_enabled=True,
                   best_effort_aggregate=BEST_EFFORT_AGGREGATE,
                   group='nova_lease_api')
        self.ops_api = api_client.TestOpenStackClient(
            'operator', self.api_fixture.base_url, project_id=OPS_PROJECT,
            roles=['reader', 'member', 'admin'])
        self.ops_api.microversion = self.api.microversion
        aggregate = self.admin_api.post_aggregate(
            {'aggregate': {'name': BEST_EFFORT_AGGREGATE}})
        for host in BEST_EFFORT_HOSTS:
            self.admin_api.add_host_to_aggregate(aggregate['id'], host)
        # The same microversion as the owner's client (networks 'none').
        self.other_api.microversion = self.api.microversion
        self.audit_conf = self.engine.conf

    def _setup_services(self):
        self.flags(initial_cpu_allocation_ratio=1.0,
                   initial_ram_allocation_ratio=1.0,
                   initial_disk_allocation_ratio=1.0)
        super()._setup_services()

    def _engine(self, **overrides):
        overrides.setdefault('resource_plugins',
                             'virtual:instance,physical:host,'
                             'flavor:instance')
        # The idle action on (its pass is a step of the walk).
        overrides.setdefault('idle_host_action', 'disable')
        overrides.setdefault('idle_host_min_hours', 1)
        overrides.setdefault('idle_host_wake_minutes', 30)
        overrides.setdefault('best_effort_enabled', True)
        overrides.setdefault('best_effort_aggregate', BEST_EFFORT_AGGREGATE)
        return super()._engine(**overrides)

    def restart_engine(self):
        """The engine process dies and another starts (its claims expire
        on their own, as a dead process's do).
        """
        self.engine.close()
        self.engine = self._engine()


class Walk(object):
    """The walk over a :class:`SoakCase` that is set up."""

    def __init__(self, case, seed, log=None):
        self.case = case
        self.seed = seed
        self.rng = random.Random(seed)
        self.log = log or (lambda line: None)
        self.steps = 0
        self.last = None
        self.counts = {}
        self.seen = None
        # The auditor's place in the engine's action journal: each step's
        # audit checks the rows journaled since the previous one (every
        # row once), and boot hints are read once per server.
        self.journal = audit.JournalCursor()
        self.refusal = None
        #: The state behind the failing step's findings (_evidence).
        self.evidence = None
        #: Leases deleted while PENDING, to be gone after the settle.
        self.removed = []
        self.ops = [
            (6, self.boot_unleased), (6, self.boot_leased_now),
            (6, self.boot_leased_future), (2, self.register_host),
            (4, self.host_lease), (3, self.boot_hinted),
            (3, self.instance_reservation), (3, self.boot_reserved_flavor),
            (3, self.flexible_lease),
            (3, self.update_reservation), (3, self.change_dates),
            (2, self.idle_pass),
            (3, self.best_effort), (2, self.delete_hunting),
            (1, self.restart_engine),
            (5, self.delete_server), (3, self.delete_lease),
            (3, self.end_early), (3, self.extend),
            (3, self.shelve), (3, self.unshelve), (2, self.migrate),
            (8, self.advance),
        ]

    # -- reading ------------------------------------------------------------

    @property
    def now(self):
        return self.case.clock.now

    def _servers(self):
        return self.case.admin_api.get_servers(
            search_opts={'all_tenants': 1})

    def _known(self):
        """The servers as the last step left them (nothing changes
        between two steps: the engine and the hook run in settle()).
        """
        if self.seen is None:
            self.seen = self._servers()
        return self.seen

    def _full(self):
        """Boots are skipped while MAX_SERVERS servers exist (shelved
        ones included): the walk's cloud stays the size of a few
        projects', so that a long walk does not slow down as it goes.
        """
        return len(self._known()) >= MAX_SERVERS

    def _leases(self, statuses, project=None):
        """The leases of the owner's project (the one the walk's lease
        steps act as), or of ``project``.
        """
        return db_api.lease_list(
            self.case.lease_db, statuses=statuses,
            project_id=project or self.case.api.project_id)

    def _pick(self, items):
        items = list(items)
        return self.rng.choice(items) if items else None

    def _api(self, project):
        return self.case.api if project == 'own' else self.case.other_api

    def _call(self, func, *args, **kwargs):
        """Call the API; a 4xx is a refusal (None), a 5xx fails the step.

        ``no_valid_host=True``: a 500 naming NoValidHost is a refusal too.
        The harness runs Nova's RPC casts as calls, so a cold migration
        without a valid host raises through the API; a deployment answers
        202 and records the fault in the server's actions.
        """
        no_valid_host = kwargs.pop('no_valid_host', False)
        try:
            return func(*args, **kwargs)
        except api_client.OpenStackApiException as e:
            code = e.response.status_code
            if no_valid_host and 'NoValidHost' in e.response.text:
                self.refusal = 'NoValidHost'
                return None
            if code >= 500:
                raise StepFailed('HTTP %s: %s' % (code, e.response.text))
            self.refusal = 'HTTP %s: %s' % (code, e.response.text[:160])
            return None

    # -- operations -----------------------------------------------------------

    def _boot(self, hints, api, name, flavor='1', count=1):
        if self._full():
            return 'skip'
        body = {'server': self.case._build_server(
            name=name, image_uuid=self.case.image_id, flavor_id=flavor,
            networks='none')}
        if count > 1:
            body['server']['min_count'] = count
        if hints:
            body['os:scheduler_hints'] = hints
        return self._call(api.post_server, body)

    def boot_unleased(self):
        project = self._pick(('own', 'other'))
        return self._boot(None, self._api(project), 'plain'), project

    def _lease_params(self, start):
        params = {'start': start,
                  'duration': '%dm' % self._pick(DURATIONS),
                  'on_end': self._pick(('delete', 'shelve'))}
        return {'reserved': 'True', 'lease_params': json.dumps(params)}

    def boot_leased_now(self):
        return self._boot(self._lease_params('now'), self.case.api, 'now')

    def boot_leased_future(self):
        start = self.now + datetime.timedelta(
            minutes=self._pick((10, 30, 60, 120, 240)))
        return self._boot(self._lease_params(_fmt(start)), self.case.api,
                          'later')

    def register_host(self):
        registered = {h['hypervisor_hostname']
                      for h in db_api.host_list(self.case.lease_db)}
        host = self._pick(sorted(set(HOSTS) - registered -
                                 set(BEST_EFFORT_HOSTS)))
        if host is None or len(registered) >= 2:
            return 'skip'
        return self._call(self.case.admin_api.api_post,
                          PREFIX + '/os-hosts', {'name': host}), host

    def host_lease(self):
        if not db_api.host_list(self.case.lease_db):
            return 'skip'
        delay = self._pick((0, 0, 20, 60, 120))
        start = 'now' if not delay else _fmt(
            self.now + datetime.timedelta(minutes=delay))
        end = _fmt(self.now + datetime.timedelta(
            minutes=delay + self._pick(DURATIONS)))
        body = self.case._lease_body(start, end, name='hosts')
        return self._call(self.case.api.api_post, PREFIX + '/leases', body)

    def flexible_lease(self):
        """"When can I get it?": the offers for a host or instance
        request, then a flexible lease of the same request, which must
        be booked at the first offer (nothing runs between the two), or
        refused with a 409 when there was none.
        """
        if not db_api.host_list(self.case.lease_db):
            return 'skip'
        minutes = self._pick(DURATIONS)
        latest = self.now + datetime.timedelta(
            minutes=self._pick((0, 30, 240)))
        if self._pick((True, False)):
            reservation = {'resource_type': 'physical:host', 'min': 1,
                           'max': 1}
        else:
            reservation = {'resource_type': 'virtual:instance',
                           'amount': self._pick((1, 2)), 'vcpus': 1,
                           'memory_mb': 512, 'disk_gb': 1,
                           'affinity': self._pick((None, False))}
        query = dict(reservation, duration='%dm' % minutes,
                     latest=_fmt(latest).replace(' ', '%20'))
        if query.get('affinity') is None:
            query.pop('affinity', None)
        found = self._call(self.case.api.api_get, PREFIX + '/offers?' +
                           '&'.join('%s=%s' % kv for kv in query.items()))
        if found is None:
            return None
        offers = found.body['offers']
        body = {'name': 'flexible', 'start_date': 'earliest',
                'duration': '%dm' % minutes,
                'latest_start': _fmt(latest),
                'reservations': [reservation]}
        made = self._call(self.case.api.api_post, PREFIX + '/leases', body)
        if made is None:
            if offers and '409' in (self.refusal or ''):
                raise StepFailed('a flexible lease was refused (%s) with an '
                                 'offer at %s' % (self.refusal,
                                                  offers[0]['start_date']))
            return None
        lease = made.body['lease']
        if not offers or lease['start_date'] != offers[0]['start_date']:
            raise StepFailed('flexible lease %s starts at %s; the offers '
                             'were %s' % (lease['id'], lease['start_date'],
                                          offers))
        return made

    def _with(self, statuses, kind):
        """A lease of ``statuses`` with a reservation of type ``kind``,
        and that reservation; (None, None) if none.
        """
        found = self._pick(
            (lease, r) for lease in self._leases(statuses)
            for r in lease['reservations'] if r['resource_type'] == kind)
        return found or (None, None)

    def boot_hinted(self):
        lease, reservation = self._with(('ACTIVE',), types.HOST)
        if lease is None:
            return 'skip'
        hints = {'reservation': reservation['id']}
        return self._boot(hints, self.case.api, 'hinted')

    def instance_reservation(self):
        """Blazar's instance reservation: ``amount`` slots on registered
        hosts, now or later, with or without anti-affinity.
        """
        if not db_api.host_list(self.case.lease_db):
            return 'skip'
        delay = self._pick((0, 0, 20, 60))
        start = 'now' if not delay else _fmt(
            self.now + datetime.timedelta(minutes=delay))
        end = _fmt(self.now + datetime.timedelta(
            minutes=delay + self._pick(DURATIONS)))
        body = self.case._lease_body(start, end, name='slots', reservations=[
            {'resource_type': 'virtual:instance',
             'amount': self._pick((1, 1, 2)), 'vcpus': 1,
             'memory_mb': 512, 'disk_gb': 1,
             'affinity': self._pick((None, False))}])
        return self._call(self.case.api.api_post, PREFIX + '/leases', body)

    def boot_reserved_flavor(self):
        """Boot with an active instance reservation's flavor, sometimes
        more servers in one request than it has slots.
        """
        lease, reservation = self._with(('ACTIVE',), types.SLOTS)
        if lease is None:
            return 'skip'
        return self._boot(None, self.case.api, 'slot',
                          flavor=reservation['id'],
                          count=self._pick((1, 1, 2, 3)))

    def update_reservation(self):
        """Blazar's reservation update: a host reservation's min/max, an
        instance reservation's amount.
        """
        lease = self._pick(
            lease for lease in self._leases(('PENDING', 'ACTIVE'))
            if any(types.get(r['resource_type']).facts.api_names
                   for r in lease['reservations']))
        if lease is None:
            return 'skip'
        reservation = self._pick(r for r in lease['reservations']
                                 if types.get(r['resource_type'])
                                 .facts.api_names)
        if types.is_whole_host(reservation):
            count = self._pick((1, 1, 2))
            item = {'id': reservation['id'], 'min': count, 'max': count}
        else:
            item = {'id': reservation['id'],
                    'amount': self._pick((1, 2, 3))}
        return self._call(self.case.api.api_put,
                          PREFIX + '/leases/%s' % lease['id'],
                          {'reservations': [item]})

    def change_dates(self):
        """A new window for a lease of any kind: a pending one moves, a
        started one gets a new end.
        """
        lease = self._pick(self._leases(('PENDING', 'ACTIVE')))
        if lease is None:
            return 'skip'
        shift = datetime.timedelta(minutes=self._pick((-30, -10, 15, 45)))
        if lease['status'] == 'PENDING':
            start = max(lease['start_date'] + shift,
                        self.now + datetime.timedelta(minutes=1))
            end = start + (lease['end_date'] - lease['start_date'])
            body = {'start_date': _fmt(start), 'end_date': _fmt(end)}
        else:
            end = max(lease['end_date'] + shift,
                      self.now + datetime.timedelta(minutes=2))
            body = {'end_date': _fmt(end)}
        return self._call(self.case.api.api_put,
                          PREFIX + '/leases/%s' % lease['id'], body)

    def _best_effort_body(self):
        end = _fmt(self.now + datetime.timedelta(
            minutes=self._pick(DURATIONS)))
        return self.case._lease_body(
            'now', end, name='hunt', lease_type='best_effort',
            reservations=[self.case._host_res(self._pick((1, 1, 2)))])

    def best_effort(self):
        """An operator's best-effort host lease: free reservable hosts,
        then opted-in compute hosts emptied by live migration.
        """
        return self._call(self.case.ops_api.api_post, PREFIX + '/leases',
                          self._best_effort_body())

    def delete_hunting(self):
        """DELETE of a best-effort lease while it hunts: one that is
        IN_PROGRESS, or one created just now (before the engine acts).
        """
        lease = self._pick(self._leases(('IN_PROGRESS',), OPS_PROJECT))
        if lease is None:
            created = self._call(self.case.ops_api.api_post,
                                 PREFIX + '/leases', self._best_effort_body())
            if created is None:
                return None
            lease = created.body['lease']
        return self._call(self.case.ops_api.api_delete,
                          PREFIX + '/leases/%s' % lease['id'])

    def restart_engine(self):
        """The engine dies and another starts, hunts in flight or not."""
        hunting = len(self._leases(('IN_PROGRESS',), OPS_PROJECT))
        self.case.restart_engine()
        return hunting

    def idle_pass(self):
        """The engine's idle-host pass (the idle action is on)."""
        return self.case.engine.idle_hosts.run_pass()

    def delete_server(self):
        server = self._pick(s for s in self._known()
                            if not s['OS-EXT-STS:task_state'])
        if server is None:
            return 'skip'
        return self._call(self.case.admin_api.delete_server, server['id'])

    def delete_lease(self):
        """A pending lease is removed, as Blazar removes it: 404 at once,
        its rows gone once the engine has released what it held in Nova
        (checked after the settle, see :meth:`step`); a started one ends.
        """
        lease = self._pick(self._leases(('PENDING', 'ACTIVE')))
        if lease is None:
            return 'skip'
        url = PREFIX + '/leases/%s' % lease['id']
        done = self._call(self.case.api.api_delete, url)
        if done is not None and lease['status'] == 'PENDING':
            try:
                self.case.api.api_get(url)
            except api_client.OpenStackApiNotFoundException:
                self.removed.append(lease['id'])
            else:
                raise StepFailed('lease %s, deleted while PENDING, is still '
                                 'shown' % lease['id'])
        return done

    def _update(self, lease, end):
        return self._call(self.case.api.api_put,
                          PREFIX + '/leases/%s' % lease['id'],
                          {'end_date': _fmt(end)})

    def end_early(self):
        lease = self._pick(self._leases(('ACTIVE',)))
        if lease is None:
            return 'skip'
        return self._update(lease, self.now + datetime.timedelta(minutes=1))

    def extend(self):
        lease = self._pick(self._leases(('PENDING', 'ACTIVE')))
        if lease is None:
            return 'skip'
        return self._update(lease, lease['end_date'] + datetime.timedelta(
            minutes=self._pick((30, 60))))

    def _action(self, statuses, action, **kwargs):
        server = self._pick(s for s in self._known()
                            if s['status'] in statuses and
                            not s['OS-EXT-STS:task_state'])
        if server is None:
            return 'skip'
        return self._call(self.case.admin_api.post_server_action,
                          server['id'], action, **kwargs)

    def shelve(self):
        return self._action(('ACTIVE',), {'shelve': None})

    def unshelve(self):
        return self._action(('SHELVED_OFFLOADED',), {'unshelve': None})

    def migrate(self):
        return self._action(('ACTIVE',), {'migrate': None},
                            no_valid_host=True)

    def advance(self):
        minutes = self._pick((5, 15, 30, 60, 90))
        self.case.clock.advance(minutes=minutes)
        return minutes

    # -- the walk ---------------------------------------------------------

    def _quiet(self, deadline):
        """Wait until no server is busy: confirm resizes and delete
        ERROR servers (no valid host: they hold nothing, and users delete
        them as the leases of their own end with them) on the way.
        Returns whether it deleted any; keeps the last list it read.
        """
        deleted = False
        while True:
            busy = []
            servers = self._servers()
            for server in servers:
                idle = not server['OS-EXT-STS:task_state']
                if server['status'] == 'VERIFY_RESIZE' and idle:
                    self._call(self.case.admin_api.post_server_action,
                               server['id'], {'confirmResize': None})
                    busy.append(server['id'])
                elif server['status'] == 'ERROR' and idle:
                    if self._call(self.case.admin_api.delete_server,
                                  server['id']) is not None:
                        deleted = True
                        busy.append(server['id'])
                elif not idle or server['status'] not in _SETTLED:
                    busy.append(server['id'])
            if not busy:
                self.seen = servers
                return deleted
            if time.monotonic() > deadline:
                raise StepFailed('servers still busy after the step: %s'
                                 % busy)
            time.sleep(0.05)

    def settle(self, timeout=60):
        """Let Nova finish (servers being deleted are gone); then the
        hook and the engine (again while that left servers to delete).
        """
        deadline = time.monotonic() + timeout
        self._quiet(deadline)
        while True:
            self.case.hook.reconcile()
            self.case.engine.process_due()
            if not self._quiet(deadline):
                return

    def _check_removed(self):
        """The leases deleted while PENDING are gone once the engine is
        done (or, their release failed, back in ERROR for the operator).
        """
        removed, self.removed = self.removed, []
        for lease_id in removed:
            try:
                lease = db_api.lease_get(self.case.lease_db, lease_id)
            except db_api.LeaseNotFound:
                continue
            if lease['status'] != 'ERROR':
                raise StepFailed('lease %s, deleted while PENDING, is still '
                                 'there, %s' % (lease_id, lease['status']))

    def step(self):
        self.steps += 1
        weights = [w for w, _ in self.ops]
        _weight, op = self.rng.choices(self.ops, weights=weights)[0]
        name = self.last = op.__name__
        self.counts[name] = self.counts.get(name, 0) + 1
        t0 = time.monotonic()
        self.refusal = None
        result = op()
        refusal = self.refusal
        t1 = time.monotonic()
        self.settle()
        self._check_removed()
        t2 = time.monotonic()
        findings = audit.run(self.case.audit_conf, cursor=self.journal)
        t3 = time.monotonic()
        if isinstance(result, tuple):
            result = result[0]
        outcome = ('skipped' if result == 'skip' else
                   'refused (%s)' % refusal if result is None else
                   'done')
        self.log('step %d (seed %d): %s %s; %d finding(s) '
                 '[%d servers; op %.2f s, settle %.2f s, audit %.2f s]' % (
                     self.steps, self.seed, name, outcome, len(findings),
                     len(self.seen), t1 - t0, t2 - t1, t3 - t2))
        return name, findings

    def _evidence(self, findings):
        """What the side database says of the leases the findings name
        (their events' claims and retries, the clock), for the replay.
        """
        out = {'now': str(timeutils.utcnow()),
               'engine_jobs': self.case.engine.in_flight, 'leases': {},
               'hosts': {}}
        hosts = set()
        for finding in findings:
            lease_ids = [(finding.details or {}).get('lease_id')]
            if finding.check == 'overcommit':
                hosts.add(finding.subject)      # it names the host
                out['holders'] = (finding.details or {}).get('holders')
                # ... and the leases whose promises it counted.
                lease_ids = [h.split()[-1] for h in out['holders'] or ()
                             if h.startswith(('lease ', 'host lease '))]
            elif not lease_ids[0] and finding.check in ('broken_promise',
                                                        'lease_status'):
                lease_ids = [finding.subject]      # these name the lease
            for lease_id in lease_ids:
                self._lease_evidence(out, hosts, lease_id)
        return self._host_evidence(out, hosts)

    def _lease_evidence(self, out, hosts, lease_id):
        """What the side database says of one lease, into ``out``; its
        hosts into ``hosts``.
        """
        if not lease_id or lease_id in out['leases']:
            return
        try:
            lease = db_api.lease_get(self.case.lease_db, lease_id)
        except db_api.LeaseNotFound:
            out['leases'][lease_id] = None
            return
        out['leases'][lease_id] = {
            'status': lease['status'],
            'status_reason': lease.get('status_reason'),
            'start_date': str(lease['start_date']),
            'end_date': str(lease['end_date']),
            'reservations': [(r['resource_type'], r['status'])
                             for r in lease['reservations']],
            'events': [{k: str(e.get(k)) for k in (
                'event_type', 'time', 'status', 'next_attempt_at',
                'claimed_by', 'claimed_at', 'attempts', 'last_error')}
                for e in db_api.event_list(self.case.lease_db,
                                           lease_id=lease_id)],
            'allocations': [
                (a['host'], str(a['start_date']), str(a['end_date']),
                 a['vcpus'], a['memory_mb'], a['disk_gb'])
                for a in db_api.allocation_list(self.case.lease_db,
                                                lease_id=lease_id)],
            'servers': [r.get('resource_id')
                        for r in lease['reservations']]}
        hosts.update(a[0] for a in out['leases'][lease_id]['allocations'])

    def _host_evidence(self, out, hosts):
        """What runs on ``hosts``, what else is promised there now, their
        services and aggregates, and the leases' servers, into ``out``.
        """
        # What runs on the hosts those leases were promised, and what
        # else is promised there now.
        now = timeutils.utcnow()
        for server in self._servers():
            host = server.get('OS-EXT-SRV-ATTR:hypervisor_hostname')
            if host in hosts:
                out['hosts'].setdefault(host, {'servers': [],
                                               'promised_now': []})
                out['hosts'][host]['servers'].append(
                    (server['id'], server['status'],
                     server['flavor'].get('vcpus'),
                     (server.get('metadata') or {}).get('lease_id'),
                     (server.get('fault') or {}).get('message')))
        lease_servers = {sid for lease in out['leases'].values() if lease
                         for sid in lease['servers'] if sid}
        for server in self._servers():
            if server['id'] in lease_servers:
                out.setdefault('lease_servers', {})[server['id']] = {
                    'status': server['status'],
                    'task_state': server.get('OS-EXT-STS:task_state'),
                    'host': server.get('OS-EXT-SRV-ATTR:host'),
                    'fault': (server.get('fault') or {}).get('message'),
                    'metadata': server.get('metadata')}
        services = {s['host']: (s['status'], s['state'],
                                s.get('disabled_reason'))
                    for s in self.case.admin_api.get_services(
                        binary='nova-compute')}
        registered = {h['hypervisor_hostname']
                      for h in db_api.host_list(self.case.lease_db)}
        aggregates = self.case.admin_api.api_get(
            '/os-aggregates').body['aggregates']
        for host in hosts:
            out['hosts'].setdefault(host, {'servers': [],
                                           'promised_now': []})
            out['hosts'][host]['service'] = services.get(host)
            out['hosts'][host]['aggregates'] = [
                (a['name'], a.get('metadata')) for a in aggregates
                if host in (a.get('hosts') or ())]
            out['hosts'][host]['registered'] = host in registered
            out['hosts'][host]['promised_now'] = [
                (a['reservation_id'], str(a['start_date']),
                 str(a['end_date']), a['vcpus'])
                for a in db_api.allocation_list(
                    self.case.lease_db, hosts=[host], start=now,
                    end=now + datetime.timedelta(seconds=1))]
        return out

    def run(self, steps):
        """Walk; return (steps done, findings of the failing step, the
        failing step's description or None).
        """
        for _ in range(steps):
            try:
                name, findings = self.step()
            except StepFailed as e:
                return self.steps, [], 'step %d (%s): %s' % (
                    self.steps, self.last, e)
            if findings:
                try:
                    self.evidence = self._evidence(findings)
                except Exception as e:  # never in the way of the finding
                    self.evidence = {'error': repr(e)}
                return self.steps, findings, 'step %d (%s): %s' % (
                    self.steps, name, '; '.join(
                        '%s: %s' % (f.check, f.message) for f in findings))
        return self.steps, [], None
