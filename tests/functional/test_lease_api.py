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
"""The lease API (/v2.1/os-reservation) on the in-process real Nova.

Hosts are registered through the API (facts from Nova, free pool through
Nova's aggregate API); leases are created, listed, shown, updated and
deleted through it; the side database is checked for what is left behind.
"""

import datetime

from nova.tests.functional.api import client as api_client
from oslo_utils import timeutils

from nova_lease.db import api as db_api
from tests.functional import base
from tests import threads

OTHER_PROJECT = 'a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5'
PREFIX = '/os-reservation'


def fmt(dt):
    return dt.strftime('%Y-%m-%d %H:%M')


class LeaseAPIMixin(object):
    """Helpers for tests that use the lease API."""

    def _other_api(self, roles=('reader', 'member')):
        root = self.api_fixture.base_url
        return api_client.TestOpenStackClient(
            'stranger', root, project_id=OTHER_PROJECT, roles=list(roles))

    @property
    def lease_db(self):
        return db_api.get_database(base.CONF)

    def _register(self, name, status=201, api=None, **capabilities):
        api = api or self.admin_api
        body = dict(capabilities, name=name)
        resp = api.api_post(PREFIX + '/os-hosts', body,
                            check_response_status=[status])
        return resp.body.get('host') if status == 201 else resp.body

    def _aggregate(self, name):
        for agg in self.admin_api.api_get('/os-aggregates').body[
                'aggregates']:
            if agg['name'] == name:
                return agg
        return None

    def _host_res(self, count=1, high=None, **extra):
        res = {'resource_type': 'physical:host', 'min': count,
               'max': high or count}
        res.update(extra)
        return res

    def _lease_body(self, start, end, name='l1', reservations=None, **extra):
        body = {'name': name, 'start_date': start, 'end_date': end,
                'reservations': reservations or [self._host_res()],
                'events': [], 'before_end_date': None}
        body.update(extra)
        return body

    def _create(self, body, status=201, api=None):
        api = api or self.api
        resp = api.api_post(PREFIX + '/leases', body,
                            check_response_status=[status])
        return resp.body['lease'] if status == 201 else resp.body

    def _at(self, **delta):
        return fmt(self.clock.now + datetime.timedelta(**delta))

    def _counts(self):
        leases = db_api.lease_list(self.lease_db)
        allocations = db_api.allocation_list(self.lease_db)
        events = db_api.event_list(self.lease_db)
        return len(leases), len(allocations), len(events)


