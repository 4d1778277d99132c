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
"""The capacity picture (nova_lease.visibility.render), on bodies shaped
like the capacity API's."""

import copy
import datetime
import re
from xml.etree import ElementTree

import testtools

from nova_lease.visibility import render

SVG = '{http://www.w3.org/2000/svg}'
EVIL = '<script>alert("x")</script> & \'co\''
PROJECT = '0123456789abcdef0123456789abcdef'
HOST = {'vcpus': 16, 'memory_mb': 32768, 'disk_gb': 1000}


T0 = datetime.datetime(2026, 12, 1)


def _t(hour):
    """The window's start plus hours, as the API writes dates."""
    return (T0 + datetime.timedelta(hours=hour)).strftime(
        '%Y-%m-%dT%H:%M:%SZ')


def _booking(lease_id, name, start, end, **kw):
    booking = {'lease_id': lease_id, 'lease_name': name,
               'project_id': PROJECT, 'reservation_id': 'r-' + lease_id,
               'resource_type': 'virtual:instance', 'start': _t(start),
               'end': _t(end), 'whole_host': False, 'vcpus': 4,
               'memory_mb': 8192, 'disk_gb': 40}
    booking.update(kw)
    return booking


def _free(free_vcpus):
    return {'used': {}, 'promised': {},
            'free': {'vcpus': free_vcpus, 'memory_mb': 32768,
                     'disk_gb': 1000}}


def _body():
    """A day in one-hour steps.

    host1 is leased whole from 2 to 10, host2 has VM leases, host3 is idle
    until 18 then leased.
    """
    totals = {'capacity': 10, 'used': 1, 'promised': 2, 'free': 7}
    return {'capacity': {
        'start': _t(0), 'end': _t(24), 'step_seconds': 3600,
        'now': '2026-12-01T05:30:00Z', 'hosts': 3,
        'resources': ['vcpus', 'memory_mb', 'disk_gb', 'hosts'],
        'steps': [{'start': _t(i), 'end': _t(i + 1),
                   'vcpus': dict(totals), 'memory_mb': dict(totals),
                   'disk_gb': dict(totals), 'hosts': dict(totals)}
                  for i in range(24)],
        'total': {'vcpus': {'capacity': 1152, 'used': 96, 'promised': 384,
                            'free': 672},
                  'hosts': {'capacity': 72, 'used': 24, 'promised': 24,
                            'free': 24}},
        'host_details': [
            {'host': 'host1', 'registered': True,
             'availability_zone': 'nova', 'capacity': dict(HOST),
             'steps': [_free(0 if 2 <= i < 10 else 16) for i in range(24)],
             'idle_until': None,
             'bookings': [_booking('lease-evil', EVIL, 2, 10,
                                   resource_type='physical:host',
                                   whole_host=True, vcpus=16)]},
            {'host': 'host2', 'registered': False,
             'availability_zone': 'nova', 'capacity': dict(HOST),
             'steps': [_free(8 if 3 <= i < 8 else 12) for i in range(24)],
             'idle_until': None,
             'bookings': [
                 _booking('lease-a', 'training', -4, 8),     # from before
                 _booking('lease-b', 'nightly', 3, 8),       # overlaps a
                 _booking('lease-a', 'training', 12, 20),
                 _booking('lease-c', 'gone', -10, -2)]},     # outside
            {'host': 'host3', 'registered': True,
             'availability_zone': 'nova', 'capacity': dict(HOST),
             'steps': [_free(16 if i < 18 else 0) for i in range(24)],
             'idle_until': _t(18),
             'bookings': [_booking('lease-d', 'later', 18, 48,
                                   resource_type='physical:host',
                                   whole_host=True, vcpus=16)]},
        ]}}


def _parse(svg):
    return ElementTree.fromstring(svg)


def _bookings(root):
    return [g for g in root.iter(SVG + 'g') if g.get('class') == 'booking']


def _rect(g):
    return g.find(SVG + 'rect')


