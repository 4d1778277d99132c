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
"""Usage enforcement ([nova_lease_enforcement]) on the in-process Nova.

Leased boots go through Nova's REST API (and python-novaclient), host
leases through the lease API (and python-blazarclient); every refusal is
a 403 naming the limit and its option, and leaves nothing behind.
"""

import datetime

from blazarclient import client as blazar_client
from blazarclient import exception as blazar_exc
from novaclient import exceptions as nova_exc
from oslo_serialization import jsonutils

from nova_lease.db import api as db_api
from tests.functional import base
from tests.functional import test_lease_api

HOUR = datetime.timedelta(hours=1)
PREFIX = test_lease_api.PREFIX
OTHER_PROJECT = test_lease_api.OTHER_PROJECT


def _date(when):
    return when.strftime('%Y-%m-%d %H:%M')


class _LimitsMixin(test_lease_api.LeaseAPIMixin):

    COMPUTES = {'host1': (8, 16384, 200), 'host2': (8, 16384, 200),
                'host3': (8, 16384, 200)}
    CLOCK_START = datetime.datetime(2030, 1, 1, 12, 0, 0)

    def setUp(self):
        super().setUp()
        self.db = db_api.get_database(base.CONF)
        self.T = self.clock.now

    def _limit(self, **options):
        self.flags(group='nova_lease_enforcement', **options)


