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
"""The capacity page and picture in a real browser.

The in-process Nova gets a started host lease (named like a script) and
instance leases; ``nova-lease-manage capacity --format html|svg --output``
writes the page and the picture, which headless Chromium (the OS packages,
tools/install-chromium.sh) opens: the bars, labels and rows are read back
from its live DOM (through chromedriver's WebDriver API), the bars' pixels
from its screenshot, and ``chromium --headless --screenshot`` must give a
page-sized PNG that is not blank.
"""

import contextlib
import io
import json
import os
from unittest import mock

import fixtures

from nova_lease.cmd import manage
from tests import browser
from tests.functional import base
from tests.functional import test_host_reservation

EVIL = '<script>document.title="owned"</script>'
WIDTH, HEIGHT = 1400, 1000

#: Every booking bar of the page: what the tests read back from the DOM.
BARS_JS = '''
return Array.from(document.querySelectorAll('g.booking')).map(g => {
    const rect = g.querySelector('rect');
    const box = rect.getBoundingClientRect();
    return {lease_id: g.dataset.leaseId, name: g.dataset.leaseName,
            host: g.dataset.host, project: g.dataset.projectId,
            type: g.dataset.resourceType,
            label: g.querySelector('text').textContent,
            fill: getComputedStyle(rect).fill,
            x: box.x, y: box.y, width: box.width, height: box.height};
});
'''

PAGE_JS = '''
return {title: document.title,
        h1: document.querySelector('h1').textContent,
        scripts: document.querySelectorAll('script').length,
        rows: Array.from(document.querySelectorAll('g.host-row')).map(
            g => g.dataset.host),
        idle: Array.from(document.querySelectorAll('rect.idle')).map(
            r => r.closest('g.host-row').dataset.host),
        now: document.querySelectorAll('g.now line').length,
        ticks: Array.from(document.querySelectorAll('text.tick')).map(
            t => t.textContent),
        totals: Array.from(document.querySelectorAll(
            'table.totals tr[data-resource]')).map(r => r.dataset.resource),
        legend: Array.from(document.querySelectorAll('g.legend-lease')).map(
            g => g.textContent),
        svg: document.querySelector('svg').getBoundingClientRect().width};
'''


def _rgb(css):
    """'rgb(1, 2, 3)' -> (1, 2, 3)."""
    return tuple(int(float(v)) for v in css[css.index('(') + 1:-1].split(
        ',')[:3])