class LeaseAPITest(LeaseAPIMixin, base.LeaseFunctionalBase):

    CLOCK_START = datetime.datetime(2030, 1, 1, 12, 0, 0)

    def test_register_host(self):
        host = self._register('host1', ssd='true', gpu='false')
        self.assertEqual('host1', host['hypervisor_hostname'])
        self.assertEqual('host1', host['service_name'])
        self.assertEqual(4, host['vcpus'])
        self.assertEqual(8192, host['memory_mb'])
        self.assertEqual(100, host['local_gb'])
        self.assertEqual('nova', host['availability_zone'])
        self.assertEqual('fake', host['hypervisor_type'])
        self.assertIn('x86_64', host['cpu_info'])
        self.assertEqual('true', host['ssd'])
        self.assertEqual('false', host['gpu'])
        # Blazar's host has a status column, which nothing sets (null);
        # blazar-dashboard's host page shows it.
        self.assertIn('status', host)
        self.assertIsNone(host['status'])
        self.assertEqual(['host1'], self._aggregate('freepool')['hosts'])
        # 'status' is a host field, not an extra capability.
        self.admin_api.api_post(PREFIX + '/os-hosts',
                                {'name': 'host2', 'status': 'up'},
                                check_response_status=[400])
        # Registered twice: 409; unknown hypervisor: 404; non-admin: 403.
        body = self._register('host1', status=409)
        self.assertIn('host1', body['error_message'])
        body = self._register('nohost', status=404)
        self.assertIn('nohost', body['error_message'])
        self._register('host2', status=403, api=self.api)
        self._register('host2', status=400, id='7')
        # Read, update, unset, allocations.
        hosts = self.admin_api.api_get(PREFIX + '/os-hosts').body['hosts']
        self.assertEqual(['host1'], [h['hypervisor_hostname']
                                     for h in hosts])
        url = PREFIX + '/os-hosts/%s' % host['id']
        shown = self.admin_api.api_get(url).body['host']
        self.assertEqual(host['id'], shown['id'])
        self.api.api_get(url, check_response_status=[403])
        updated = self.admin_api.api_put(
            url, {'values': {'gpu': 'true', 'ssd': None}}).body['host']
        self.assertEqual('true', updated['gpu'])
        self.assertNotIn('ssd', updated)
        allocations = self.admin_api.api_get(
            PREFIX + '/os-hosts/allocations').body['allocations']
        self.assertEqual([{'resource_id': host['id'], 'reservations': []}],
                         allocations)
        self.api.api_get(PREFIX + '/os-hosts/allocations',
                         check_response_status=[403])
        # Unregister: out of the free pool and the side database.
        self.admin_api.api_delete(url, check_response_status=[204])
        self.assertEqual([], self._aggregate('freepool')['hosts'])
        self.admin_api.api_get(url, check_response_status=[404])

    def test_host_lease_crud_and_projects(self):
        self._register('host1', ssd='true')
        self._register('host2')
        res = self._host_res(
            availability_zone='nova', extra_specs={
                'ssd': 'true', 'capabilities:cpu_info:arch': 'x86_64'})
        lease = self._create(self._lease_body(
            'now', self._at(hours=2), reservations=[res]))
        self.assertEqual('PENDING', lease['status'])
        self.assertEqual(self.api.project_id, lease['project_id'])
        self.assertEqual('fake', lease['user_id'])
        self.assertEqual('2030-01-01T12:00:00.000000', lease['start_date'])
        self.assertEqual('2030-01-01T14:00:00.000000', lease['end_date'])
        self.assertEqual('2030-01-01T13:00:00.000000',
                         lease['before_end_date'])
        reservation = lease['reservations'][0]
        for key, value in (('resource_type', 'physical:host'), ('min', 1),
                           ('max', 1), ('status', 'pending'),
                           ('availability_zone', 'nova'),
                           ('lease_id', lease['id'])):
            self.assertEqual(value, reservation[key], key)
        self.assertEqual(
            [('start_lease', '2030-01-01T12:00:00.000000'),
             ('before_end_lease', '2030-01-01T13:00:00.000000'),
             ('end_lease', '2030-01-01T14:00:00.000000')],
            [(e['event_type'], e['time']) for e in lease['events']])
        # host1 is the only one with ssd=true.
        allocations = db_api.allocation_list(self.lease_db)
        self.assertEqual(['host1'], [a['host'] for a in allocations])
        self.assertTrue(allocations[0]['whole_host'])

        url = PREFIX + '/leases/%s' % lease['id']
        self.assertEqual(lease['id'], self.api.api_get(url).body[
            'lease']['id'])
        self.assertEqual([lease['id']], [
            x['id'] for x in self.api.api_get(PREFIX + '/leases').body[
                'leases']])
        # Another project sees nothing and cannot act on it (404: the id
        # is not disclosed).
        other = self._other_api()
        self.assertEqual([], other.api_get(PREFIX + '/leases').body[
            'leases'])
        for call in (lambda: other.api_get(url, check_response_status=[404]),
                     lambda: other.api_put(url, {'name': 'x'},
                                           check_response_status=[404]),
                     lambda: other.api_delete(url,
                                              check_response_status=[404])):
            body = call().body
            self.assertIn(lease['id'], body['error_message'])
        other.api_get(PREFIX + '/leases?all_projects=1',
                      check_response_status=[403])
        # A reader of the same project may read it.
        self.api_fixture.reader_api.api_get(url)
        # The admin sees every project, as Blazar 18 lists leases for its
        # admins (what blazar-dashboard's lease list and 'openstack
        # reservation lease list' show), with all_projects or without;
        # all_projects=0: the admin's own project only.
        # An admin of another project: Blazar's rule is the admin role.
        admin = api_client.TestOpenStackClient(
            'admin', self.api_fixture.base_url, project_id=OTHER_PROJECT,
            roles=['reader', 'member', 'admin'])
        for query in ('?all_projects=1', '', '?all_tenants=true'):
            leases = admin.api_get(PREFIX + '/leases' + query).body[
                'leases']
            self.assertEqual([lease['id']], [x['id'] for x in leases])
        self.assertEqual([], admin.api_get(
            PREFIX + '/leases?all_projects=0').body['leases'])
        # A member's list stays its project's, asked or not.
        self.assertEqual([], other.api_get(
            PREFIX + '/leases?all_projects=0').body['leases'])
        # Rename.
        renamed = self.api.api_put(url, {'name': 'renamed'}).body['lease']
        self.assertEqual('renamed', renamed['name'])
        # Delete before start: the lease, its events and allocations go.
        self.api.api_delete(url, check_response_status=[204])
        self.api.api_get(url, check_response_status=[404])
        self.assertEqual((0, 0, 0), self._counts())

    def test_back_to_back_overlap_and_cleaning_time(self):
        self._register('host1')
        first = self._create(self._lease_body(
            self._at(hours=1), self._at(hours=2), name='first'))
        second = self._create(self._lease_body(
            self._at(hours=2), self._at(hours=3), name='second'))
        self.assertNotEqual(first['id'], second['id'])
        counts = self._counts()
        self.assertEqual((2, 2, 6), counts)
        body = self._create(self._lease_body(
            self._at(hours=1, minutes=30), self._at(hours=2, minutes=30),
            name='overlap'), status=409)
        self.assertIn('reservations[0]', body['error_message'])
        self.assertIn('not enough free hosts', body['error_message'])
        self.assertEqual(409, body['error_code'])
        self.assertEqual(counts, self._counts())

    def test_cleaning_time(self):
        self.flags(cleaning_time=15, group='nova_lease_api')
        self._register('host1')
        self._create(self._lease_body(
            self._at(hours=1), self._at(hours=2), name='first'))
        counts = self._counts()
        body = self._create(self._lease_body(
            self._at(hours=2, minutes=10), self._at(hours=3),
            name='too-soon'), status=409)
        self.assertIn('15 minutes of cleaning time', body['error_message'])
        self.assertEqual(counts, self._counts())
        # A lease must also end 15 minutes before the next one starts.
        self._create(self._lease_body(
            self._at(minutes=10), self._at(minutes=50), name='before'),
            status=409)
        self.assertEqual(counts, self._counts())
        self._create(self._lease_body(
            self._at(minutes=10), self._at(minutes=45), name='before'))
        self._create(self._lease_body(
            self._at(hours=2, minutes=15), self._at(hours=3), name='after'))
        self.assertEqual(3, len(db_api.lease_list(self.lease_db)))

    def test_validation_errors_name_the_field(self):
        self._register('host1')
        cases = [
            ('end_date', self._lease_body(self._at(hours=2),
                                          self._at(hours=1))),
            ('start_date', self._lease_body('tomorrow', self._at(hours=1))),
            ('end_date', self._lease_body('now', '2030-13-01 10:00')),
            ('start_date', self._lease_body(self._at(hours=-3),
                                            self._at(hours=1))),
            ('name', self._lease_body('now', self._at(hours=1), name='')),
            ('reservations[0].max', self._lease_body(
                'now', self._at(hours=1), reservations=[
                    {'resource_type': 'physical:host', 'min': 1}])),
            ('reservations[0].min', self._lease_body(
                'now', self._at(hours=1), reservations=[
                    {'resource_type': 'physical:host', 'max': 1}])),
            ('reservations[0].max', self._lease_body(
                'now', self._at(hours=1),
                reservations=[self._host_res(2, 1)])),
            ('reservations[0].min', self._lease_body(
                'now', self._at(hours=1),
                reservations=[self._host_res('one', 2)])),
            ('reservations[0].max', self._lease_body(
                'now', self._at(hours=1),
                reservations=[self._host_res(1, 1.5)])),
            ('reservations[0].min', self._lease_body(
                'now', self._at(hours=1),
                reservations=[self._host_res(0, 1)])),
            ('reservations[0].vcpus', self._lease_body(
                'now', self._at(hours=1),
                reservations=[self._host_res(vcpus='many')])),
            ('reservations[0].region', self._lease_body(
                'now', self._at(hours=1),
                reservations=[self._host_res(region='Elsewhere')])),
            ('reservations[0].hypervisor_properties', self._lease_body(
                'now', self._at(hours=1), reservations=[self._host_res(
                    hypervisor_properties='[">=", "$vcpus"')])),
            ('reservations[0].resource_properties', self._lease_body(
                'now', self._at(hours=1), reservations=[self._host_res(
                    resource_properties='["~", "$gpu", "true"]')])),
            ('reservations[0].extra_specs', self._lease_body(
                'now', self._at(hours=1), reservations=[self._host_res(
                    extra_specs=['ssd'])])),
            ('reservations[0].resource_type', self._lease_body(
                'now', self._at(hours=1), reservations=[
                    {'resource_type': 'virtual:floatingip', 'amount': 1}])),
            ('reservations', self._lease_body('now', self._at(hours=1),
                                              reservations={})),
            ('colour', self._lease_body('now', self._at(hours=1),
                                        colour='blue')),
        ]
        for field, body in cases:
            if field == 'reservations':
                # (_lease_body gives a default for an empty value.)
                body['reservations'] = {'resource_type': 'physical:host'}
            error = self._create(body, status=400)
            self.assertEqual(400, error['error_code'], field)
            self.assertIn(field, error['error_message'])
        self.assertEqual((0, 0, 0), self._counts())
        # The region of this cloud is accepted; a bad body is a 400 too.
        self._create(self._lease_body('now', self._at(hours=1),
                                      reservations=[self._host_res(
                                          region='RegionOne')]))
        resp = self.api.api_request(PREFIX + '/leases', method='POST',
                                    body='{not json',
                                    check_response_status=[400])
        self.assertIn('JSON', resp.json()['error_message'])
        # Unknown paths and methods.
        self.api.api_get(PREFIX + '/nothing', check_response_status=[404])
        self.api.api_request(PREFIX + '/leases', method='PATCH',
                             check_response_status=[405])

    def test_schema_refusals_in_blazar_shape(self):
        # The router refuses by the route's JSON schemas before any
        # handler runs: Blazar's error shape, the parsers' words.
        host = self._register('host1')
        lease = self._create(self._lease_body('now', self._at(hours=1)))
        counts = self._counts()
        body = self._lease_body('now', self._at(hours=1), reservations=[
            self._host_res(), self._host_res(min=1.5)])
        for sent in (body, {'lease': body}):
            resp = self.api.api_post(PREFIX + '/leases', sent,
                                     check_response_status=[400])
            self.assertEqual(
                {'error_code': 400, 'error_name': 'LeaseParamError',
                 'error_message': "'reservations[1].min' must be an "
                                  "integer, got a number"}, resp.body)
        resp = self.api.api_put(
            PREFIX + '/leases/%s' % lease['id'],
            {'lease': {'name': 'x', 'colour': 'red'}},
            check_response_status=[400])
        self.assertEqual(
            {'error_code': 400, 'error_name': 'LeaseParamError',
             'error_message': "'colour': unknown key; a lease update may "
                              "change before_end_date, end_date, name, "
                              "reservations, start_date"}, resp.body)
        resp = self.admin_api.api_put(
            PREFIX + '/os-hosts/%s' % host['id'], {'values': ['gpu']},
            check_response_status=[400])
        self.assertEqual(
            {'error_code': 400, 'error_name': 'BadRequest',
             'error_message': 'values: must be an object of extra '
                              'capabilities'}, resp.body)
        resp = self.admin_api.api_get(
            PREFIX + '/leases?all_tenants=maybe',
            check_response_status=[400])
        self.assertEqual(
            {'error_code': 400, 'error_name': 'BadRequest',
             'error_message': "all_projects: must be a boolean such as 1 "
                              "or true, got 'maybe'"}, resp.body)
        # Nothing was recorded or changed.
        self.assertEqual(counts, self._counts())
        self.assertEqual('l1', self.api.api_get(
            PREFIX + '/leases/%s' % lease['id']).body['lease']['name'])

    def test_hypervisor_and_resource_properties(self):
        self._register('host1', gpu='true')
        self._register('host2', gpu='false')
        lease = self._create(self._lease_body(
            'now', self._at(hours=1), reservations=[self._host_res(
                hypervisor_properties='[">=", "$vcpus", "8"]')]))
        self.assertEqual(['host2'], [a['host'] for a in db_api.allocation_list(
            self.lease_db, lease_id=lease['id'])])
        lease = self._create(self._lease_body(
            self._at(hours=2), self._at(hours=3), reservations=[
                self._host_res(resource_properties=[
                    'and', ['==', '$gpu', 'true'],
                    ['not', ['==', '$gpu', 'false']]])]))
        self.assertEqual(['host1'], [a['host'] for a in db_api.allocation_list(
            self.lease_db, lease_id=lease['id'])])
        body = self._create(self._lease_body(
            self._at(hours=4), self._at(hours=5), reservations=[
                self._host_res(memory_mb=32768)]), status=409)
        self.assertIn('0 reservable host(s) match', body['error_message'])
        # min/max: both hosts when both are free.
        lease = self._create(self._lease_body(
            self._at(hours=6), self._at(hours=7),
            reservations=[self._host_res(1, 3)]))
        self.assertEqual(['host1', 'host2'], sorted(
            a['host'] for a in db_api.allocation_list(
                self.lease_db, lease_id=lease['id'])))

    def test_update_window(self):
        self._register('host1')
        self._register('host2')
        a = self._create(self._lease_body(self._at(hours=1),
                                          self._at(hours=2), name='a'))
        b = self._create(self._lease_body(self._at(hours=1),
                                          self._at(hours=2), name='b'))
        url_a = PREFIX + '/leases/%s' % a['id']
        # Move a later: it keeps its host.
        hosts_before = [x['host'] for x in db_api.allocation_list(
            self.lease_db, lease_id=a['id'])]
        moved = self.api.api_put(url_a, {
            'start_date': self._at(hours=3),
            'end_date': self._at(hours=4)}).body['lease']
        self.assertEqual('2030-01-01T15:00:00.000000', moved['start_date'])
        # (The 1-hour lease is warned 30 minutes before its end.)
        self.assertEqual(
            ['2030-01-01T15:00:00.000000', '2030-01-01T15:30:00.000000',
             '2030-01-01T16:00:00.000000'],
            [e['time'] for e in moved['events']])
        allocs = db_api.allocation_list(self.lease_db, lease_id=a['id'])
        self.assertEqual(hosts_before, [x['host'] for x in allocs])
        self.assertEqual(timeutils.normalize_time(
            datetime.datetime(2030, 1, 1, 16, 0)), allocs[0]['end_date'])
        # A third lease takes the hosts b does not hold at 13:00-14:00 ...
        c = self._create(self._lease_body(self._at(hours=1),
                                          self._at(hours=2), name='c'))
        # ... so moving a back there is a 409 that changes nothing.
        before = self.api.api_get(url_a).body['lease']
        body = self.api.api_put(url_a, {
            'start_date': self._at(hours=1), 'end_date': self._at(hours=2)},
            check_response_status=[409]).body
        self.assertIn('not enough free hosts', body['error_message'])
        self.assertEqual(before, self.api.api_get(url_a).body['lease'])
        # End before start, and unknown keys: 400.
        body = self.api.api_put(url_a, {'end_date': self._at(hours=2)},
                                check_response_status=[400]).body
        self.assertIn("'end_date' (2030-01-01 14:00) must be after "
                      "'start_date' (2030-01-01 15:00)",
                      body['error_message'])
        # A warning outside the lease: refused as in a new lease's body.
        body = self.api.api_put(url_a, {'before_end_date': self._at(hours=5)},
                                check_response_status=[400]).body
        self.assertIn("'before_end_date' (2030-01-01 17:00) must be at or "
                      "after 'start_date' (2030-01-01 15:00) and before "
                      "'end_date' (2030-01-01 16:00)", body['error_message'])
        self.api.api_put(url_a, {'colour': 'red'},
                         check_response_status=[400])
        # Delete b: its host is free again, a can move there.
        self.api.api_delete(PREFIX + '/leases/%s' % b['id'])
        # a's own host (host1) is c's over that window: a is re-homed.
        self.assertEqual(['host1'], [x['host'] for x in db_api.allocation_list(
            self.lease_db, lease_id=c['id'])])
        self.assertEqual(['host1'], hosts_before)
        self.api.api_put(url_a, {'start_date': self._at(hours=1),
                                 'end_date': self._at(hours=2)})
        self.assertEqual(['host2'], [x['host'] for x in db_api.allocation_list(
            self.lease_db, lease_id=a['id'])])
        self.assertEqual(2, len(db_api.lease_list(self.lease_db)))

    def test_parallel_creates_for_the_last_free_host(self):
        self._register('host1')
        body = self._lease_body(self._at(hours=1), self._at(hours=2))

        def create(_n):
            return self.api.api_post(PREFIX + '/leases', body,
                                     check_response_status=[201, 409]).status

        results = threads.race(6, create, timeout=60)
        self.assertEqual([], threads.errors(results))
        self.assertEqual([201, 409, 409, 409, 409, 409], sorted(results))
        self.assertEqual((1, 1, 3), self._counts())
