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
"""Servers that do not belong to a host lease are never touched by it.

Two ends of the same promise (Guarantee 2, "nothing outside a lease is
touched"):

* ``POST /os-hosts`` refuses (409, naming them) a host that still runs
  servers or that holds allocations of instance leases: such servers would
  sit on a host that is then leased to someone else;
* at the end of a host lease the physical:host plugin deletes or shelves
  only the servers of the lease's project booted with ``--hint
  reservation=<its id>`` (the paste filter records the hint in the
  server's ``lease_reservation_id`` metadata). Anything else found on the
  hosts -- here a server an admin forced onto the host, which bypasses
  the scheduler's filters -- is left alone, logged, and named in the
  lease's ``status_reason`` and in its ``lease.end`` notification when it
  is the lease's project's (another project's is counted there, named in
  the log only).
"""

from nova.tests.functional.api import client as api_client

from nova_lease.db import api as db_api
from nova_lease.plugins.host import aggregates as host_aggregates
from tests.functional import base
from tests.functional import test_host_reservation
from tests.functional import test_lease_api

PREFIX = test_lease_api.PREFIX
BIG = (8, 16384, 200)


class _RecordingNotifier(object):
    def __init__(self):
        self.sent = []

    def notify(self, event_type, lease, reservations=None, usage=None):
        self.sent.append((event_type, dict(lease)))
        return True


class _ForcedBootMixin(object):

    def _boot_forced(self, host, name, api=None):
        """An admin boot forced onto ``host`` (``--availability-zone
        nova:<host>``): Nova's scheduler runs no filter for it.
        """
        api = api or self.admin_api
        body = {'server': self._build_server(
            name=name, image_uuid=self.image_id, flavor_id='1',
            networks='none', az='nova:%s' % host)}
        server = self._wait_for_state_change(api.post_server(body), 'ACTIVE')
        self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
        return server


class HostRegistrationTest(_ForcedBootMixin, test_lease_api.LeaseAPIMixin,
                           base.LeaseFunctionalBase):

    COMPUTES = {'host1': BIG, 'host2': BIG}

    def test_register_host_running_servers_is_409(self):
        server = self._boot_forced('host1', 'already-there')
        body = self._register('host1', status=409)
        self.assertEqual('HostHavingServers', body['error_name'])
        self.assertIn('host1', body['error_message'])
        self.assertIn(server['id'], body['error_message'])
        # Nothing was registered: not in the side database, not in the
        # free pool.
        self.assertEqual([], db_api.host_list(self.lease_db))
        pool = self._aggregate('freepool')
        self.assertNotIn('host1', (pool or {}).get('hosts') or [])
        # Once the server is gone the host can be registered.
        self._delete_server(server)
        self._register('host1')
        self.assertEqual(['host1'], self._aggregate('freepool')['hosts'])

    def test_register_host_with_future_instance_allocations_is_409(self):
        hints = {'reserved': 'True', 'lease_params': (
            '{"name": "later", "start": "%s", "end": "%s"}'
            % (self._at(hours=2), self._at(hours=3)))}
        self._boot(hints, name='future', wait=None)
        lease = db_api.lease_list(self.lease_db)[0]
        allocation = db_api.allocation_list(self.lease_db,
                                            lease_id=lease['id'])[0]
        host = allocation['host']
        # Its server waits shelved-offloaded, on no host: only the
        # allocation is in the way.
        [server] = self.api.get_servers()
        self._wait_for_state_change(server, 'SHELVED_OFFLOADED')
        body = self._register(host, status=409)
        self.assertEqual('HostHavingAllocations', body['error_name'])
        self.assertIn(host, body['error_message'])
        self.assertIn(lease['id'], body['error_message'])
        self.assertEqual([], db_api.host_list(self.lease_db))