class SvgTest(testtools.TestCase):

    def setUp(self):
        super(SvgTest, self).setUp()
        self.body = _body()
        self.svg = render.svg(self.body)
        self.root = _parse(self.svg)

    def _row(self, host):
        return [g for g in self.root.iter(SVG + 'g')
                if g.get('class') == 'host-row' and g.get('data-host') ==
                host][0]

    def test_hosts_are_rows_in_order(self):
        rows = [g.get('data-host') for g in self.root.iter(SVG + 'g')
                if g.get('class') == 'host-row']
        self.assertEqual(['host1', 'host2', 'host3'], rows)
        names = [t.text for t in self.root.iter(SVG + 'text')
                 if t.get('class') == 'host-name']
        self.assertEqual(['host1', 'host2', 'host3'], names)

    def test_each_booking_in_the_window_is_a_labelled_bar(self):
        bars = _bookings(self.root)
        self.assertEqual(
            [('host1', EVIL), ('host2', 'training'), ('host2', 'nightly'),
             ('host2', 'training'), ('host3', 'later')],
            [(g.get('data-host'), g.get('data-lease-name')) for g in bars])
        labels = [g.find(SVG + 'text').text for g in bars]
        self.assertEqual('%s (01234567)' % EVIL, labels[0])
        self.assertEqual('training (01234567)', labels[1])
        self.assertIn('project %s' % PROJECT, bars[0].find(SVG + 'title')
                      .text)
        # The lease outside the window is not drawn.
        self.assertNotIn('lease-c', self.svg)

    def test_bars_are_placed_on_the_time_axis(self):
        scale = render._Scale(render.parse_time(_t(0)),
                              render.parse_time(_t(24)), render.LABEL_WIDTH,
                              render.WIDTH - render.LABEL_WIDTH -
                              render.RIGHT_MARGIN)
        hour = scale.width / 24
        bars = _bookings(self.root)
        evil = _rect(bars[0])
        self.assertAlmostEqual(scale.x0 + 2 * hour, float(evil.get('x')),
                               delta=0.1)
        self.assertAlmostEqual(8 * hour, float(evil.get('width')), delta=0.2)
        # Begun before the window: from its left edge; ends after: to
        # the right edge.
        self.assertEqual(scale.x0, float(_rect(bars[1]).get('x')))
        later = _rect(bars[4])
        self.assertAlmostEqual(scale.x0 + scale.width,
                               float(later.get('x')) +
                               float(later.get('width')), delta=0.2)

    def test_overlapping_bookings_get_lanes(self):
        bars = _bookings(self.root)
        ys = [float(_rect(g).get('y')) for g in bars[1:4]]
        self.assertNotEqual(ys[0], ys[1])   # training and nightly overlap
        self.assertEqual(ys[0], ys[2])      # the later training: lane 0

    def test_colour_is_stable_per_lease(self):
        bars = _bookings(self.root)
        fills = {}
        for g in bars:
            fills.setdefault(g.get('data-lease-id'), set()).add(
                _rect(g).get('fill'))
        self.assertEqual({1}, {len(f) for f in fills.values()})
        self.assertEqual(4, len({f.pop() for f in fills.values()}))
        # Another picture with other leases: the same colour for lease-a.
        other = _body()
        other['capacity']['host_details'][1]['bookings'] = [
            _booking('lease-a', 'training', 1, 2)]
        bar = _bookings(_parse(render.svg(other)))[1]
        self.assertEqual(_rect(bars[1]).get('fill'), _rect(bar).get('fill'))
        self.assertEqual(render.lease_colours(['lease-a', 'lease-b',
                                               'lease-d', 'lease-evil']),
                         {g.get('data-lease-id'): _rect(g).get('fill')
                          for g in bars})
        # And the legend shows each lease once, in its colour.
        legend = [g for g in self.root.iter(SVG + 'g')
                  if g.get('class') == 'legend-lease']
        # In the order of the names.
        self.assertEqual(['lease-evil', 'lease-d', 'lease-b', 'lease-a'],
                         [g.get('data-lease-id') for g in legend])
        self.assertEqual(_rect(bars[1]).get('fill'),
                         _rect(legend[3]).get('fill'))

    def test_lease_colours(self):
        # Its own colour when no other lease of the picture has it; else
        # the next free one, the same every time.
        ids = ['lease-%d' % i for i in range(30)]
        colours = render.lease_colours(ids)
        self.assertEqual(colours, render.lease_colours(reversed(ids)))
        self.assertEqual(len(render.PALETTE),
                         len(set(colours.values())))
        alone = render.lease_colours(['lease-7'])
        self.assertEqual({'lease-7': render.lease_colour('lease-7')}, alone)
        two = render.lease_colours(['lease-a', 'lease-b'])
        self.assertEqual(render.lease_colour('lease-a'), two['lease-a'])
        self.assertNotEqual(two['lease-a'], two['lease-b'])

    def _free(self, host):
        """The host's free fraction per step, from its shaded runs."""
        free = []
        for r in self._row(host).iter(SVG + 'rect'):
            if r.get('class') == 'free':
                free += [float(r.get('data-free'))] * int(r.get(
                    'data-steps'))
        return free

    def test_free_capacity_is_shaded_per_step(self):
        self.assertEqual([1.0] * 2 + [0.0] * 8 + [1.0] * 14,
                         self._free('host1'))
        self.assertEqual([0.75] * 3 + [0.5] * 5 + [0.75] * 16,
                         self._free('host2'))
        # A run of equal steps is one rectangle, as wide as its steps.
        runs = [r for r in self._row('host1').iter(SVG + 'rect')
                if r.get('class') == 'free']
        self.assertEqual(['2', '8', '14'], [r.get('data-steps')
                                            for r in runs])
        hour = 1160 / 24.0
        self.assertAlmostEqual(8 * hour, float(runs[1].get('width')),
                               delta=0.2)
        self.assertIn('free 0% from 2026-12-01 02:00 to 2026-12-01 10:00 '
                      'UTC: 0 vcpus', runs[1].find(SVG + 'title').text)
        opacity = {float(r.get('fill-opacity'))
                   for r in self._row('host1').iter(SVG + 'rect')
                   if r.get('class') == 'free'}
        self.assertEqual(2, len(opacity))

    def test_free_fraction_is_the_scarcest_resource(self):
        self.assertEqual(0.25, render.free_fraction(
            HOST, {'vcpus': 4, 'memory_mb': 32768, 'disk_gb': 1000}))
        self.assertEqual(0.0, render.free_fraction({}, {'vcpus': 4}))
        self.assertEqual(1.0, render.free_fraction({'vcpus': 2},
                                                   {'vcpus': 3}))

    def test_idle_host_is_marked(self):
        idle = [r for r in self.root.iter(SVG + 'rect')
                if r.get('class') == 'idle']
        self.assertEqual(1, len(idle))
        self.assertEqual(_t(18), idle[0].get('data-idle-until'))
        badges = [t.text for t in self._row('host3').iter(SVG + 'text')
                  if t.get('class') == 'idle-badge']
        self.assertEqual(['idle until 2026-12-01 18:00'], badges)

    def test_now_is_a_vertical_line(self):
        now = [g for g in self.root.iter(SVG + 'g')
               if g.get('class') == 'now']
        self.assertEqual(1, len(now))
        line = now[0].find(SVG + 'line')
        self.assertEqual(line.get('x1'), line.get('x2'))
        width = render.WIDTH - render.LABEL_WIDTH - render.RIGHT_MARGIN
        self.assertAlmostEqual(render.LABEL_WIDTH + width * 5.5 / 24,
                               float(line.get('x1')), delta=0.1)
        # Not drawn when now is outside the window.
        self.body['capacity']['now'] = _t(30)
        self.assertNotIn('class="now"', render.svg(self.body))

    def test_axis_ticks_are_round_and_readable(self):
        ticks = [t for t in self.root.iter(SVG + 'text')
                 if t.get('class') == 'tick']
        self.assertEqual(['%02d:00' % h for h in range(0, 24, 2)] +
                         ['00:00'], [t.text for t in ticks])
        xs = [float(t.get('x')) for t in ticks]
        self.assertTrue(all(b - a >= render.MIN_TICK_PX
                            for a, b in zip(xs, xs[1:])))
        days = [t.text for t in self.root.iter(SVG + 'text')
                if t.get('class') == 'day']
        self.assertEqual(['Tue Dec 01 2026', 'Wed Dec 02 2026'], days)

    def test_tick_spacing(self):
        start = render.parse_time('2026-12-01T00:10:00Z')
        spacing, when = render.ticks(
            start, start + datetime.timedelta(days=14), 1160)
        self.assertEqual(2 * 86400, spacing)
        self.assertTrue(all(w.time() == datetime.time(0) for w in when))
        spacing, when = render.ticks(
            start, start + datetime.timedelta(hours=1), 1160)
        self.assertEqual(300, spacing)
        self.assertEqual(datetime.datetime(2026, 12, 1, 0, 10,
                                           tzinfo=datetime.timezone.utc),
                         when[0])

    def test_free_runs(self):
        self.assertEqual([(0, 1), (2, 2), (3, 4)],
                         render.free_runs([1, 1, 2, 1, 1]))
        self.assertEqual([], render.free_runs([]))

    def test_lanes(self):
        placed, count = render.lanes([(0, 5, 'a'), (1, 3, 'b'), (3, 4, 'c'),
                                      (5, 6, 'd')])
        self.assertEqual(2, count)
        self.assertEqual([(0, 'a'), (1, 'b'), (1, 'c'), (0, 'd')], placed)
        self.assertEqual(([], 1), render.lanes([]))

    def test_lease_name_is_text_never_markup(self):
        self.assertNotIn('<script', self.svg)
        self.assertIn('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; '
                      '&amp; &#x27;co&#x27;', self.svg)
        page = render.html(self.body)
        self.assertNotIn('<script', page)
        self.assertIn('&lt;script&gt;', page)

    def test_control_characters_keep_the_document_valid(self):
        booking = self.body['capacity']['host_details'][0]['bookings'][0]
        booking['lease_name'] = 'bad\x00\x07name\u2603'
        root = _parse(render.svg(self.body))
        self.assertEqual('bad??name\u2603',
                         _bookings(root)[0].get('data-lease-name'))

    def test_booking_without_name_or_end(self):
        booking = self.body['capacity']['host_details'][0]['bookings'][0]
        booking.update(lease_name=None, end=None)
        root = _parse(render.svg(self.body))
        bar = _bookings(root)[0]
        self.assertEqual('lease-evil (01234567)', bar.find(SVG + 'text').text)
        self.assertEqual(render.LABEL_WIDTH + 1160,
                         float(_rect(bar).get('x')) +
                         float(_rect(bar).get('width')))
        self.assertIn('<td class="text">-</td>', render.html(self.body))

    def test_whole_body_or_capacity_object(self):
        self.assertEqual(self.svg, render.svg(self.body['capacity']))

    def test_without_host_details_one_aggregate_row(self):
        body = copy.deepcopy(self.body)
        del body['capacity']['host_details']
        root = _parse(render.svg(body))
        rows = [g.get('data-host') for g in root.iter(SVG + 'g')
                if g.get('class') == 'host-row']
        self.assertEqual(['all hosts'], rows)
        self.assertEqual([], _bookings(root))
        free = [(float(r.get('data-free')), r.get('data-steps'))
                for r in root.iter(SVG + 'rect') if r.get('class') == 'free']
        self.assertEqual([(0.7, '24')], free)
        self.assertIn('detail=hosts', render.html(body))

    def test_no_hosts(self):
        self.body['capacity']['host_details'] = []
        root = _parse(render.svg(self.body))
        self.assertEqual(['no hosts'], [t.text for t in root.iter(SVG + 'text')
                                        if t.get('class') == 'empty'])


