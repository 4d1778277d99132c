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
"""Horizon with the unmodified blazar-dashboard against the sandbox, in a
real headless Chromium.

One ``nova-lease-sandbox --dashboard`` for the class (Horizon 27.0.0 and
blazar-dashboard 16.0.0 from tools/dashboard-requirements.txt, installed
by tools/setup-dashboard.sh in .venv-dashboard); Chromium and chromedriver
from the OS packages (tools/install-chromium.sh), driven through
tests/browser.py. Every page opened must be free of error pages (Horizon's
500 "Something went wrong!", 404, "Server error") and of error messages
(Horizon's danger/error alerts and toasts): that is checked after every
step. The member and the admin log in through the login form and create
leases through blazar-dashboard's form; the admin's host comes from the
lease API (``openstack reservation host create``), because blazar-
dashboard's own "Create Hosts" fails with Horizon 27 (doc/source/user/
dashboard.rst).

Set NOVA_LEASE_DASHBOARD_SCREENSHOTS to a directory to keep the
screenshots of the lease list and of the host calendar (the docs'
pictures come from there).
"""

import datetime
import os
import subprocess
import time

from keystoneauth1.identity import v3 as ks_v3
from keystoneauth1 import session as ks_session
import testtools

from nova_lease.sandbox import openrc
from tests import browser
from tests.functional import test_sandbox

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SETUP = os.path.join(ROOT, 'tools', 'setup-dashboard.sh')
WIDTH, HEIGHT = 1400, 900
#: Seconds: a page's load, and what it loads afterwards.
PAGE_TIMEOUT = int(os.environ.get('NOVA_LEASE_DASHBOARD_PAGE_TIMEOUT', 120))
#: Seconds: the sandbox's start, and Horizon's first page (it compiles its
#: stylesheets meanwhile).
READY_TIMEOUT = int(os.environ.get('NOVA_LEASE_DASHBOARD_READY_TIMEOUT',
                                   600))

#: What a page shows: its address, title, heading, error messages, every
#: message (also those that have faded out), its visible text.
PAGE_JS = '''
const errors = Array.from(document.querySelectorAll(
    '.alert-danger, .alert-error')).map(e => e.textContent.trim())
    .filter(t => t);
const messages = Array.from(document.querySelectorAll('.alert')).map(
    e => e.textContent.trim()).join(' | ');
const heading = document.querySelector('.page-header h1, h1, h2');
return {url: location.href, ready: document.readyState,
        title: document.title, errors: errors, messages: messages,
        heading: heading ? heading.textContent.trim() : '',
        text: document.body ? document.body.innerText : ''};
'''
#: The strings of Horizon's error pages.
ERROR_PAGES = ('Something went wrong', 'Server error', 'Page Not Found',
               'Server Error', 'Traceback', 'Forbidden')

FILL_JS = '''
const form = document.querySelector(arguments[0]).form;
for (const [name, value] of Object.entries(arguments[1])) {
    const el = form.elements[name];
    el.value = value;
}
window.__nova_lease_before = true;
form.submit();
'''
#: The lease list's rows: name, id (from the detail link), status.
ROWS_JS = '''
return Array.from(document.querySelectorAll('table tbody tr')).map(tr => {
    const link = tr.querySelector('a[href*="/leases/"]');
    return {text: tr.innerText,
            href: link ? link.getAttribute('href') : null,
            name: link ? link.textContent.trim() : null};
}).filter(r => r.href);
'''


def _at(**delta):
    """A date as blazar-dashboard's form takes it (UTC, the browser's
    default time zone for Horizon).
    """
    when = datetime.datetime.now(datetime.timezone.utc) + \
        datetime.timedelta(**delta)
    return when.strftime('%Y-%m-%d %H:%M')


def _lease_id(href):
    return href.rstrip('/').rsplit('/', 1)[-1]