class HostLeaseBystanderTest(_ForcedBootMixin,
                             test_host_reservation.HostLeaseMixin,
                             base.LeaseFunctionalBase):

    # host3 stays unregistered: where unleased work goes.
    COMPUTES = {'host1': BIG, 'host2': BIG, 'host3': BIG}

    def setUp(self):
        super().setUp()
        self.notifier = _RecordingNotifier()
        self.engine.notifier = self.notifier

    def _other_admin(self):
        admin = api_client.TestOpenStackClient(
            'other-admin', self.api_fixture.base_url,
            project_id=test_lease_api.OTHER_PROJECT,
            roles=['reader', 'member', 'admin'])
        admin.microversion = 'latest'
        return admin

    def _started_lease(self, on_end):
        self._register('host1')
        self._register('host2')
        lease = self._create(self._lease_body(
            'now', self._at(hours=2), on_end=on_end))
        rid = lease['reservations'][0]['id']
        self.assertEqual(1, self.engine.process_due())
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        [host] = self._hosts_of(lease)
        owned = [self._boot_hinted(rid, name='owned-%d' % n)
                 for n in range(2)]
        for server in owned:
            self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
        # Forced onto the host by admins (force_hosts bypasses the
        # scheduler's filters): one of another project, one of the
        # lease's own project booted without the hint.
        stranger = self._boot_forced(host, 'stranger',
                                     api=self._other_admin())
        unhinted = self._boot_forced(host, 'unhinted')
        return lease, host, owned, [stranger, unhinted]

    def _end(self, lease):
        self.clock.advance(hours=2)
        # before_end, then the end.
        self.engine.process_due()
        lease = self._lease(lease['id'])
        self.assertEqual('TERMINATED', lease['status'])
        return lease

    def _assert_reported(self, lease, host, bystanders):
        # The lease's own servers left alone are named; another
        # project's are counted, never named (ids, project), to the
        # lease's owner (the engine's log names them).
        reason = lease['status_reason']
        self.assertIsNotNone(reason)
        self.assertIn(host, reason)
        [stranger] = [s for s in bystanders if self.admin_api.get_server(
            s['id'])['tenant_id'] == test_lease_api.OTHER_PROJECT]
        [unhinted] = [s for s in bystanders if s is not stranger]
        self.assertIn(unhinted['id'], reason)
        self.assertNotIn(stranger['id'], reason)
        self.assertNotIn(test_lease_api.OTHER_PROJECT, reason)
        self.assertIn('1 server(s) of other projects', reason)
        ends = [sent for event_type, sent in self.notifier.sent
                if event_type == 'lease.end']
        self.assertEqual(1, len(ends))
        self.assertEqual(reason, ends[0]['status_reason'])
        event = [e for e in db_api.event_list(self.lease_db,
                                              lease_id=lease['id'])
                 if e['event_type'] == 'end_lease'][0]
        self.assertEqual('DONE', event['status'])
        self.assertEqual(reason, event['last_error'])

    def test_end_with_delete_leaves_bystanders_alone(self):
        lease, host, owned, bystanders = self._started_lease('delete')
        # A hinted server without the metadata (removed by its user, or
        # booted before the filter recorded it) still belongs to the
        # lease: Nova keeps its boot hints.
        self.api.api_delete('/servers/%s/metadata/lease_reservation_id'
                            % owned[0]['id'], check_response_status=[204])
        self.assertEqual({}, self.api.get_server(owned[0]['id'])['metadata'])
        lease = self._end(lease)
        for server in owned:
            self._wait_until_deleted(server)
        for server in bystanders:
            server = self.admin_api.get_server(server['id'])
            self.assertEqual('ACTIVE', server['status'])
            self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
        self._assert_reported(lease, host, bystanders)
        # The lease still ended: the host is back in the free pool (its
        # later leases need it there) and the aggregate is gone.
        self.assertIn(host, self._aggregate('freepool')['hosts'])
        self.assertIsNone(self._aggregate(host_aggregates.aggregate_name(
            lease['reservations'][0]['id'])))

    def test_end_with_shelve_leaves_bystanders_alone(self):
        lease, host, owned, bystanders = self._started_lease('shelve')
        lease = self._end(lease)
        for server in owned:
            self.assertEqual(
                'SHELVED_OFFLOADED',
                self.api.get_server(server['id'])['status'])
        for server in bystanders:
            server = self.admin_api.get_server(server['id'])
            self.assertEqual('ACTIVE', server['status'])
            self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
        self._assert_reported(lease, host, bystanders)

    def test_delete_of_started_lease_leaves_bystanders_alone(self):
        lease, host, owned, bystanders = self._started_lease('delete')
        self.api.api_delete(PREFIX + '/leases/%s' % lease['id'],
                            check_response_status=[204])
        self.assertEqual(1, self.engine.process_due())
        lease = self._lease(lease['id'])
        self.assertEqual('TERMINATED', lease['status'])
        for server in owned:
            self._wait_until_deleted(server)
        for server in bystanders:
            self.assertEqual(
                'ACTIVE', self.admin_api.get_server(server['id'])['status'])
        self._assert_reported(lease, host, bystanders)

    def test_hinted_boot_records_its_reservation(self):
        self._register('host1')
        lease = self._create(self._lease_body('now', self._at(hours=2)))
        rid = lease['reservations'][0]['id']
        self.engine.process_due()
        server = self._boot_hinted(rid, name='hinted')
        self.assertEqual({'lease_reservation_id': rid},
                         self.api.get_server(server['id'])['metadata'])
        # The user's own metadata is kept; a value of this key given by
        # the user is replaced by the hint's.
        body = {'server': self._build_server(
            name='with-meta', image_uuid=self.image_id, flavor_id='1',
            networks='none'), 'os:scheduler_hints': {'reservation': rid}}
        body['server']['metadata'] = {'team': 'blue',
                                      'lease_reservation_id': 'mine'}
        server = self._wait_for_state_change(self.api.post_server(body),
                                             'ACTIVE')
        self.assertEqual({'team': 'blue', 'lease_reservation_id': rid},
                         self.api.get_server(server['id'])['metadata'])
        # A boot without the hint gets nothing.
        server = self._boot(name='plain')
        self.assertEqual({}, self.api.get_server(server['id'])['metadata'])

    def test_clean_end_has_no_status_reason(self):
        self._register('host1')
        lease = self._create(self._lease_body('now', self._at(hours=2)))
        self.engine.process_due()
        owned = self._boot_hinted(lease['reservations'][0]['id'])
        lease = self._end(lease)
        self._wait_until_deleted(owned)
        self.assertIsNone(lease['status_reason'])
        self.assertIsNone(
            [e for e in db_api.event_list(self.lease_db,
                                          lease_id=lease['id'])
             if e['event_type'] == 'end_lease'][0]['last_error'])