class HtmlTest(testtools.TestCase):

    def setUp(self):
        super(HtmlTest, self).setUp()
        self.body = _body()
        self.page = render.html(self.body, title='Cloud <one>')

    def test_self_contained(self):
        # Nothing fetched: no script, link, image or external reference;
        # the only URL is the SVG namespace name.
        for tag in ('<script', '<link', '<img', '<iframe', '@import'):
            self.assertNotIn(tag, self.page)
        self.assertEqual(['http://www.w3.org/2000/svg'],
                         re.findall(r'https?://[^"\s)]+', self.page))
        self.assertEqual(set(), set(re.findall(r'url\(([^#][^)]*)\)',
                                               self.page)))
        self.assertNotIn(' src=', self.page)
        self.assertNotIn(' href=', self.page)
        self.assertTrue(self.page.startswith('<!DOCTYPE html>'))

    def test_title_window_and_totals(self):
        self.assertIn('<title>Cloud &lt;one&gt;</title>', self.page)
        self.assertIn('<h1>Cloud &lt;one&gt;</h1>', self.page)
        self.assertIn('From 2026-12-01 00:00 to 2026-12-02 00:00 UTC, in '
                      'steps of 1 hour; now is 2026-12-01 05:30 UTC; 3 '
                      'hosts.', self.page)
        self.assertIn('<tr data-resource="vcpus"><td>vcpus</td><td>1,152'
                      '</td><td>96</td><td>384</td><td>672</td><td>58%</td>'
                      '</tr>', self.page)
        self.assertIn('<tr data-resource="hosts">', self.page)
        # Resources without a total are left out.
        self.assertNotIn('data-resource="disk_gb"', self.page)

    def test_svg_inline_and_bookings_listed(self):
        self.assertIn('<svg xmlns="http://www.w3.org/2000/svg"', self.page)
        listed = re.findall(r'<tr data-lease-id="([^"]*)"', self.page)
        # In start order; lease-c ended before the window.
        self.assertEqual(['lease-a', 'lease-evil', 'lease-b', 'lease-a',
                          'lease-d'], listed)
        self.assertIn('<td class="text">&lt;script&gt;alert(&quot;x&quot;)'
                      '&lt;/script&gt; &amp; &#x27;co&#x27;</td>', self.page)

    def test_duration(self):
        self.assertEqual('1 hour', render._duration(3600))
        self.assertEqual('15 minutes', render._duration(900))
        self.assertEqual('2 days', render._duration(172800))
        self.assertEqual('90 seconds', render._duration(90))