class DashboardTest(testtools.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.skip_reason = browser.missing()
        if cls.skip_reason:
            return
        proc = subprocess.run([SETUP], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=1200)
        if proc.returncode != 0:
            raise AssertionError('tools/setup-dashboard.sh failed:\n%s'
                                 % proc.stderr[-3000:])
        python = proc.stdout.strip().splitlines()[-1]
        cls.port = test_sandbox.free_port()
        cls.base = 'http://127.0.0.1:%d/' % cls.port
        cls.sandbox = test_sandbox.Sandbox(
            test_sandbox.state_dir(), '--dashboard', '--dashboard-port',
            str(cls.port), '--dashboard-python', python)
        try:
            cls.demo = cls.sandbox.wait_ready(READY_TIMEOUT)
            cls.admin = openrc.read_openrc(cls.sandbox.openrc_path('admin'))
            # Blazar's instance reservations take slots on registered
            # hosts only.
            for host in ('host1', 'host2'):
                cls._register_host(host)
        except BaseException:
            cls.sandbox.kill()
            raise

    @classmethod
    def tearDownClass(cls):
        if not cls.skip_reason:
            cls.sandbox.kill()
        super().tearDownClass()

    @classmethod
    def _register_host(cls, name):
        """As the admin, what ``openstack reservation host create``
        does (blazar-dashboard's "Create Hosts" fails with Horizon 27).
        """
        env = cls.admin
        sess = ks_session.Session(auth=ks_v3.Password(
            auth_url=env['OS_AUTH_URL'], username=env['OS_USERNAME'],
            password=env['OS_PASSWORD'],
            project_name=env['OS_PROJECT_NAME'],
            user_domain_name=env['OS_USER_DOMAIN_NAME'],
            project_domain_name=env['OS_PROJECT_DOMAIN_NAME']))
        sess.post('/os-hosts', json={'name': name},
                  endpoint_filter={'service_type': 'reservation',
                                   'interface': 'public'})

    def setUp(self):
        if self.skip_reason:
            self.skipTest(self.skip_reason)
        super().setUp()
        self.chromium = browser.Browser(
            WIDTH, HEIGHT, timeout=max(300, PAGE_TIMEOUT))
        self.chromium.__enter__()
        self.addCleanup(self.chromium.__exit__, None, None, None)

    # -- the browser ---------------------------------------------------------

    def _page(self):
        deadline = time.monotonic() + PAGE_TIMEOUT
        error = None
        while True:
            try:
                page = self.chromium.script(PAGE_JS)
                if page['ready'] == 'complete':
                    return page
            except browser.WebDriverError as e:
                error = e    # between two pages
            self.assertLess(time.monotonic(), deadline,
                            'the page did not load (%s)' % error)
            time.sleep(0.2)

    def _check(self, page, what):
        for text in ERROR_PAGES:
            self.assertNotIn(text, page['title'] + '\n' + page['heading'],
                             '%s: an error page at %s:\n%s'
                             % (what, page['url'], page['text'][:2000]))
        self.assertEqual([], page['errors'], '%s: error messages at %s'
                         % (what, page['url']))
        return page

    def _open(self, path, what, wait_for=None):
        """Open base + path; wait for the text wait_for; check for errors
        (also those that asynchronous calls show after the load).
        """
        self.chromium.open(self.base + path)
        page = self._page()
        deadline = time.monotonic() + PAGE_TIMEOUT
        while wait_for and wait_for not in page['text']:
            self._check(page, what)
            self.assertLess(time.monotonic(), deadline, '%s: no %r at %s:\n'
                            '%s' % (what, wait_for, page['url'],
                                    page['text'][:2000]))
            time.sleep(0.5)
            page = self._page()
        return self._check(page, what)

    def _after_submit(self, what):
        """Wait until the page the form was on is gone; check the new one."""
        deadline = time.monotonic() + PAGE_TIMEOUT
        while True:
            try:
                if not self.chromium.script(
                        'return window.__nova_lease_before === true;'):
                    break
            except browser.WebDriverError:
                pass
            self.assertLess(time.monotonic(), deadline,
                            '%s: the form was not sent' % what)
            time.sleep(0.2)
        return self._check(self._page(), what)

    def _login(self, env):
        self._open('auth/login/', 'the login page')
        self.chromium.script(FILL_JS, '#id_username', {
            'username': env['OS_USERNAME'],
            'password': env['OS_PASSWORD']})
        page = self._after_submit('logging in as %s' % env['OS_USERNAME'])
        self.assertNotIn('/auth/login', page['url'], page['text'][:2000])

    def _create_lease(self, fields, what):
        self._open('project/leases/create/', what + ': the form')
        self.chromium.script(FILL_JS, '#id_name', fields)
        page = self._after_submit(what)
        self.assertIn('Lease %s was successfully created.' % fields['name'],
                      page['messages'], page['text'][:2000])
        return self._row(fields['name'])

    def _rows(self):
        self._open('project/leases/', 'the lease list')
        return self.chromium.script(ROWS_JS)

    def _row(self, name):
        for row in self._rows():
            if row['name'] == name:
                return row
        self.fail('no lease %s in the list' % name)

    def _screenshot(self, name):
        where = os.environ.get('NOVA_LEASE_DASHBOARD_SCREENSHOTS')
        shot = self.chromium.screenshot()
        self.assertEqual(b'\x89PNG', shot[:4])
        if where:
            with open(os.path.join(where, name), 'wb') as f:
                f.write(shot)

    # -- the tests ---------------------------------------------------------

    def test_member(self):
        self._login(self.demo)
        # The landing page, Compute > Instances and Images (its list comes
        # from an asynchronous call: wait for the image).
        self._open('project/', 'the landing page (Project > Overview)')
        self._open('project/instances/', 'Compute > Instances')
        self._open('project/images/', 'Compute > Images',
                   wait_for='fakeimage123456')
        row = self._create_lease({
            'name': 'dash-instances', 'start_date': _at(days=1),
            'end_date': _at(days=1, hours=2), 'resource_type': 'instance',
            'amount': '1', 'vcpus': '1', 'memory_mb': '512',
            'disk_gb': '1'}, 'an instance lease')
        self.assertIn('PENDING', row['text'].upper())
        page = self._open(row['href'].lstrip('/'), 'the lease details',
                          wait_for='virtual:instance')
        self.assertIn('dash-instances', page['text'])
        # blazar-dashboard 16 adds nothing to Launch Instance: booting into
        # a reservation is the nova client's (--hint reservation=<id>).

    def test_admin(self):
        self._login(self.admin)
        self._open('project/', 'the landing page (Project > Overview)')
        self._open('admin/hosts/', 'Admin > Reservation > Hosts',
                   wait_for='host1')
        row = self._create_lease({
            'name': 'dash-host', 'start_date': _at(days=2),
            'end_date': _at(days=2, hours=4), 'resource_type': 'host',
            'min_hosts': '1', 'max_hosts': '1'}, 'a host lease')
        self._screenshot('dashboard-leases.png')
        page = self._open(row['href'].lstrip('/'), 'the lease details',
                          wait_for='physical:host')
        self.assertIn('dash-host', page['text'])
        self._open('project/leases/calendar/host/', 'the host calendar',
                   wait_for='host1')
        deadline = time.monotonic() + PAGE_TIMEOUT
        while not self.chromium.script(
                'return document.querySelectorAll('
                '".apexcharts-rangebar-area").length;'):
            self.assertLess(time.monotonic(), deadline,
                            'no lease bar in the host calendar')
            time.sleep(0.5)
        self._check(self._page(), 'the host calendar')
        self._screenshot('dashboard-calendar.png')

    def test_delete_pending_lease(self):
        self._login(self.demo)
        row = self._create_lease({
            'name': 'dash-delete', 'start_date': _at(days=3),
            'end_date': _at(days=3, hours=1), 'resource_type': 'instance',
            'amount': '1', 'vcpus': '1', 'memory_mb': '512',
            'disk_gb': '1'}, 'a lease to delete')
        lease_id = _lease_id(row['href'])
        # The row's "Delete Lease", then the confirmation's button.
        self.chromium.script(
            'window.__nova_lease_before = true;'
            'document.querySelector(\'button[value="leases__delete__\' + '
            'arguments[0] + \'"]\').click();', lease_id)
        deadline = time.monotonic() + PAGE_TIMEOUT
        while not self.chromium.script(
                'const b = document.querySelector(".modal-footer '
                '.btn-danger, .modal-footer .btn-primary");'
                'if (b) { b.click(); return true; } return false;'):
            self.assertLess(time.monotonic(), deadline,
                            'no confirmation of the deletion')
            time.sleep(0.2)
        page = self._after_submit('deleting a pending lease')
        self.assertIn('dash-delete', page['messages'])   # "Deleted ..."
        names = [r['name'] for r in self._rows()]
        # Removed, as Blazar removes a lease that never started.
        self.assertNotIn('dash-delete', names)
