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
"""Capacity over time (nova_lease.calendar.capacity) against brute force."""

import collections
import datetime

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from nova_lease import calendar
from nova_lease.calendar import capacity

BASE = datetime.datetime(2026, 3, 1, 8, 0)
HOUR = datetime.timedelta(hours=1)
Res = collections.namedtuple('Res', 'lease_id project_id resource_type')


def T(k):
    return BASE + k * datetime.timedelta(minutes=30)


def _host_items(items):
    out = collections.defaultdict(list)
    for item in items:
        out[item.host].append(item)
    return {h: tuple(v) for h, v in out.items()}


def reference(hosts, items, reservations, start, end, step, now,
              project_id=None):
    """Brute force: every instant where something starts, per host."""
    bounds = [start]
    while bounds[-1] + step < end:
        bounds.append(bounds[-1] + step)
    bounds.append(end)
    figures = collections.defaultdict(lambda: collections.defaultdict(
        lambda: [0] * (len(bounds) - 1)))
    for s, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        active = b > now
        for h in hosts:
            mine = [i for i in items if i.host == h.name and i.start < b and
                    (i.end is None or i.end > a)]
            instants = {a} | {i.start for i in mine if a < i.start < b}
            peak = [0, 0, 0]
            whole = any(i.whole_host for i in mine)
            for t in instants:
                at = [i for i in mine if i.start <= t and
                      (i.end is None or t < i.end) and not i.whole_host]
                for q in range(3):
                    peak[q] = max(peak[q], sum(i[3 + q] for i in at))
            extra = [0, 0, 0]
            own_extra = [0, 0, 0]
            for entry in h.leased:
                until, size = entry[:2]
                if until > now and a < until and b > now:
                    for q in range(3):
                        extra[q] += size[q]
                        if len(entry) > 2 and reservations[
                                entry[2]].project_id == project_id:
                            own_extra[q] += size[q]
            leased_sum = [sum(e[1][q] for e in h.leased)
                          for q in range(3)]
            unleased = [0 if h.registered else max(h.used[q] - leased_sum[q],
                                                   0) for q in range(3)]
            own_peak, own_whole = peak, whole
            if project_id is not None:
                own = [i for i in mine
                       if reservations[i.ref].project_id == project_id]
                own_whole = any(i.whole_host for i in own)
                own_peak = [0, 0, 0]
                for t in instants:
                    at = [i for i in own if i.start <= t and
                          (i.end is None or t < i.end) and not i.whole_host]
                    for q in range(3):
                        own_peak[q] = max(own_peak[q],
                                          sum(i[3 + q] for i in at))
            running = False
            for q, r in enumerate(capacity.HOST_RESOURCES):
                cap = h.capacity[q]
                promised = cap if whole else peak[q] + extra[q]
                used = unleased[q] if active else 0
                running |= used > 0
                figures[r]['capacity'][s] += cap
                figures[r]['used'][s] += used
                figures[r]['free'][s] += max(cap - used - promised, 0)
                figures[r]['promised'][s] += (
                    promised if project_id is None else
                    (cap if own_whole else own_peak[q] + own_extra[q]))
            figures['hosts']['capacity'][s] += 1
            figures['hosts']['promised'][s] += int(
                whole if project_id is None else own_whole)
            figures['hosts']['used'][s] += int(running and not whole)
            figures['hosts']['free'][s] += int(
                not mine and not running and not any(extra))
    return bounds, figures


def _body(hosts, items, reservations, start, end, step, now, **kw):
    cal = calendar.Calendar({}, items) if items else None
    return capacity.capacity_over_time(
        hosts, cal, _host_items(items), reservations, start, end, step, now,
        **kw)['capacity']