class EnforcementTest(_LimitsMixin, base.LeaseFunctionalBase):

    # host3 is registered for host leases before anything runs (a host
    # that runs servers or holds instance allocations cannot be).

    def _boot_leased(self, start, end, api=None, count=1, status=202,
                     flavor='1'):
        api = api or self.api
        params = {'name': 'l', 'start': 'now' if start is None
                  else _date(start), 'end': _date(end)}
        server = self._build_server(name='vm', image_uuid=self.image_id,
                                    flavor_id=flavor, networks='none')
        if count > 1:
            server['min_count'] = count
        body = {'server': server, 'os:scheduler_hints': {
            'reserved': 'True', 'lease_params': jsonutils.dumps(params)}}
        resp = api.api_post('/servers', body,
                            check_response_status=[status])
        if status == 202:
            self._wait_settled()
        return resp.body

    def _wait_settled(self):
        # Let every build finish (or fail) before the next request.
        for server in self.admin_api.get_servers(
                detail=True, search_opts={'all_tenants': 1}):
            if server['status'] == 'BUILD':
                self._wait_for_state_change(server, 'ACTIVE')

    def _forbidden(self, body, option):
        message = body['forbidden']['message']
        self.assertEqual(403, body['forbidden']['code'])
        self.assertIn('[nova_lease_enforcement] %s' % option, message)
        return message

    def _leases(self):
        return len(db_api.lease_list(self.db))

    def test_start_ahead_is_limited_when_configured(self):
        # No limit by default, as in Blazar: year 9999 is admitted.
        self._boot_leased(datetime.datetime(9999, 1, 1, 0, 0),
                          datetime.datetime(9999, 1, 2, 0, 0))
        self.assertEqual(1, self._leases())
        servers = len(self.api.get_servers())
        self._limit(max_start_ahead='365d')
        body = self._boot_leased(datetime.datetime(9998, 1, 1, 0, 0),
                                 datetime.datetime(9998, 1, 2, 0, 0),
                                 status=403)
        message = self._forbidden(body, 'max_start_ahead')
        self.assertIn("'lease_params.start' (9998-01-01 00:00)", message)
        self.assertIn('the limit is 365d', message)
        body = self.api.api_post(PREFIX + '/leases', self._lease_body(
            '9998-01-01 00:00', '9998-01-02 00:00'),
            check_response_status=[403]).body
        self.assertEqual(403, body['error_code'])
        self.assertIn('[nova_lease_enforcement] max_start_ahead',
                      body['error_message'])
        self.assertIn("'start_date'", body['error_message'])
        self.assertEqual(1, self._leases())
        self.assertEqual(servers, len(self.api.get_servers()))
        # Within the limit: fine; the limit is the operator's.
        self._boot_leased(self.T + 300 * 24 * HOUR,
                          self.T + 301 * 24 * HOUR)
        self._limit(max_start_ahead='0')
        self._boot_leased(self.T + 800 * 24 * HOUR,
                          self.T + 801 * 24 * HOUR)
        self.assertEqual(3, self._leases())

    def test_leases_per_project(self):
        self._register('host3')
        self._limit(max_leases_per_project=2)
        self._boot_leased(None, self.T + HOUR)
        self._boot_leased(self.T + HOUR, self.T + 2 * HOUR)
        body = self._boot_leased(self.T + 3 * HOUR, self.T + 4 * HOUR,
                                 status=403)
        message = self._forbidden(body, 'max_leases_per_project')
        self.assertIn('already holds 2 lease(s)', message)
        body = self._create(self._lease_body(
            _date(self.T + HOUR), _date(self.T + 2 * HOUR)), status=403)
        self.assertIn('max_leases_per_project', body['error_message'])
        self.assertEqual(2, self._leases())
        # Another project has its own count; an exempt one has none.
        other = self._other_api()
        other.microversion = 'latest'
        self._boot_leased(None, self.T + HOUR, api=other)
        self._limit(exempt_projects=[self.api.project_id])
        self._boot_leased(self.T + 3 * HOUR, self.T + 4 * HOUR)
        # A lease that has ended no longer counts.
        self._limit(exempt_projects=[])
        self.clock.advance(hours=5)
        self._boot_leased(None, self.T + 6 * HOUR)

    def test_promised_vcpus_and_ram_peak(self):
        # Flavor 1: 1 vcpu, 512 MB.
        self._limit(max_promised_vcpus=3, max_promised_memory_mb=2048)
        self._boot_leased(self.T + HOUR, self.T + 3 * HOUR, count=2)
        # Overlapping [T+2h, T+3h): 2 + 2 = 4 vcpus > 3.
        body = self._boot_leased(self.T + 2 * HOUR, self.T + 4 * HOUR,
                                 count=2, status=403)
        message = self._forbidden(body, 'max_promised_vcpus')
        self.assertIn('vCPUs leased by project %s to 4 at %s' % (
            self.api.project_id, _date(self.T + 2 * HOUR)), message)
        # After the first one: fine.
        self._boot_leased(self.T + 3 * HOUR, self.T + 5 * HOUR, count=2)
        # One more overlapping server fits the vcpus (3), not the RAM
        # limit once flavor 2 (2048 MB) is asked for.
        body = self._boot_leased(self.T + 4 * HOUR, self.T + 6 * HOUR,
                                 flavor='2', status=403)
        self._forbidden(body, 'max_promised_memory_mb')
        self.assertEqual(2, self._leases())

    def test_instance_reservations_of_the_lease_api_count(self):
        # Blazar's instance reservations (amount x size) count against
        # the same limits as leased boots, both ways.
        self._register('host3')
        self._limit(max_promised_vcpus=3)

        def instances(amount, start, end, status=201):
            return self._create(self._lease_body(
                _date(start), _date(end), name='i%d' % amount,
                reservations=[{'resource_type': 'virtual:instance',
                               'amount': amount, 'vcpus': 1,
                               'memory_mb': 512, 'disk_gb': 1}]),
                status=status)

        body = instances(4, self.T + HOUR, self.T + 2 * HOUR, status=403)
        self.assertIn('[nova_lease_enforcement] max_promised_vcpus',
                      body['error_message'])
        self.assertIn('to 4 at', body['error_message'])
        instances(2, self.T + HOUR, self.T + 2 * HOUR)
        # 2 promised + 2 booted = 4 > 3.
        body = self._boot_leased(self.T + HOUR, self.T + 2 * HOUR, count=2,
                                 status=403)
        self._forbidden(body, 'max_promised_vcpus')
        self._boot_leased(self.T + HOUR, self.T + 2 * HOUR)
        self.assertEqual(2, self._leases())

    def test_promised_hosts_create_and_extend(self):
        self._limit(max_promised_hosts=1)
        self._register('host1')
        self._register('host2')
        first = self._create(self._lease_body(
            _date(self.T + HOUR), _date(self.T + 2 * HOUR), name='first'))
        body = self._create(self._lease_body(
            _date(self.T + HOUR), _date(self.T + 3 * HOUR), name='clash'),
            status=403)
        self.assertIn('[nova_lease_enforcement] max_promised_hosts',
                      body['error_message'])
        self.assertIn('hosts leased by project %s to 2' %
                      self.api.project_id, body['error_message'])
        second = self._create(self._lease_body(
            _date(self.T + 3 * HOUR), _date(self.T + 4 * HOUR),
            name='second'))
        # Extending the first into the second: refused, nothing changes.
        url = PREFIX + '/leases/%s' % first['id']
        body = self.api.api_put(url, {'end_date': _date(self.T + 4 * HOUR)},
                                check_response_status=[403]).body
        self.assertIn('max_promised_hosts', body['error_message'])
        self.assertEqual(
            _date(self.T + 2 * HOUR),
            _date(db_api.lease_get(self.db, first['id'])['end_date']))
        # Up to the second's start: fine.
        self.api.api_put(url, {'end_date': _date(self.T + 3 * HOUR)})
        self.assertEqual(2, self._leases())
        self.assertNotEqual(first['id'], second['id'])

    def test_real_clients(self):
        self._limit(max_leases_per_project=1)
        novaclient = self.novaclient()
        params = jsonutils.dumps({'name': 'n', 'start': 'now',
                                  'duration': '1h'})
        hints = {'reserved': 'True', 'lease_params': params}
        novaclient.servers.create('one', self.image_id, '1', nics='none',
                                  scheduler_hints=hints)
        self._wait_settled()
        e = self.assertRaises(
            nova_exc.Forbidden, novaclient.servers.create, 'two',
            self.image_id, '1', nics='none', scheduler_hints=hints)
        self.assertIn('[nova_lease_enforcement] max_leases_per_project',
                      str(e))
        # Register a host that the leased server does not run on (a busy
        # host cannot be registered).
        [server] = self.admin_api.get_servers()
        idle = sorted(set(self.COMPUTES) -
                      {server['OS-EXT-SRV-ATTR:host']})[0]
        self._register(idle)
        client = blazar_client.Client(
            session=self.keystone.session('fake'),
            endpoint_override=self.keystone.reservation_url)
        reservation = {'resource_type': 'physical:host', 'min': 1,
                       'max': 1, 'hypervisor_properties': '',
                       'resource_properties': ''}
        e = self.assertRaises(
            blazar_exc.BlazarClientException, client.lease.create,
            'bc', _date(self.T + HOUR), _date(self.T + 2 * HOUR),
            [reservation], [])
        self.assertEqual(403, e.kwargs['code'])
        self.assertIn('max_leases_per_project', str(e))
        self.assertEqual(1, self._leases())


