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
"""A request at cold start (the scheduler has no snapshot yet) reads what
it needs itself and gets the answers the snapshot would give (no leased
server runs on its hosts here: those would count as unleased); past
view.COLD_READ_LIMIT it is refused. On SQLite, MariaDB/MySQL and
PostgreSQL.
"""

import datetime

import fixtures
import nova.conf
from oslo_config import fixture as config_fixture
from oslo_utils import timeutils

from nova_lease.db import api
from nova_lease import params
from nova_lease.scheduler import snapshot_reads
from nova_lease.scheduler import view
from tests.functional.db import base
from tests.unit import test_scheduler as unit

CONF = nova.conf.CONF
NOW = unit.NOW
HOUR = datetime.timedelta(hours=1)


class _ColdTests(object):

    def setUp(self):
        super().setUp()
        flags = self.useFixture(config_fixture.Config(CONF))
        flags.config(group='nova_lease_database', connection=self.url)
        flags.config(group='nova_lease', freepool_aggregate='freepool')
        timeutils.set_time_override(NOW)
        self.addCleanup(timeutils.clear_time_override)
        view._COLD_OVERFLOW.clear()
        self.addCleanup(view._COLD_OVERFLOW.clear)
        self._instance_lease('host1', NOW + HOUR, NOW + 3 * HOUR, 4)
        self._instance_lease('host2', NOW + 2 * HOUR, NOW + 5 * HOUR, 2)
        # A started lease whose server is shelved: its unshelve.
        self.server = 'server-1'
        self._instance_lease('host2', NOW - HOUR, NOW + 4 * HOUR, 1,
                             status='ACTIVE', server=self.server)
        lease = api.lease_create(self.db, {
            'name': 'hosts', 'project_id': 'p1', 'start_date': NOW - HOUR,
            'end_date': NOW + 5 * HOUR, 'status': 'ACTIVE'},
            reservations=[{
                'resource_type': 'physical:host', 'status': 'active',
                'allocations': [{
                    'host': 'host3', 'start_date': NOW - HOUR,
                    'end_date': NOW + 5 * HOUR, 'whole_host': True}]}])
        self.rid = lease['reservations'][0]['id']
        api.host_create(self.db, {'hypervisor_hostname': 'host4',
                                  'service_host': 'host4', 'vcpus': 4,
                                  'memory_mb': 8704, 'local_gb': 100})
        self.hosts = [unit._host('host1'), unit._host('host2'),
                      unit._host('host3', aggregates=[unit._held(self.rid)]),
                      unit._host('host4'),
                      unit._host('host5', aggregates=['freepool']),
                      unit._host('host6', vcpus_used=1)]

    def _instance_lease(self, host, start, end, vcpus, status='PENDING',
                        server=None):
        api.lease_create(self.db, {
            'name': 'l', 'project_id': 'other', 'start_date': start,
            'end_date': end, 'status': status},
            reservations=[{
                'resource_type': 'virtual:instance',
                'status': 'active' if server else 'pending',
                'resource_id': server,
                'properties': {'vcpus': vcpus, 'memory_mb': 512,
                               'disk_gb': 1},
                'allocations': [{
                    'host': host, 'start_date': start, 'end_date': end,
                    'vcpus': vcpus, 'memory_mb': 512, 'disk_gb': 1}]}])

    def _lease_hints(self, end, start=None):
        """The hints of the first boot of a server of a lease of project
        p1 from ``start`` (now if None) to ``end``: the internal hint
        nova-api adds, naming a lease of the side database with a
        reservation not linked to a server yet (one lease per interval).
        """
        start = start or NOW
        key = (start, end)
        if key not in self._leases:
            lease = api.lease_create(self.db, {
                'name': 'boot', 'project_id': 'p1', 'start_date': start,
                'end_date': end, 'status': 'PENDING'},
                reservations=[{'resource_type': 'virtual:instance',
                               'status': 'pending', 'properties': {}}])
            self._leases[key] = lease['id']
        return {params.LEASE_ID_HINT: self._leases[key]}

    def _specs(self):
        if not hasattr(self, '_leases'):
            self._leases = {}
        return [
            unit._spec(vcpus=1), unit._spec(vcpus=3),
            unit._spec(self._lease_hints(NOW + HOUR / 2), vcpus=4),
            unit._spec(self._lease_hints(NOW + 150 * unit._SEC * 60),
                       vcpus=2),
            unit._spec(self._lease_hints(NOW + 3 * HOUR, NOW + HOUR),
                       vcpus=1),
            unit._spec({'reservation': self.rid}, vcpus=1),
            unit._spec({'reservation': self.rid}, vcpus=1, project='p2'),
            unit._spec(uuid=self.server, vcpus=1),
        ]

    def test_same_answers_as_the_snapshot(self):
        full = snapshot_reads.load(self.db, NOW)
        self.assertEqual({'host4'}, full.registered)
        for spec in self._specs():
            warm = view.RequestView(spec, full, NOW, CONF)
            cold = view.ColdView(spec, NOW, CONF)
            self.assertEqual(warm.request, cold.request)
            passes = warm.passes(self.hosts)
            self.assertEqual(passes, cold.passes(self.hosts), spec)
            passed = [hs for hs, (ok, _why) in zip(self.hosts, passes)
                      if ok]
            self.assertEqual(warm.weights(passed), cold.weights(passed))
        # Something passes and something does not, for each reason.
        reasons = {why for spec in self._specs()
                   for _ok, why in view.ColdView(spec, NOW, CONF).passes(
                       self.hosts)}
        for part in ('does not fit', 'free pool', 'os-hosts', 'holds it',
                     'may only use'):
            self.assertTrue([r for r in reasons if r and part in r], part)

    def test_too_many_promises_are_refused(self):
        self.useFixture(fixtures.MockPatchObject(view, 'COLD_READ_LIMIT',
                                                 1))
        reads = []
        real = snapshot_reads.read_host_items
        self.useFixture(fixtures.MockPatchObject(
            snapshot_reads, 'read_host_items',
            lambda *args: reads.append(args[4]) or real(*args)))
        for spec in self._specs()[:4]:
            self.assertEqual(
                [], [ok for ok, _why in view.ColdView(
                    spec, NOW, CONF).passes(self.hosts) if ok])
        # All of the hosts' allocations are read once; then only those
        # over a leased request's interval.
        self.assertEqual([None, NOW + HOUR / 2, NOW + 150 * unit._SEC * 60],
                         reads)
        # A host without promises: read, and answered.
        spec = unit._spec(vcpus=1)
        self.assertEqual([(True, None)], view.ColdView(
            spec, NOW, CONF).passes([unit._host('host6')]))


class ColdSQLiteTest(_ColdTests, base.SQLiteTestCase):
    pass


class ColdMySQLTest(_ColdTests, base.MySQLTestCase):
    pass


class ColdPostgreSQLTest(_ColdTests, base.PostgreSQLTestCase):
    pass
