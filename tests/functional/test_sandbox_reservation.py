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
"""``openstack reservation ...`` against the sandbox, as the docs show.

The walk-through of doc/source/user/blazarclient.rst ("A walk through, on
the sandbox"): :class:`DocumentedWalkThroughTest` checks that the page
still shows the commands these tests run.

One sandbox for the whole class, started in setUpClass with the helpers of
test_sandbox (in their shared state directory). The unmodified
``openstack`` executable of the venv (OSC and the python-blazarclient
plugin) runs as a subprocess with the variables of DIR/admin-openrc or
DIR/demo-openrc only, and finds the lease API through the catalog's
``reservation`` endpoint. Each test registers its own fake
compute host, so the tests do not depend on their order.
"""

import datetime
import json
import os
import re
import shlex
import time

import testtools

from nova_lease.sandbox import openrc
from tests.functional import test_sandbox

#: The page whose walk-through these tests follow.
DOC = os.path.join(os.path.dirname(__file__), '..', '..', 'doc', 'source',
                   'user', 'blazarclient.rst')
#: The documented lease reservation, letter for letter.
HOST_RESERVATION = ("resource_type=physical:host,min=1,max=1,"
                    "hypervisor_properties=[],resource_properties=[]")
#: The dates the client takes (UTC), as the page's ``date`` commands write
#: them.
DATE_FORMAT = '%Y-%m-%d %H:%M'


def _at(**delta):
    """A date as the client takes it (UTC, YYYY-MM-DD HH:MM)."""
    when = datetime.datetime.now(datetime.timezone.utc) + \
        datetime.timedelta(**delta)
    return when.strftime(DATE_FORMAT)


def documented_commands():
    """The ``openstack reservation ...`` commands of the page's sandbox
    walk-through, as argument lists (continuation lines joined; ``$(...)``
    left as text).
    """
    with open(DOC) as f:
        text = f.read()
    section = text[text.index('A walk through, on the sandbox'):]
    lines = []
    for line in section.replace('\\\n', ' ').splitlines():
        line = line.strip()
        if line.startswith('openstack reservation lease '):
            lines.append(shlex.split(line))
    return lines


def _date_command(text):
    """``$(date -u -d '+3 hours' '+FORMAT')`` -> ('+3 hours', 'FORMAT')."""
    match = re.fullmatch(r"\$\(date -u -d '([^']*)' '\+([^']*)'\)", text)
    return match.groups() if match else None


class DocumentedWalkThroughTest(testtools.TestCase):
    """The page shows what ReservationCLITest runs (no sandbox needed)."""

    def test_page_shows_the_tested_commands(self):
        commands = documented_commands()
        self.assertEqual(
            ['create', 'list', 'show', 'set', 'set', 'delete'],
            [argv[3] for argv in commands])
        create = commands[0]
        self.assertEqual(
            HOST_RESERVATION, create[create.index('--reservation') + 1])
        # Starts in an hour, ends in three: the dates of
        # test_lease_create_list_show_set_delete, in the client's format.
        self.assertEqual(
            ('+1 hour', DATE_FORMAT),
            _date_command(create[create.index('--start-date') + 1]))
        self.assertEqual(
            ('+3 hours', DATE_FORMAT),
            _date_command(create[create.index('--end-date') + 1]))
        self.assertEqual('lease1', create[-1])
        self.assertEqual(['--name', 'lease2', 'lease1'], commands[3][4:])
        extend = commands[4]
        self.assertEqual(
            ('+4 hours', DATE_FORMAT),
            _date_command(extend[extend.index('--end-date') + 1]))
        self.assertEqual(['lease2'], commands[5][4:])


def _iso(date):
    """'YYYY-MM-DD HH:MM' -> the API's 'YYYY-MM-DDTHH:MM:00.000000'."""
    return date.replace(' ', 'T') + ':00.000000'


