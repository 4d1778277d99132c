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
"""The host allocation service under concurrency, on every database.

Several threads (each with its own connection from the pool, as nova-api
request threads or separate nova-api processes would have) create host
leases at once: no host is ever booked twice over overlapping windows, and
a loser gets NotEnoughHosts (409) and leaves nothing behind.
"""

import datetime

import fixtures
from oslo_config import cfg

from nova_lease import conf as lease_conf
from nova_lease.db import api as db_api
from nova_lease import enforcement
from nova_lease import lease_events
from nova_lease.plugins.host import allocation as host_allocation
from nova_lease.plugins.host import request as host_request
from nova_lease.plugins.host import rtype as host_rtype
from tests.functional.db import base
from tests import threads


def _conf():
    conf = cfg.ConfigOpts()
    lease_conf.register_opts(conf)
    conf([], project='nova')
    return conf


START = datetime.datetime(2030, 6, 1, 10, 0)


def _request(count=1, **extra):
    return host_request.HostRequest(min=count, max=count, **extra)


class _AllocationTests(object):

    def _hosts(self, count, **caps):
        for i in range(count):
            db_api.host_create(self.db, {
                'hypervisor_hostname': 'node%02d' % i,
                'service_host': 'node%02d' % i, 'availability_zone': 'nova',
                'vcpus': 8, 'memory_mb': 16384, 'local_gb': 100,
                'cpu_info': '{"arch": "x86_64"}', 'hypervisor_type': 'fake',
                'capabilities': dict(caps)})

    def _create(self, name, start, hours=1, request=None, cleaning=0,
                conf=None):
        end = start + datetime.timedelta(hours=hours)
        values = {'name': name, 'project_id': 'p', 'user_id': 'u',
                  'start_date': start, 'end_date': end, 'status': 'PENDING'}
        return host_rtype.create_host_lease(
            self.db, conf or _conf(), values,
            [('reservations[0]', request or _request())],
            lease_events.lease_events(start, end), cleaning)

    def _race(self, count, make):
        def run(i):
            try:
                return ('ok', make(i)['id'])
            except host_allocation.NotEnoughHosts as e:
                return ('409', str(e))
            except enforcement.LimitExceeded as e:
                return ('403', str(e))

        return [('error', repr(r)) if isinstance(r, BaseException) else r
                for r in threads.race(count, run)]

    def _assert_no_double_booking(self):
        allocations = db_api.allocation_list(self.db)
        by_host = {}
        for a in allocations:
            by_host.setdefault(a['host'], []).append(
                (a['start_date'], a['end_date']))
        for host, windows in by_host.items():
            windows.sort()
            for (s1, e1), (s2, e2) in zip(windows, windows[1:]):
                self.assertLessEqual(e1, s2, 'host %s booked twice' % host)

    def test_parallel_creates_for_the_last_free_host(self):
        self._hosts(1)
        results = self._race(8, lambda i: self._create('l%d' % i, START))
        kinds = sorted(kind for kind, _detail in results)
        self.assertEqual(['409'] * 7 + ['ok'], kinds, results)
        self.assertEqual(1, len(db_api.lease_list(self.db)))
        self.assertEqual(1, len(db_api.allocation_list(self.db)))
        self.assertEqual(2, len(db_api.event_list(self.db)))

    def test_parallel_creates_many_hosts(self):
        self._hosts(5)
        # 12 leases of 1 host over overlapping windows: 5 fit.
        results = self._race(12, lambda i: self._create(
            'l%d' % i, START + datetime.timedelta(minutes=i % 3)))
        kinds = sorted(kind for kind, _detail in results)
        self.assertEqual(['409'] * 7 + ['ok'] * 5, kinds, results)
        self._assert_no_double_booking()
        self.assertEqual(5, len({a['host'] for a in
                                 db_api.allocation_list(self.db)}))

    def test_parallel_creates_of_one_project_keep_its_limits(self):
        # Usage limits hold under parallel requests of one project: the
        # booking pipeline checks them under the project's lock, in the
        # transaction that books.
        self._hosts(8)
        conf = _conf()
        conf.set_override('max_promised_hosts', 2,
                          group='nova_lease_enforcement')
        results = self._race(8, lambda i: self._create(
            'l%d' % i, START, conf=conf))
        kinds = sorted(kind for kind, _detail in results)
        self.assertEqual(['403'] * 6 + ['ok'] * 2, kinds, results)
        self.assertEqual(2, len(db_api.allocation_list(self.db)))
        conf.set_override('max_promised_hosts', 0,
                          group='nova_lease_enforcement')
        conf.set_override('max_leases_per_project', 4,
                          group='nova_lease_enforcement')
        results = self._race(6, lambda i: self._create(
            'm%d' % i, START + datetime.timedelta(hours=2), conf=conf))
        kinds = sorted(kind for kind, _detail in results)
        self.assertEqual(['403'] * 4 + ['ok'] * 2, kinds, results)
        self.assertEqual(4, len(db_api.lease_list(self.db)))

    def test_back_to_back_and_cleaning_time(self):
        self._hosts(1)
        self._create('a', START)
        self._create('b', START + datetime.timedelta(hours=1))
        self.assertRaises(host_allocation.NotEnoughHosts, self._create, 'c',
                          START + datetime.timedelta(minutes=30))
        self._create('d', START + datetime.timedelta(hours=3),
                     cleaning=15)
        self.assertRaises(host_allocation.NotEnoughHosts, self._create, 'e',
                          START + datetime.timedelta(hours=4, minutes=10))
        self._create('f', START + datetime.timedelta(hours=4, minutes=15))
        self.assertEqual(4, len(db_api.lease_list(self.db)))
        self._assert_no_double_booking()

    def test_min_max_and_matching(self):
        self._hosts(3, ssd='true')
        lease = self._create('a', START, request=host_request.HostRequest(
            min=1, max=2, extra_specs={'ssd': 'true'}))
        self.assertEqual(2, len(db_api.allocation_list(
            self.db, lease_id=lease['id'])))
        lease = self._create('b', START, request=host_request.HostRequest(
            min=1, max=5))
        self.assertEqual(1, len(db_api.allocation_list(
            self.db, lease_id=lease['id'])))
        self.assertRaises(host_allocation.NotEnoughHosts, self._create,
                          'c', START)

    def _hosts_of(self, lease):
        return [a['host'] for a in db_api.allocation_list(
            self.db, lease_id=lease['id'])]

    def _ssd_host(self, name):
        return db_api.host_create(self.db, {
            'hypervisor_hostname': name, 'service_host': name,
            'availability_zone': 'nova', 'vcpus': 8, 'memory_mb': 16384,
            'local_gb': 100, 'capabilities': {'ssd': 'true'}})

    def test_registry_changed_by_another_process(self):
        # This process keeps the host registry; changes written by another
        # process (here: straight through db.api, without
        # registry.invalidate_host_cache) are seen by the next allocation.
        self._hosts(1, ssd='false')
        ssd = host_request.HostRequest(min=1, max=1,
                                       extra_specs={'ssd': 'true'})
        self.assertRaises(host_allocation.NotEnoughHosts, self._create, 'a',
                          START, request=ssd)
        # A new host (nothing matched in the cached registry).
        self._ssd_host('node01')
        lease = self._create('b', START, request=ssd)
        self.assertEqual(['node01'], self._hosts_of(lease))
        # New capabilities (the cached registry matches node01 only, which
        # is booked: the allocations' query sees the change).
        node00 = db_api.host_get_by_hostname(self.db, 'node00')
        db_api.host_update(self.db, node00['id'],
                           {'capabilities': {'ssd': 'true'}})
        lease = self._create('c', START, request=ssd)
        self.assertEqual(['node00'], self._hosts_of(lease))
        # A host no longer reservable (matched by the cached registry, free
        # at that time).
        node01 = db_api.host_get_by_hostname(self.db, 'node01')
        db_api.host_update(self.db, node01['id'], {'reservable': False})
        later = START + datetime.timedelta(days=1)
        lease = self._create('d', later, request=host_request.HostRequest(
            min=1, max=2, extra_specs={'ssd': 'true'}))
        self.assertEqual(['node00'], self._hosts_of(lease))
        # A host removed (matched by the cached registry, free).
        node02 = self._ssd_host('node02')
        two = host_request.HostRequest(min=2, max=2,
                                       extra_specs={'ssd': 'true'})
        later = START + datetime.timedelta(days=2)
        lease = self._create('e', later, request=two)
        self.assertEqual(['node00', 'node02'], self._hosts_of(lease))
        db_api.lease_destroy(self.db, lease['id'])
        db_api.host_destroy(self.db, node02['id'])
        self.assertRaises(host_allocation.NotEnoughHosts, self._create, 'f',
                          later, request=two)

    def test_every_write_of_a_host_is_seen(self):
        # The process brings its copy of the registry up to date host by
        # host, by the hosts' versions: writes of one host in quick
        # succession, and a host removed and registered again (SQLite may
        # give it the same id), are each seen by the next allocation.
        self._hosts(3, ssd='false')
        ssd = host_request.HostRequest(min=1, max=1,
                                       extra_specs={'ssd': 'true'})
        self.assertRaises(host_allocation.NotEnoughHosts, self._create,
                          'none', START, request=ssd)
        node02 = db_api.host_get_by_hostname(self.db, 'node02')
        for i in range(5):
            db_api.host_update(self.db, node02['id'],
                               {'capabilities': {'ssd': 'true'}})
            lease = self._create('on-%d' % i, START, request=ssd)
            self.assertEqual(['node02'], self._hosts_of(lease))
            db_api.lease_destroy(self.db, lease['id'])
            db_api.host_update(self.db, node02['id'],
                               {'capabilities': {'ssd': 'false'}})
            self.assertRaises(host_allocation.NotEnoughHosts, self._create,
                              'off-%d' % i, START, request=ssd)
        db_api.host_destroy(self.db, node02['id'])
        self._ssd_host('node02')
        lease = self._create('again', START, request=ssd)
        self.assertEqual(['node02'], self._hosts_of(lease))

    def test_only_the_written_host_is_read_again(self):
        self._hosts(10, ssd='false')
        read = []
        real = db_api.host_list

        def host_list(*args, **kwargs):
            read.append(kwargs.get('ids'))
            return real(*args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_lease.db.api.host_list', host_list))
        self._create('first', START)
        self.assertEqual([None], read)     # every host, once
        node03 = db_api.host_get_by_hostname(self.db, 'node03')
        db_api.host_update(self.db, node03['id'],
                           {'capabilities': {'ssd': 'true'}})
        lease = self._create('second', START, request=host_request.HostRequest(
            min=1, max=1, extra_specs={'ssd': 'true'}))
        self.assertEqual(['node03'], self._hosts_of(lease))
        self.assertEqual([None, [node03['id']]], read)


class AllocationSQLiteTest(_AllocationTests, base.SQLiteTestCase):
    pass


class AllocationMySQLTest(_AllocationTests, base.MySQLTestCase):
    pass


class AllocationPostgreSQLTest(_AllocationTests, base.PostgreSQLTestCase):
    pass
