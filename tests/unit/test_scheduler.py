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
"""LeaseFilter / LeaseWeigher rules on Nova's FakeHostState objects.

The calendar snapshot is built in memory (the database path is covered by
tests/functional/test_admission_db.py and test_scheduling.py).
"""

import datetime
import random

import fixtures
import nova.conf
from nova import objects
from nova.scheduler import weights as nova_weights
from nova.tests.unit.scheduler import fakes
from oslo_config import fixture as config_fixture
from oslo_serialization import jsonutils
from oslo_utils import timeutils
from oslo_utils import uuidutils
import testtools

from nova_lease import calendar
from nova_lease import params
from nova_lease.plugins.host import aggregates as host_aggregates
from nova_lease import resource_types as types
from nova_lease.scheduler import filters
from nova_lease.scheduler import hosts as lease_hosts
from nova_lease.scheduler import moves
from nova_lease.scheduler import request as lease_request
from nova_lease.scheduler import snapshot
from nova_lease.scheduler import view
from nova_lease.scheduler import weights

CONF = nova.conf.CONF
NOW = datetime.datetime(2030, 1, 1, 12, 0)
HOUR = datetime.timedelta(hours=1)
objects.register_all()


def _aggregate(name, host, metadata=None):
    return objects.Aggregate(name=name, hosts=[host], metadata=metadata or {})


def _held(rid):
    """An aggregate of host reservation ``rid`` (as the engine makes it)."""
    return (rid, {lease_hosts.RESERVATION_KEY: rid})


def _host(name, vcpus_used=0, instances=None, aggregates=()):
    """``aggregates``: names, or (name, metadata) pairs."""
    aggregates = [(a, None) if isinstance(a, str) else a
                  for a in aggregates]
    return fakes.FakeHostState(name, name, {
        'vcpus_total': 4, 'vcpus_used': vcpus_used,
        'total_usable_ram_mb': 8192 + 512, 'free_ram_mb': 8192 + 512,
        'total_usable_disk_gb': 100, 'disk_mb_used': 0,
        'cpu_allocation_ratio': 1.0, 'ram_allocation_ratio': 1.0,
        'disk_allocation_ratio': 1.0,
        'aggregates': [_aggregate(a, name, meta) for a, meta in aggregates]},
        instances=instances)


def _spec(hints=None, uuid=None, vcpus=4, project='p1', **kwargs):
    flavor = objects.Flavor(vcpus=vcpus, memory_mb=512, root_gb=1,
                            ephemeral_gb=0, swap=0, extra_specs={})
    return objects.RequestSpec(
        instance_uuid=uuid or uuidutils.generate_uuid(), flavor=flavor,
        project_id=project, num_instances=1, is_bfv=False,
        scheduler_hints={k: [v] for k, v in (hints or {}).items()},
        **kwargs)


def _lease_hints(end, start=None):
    """The hints of a first boot of a lease of project p1 from ``start``
    (now if None) to ``end``: the internal hint nova-api adds, naming a
    lease that :func:`_lease_of` finds (as ``lease_request.lookup_lease``
    would in the side database).
    """
    return {params.LEASE_ID_HINT: 'lease|%s|%s' % (
        (start or NOW).isoformat(), end.isoformat())}


def _lease_of(lease_id, now):
    """``lease_request.lookup_lease`` for the leases named by
    :func:`_lease_hints`.
    """
    if not lease_id.startswith('lease|'):
        return []
    _, start, end = lease_id.split('|')
    start = datetime.datetime.fromisoformat(start)
    end = datetime.datetime.fromisoformat(end)
    if end <= now:
        return []
    return [snapshot.Reservation('r-' + lease_id, lease_id, 'p1',
                                 types.SERVER, None, start, end,
                                 'PENDING', None)]


def _reservation(rid, start, end, resource_id=None, kind=types.SERVER,
                 project='p1', status='PENDING', vcpus=4):
    return snapshot.Reservation(rid, 'lease-' + rid, project, kind,
                                resource_id, start, end, status,
                                calendar.Demand(vcpus, 512, 1))