class CapacityPageTest(test_host_reservation.HostLeaseMixin,
                       base.LeaseFunctionalBase):

    COMPUTES = {'host1': (8, 16384, 200), 'host2': (8, 16384, 200),
                'host3': (4, 8192, 100)}

    def setUp(self):
        reason = browser.missing()
        if reason:
            self.skipTest(reason)
        super().setUp()
        self.conf = self.engine_conf(resource_plugins='physical:host')
        self.out_dir = self.useFixture(fixtures.TempDir()).path

    def _manage(self, *args):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err), \
                mock.patch.object(manage.logging, 'setup'):
            code = manage.main(['--config-file', self.conf.config_file[0],
                                'capacity'] + list(args))
        return code, out.getvalue(), err.getvalue()

    def _scenario(self):
        """A started host lease on host3, a VM lease now, one later."""
        self._register('host3')
        lease = self._create(self._lease_body(
            'now', self._at(hours=3), name=EVIL,
            reservations=[self._host_res()]))
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        self._boot({'reserved': 'True', 'lease_params': json.dumps(
            {'name': 'vm-now', 'start': 'now', 'duration': '2h'})},
            name='vm-now')
        self._boot({'reserved': 'True', 'lease_params': json.dumps(
            {'name': 'vm-later', 'start': self._at(hours=1),
             'end': self._at(hours=4)})}, name='vm-later', wait=None)
        return lease

    def _write(self, fmt):
        path = os.path.join(self.out_dir, 'capacity.' + fmt)
        code, out, err = self._manage(
            '--start', self._at(hours=-1), '--end', self._at(hours=5),
            '--step', '900', '--detail', '--format', fmt, '--output', path)
        self.assertEqual(0, code, err)
        self.assertEqual('', out)
        return path

    def test_page_in_a_browser(self):
        lease = self._scenario()
        path = self._write('html')
        url = 'file://' + path
        with browser.Browser(WIDTH, HEIGHT) as chromium:
            chromium.open(url)
            page = chromium.script(PAGE_JS)
            bars = chromium.script(BARS_JS)
            shot = chromium.screenshot()

        # The lease named like a script is text: no script element, the
        # title is the page's own.
        self.assertEqual(0, page['scripts'])
        self.assertEqual(page['h1'], page['title'])
        self.assertEqual(['host1', 'host2', 'host3'], page['rows'])
        self.assertEqual(1, page['now'])
        self.assertGreater(len(page['ticks']), 4)
        self.assertEqual(['vcpus', 'memory_mb', 'disk_gb', 'hosts'],
                         page['totals'])
        self.assertLessEqual(page['svg'], WIDTH)

        by_name = {}
        for bar in bars:
            by_name.setdefault(bar['name'], []).append(bar)
        self.assertEqual({EVIL, 'vm-now', 'vm-later'}, set(by_name))
        host_bar, = by_name[EVIL]
        self.assertEqual(lease['id'], host_bar['lease_id'])
        self.assertEqual('host3', host_bar['host'])
        self.assertEqual('physical:host', host_bar['type'])
        self.assertEqual('%s (%s)' % (EVIL, self.api.project_id[:8]),
                         host_bar['label'])
        self.assertIn(EVIL + ' (', page['legend'][0] + ''.join(
            page['legend']))
        for bar in bars:
            self.assertGreater(bar['width'], 10)
            self.assertGreater(bar['height'], 10)
        # The window is 6 hours from an hour ago: the host lease (from now,
        # 3 hours) is as long as the later VM lease (3 hours from in an
        # hour), an hour (a third of its width) to the left of it; the
        # dates given to the minute, now is not: a minute is 3 pixels.
        later, = by_name['vm-later']
        self.assertAlmostEqual(host_bar['width'], later['width'], delta=4)
        self.assertAlmostEqual(host_bar['x'], later['x'] - later['width']
                               / 3, delta=4)

        # What the browser drew: each bar's colour at its right end (no
        # label there), in the screenshot of the same viewport.
        # (The viewport is the window less the browser's own bars.)
        width, height, pixels = browser.png_pixels(shot)
        self.assertEqual(WIDTH, width)
        for bar in bars:
            x = int(bar['x'] + bar['width'] - 4)
            y = int(bar['y'] + bar['height'] / 2)
            self.assertLess(y, height, bar)
            got = pixels[y][x]
            want = _rgb(bar['fill'])
            self.assertTrue(all(abs(a - b) <= 3 for a, b in zip(got, want)),
                            '%s at (%d, %d): %s, not %s'
                            % (bar['name'], x, y, got, want))

        # chromium --headless --screenshot: a page-sized PNG, not blank.
        png = os.path.join(self.out_dir, 'capacity.png')
        data = browser.screenshot(url, png, WIDTH, HEIGHT)
        width, height, pixels = browser.png_pixels(data)
        self.assertEqual((WIDTH, HEIGHT), (width, height))
        colours = set()
        not_white = 0
        for row in pixels:
            colours.update(row)
            not_white += sum(1 for p in row if p != (255, 255, 255))
        self.assertGreater(len(colours), 50)
        self.assertGreater(not_white / float(width * height), 0.05)

    def test_svg_in_a_browser(self):
        self._scenario()
        path = self._write('svg')
        with open(path) as f:
            self.assertTrue(f.read().startswith('<svg xmlns='))
        with browser.Browser(WIDTH, HEIGHT) as chromium:
            chromium.open('file://' + path)
            bars = chromium.script(BARS_JS)
            root = chromium.script(
                'return document.documentElement.localName')
        self.assertEqual('svg', root)
        self.assertEqual(sorted([EVIL, 'vm-now', 'vm-later']),
                         sorted(b['name'] for b in bars))
        # --dump-dom: the document Chromium parsed holds the name as text.
        dom = browser.dump_dom('file://' + path)
        self.assertIn('&lt;script&gt;document.title=', dom)
        self.assertNotIn(EVIL, dom)