class ReservationCLITest(test_sandbox.ClientMixin, testtools.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.sandbox = test_sandbox.Sandbox(test_sandbox.state_dir())
        try:
            cls.demo = cls.sandbox.wait_ready()
            cls.admin = openrc.read_openrc(cls.sandbox.openrc_path('admin'))
        except BaseException:
            cls.sandbox.kill()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.sandbox.kill()
        super().tearDownClass()

    # -- helpers -----------------------------------------------------------

    def _osc(self, env, *args):
        return self._client(env, 'openstack', *args)

    def _osc_json(self, env, *args):
        text = self._osc(env, *(args + ('-f', 'json')))
        # 'create' commands print "Created a new ...:" before the JSON.
        starts = [i for i in (text.find('{'), text.find('[')) if i >= 0]
        try:
            return json.loads(text[min(starts):] if starts else text)
        except ValueError:
            self.fail('not JSON: %r' % text)

    def _register(self, host):
        """As the admin: openstack reservation host create <host>."""
        created = self._osc_json(self.admin, 'reservation', 'host',
                                 'create', host)
        self.assertEqual(host, created['hypervisor_hostname'])
        self.assertEqual(host, created['service_name'])
        return created

    def _host_names(self):
        return sorted(h['hypervisor_hostname'] for h in self._osc_json(
            self.admin, 'reservation', 'host', 'list'))

    def _aggregate_hosts(self, name):
        return self._osc_json(self.admin, 'aggregate', 'show', name)['hosts']

    def _lease(self, name_or_id):
        return self._osc_json(self.demo, 'reservation', 'lease', 'show',
                              name_or_id)

    def _wait_status(self, name_or_id, status, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            lease = self._lease(name_or_id)
            if lease['status'] == status:
                return lease
            # (python-blazarclient is served 1.0: no status_reason.)
            self.assertNotEqual('ERROR', lease['status'],
                                lease.get('status_reason'))
            self.assertLess(time.monotonic(), deadline,
                            'lease %s still %s, not %s' % (
                                name_or_id, lease['status'], status))
            time.sleep(1)

    # -- tests -------------------------------------------------------------

    def test_admin_registers_a_host_into_the_free_pool(self):
        created = self._register('host1')
        self.assertEqual(4, created['vcpus'])
        self.assertEqual(8192, created['memory_mb'])
        # The table, as the admin reads it.
        listed = self._osc(self.admin, 'reservation', 'host', 'list')
        self.assertIn(['host1', '4', '8192', '80'],
                      [row[1:] for row in self._rows(listed)])
        # Registration really put the compute host into Nova's free pool.
        self.assertIn('host1', self._aggregate_hosts('freepool'))
        # Twice is a conflict, not a second host.
        proc = test_sandbox.run_client(self.admin, 'openstack',
                                       'reservation', 'host', 'create',
                                       'host1')
        self.assertNotEqual(0, proc.returncode)
        self.assertIn('Host host1 already exists', proc.stderr)

    def test_user_may_not_register_or_list_hosts(self):
        before = self._host_names()
        proc = test_sandbox.run_client(self.demo, 'openstack', '--debug',
                                       'reservation', 'host', 'create',
                                       'host3')
        self.assertNotEqual(0, proc.returncode)
        self.assertRegex(proc.stderr,
                         r'"POST /v2\.1/os-reservation/os-hosts HTTP/1\.1" '
                         r'403 ')
        self.assertIn("Policy doesn't allow nova_lease:os-hosts:create",
                      proc.stderr)
        proc = test_sandbox.run_client(self.demo, 'openstack', 'reservation',
                                       'host', 'list')
        self.assertNotEqual(0, proc.returncode)
        self.assertIn("Policy doesn't allow nova_lease:os-hosts:list",
                      proc.stderr)
        self.assertEqual(before, self._host_names())

    def test_lease_create_list_show_set_delete(self):
        self._register('host2')
        start, end = _at(hours=1), _at(hours=3)
        created = self._osc_json(
            self.demo, 'reservation', 'lease', 'create',
            '--reservation', HOST_RESERVATION,
            '--start-date', start, '--end-date', end, 'lease1')
        self.assertEqual('lease1', created['name'])
        self.assertEqual('PENDING', created['status'])
        self.assertEqual(_iso(start), created['start_date'])
        self.assertEqual(_iso(end), created['end_date'])
        # OSC shows the reservations as JSON text.
        reservation = json.loads(created['reservations'])
        self.assertEqual(('physical:host', 1, 1, 'pending'), (
            reservation['resource_type'], reservation['min'],
            reservation['max'], reservation['status']))

        # The table, as the user reads it.
        table = self._osc(self.demo, 'reservation', 'lease', 'list')
        self.assertIn([created['id'], 'lease1', _iso(start), _iso(end)],
                      self._rows(table))
        self.assertEqual(created['id'], self._lease('lease1')['id'])

        out = self._osc(self.demo, 'reservation', 'lease', 'set',
                        '--name', 'lease2', 'lease1')
        self.assertIn('Updated lease: lease1', out)
        new_end = _at(hours=4)
        self._osc(self.demo, 'reservation', 'lease', 'set',
                  '--end-date', new_end, 'lease2')
        shown = self._lease('lease2')
        self.assertEqual((created['id'], 'lease2'),
                         (shown['id'], shown['name']))
        self.assertEqual(_iso(new_end), shown['end_date'])
        self.assertEqual(_iso(start), shown['start_date'])
        self.assertEqual('PENDING', shown['status'])

        # The admin sees the allocation of a registered host to it.
        allocations = self._osc_json(self.admin, 'reservation',
                                     'allocation', 'list', 'host')
        leased = [r['lease_id'] for a in allocations
                  for r in a.get('reservations', [])]
        self.assertIn(created['id'], leased)

        out = self._osc(self.demo, 'reservation', 'lease', 'delete',
                        'lease2')
        self.assertIn('Deleted lease: lease2', out)
        leases = self._osc_json(self.demo, 'reservation', 'lease', 'list')
        self.assertNotIn(created['id'], [x['id'] for x in leases])

    def test_lease_starting_now_gets_its_host(self):
        self._register('host3')
        created = self._osc_json(
            self.demo, 'reservation', 'lease', 'create',
            '--reservation', HOST_RESERVATION,
            '--end-date', _at(minutes=30), 'now-lease')
        # The engine starts it at once: the reserved host leaves the free
        # pool for the reservation's own aggregate.
        lease = self._wait_status(created['id'], 'ACTIVE')
        reservation = json.loads(lease['reservations'])
        self.assertEqual('active', reservation['status'])
        aggregate = reservation['id']
        hosts = self._aggregate_hosts(aggregate)
        self.assertEqual(1, len(hosts))
        self.assertNotIn(hosts[0], self._aggregate_hosts('freepool'))

        # A server booted with the reservation hint lands on that host.
        self._client(self.demo, 'nova', 'boot', '--flavor',
                     self.demo['NOVA_LEASE_FLAVOR'], '--image',
                     self.demo['NOVA_LEASE_IMAGE'], '--nic', 'none',
                     '--hint', 'reservation=%s' % reservation['id'],
                     '--poll', 'on-lease', timeout=90)
        servers = self._osc_json(self.admin, 'server', 'list',
                                 '--all-projects', '--long',
                                 '--name', '^on-lease$')
        self.assertEqual([('ACTIVE', hosts[0])],
                         [(x['Status'], x['Host']) for x in servers])

        # Deleting a started lease ends it now: its server is deleted, the
        # host goes back to the free pool and the lease stays visible as
        # TERMINATED.
        self._osc(self.demo, 'reservation', 'lease', 'delete', 'now-lease')
        self._wait_status(created['id'], 'TERMINATED')
        self.assertIn(hosts[0], self._aggregate_hosts('freepool'))
        deadline = time.monotonic() + 60
        while self._osc(self.demo, 'server', 'list', '--name', '^on-lease$',
                        '-f', 'value', '-c', 'ID'):
            self.assertLess(time.monotonic(), deadline,
                            'the server of the ended lease is still there')
            time.sleep(1)
        names = self._osc(self.admin, 'aggregate', 'list', '-f', 'value',
                          '-c', 'Name').split()
        self.assertIn('freepool', names)
        self.assertNotIn(aggregate, names)