class ChangeEnforcementTest(_LimitsMixin, base.LeaseFunctionalBase):
    """Every change of what a project holds is checked against every
    limit: reservation updates (E1) and date changes (E2), not only
    creation.
    """

    def _register_all(self):
        for host in self.COMPUTES:
            self._register(host)

    def _put(self, lease_id, body, status):
        return self.api.api_put(PREFIX + '/leases/%s' % lease_id, body,
                                check_response_status=[status]).body

    def _instances(self, start, end, amount=1, vcpus=1, name='i'):
        return self._create(self._lease_body(
            _date(start), _date(end), name=name,
            reservations=[{'resource_type': 'virtual:instance',
                           'amount': amount, 'vcpus': vcpus,
                           'memory_mb': 512, 'disk_gb': 1,
                           'affinity': None}]))

    def _hosts_of(self, lease_id):
        return sorted(a['host'] for a in db_api.allocation_list(
            self.db, lease_id=lease_id))

    def test_host_reservation_update_is_limited(self):
        # E1: max_promised_hosts=1, then PUT min=max=3 was a 200 with 3
        # hosts.
        self._register_all()
        self._limit(max_promised_hosts=1)
        lease = self._create(self._lease_body(
            _date(self.T + HOUR), _date(self.T + 2 * HOUR)))
        rid = lease['reservations'][0]['id']
        body = self._put(lease['id'], {'reservations': [
            {'id': rid, 'min': 3, 'max': 3}]}, 403)
        self.assertIn('[nova_lease_enforcement] max_promised_hosts',
                      body['error_message'])
        self.assertIn('to 3 at', body['error_message'])
        self.assertEqual(1, len(self._hosts_of(lease['id'])))
        # Within the limit: fine.
        self._limit(max_promised_hosts=2)
        self._put(lease['id'], {'reservations': [
            {'id': rid, 'min': 2, 'max': 2}]}, 200)
        self.assertEqual(2, len(self._hosts_of(lease['id'])))

    def test_instance_reservation_update_is_limited(self):
        # E1: amount and size of an instance reservation.
        self._register_all()
        self._limit(max_promised_vcpus=4)
        lease = self._instances(self.T + HOUR, self.T + 2 * HOUR,
                                amount=2, vcpus=2)
        rid = lease['reservations'][0]['id']
        body = self._put(lease['id'], {'reservations': [
            {'id': rid, 'amount': 3}]}, 403)
        self.assertIn('[nova_lease_enforcement] max_promised_vcpus',
                      body['error_message'])
        self.assertIn('to 6 at', body['error_message'])
        body = self._put(lease['id'], {'reservations': [
            {'id': rid, 'vcpus': 4}]}, 403)
        self.assertIn('to 8 at', body['error_message'])
        shown = db_api.lease_get(self.db, lease['id'])['reservations'][0]
        self.assertEqual(2, shown['properties']['amount'])
        self.assertEqual(2, shown['properties']['vcpus'])
        self._put(lease['id'], {'reservations': [
            {'id': rid, 'amount': 1, 'vcpus': 4}]}, 200)

    def test_date_change_of_instance_reservations_is_limited(self):
        # E2: two leases of 2 vCPUs each, one after the other, fit a
        # limit of 3; moving one onto the other does not.
        self._register_all()
        self._limit(max_promised_vcpus=3)
        first = self._instances(self.T + HOUR, self.T + 2 * HOUR,
                                amount=2, name='first')
        self._instances(self.T + 3 * HOUR, self.T + 4 * HOUR, amount=2,
                        name='second')
        body = self._put(first['id'], {
            'start_date': _date(self.T + 3 * HOUR),
            'end_date': _date(self.T + 5 * HOUR)}, 403)
        self.assertIn('[nova_lease_enforcement] max_promised_vcpus',
                      body['error_message'])
        self.assertIn('to 4 at', body['error_message'])
        body = self._put(first['id'], {
            'end_date': _date(self.T + 3 * HOUR + HOUR // 2)}, 403)
        self.assertIn('max_promised_vcpus', body['error_message'])
        lease = db_api.lease_get(self.db, first['id'])
        self.assertEqual(self.T + HOUR, lease['start_date'])
        self.assertEqual(self.T + 2 * HOUR, lease['end_date'])
        # Up to the other's start: fine.
        self._put(first['id'], {'end_date': _date(self.T + 3 * HOUR)}, 200)

    def test_date_change_of_a_boot_lease_is_limited(self):
        # E2 for a VM lease made with boot hints (its size is its
        # flavor's).
        self._limit(max_promised_vcpus=1)
        server = self._build_server(name='vm', image_uuid=self.image_id,
                                    flavor_id='1', networks='none')
        for start, end in ((self.T + HOUR, self.T + 2 * HOUR),
                           (self.T + 3 * HOUR, self.T + 4 * HOUR)):
            params = {'name': 'l', 'start': _date(start), 'end': _date(end)}
            self.api.api_post('/servers', {
                'server': dict(server), 'os:scheduler_hints': {
                    'reserved': 'True',
                    'lease_params': jsonutils.dumps(params)}},
                check_response_status=[202])
        first = sorted(db_api.lease_list(self.db),
                       key=lambda lease: lease['start_date'])[0]
        body = self._put(first['id'], {
            'end_date': _date(self.T + 4 * HOUR)}, 403)
        self.assertIn('max_promised_vcpus', body['error_message'])