class _Base(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.flags = self.useFixture(config_fixture.Config(CONF))
        self.flags.config(group='nova_lease', freepool_aggregate='freepool')
        timeutils.set_time_override(NOW)
        self.addCleanup(timeutils.clear_time_override)
        self.snap = snapshot.Snapshot()
        self.useFixture(fixtures.MockPatchObject(
            view, 'get_snapshot', side_effect=lambda now, conf: self.snap))
        # The servers the snapshot does not know are not in the database
        # either (tests/functional covers the lookup).
        self.lookup = self.useFixture(fixtures.MockPatchObject(
            lease_request, 'lookup_server', return_value=(None, ()))).mock
        self.lookup_res = self.useFixture(fixtures.MockPatchObject(
            lease_request, 'lookup_reservation', return_value=(None, ()))).mock
        self.lookup_lease = self.useFixture(fixtures.MockPatchObject(
            lease_request, 'lookup_lease',
            side_effect=lambda conf, lease_id, now: _lease_of(lease_id,
                                                              now))).mock
        # No side database here: the filter and weigher do not register
        # (tests/functional/test_misconfiguration.py covers it).
        self.useFixture(fixtures.MockPatch(
            'nova_lease.registration.register_nova_process'))
        # What placement says of hosts a live migration reached
        # (nova_lease.scheduler.moves reads Nova's cell database and
        # placement: tests/functional/test_scheduling.py covers it).
        self.usage = {}
        self.useFixture(fixtures.MockPatchObject(
            moves, 'placement_usage',
            side_effect=lambda hosts, conf: self.usage))
        self.filter = filters.LeaseFilter()

    def promise(self, host, start, end, rid='r1', vcpus=4, **kwargs):
        items = list(self.snap.items) + [calendar.Item(
            host, start, end, vcpus, 512, 1, False, rid)]
        reservations = dict(self.snap.reservations)
        reservations[rid] = _reservation(rid, start, end, vcpus=vcpus,
                                         **kwargs)
        self.snap = snapshot.Snapshot(items, reservations)

    def passing(self, hosts, spec):
        return [h.host for h in self.filter.filter_all(hosts, spec)]


class FilterTest(_Base):

    def test_promise_lends_capacity_to_work_that_ends_before(self):
        self.promise('host1', NOW + 2 * HOUR, NOW + 4 * HOUR)
        hosts = [_host('host1'), _host('host2')]
        self.assertEqual(['host1', 'host2'], self.passing(
            hosts, _spec(_lease_hints(NOW + HOUR))))
        self.assertEqual(['host1', 'host2'], self.passing(
            hosts, _spec(_lease_hints(NOW + 2 * HOUR))))
        self.assertEqual(['host2'], self.passing(
            hosts, _spec(_lease_hints(NOW + 3 * HOUR))))
        self.assertEqual(['host2'], self.passing(hosts, _spec()))
        # Half the host is free during the promise.
        self.assertEqual(['host1', 'host2'], self.passing(
            hosts, _spec(vcpus=0)))

    def test_future_lease_first_boot_needs_until_its_start(self):
        self.promise('host1', NOW + 2 * HOUR, NOW + 4 * HOUR)
        spec = _spec(_lease_hints(NOW + 4 * HOUR, start=NOW + 2 * HOUR))
        req = lease_request.resolve(spec, self.snap, NOW,
                                    lookup_lease=_lease_of)
        self.assertEqual((lease_request.LEASED, NOW, NOW + 2 * HOUR),
                         (req.kind, req.start, req.end))
        self.assertEqual(['host1', 'host2'],
                         self.passing([_host('host1'), _host('host2')],
                                      spec))

    def test_unshelve_goes_to_the_allocated_host_only(self):
        uuid = uuidutils.generate_uuid()
        self.promise('host1', NOW, NOW + 2 * HOUR, resource_id=uuid,
                     status='ACTIVE')
        spec = _spec(_lease_hints(NOW + 2 * HOUR, start=NOW), uuid=uuid)
        # Its own allocation does not count against it.
        self.assertEqual(['host1'], self.passing(
            [_host('host1'), _host('host2')], spec))
        # Something else took the capacity: NoValidHost, not another host.
        self.assertEqual([], self.passing(
            [_host('host1', vcpus_used=1), _host('host2')], spec))
        # Moving it away from its host (migration) is not pinned.
        spec.ignore_hosts = ['host1']
        self.assertEqual(['host2'], self.passing([_host('host2')], spec))

    def test_running_leased_server_is_not_counted_twice(self):
        uuid = uuidutils.generate_uuid()
        self.promise('host1', NOW - HOUR, NOW + 2 * HOUR, resource_id=uuid,
                     status='ACTIVE', vcpus=2)
        inst = objects.Instance(uuid=uuid, vcpus=2, memory_mb=512,
                                root_gb=1, ephemeral_gb=0)
        host = _host('host1', vcpus_used=2, instances=[inst])
        # 2 used by the leased server, which its allocation accounts for:
        # 2 free until its end, 4 after.
        self.assertEqual(['host1'], self.passing(
            [host], _spec(vcpus=2)))
        self.assertEqual([], self.passing([host], _spec(vcpus=3)))
        self.assertEqual(['host1'], self.passing(
            [host], _spec(_lease_hints(NOW + 5 * HOUR), vcpus=2)))
        # Without the allocation (an immediate lease), it counts until its
        # lease ends: 4 vcpus fit from then on, not before.
        self.snap = snapshot.Snapshot((), {'r1': _reservation(
            'r1', NOW - HOUR, NOW + 2 * HOUR, resource_id=uuid,
            status='ACTIVE', vcpus=2)})
        self.assertEqual([], self.passing([host], _spec(vcpus=4)))
        self.assertEqual(['host1'], self.passing([host], _spec(vcpus=2)))

    def test_server_linked_after_the_snapshot_was_read(self):
        uuid = uuidutils.generate_uuid()
        self.promise('host1', NOW, NOW + 2 * HOUR, status='ACTIVE')
        self.lookup.return_value = (
            self.snap.reservations['r1']._replace(resource_id=uuid),
            {'host1'})
        spec = _spec(_lease_hints(NOW + 2 * HOUR, start=NOW), uuid=uuid)
        self.assertEqual(['host1'], self.passing(
            [_host('host1'), _host('host2')], spec))
        self.lookup.assert_called_once_with(CONF, uuid, NOW)
        # Not asked about requests without lease hints.
        self.passing([_host('host2')], _spec())
        self.assertEqual(1, self.lookup.call_count)

    def test_free_pool_takes_no_unleased_server(self):
        hosts = [_host('host1', aggregates=['freepool']), _host('host2')]
        self.assertEqual(['host2'], self.passing(hosts, _spec()))
        # Nor a leased one: host reservations' admission only sees
        # allocations.
        self.assertEqual(['host2'], self.passing(
            hosts, _spec(_lease_hints(NOW + HOUR))))
        self.flags.config(group='nova_lease', freepool_aggregate='other')
        self.assertEqual(['host1', 'host2'], self.passing(hosts, _spec()))

    def test_default_lease_is_not_the_schedulers(self):
        # nova-api gives default leases (and marks their first boot); the
        # scheduler never applies default_lease: a request without a lease
        # hint is unleased (a server booted before the option was set).
        self.promise('host1', NOW + 2 * HOUR, NOW + 4 * HOUR)
        hosts = [_host('host1'), _host('host2')]
        self.flags.config(group='nova_lease', default_lease=True)
        self.flags.config(group='nova_lease_api',
                          default_lease_duration='1h')
        self.assertEqual(['host2'], self.passing(hosts, _spec()))

    def test_host_reservation_hint(self):
        self.snap = snapshot.Snapshot(
            [calendar.Item('host1', NOW - HOUR, NOW + HOUR, whole_host=True,
                           ref='hr')],
            {'hr': _reservation('hr', NOW - HOUR, NOW + HOUR,
                                kind=types.HOST, status='ACTIVE')})
        hosts = [_host('host1', aggregates=[_held('hr')]), _host('host2')]
        self.assertEqual(['host1'], self.passing(
            hosts, _spec({'reservation': 'hr'})))
        self.assertEqual([], self.passing(
            hosts, _spec({'reservation': 'hr'}, project='other')))
        # Nobody else gets the reserved host.
        self.assertEqual(['host2'], self.passing(
            hosts, _spec(_lease_hints(NOW + 10 * 60 * _SEC), vcpus=1)))
        self.lookup_res.assert_not_called()
        # A lease that started after the snapshot was read: asked for.
        self.snap = snapshot.Snapshot(self.snap.items, {
            'hr': self.snap.reservations['hr']._replace(
                lease_status='PENDING')})
        self.assertEqual([], self.passing(
            hosts, _spec({'reservation': 'hr'})))
        self.lookup_res.return_value = (
            self.snap.reservations['hr']._replace(lease_status='ACTIVE'),
            {'host1'})
        self.assertEqual(['host1'], self.passing(
            hosts, _spec({'reservation': 'hr'})))

    def test_reservation_aggregate_is_the_owners_until_the_end(self):
        # The allocation is over, the engine has not ended the lease yet:
        # the host is still in the reservation's aggregate (and its
        # servers are about to be deleted).
        self.snap = snapshot.Snapshot(
            [calendar.Item('host1', NOW - 2 * HOUR, NOW - HOUR,
                           whole_host=True, ref='hr')],
            {'hr': _reservation('hr', NOW - 2 * HOUR, NOW - HOUR,
                                kind=types.HOST, status='ACTIVE')})
        hosts = [_host('host1', aggregates=[_held('hr')]), _host('host2')]
        self.assertEqual(['host2'], self.passing(hosts, _spec()))
        self.assertEqual(['host2'], self.passing(
            hosts, _spec(_lease_hints(NOW + HOUR), vcpus=1)))
        # Over for its owner too.
        self.assertEqual([], self.passing(
            hosts, _spec({'reservation': 'hr'}, vcpus=1)))
        # Another reservation's hint does not open it either.
        self.snap = snapshot.Snapshot((), {'other': _reservation(
            'other', NOW - HOUR, NOW + HOUR, kind=types.HOST,
            status='ACTIVE')})
        self.lookup_res.return_value = (self.snap.reservations['other'],
                                        {'host1', 'host2'})
        self.assertEqual([], self.passing(
            hosts, _spec({'reservation': 'other'}, vcpus=1)))
        # The key is the one the engine's host plugin sets.
        self.assertEqual(host_aggregates.META_RESERVATION,
                         lease_hosts.RESERVATION_KEY)

    def test_hint_needs_the_reservations_aggregate(self):
        # The lease ended early (deleted): the engine deleted the
        # aggregate and put the host back in the free pool, but the
        # snapshot still shows the lease ACTIVE.
        self.snap = snapshot.Snapshot(
            [calendar.Item('host1', NOW - HOUR, NOW + HOUR, whole_host=True,
                           ref='hr')],
            {'hr': _reservation('hr', NOW - HOUR, NOW + HOUR,
                                kind=types.HOST, status='ACTIVE')})
        spec = _spec({'reservation': 'hr'}, vcpus=1)
        self.assertEqual([], self.passing(
            [_host('host1', aggregates=['freepool'])], spec))
        self.assertEqual([], self.passing([_host('host1')], spec))
        self.assertEqual(['host1'], self.passing(
            [_host('host1', aggregates=[_held('hr')])], spec))
        # The reason is logged.
        request_view = view.RequestView(spec, self.snap, NOW)
        self.assertEqual(
            [(False, 'not in the aggregate of reservation hr')],
            request_view.passes([_host('host1', aggregates=['freepool'])]))

    def test_rebuild_is_not_filtered(self):
        self.promise('host1', NOW, NOW + 4 * HOUR)
        spec = _spec()
        spec.scheduler_hints = {'_nova_check_type': ['rebuild']}
        self.assertEqual(['host1'], self.passing([_host('host1')], spec))

    def test_lease_params_hint_is_never_read(self):
        # Nova keeps the boot hints and hands them over at every move: a
        # lease is only what the side database says.
        self.promise('host1', NOW + HOUR, NOW + 4 * HOUR)
        for raw in ('{"end": 1', jsonutils.dumps({'duration': '30m'})):
            spec = _spec({'reserved': 'True', 'lease_params': raw})
            self.assertEqual(lease_request.UNLEASED,
                             lease_request.resolve(spec, self.snap, NOW).kind)
            self.assertEqual([], self.passing([_host('host1')], spec))
        self.lookup.assert_not_called()

    def test_first_boot_hint_of_a_lease_that_is_over(self):
        # A move of a server whose lease has ended: unleased.
        self.promise('host1', NOW + HOUR, NOW + 4 * HOUR)
        uuid = uuidutils.generate_uuid()
        spec = _spec(_lease_hints(NOW - 1 * _SEC, start=NOW - HOUR),
                     uuid=uuid)
        request = lease_request.resolve(spec, self.snap, NOW,
                                        lookup=lambda u, n: (None, ()),
                                        lookup_lease=_lease_of)
        self.assertEqual((lease_request.UNLEASED, None),
                         (request.kind, request.end))
        self.assertEqual([], self.passing([_host('host1')], spec))
        self.lookup.assert_called_once_with(CONF, uuid, NOW)

    def test_first_boot_hint_needs_an_unlinked_reservation(self):
        # Every reservation of the lease has its server: not a first boot.
        self.snap = snapshot.Snapshot((), {'r1': _reservation(
            'r1', NOW, NOW + HOUR, resource_id='another-server',
            status='ACTIVE')})
        spec = _spec({params.LEASE_ID_HINT: 'lease-r1'})
        self.assertEqual(lease_request.UNLEASED,
                         lease_request.resolve(spec, self.snap, NOW).kind)
        self.snap = snapshot.Snapshot((), {'r1': _reservation(
            'r1', NOW, NOW + HOUR)})
        request = lease_request.resolve(spec, self.snap, NOW)
        self.assertEqual((lease_request.LEASED, NOW + HOUR),
                         (request.kind, request.end))
        # Another project's lease does not lease this request.
        self.assertEqual(lease_request.UNLEASED, lease_request.resolve(
            _spec({params.LEASE_ID_HINT: 'lease-r1'}, project='p2'),
            self.snap, NOW).kind)
        self.lookup_lease.assert_not_called()

    def test_registered_hosts_take_host_reservations_only(self):
        # Registered (os-hosts) but in neither aggregate: an operator
        # took it out of the free pool, or the engine is between steps.
        self.snap = self.snap.with_registered({'host1'}, ('1', 'x'))
        hosts = [_host('host1'), _host('host2')]
        self.assertEqual(['host2'], self.passing(hosts, _spec()))
        self.assertEqual(['host2'], self.passing(
            hosts, _spec(_lease_hints(NOW + HOUR), vcpus=1)))
        request_view = view.view_for(_spec(), fresh=True)
        self.assertEqual(
            [(False, 'registered for host reservations (os-hosts)')],
            request_view.passes([_host('host1')]))

    def _unreadable(self):
        """No snapshot, and the side database cannot be read."""
        view.get_snapshot.side_effect = lambda now, conf: None
        self.useFixture(fixtures.MockPatchObject(
            view.db_api, 'get_database',
            side_effect=RuntimeError('database down')))

    def test_calendar_unreadable_fails_closed(self):
        self._unreadable()
        hosts = [_host('free', aggregates=['freepool']),
                 _host('held', aggregates=[_held('hr')]), _host('plain')]
        # Unleased work: anywhere but the free pool and the reservations'
        # aggregates (placement decides).
        self.assertEqual(['plain'], self.passing(hosts, _spec()))
        # Whatever may be leased: nowhere.
        for spec in (_spec(_lease_hints(NOW + HOUR), vcpus=1),
                     _spec({'reservation': 'hr'}),
                     _spec({'nova_lease_id': 'l1'}, vcpus=1),
                     _spec({'nova_lease_reservation': 'r1'}, vcpus=1),
                     _spec({'reserved': 'True'}, vcpus=1)):
            self.assertEqual([], self.passing(hosts, spec))
        self.flags.config(group='nova_lease', default_lease=True,
                          default_lease_exempt_projects=['exempt'])
        self.assertEqual([], self.passing(hosts, _spec()))
        self.assertEqual(['plain'], self.passing(
            hosts, _spec(project='exempt')))

    def test_snapshot_unreadable_fails_closed(self):
        view.get_snapshot.side_effect = RuntimeError('down')
        hosts = [_host('free', aggregates=['freepool']), _host('plain')]
        self.assertEqual(['plain'], self.passing(hosts, _spec()))
        self.assertEqual([], self.passing(
            hosts, _spec(_lease_hints(NOW + HOUR), vcpus=1)))

    def test_host_passes(self):
        self.promise('host1', NOW, NOW + 4 * HOUR)
        self.assertFalse(self.filter.host_passes(_host('host1'), _spec()))
        self.assertTrue(self.filter.host_passes(_host('host2'), _spec()))


class ArrivedServersTest(_Base):
    """Placement's usage counts where a live migration arrived."""

    def test_placement_usage_over_the_record_keeps_a_promise(self):
        # host1's record says 0 vcpus used, placement 2 (a server that
        # arrived): 2 + 4 promised from NOW+1h do not leave 4 for an
        # unleased request.
        self.promise('host1', NOW + HOUR, NOW + 2 * HOUR, vcpus=2)
        hosts = [_host('host1'), _host('host2')]
        self.assertEqual(['host1', 'host2'], self.passing(hosts, _spec(
            vcpus=2)))
        self.usage = {'host1': (2, 0, 0)}
        self.assertEqual(['host2'], self.passing(hosts, _spec(vcpus=2)))

    def test_the_record_counts_when_it_says_more(self):
        self.usage = {'host1': (0, 0, 0)}
        self.assertEqual(['host2'], self.passing(
            [_host('host1', vcpus_used=2), _host('host2')],
            _spec(vcpus=4)))

    def test_a_host_whose_usage_cannot_be_read_passes_nothing(self):
        self.usage = {'host1': None}
        self.assertEqual(['host2'], self.passing(
            [_host('host1'), _host('host2')], _spec(vcpus=1)))


class WeigherTest(_Base):

    def weigh(self, hosts, spec):
        handler = nova_weights.HostWeightHandler()
        # The filter runs first in Nova and builds the request's view.
        hosts = list(self.filter.filter_all(hosts, spec))
        weighed = handler.get_weighed_objects([weights.LeaseWeigher()],
                                              hosts, spec)
        return [w.obj.host for w in weighed]

    def test_tightest_fit_first(self):
        self.promise('host1', NOW + HOUR, NOW + 9 * HOUR, rid='a')
        self.promise('host2', NOW + 3 * HOUR, NOW + 9 * HOUR, rid='b')
        hosts = [_host('host3'), _host('host2'), _host('host1')]
        self.assertEqual(['host1', 'host2', 'host3'], self.weigh(
            hosts, _spec(_lease_hints(NOW + 45 * 60 * _SEC), vcpus=2)))
        self.assertEqual(['host2', 'host3'], self.weigh(
            hosts, _spec(_lease_hints(NOW + 2 * HOUR), vcpus=2)))
        self.flags.config(group='nova_lease_scheduler',
                          weigher_multiplier=-1.0)
        self.assertEqual('host3', self.weigh(
            hosts, _spec(_lease_hints(NOW + 45 * 60 * _SEC), vcpus=2))[0])

    def test_unleased_prefers_no_promise_then_the_latest(self):
        self.promise('host1', NOW + HOUR, NOW + 9 * HOUR, rid='a',
                     vcpus=1)
        self.promise('host2', NOW + 3 * HOUR, NOW + 9 * HOUR, rid='b',
                     vcpus=1)
        hosts = [_host('host1'), _host('host2'), _host('host3')]
        self.assertEqual(['host3', 'host2', 'host1'],
                         self.weigh(hosts, _spec(vcpus=1)))

    def test_calendar_unreadable_weighs_zero(self):
        view.get_snapshot.side_effect = lambda now, conf: None
        self.useFixture(fixtures.MockPatchObject(
            view.db_api, 'get_database',
            side_effect=RuntimeError('database down')))
        hosts = [_host('host1'), _host('host2')]
        request_view = view.view_for(_spec(), fresh=True)
        self.assertEqual([0.0, 0.0], request_view.weights(hosts))
        self.assertEqual(['host1', 'host2'], sorted(self.weigh(
            hosts, _spec())))

    def test_aggregate_multiplier_overrides(self):
        host = _host('host1')
        host.aggregates = [objects.Aggregate(
            name='a', hosts=['host1'],
            metadata={'lease_weigher_multiplier': '2.5'})]
        self.assertEqual(2.5, weights.LeaseWeigher().weight_multiplier(host))


_SEC = datetime.timedelta(seconds=1)


def _reference_leased(host_states, snap, now):
    """Running leased servers, one by one.

    doc/source/reference/scheduling.rst, "Demand over time":
    [(host position, end, (vcpus, memory_mb, disk_gb))].
    """
    out = []
    for k, hs in enumerate(host_states):
        for uuid, inst in (hs.instances or {}).items():
            res = snap.servers.get(uuid)
            if res is None:
                continue
            size = res.size or lease_hosts._instance_size(inst)
            entry = lease_hosts.leased_entry(res, lease_hosts.host_key(hs),
                                             size, snap, now)
            if entry is not None:
                out.append((k, calendar.to_us(entry[0]),
                            tuple(entry[1][:3])))
    return sorted(out)


class HostLoadsTest(testtools.TestCase):

    def test_vectorised_equals_one_by_one(self):
        rng = random.Random(7)
        hosts = ['host%d' % k for k in range(6)]
        for _round in range(30):
            items, reservations, instances = [], {}, {}
            for n in range(rng.randrange(0, 40)):
                rid, uuid = 'r%d' % n, 's%d' % n
                start = NOW + rng.randrange(-5, 4) * HOUR
                end = start + rng.randrange(1, 6) * HOUR
                vcpus = rng.randrange(1, 4)
                sized = rng.random() < 0.8
                reservations[rid] = snapshot.Reservation(
                    rid, 'l' + rid, 'p', types.SERVER, uuid, start,
                    end, 'ACTIVE',
                    calendar.Demand(vcpus, 256, 1) if sized else None)
                if rng.random() < 0.7:
                    items.append(calendar.Item(
                        rng.choice(hosts), start - rng.randrange(2) * HOUR,
                        end, vcpus, 256, 1, False, rid))
                if rng.random() < 0.8:
                    instances.setdefault(rng.choice(hosts), []).append(
                        objects.Instance(uuid=uuid, vcpus=vcpus,
                                         memory_mb=256, root_gb=1,
                                         ephemeral_gb=0))
            for k in range(5):
                instances.setdefault(rng.choice(hosts), []).append(
                    objects.Instance(uuid='unleased-%d' % k, vcpus=1,
                                     memory_mb=256, root_gb=1,
                                     ephemeral_gb=0))
            snap = snapshot.Snapshot(items, reservations)
            states = [_host(h, instances=instances.get(h)) for h in hosts]
            loads = lease_hosts.host_loads(states, snap, NOW, (0, 0, 0))
            got = sorted(zip(loads.l_own.tolist(), loads.l_end.tolist(),
                             map(tuple, loads.l_size.T.tolist())))
            self.assertEqual(_reference_leased(states, snap, NOW), got)