class CapacityReferenceTest(testtools.TestCase):

    def _check(self, hosts, items, reservations, start, end, step, now,
               project_id=None):
        body = _body(hosts, items, reservations, start, end, step, now,
                     project_id=project_id)
        bounds, ref = reference(hosts, items, reservations, start, end,
                                step, now, project_id)
        self.assertEqual(len(bounds) - 1, len(body['steps']))
        figures = capacity.FIGURES if project_id is None else \
            capacity.MEMBER_FIGURES
        for s, entry in enumerate(body['steps']):
            self.assertEqual(capacity.iso(bounds[s]), entry['start'])
            self.assertEqual(capacity.iso(bounds[s + 1]), entry['end'])
            for r in capacity.RESOURCES:
                self.assertEqual(set(figures), set(entry[r]))
                for f in figures:
                    self.assertEqual(ref[r][f][s], entry[r][f],
                                     (s, r, f, entry))
        return body

    @settings(max_examples=150, deadline=None)
    @given(st.data())
    def test_random_against_reference(self, data):
        n_hosts = data.draw(st.integers(1, 4))
        hosts = []
        for k in range(n_hosts):
            hosts.append(capacity.CapacityHost(
                'h%d' % k, calendar.HostCapacity(
                    *data.draw(st.tuples(st.integers(0, 16),
                                         st.integers(0, 64),
                                         st.integers(0, 32)))),
                used=data.draw(st.tuples(st.integers(0, 8),
                                         st.integers(0, 32),
                                         st.integers(0, 16))),
                registered=data.draw(st.booleans()),
                leased=[(T(data.draw(st.integers(-4, 30))),
                         calendar.Demand(*data.draw(st.tuples(
                             st.integers(0, 4), st.integers(0, 8),
                             st.integers(0, 4)))),
                         data.draw(st.sampled_from(['x0', 'x1'])))
                        [:data.draw(st.sampled_from([2, 3]))]
                        for _n in range(data.draw(st.integers(0, 2)))]))
        items = []
        reservations = {'x0': Res('lx0', 'p0', 'virtual:instance'),
                        'x1': Res('lx1', 'p1', 'virtual:instance')}
        for k in range(data.draw(st.integers(0, 12))):
            a = data.draw(st.integers(-10, 40))
            length = data.draw(st.integers(1, 20))
            rid = 'r%d' % k
            whole = data.draw(st.integers(0, 5)) == 0
            items.append(calendar.Item(
                'h%d' % data.draw(st.integers(0, n_hosts)), T(a),
                T(a + length),
                *data.draw(st.tuples(st.integers(0, 4), st.integers(0, 16),
                                     st.integers(0, 8))),
                whole_host=whole, ref=rid))
            reservations[rid] = Res('l%d' % k, 'p%d' % (k % 2),
                                    'physical:host' if whole
                                    else 'virtual:instance')
        start = T(data.draw(st.integers(-4, 10)))
        end = start + datetime.timedelta(
            minutes=data.draw(st.integers(1, 600)))
        step = datetime.timedelta(minutes=data.draw(st.integers(1, 240)))
        now = T(data.draw(st.integers(-2, 12)))
        project = data.draw(st.sampled_from([None, 'p0', 'p1', 'p9']))
        self._check(hosts, items, reservations, start, end, step, now,
                    project)

    def test_scenario(self):
        cap = calendar.HostCapacity(16, 32768, 1000)
        hosts = [
            capacity.CapacityHost('c1', cap, used=(6, 4096, 40),
                                  leased=[(BASE + 10 * HOUR,
                                           calendar.Demand(2, 1024, 10))]),
            capacity.CapacityHost('c2', cap),
            capacity.CapacityHost('r1', cap, registered=True),
        ]
        items = [
            calendar.Item('c2', BASE + 2 * HOUR, BASE + 5 * HOUR, 4, 8192,
                          20, ref='vm'),
            calendar.Item('r1', BASE + 3 * HOUR, BASE + 4 * HOUR,
                          whole_host=True, ref='hl'),
        ]
        reservations = {'vm': Res('L1', 'p1', 'virtual:instance'),
                        'hl': Res('L2', 'p2', 'physical:host')}
        body = self._check(hosts, items, reservations, BASE,
                           BASE + 6 * HOUR, HOUR, BASE)
        third = body['steps'][3]
        self.assertEqual({'capacity': 48, 'used': 4, 'promised': 22,
                          'free': 22}, third['vcpus'])
        self.assertEqual({'capacity': 3, 'used': 1, 'promised': 1,
                          'free': 0}, third['hosts'])
        self.assertEqual({'capacity': 3, 'used': 1, 'promised': 0,
                          'free': 2}, body['steps'][0]['hosts'])
        # Unit-hours: 6 one-hour steps of 48 vcpus.
        self.assertEqual(288, body['total']['vcpus']['capacity'])
        self.assertEqual(24, body['total']['vcpus']['used'])
        self.assertEqual('2026-03-01T08:00:00Z', body['start'])
        self.assertEqual(3600, body['step_seconds'])

    def test_member_sees_only_its_promises(self):
        cap = calendar.HostCapacity(8, 8192, 100)
        hosts = [capacity.CapacityHost('c1', cap, used=(2, 0, 0)),
                 capacity.CapacityHost('c2', cap)]
        items = [calendar.Item('c1', BASE, BASE + HOUR, 2, 0, 0, ref='a'),
                 calendar.Item('c2', BASE, BASE + HOUR, 3, 0, 0, ref='b')]
        reservations = {'a': Res('L1', 'p1', 'virtual:instance'),
                        'b': Res('L2', 'p2', 'virtual:instance')}
        body = self._check(hosts, items, reservations, BASE, BASE + HOUR,
                           HOUR, BASE, project_id='p1')
        step = body['steps'][0]
        self.assertEqual({'capacity': 16, 'promised': 2, 'free': 9},
                         step['vcpus'])
        self.assertEqual('project', body['view'])
        self.assertNotIn('host_details', body)
        # The project's items given (as the snapshot indexes them): the
        # same view.
        self.assertEqual(body, _body(
            hosts, items, reservations, BASE, BASE + HOUR, HOUR, BASE,
            project_id='p1', project_items=[items[0]]))
        body = _body(hosts, items, reservations, BASE, BASE + HOUR, HOUR,
                     BASE, project_id='p1', detail=True)
        self.assertNotIn('host_details', body)
        self.assertNotIn('L2', str(body))
        self.assertNotIn('c2', str(body))

    def test_last_step_is_shorter_and_totals_weigh_it(self):
        hosts = [capacity.CapacityHost('c1', calendar.HostCapacity(4, 0, 0))]
        body = _body(hosts, [], {}, BASE, BASE + 90 * HOUR / 60, HOUR,
                     BASE)
        self.assertEqual(['2026-03-01T09:00:00Z', '2026-03-01T09:30:00Z'],
                         [body['steps'][1]['start'],
                          body['steps'][1]['end']])
        self.assertEqual(6, body['total']['vcpus']['capacity'])

    def test_past_steps_count_no_unleased_work(self):
        hosts = [capacity.CapacityHost('c1', calendar.HostCapacity(4, 0, 0),
                                       used=(1, 0, 0))]
        body = _body(hosts, [], {}, BASE, BASE + 3 * HOUR, HOUR,
                     BASE + 90 * HOUR / 60)
        self.assertEqual([0, 1, 1],
                         [s['vcpus']['used'] for s in body['steps']])

    def test_detail(self):
        cap = calendar.HostCapacity(8, 8192, 100)
        hosts = [capacity.CapacityHost('c1', cap, used=(2, 512, 0),
                                       availability_zone='az1'),
                 capacity.CapacityHost('r1', cap, registered=True),
                 capacity.CapacityHost('r2', cap, registered=True)]
        items = [calendar.Item('r1', BASE + HOUR, BASE + 3 * HOUR,
                               whole_host=True, ref='h'),
                 calendar.Item('c1', BASE - HOUR, BASE + HOUR, 1, 256, 5,
                               ref='v')]
        reservations = {'h': Res('L1', 'p1', 'physical:host'),
                        'v': Res('L2', 'p2', 'virtual:instance')}
        body = _body(hosts, items, reservations, BASE, BASE + 4 * HOUR,
                     HOUR, BASE, detail=True)
        c1, r1, r2 = body['host_details']
        self.assertEqual('c1', c1['host'])
        self.assertEqual('az1', c1['availability_zone'])
        self.assertEqual(4, len(c1['steps']))
        self.assertEqual({'vcpus': 2, 'memory_mb': 512, 'disk_gb': 0},
                         c1['steps'][0]['used'])
        self.assertEqual({'vcpus': 5, 'memory_mb': 7424, 'disk_gb': 95},
                         c1['steps'][0]['free'])
        self.assertIsNone(c1['idle_until'])
        self.assertEqual([{
            'lease_id': 'L2', 'lease_name': None, 'project_id': 'p2',
            'reservation_id': 'v', 'resource_type': 'virtual:instance',
            'start': '2026-03-01T07:00:00Z', 'end': '2026-03-01T09:00:00Z',
            'whole_host': False, 'vcpus': 1, 'memory_mb': 256,
            'disk_gb': 5}], c1['bookings'])
        self.assertEqual('2026-03-01T09:00:00Z', r1['idle_until'])
        self.assertEqual({'vcpus': 8, 'memory_mb': 8192, 'disk_gb': 100},
                         r1['steps'][1]['promised'])
        self.assertTrue(r1['bookings'][0]['whole_host'])
        self.assertEqual(8, r1['bookings'][0]['vcpus'])
        self.assertEqual('2026-03-01T12:00:00Z', r2['idle_until'])

    def test_filters_and_resources(self):
        cap = calendar.HostCapacity(8, 8192, 100)
        hosts = [capacity.CapacityHost('c1', cap, availability_zone='az1',
                                       aggregates=['fast']),
                 capacity.CapacityHost('c2', cap, service_host='svc2',
                                       availability_zone='az2')]

        def count(**kw):
            return _body(hosts, [], {}, BASE, BASE + HOUR, HOUR, BASE,
                         **kw)['hosts']

        self.assertEqual(2, count())
        self.assertEqual(1, count(host='svc2'))
        self.assertEqual(1, count(host='c1'))
        self.assertEqual(1, count(aggregate='fast'))
        self.assertEqual(1, count(availability_zone='az2'))
        body = _body(hosts, [], {}, BASE, BASE + HOUR, HOUR, BASE,
                     resources=['hosts', 'vcpus'])
        self.assertEqual(['vcpus', 'hosts'], body['resources'])
        self.assertEqual({'start', 'end', 'vcpus', 'hosts'},
                         set(body['steps'][0]))

    def test_member_zones(self):
        cap = calendar.HostCapacity(1, 1, 1)

        def zones(sizes, min_hosts):
            hosts = [capacity.CapacityHost('%s%d' % (z, k), cap,
                                           availability_zone=z)
                     for z, n in sizes.items() for k in range(n)]
            return capacity.member_zones(hosts, min_hosts)

        self.assertEqual({'a', 'b', 'c'},
                         zones({'a': 5, 'b': 4, 'c': 3}, 3))
        # c is too small, and what a and b leave out (c) too: b, the
        # smaller, is given up with it.
        self.assertEqual({'a'}, zones({'a': 5, 'b': 4, 'c': 1}, 3))
        self.assertEqual(set(), zones({'a': 10, 'b': 1}, 10))
        # A zone of every host is the unfiltered view.
        self.assertEqual({'a'}, zones({'a': 2}, 10))
        self.assertEqual({'a', 'b'}, zones({'a': 2, 'b': 1}, 1))

    def test_member_filter_below_the_minimum(self):
        cap = calendar.HostCapacity(8, 8192, 100)
        hosts = [capacity.CapacityHost('c%d' % k, cap,
                                       availability_zone='big')
                 for k in range(3)]
        hosts.append(capacity.CapacityHost('s1', cap,
                                           availability_zone='small'))

        def count(**kw):
            return _body(hosts, [], {}, BASE, BASE + HOUR, HOUR, BASE,
                         **kw)['hosts']

        for zone in ('small', 'big'):
            e = self.assertRaises(capacity.NarrowView, count,
                                  project_id='p', member_min_hosts=2,
                                  availability_zone=zone)
            self.assertEqual('availability_zone', e.field)
        # The admin's view, an unknown zone (a 400 as before), a member
        # allowed single hosts.
        self.assertEqual(1, count(availability_zone='small',
                                  member_min_hosts=2))
        e = self.assertRaises(capacity.CapacityError, count,
                              project_id='p', member_min_hosts=2,
                              availability_zone='mars')
        self.assertNotIsInstance(e, capacity.NarrowView)
        self.assertEqual(4, count(project_id='p', member_min_hosts=2))
        self.assertEqual(1, count(project_id='p', member_min_hosts=1,
                                  availability_zone='small'))

    def test_bad_queries_name_the_field(self):
        hosts = [capacity.CapacityHost('c1', calendar.HostCapacity(1, 1, 1))]

        def field(start=BASE, end=BASE + HOUR, step=HOUR, **kw):
            e = self.assertRaises(capacity.CapacityError, _body, hosts, [],
                                  {}, start, end, step, BASE, **kw)
            self.assertIn(e.field, e.message)
            return e.field

        self.assertEqual('end', field(end=BASE))
        self.assertEqual('end', field(end=BASE - HOUR))
        self.assertEqual('step', field(step=datetime.timedelta(0)))
        self.assertEqual('step', field(
            end=BASE + (capacity.MAX_STEPS + 1) * HOUR))
        self.assertEqual('resource', field(resources=['gpus']))
        self.assertEqual('resource', field(resources=[]))
        self.assertEqual('host', field(host='nope'))
        self.assertEqual('aggregate', field(aggregate='nope'))
        self.assertEqual('availability_zone',
                         field(availability_zone='nope'))
        # The cap itself is allowed.
        body = _body(hosts, [], {}, BASE,
                     BASE + capacity.MAX_STEPS * HOUR, HOUR, BASE)
        self.assertEqual(capacity.MAX_STEPS, len(body['steps']))

    def test_many_hosts_span_chunks(self):
        cap = calendar.HostCapacity(4, 100, 10)
        n = capacity.HOST_CHUNK + 7
        hosts = [capacity.CapacityHost('h%04d' % k, cap, used=(1, 0, 0))
                 for k in range(n)]
        items = [calendar.Item('h%04d' % k, BASE, BASE + HOUR, 1, 10, 1,
                               ref='r%d' % k) for k in range(0, n, 3)]
        reservations = {i.ref: Res('l', 'p', 'virtual:instance')
                        for i in items}
        body = _body(hosts, items, reservations, BASE, BASE + 2 * HOUR,
                     HOUR, BASE, detail=True)
        self.assertEqual(n * 4, body['steps'][0]['vcpus']['capacity'])
        self.assertEqual(n + len(items), body['steps'][0]['vcpus']['used'] +
                         body['steps'][0]['vcpus']['promised'])
        self.assertEqual(n, len(body['host_details']))
        self.assertEqual(1, body['host_details'][-1]['steps'][0]['used'][
            'vcpus'])
