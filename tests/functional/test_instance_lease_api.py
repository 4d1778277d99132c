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
"""POST /servers with lease hints through the real nova-api pipeline."""

import datetime
import re
import time
from unittest import mock

from nova.compute import api as nova_compute_api
from nova import exception as nova_exception
from oslo_db import exception as db_exc
from oslo_serialization import jsonutils

from nova_lease.capacity import admission
from nova_lease.db import api as db_api
from nova_lease import params as lease_params
from nova_lease.plugins.instance import leases
from nova_lease.plugins.instance import rtype as instance_rtype
# Nova imports the scheduler filter from its configuration inside a fixture
# that forbids os.uname(), which numpy (used by the capacity calendar)
# calls at import time: import it here first.
from nova_lease.scheduler import filters  # noqa: F401
from tests.functional import base


def _table_value(output, prop):
    match = re.search(r'^\|\s*%s\s*\|\s*(.*?)\s*\|$' % re.escape(prop),
                      output, re.MULTILINE)
    return match.group(1) if match else None


class LeaseApiBase(base.LeaseFunctionalBase):

    COMPUTES = {'host1': (8, 16384, 200), 'host2': (8, 16384, 200)}

    def setUp(self):
        super().setUp()
        self.db = db_api.get_database(base.CONF)

    def _date(self, **delta):
        return (self.clock.now + datetime.timedelta(**delta)).strftime(
            '%Y-%m-%d %H:%M')

    def _params(self, **params):
        return jsonutils.dumps(params)

    def _post(self, hints, name='vm', status=202, server_extra=None,
              hint_key='os:scheduler_hints', api=None):
        api = api or self.api
        body = {'server': self._build_server(
            name=name, image_uuid=self.image_id, flavor_id='1',
            networks='none')}
        body['server'].update(server_extra or {})
        if hints is not None:
            body[hint_key] = hints
        return api.api_post('/servers', body,
                            check_response_status=[status])

    def _servers(self):
        return self.admin_api.get_servers(search_opts={'all_tenants': 1})

    def _leases(self):
        return db_api.lease_list(self.db)

    def _wait_all_active(self):
        # Let every build finish before the test ends (harness gotcha 3).
        for server in self._servers():
            self._wait_for_state_change(server, 'ACTIVE')

    def assertNothingLeft(self):
        self.assertEqual([], self._servers())
        self.assertEqual([], self._leases())


class TestLeasedBoot(LeaseApiBase):

    def test_seed_command_through_the_nova_cli(self):
        end = self._date(days=9)
        out = self.nova_cli(
            'boot', '--flavor', '1', '--image', 'fakeimage7',
            '--hint', 'reserved=True', '--hint',
            'lease_params={"name": "lease1", "start": "now", "end": "%s"}'
            % end, 'vm1')
        server_id = _table_value(out, 'id')
        server = self._wait_for_state_change({'id': server_id}, 'ACTIVE')
        [lease] = self._leases()
        self.assertEqual('lease1', lease['name'])
        self.assertEqual('PENDING', lease['status'])
        self.assertEqual(self.api.project_id, lease['project_id'])
        self.assertEqual('fake', lease['user_id'])
        self.assertEqual(self.clock.now, lease['start_date'])
        self.assertEqual(end, lease['end_date'].strftime('%Y-%m-%d %H:%M'))
        [res] = lease['reservations']
        self.assertEqual(('virtual:instance', server_id, 'pending'),
                         (res['resource_type'], res['resource_id'],
                          res['status']))
        self.assertEqual(
            {'vcpus': 1, 'memory_mb': 512, 'disk_gb': 1, 'index': 0,
             'flavor_id': '1'}, res['properties'])
        self.assertEqual({'lease_id': lease['id'], 'lease_status': 'pending'},
                         server['metadata'])
        # start (released: linked), before_end 60 min before end, end
        self.assertEqual(
            [('start_lease', lease['start_date'], None),
             ('before_end_lease',
              lease['end_date'] - datetime.timedelta(minutes=60), None),
             ('end_lease', lease['end_date'], None)],
            [(e['event_type'], e['time'], e['next_attempt_at'])
             for e in lease['events']])
        shown = self.nova_cli('show', 'vm1')
        self.assertEqual({'lease_id': lease['id'], 'lease_status': 'pending'},
                         jsonutils.loads(_table_value(shown, 'metadata')))

    def test_list_values_and_legacy_hint_key(self):
        # Nova's tests use oslo.messaging's in-memory "test" notifier.
        from oslo_messaging.notify import _impl_test
        _impl_test.reset()
        params = self._params(start='now', duration='2h')
        self._post({'reserved': ['true'], 'lease_params': [params]},
                   hint_key='OS-SCH-HNT:scheduler_hints', name='legacy')
        [lease] = self._leases()
        for _ in range(50):
            sent = [m for _c, m, _p, _r in _impl_test.NOTIFICATIONS
                    if m['event_type'] == 'lease.create']
            if sent:
                break
            time.sleep(0.1)
        [message] = sent
        data = message['payload']['nova_object.data']
        self.assertEqual((lease['id'], 'PENDING'),
                         (data['id'], data['status']))
        self.assertEqual(lease['reservations'][0]['resource_id'],
                         data['reservations'][0]['resource_id'])
        self.assertEqual('legacy', lease['name'])   # the server's name
        self.assertEqual(datetime.timedelta(hours=2),
                         lease['end_date'] - lease['start_date'])
        self._wait_for_state_change(
            {'id': lease['reservations'][0]['resource_id']}, 'ACTIVE')

    def test_future_lease_allocations_from_admission(self):
        calls = []

        def allocate(session, conf, flavor, count, start, end):
            calls.append((flavor, count, start, end))
            return [{'host': 'host1', 'start_date': start, 'end_date': end,
                     'vcpus': flavor['vcpus'],
                     'memory_mb': flavor['memory_mb'],
                     'disk_gb': flavor['disk_gb']}] * count

        self.useFixture(base.fixtures.MockPatchObject(
            admission, 'allocate_instances', side_effect=allocate))
        start = self.clock.now.replace(second=0) + datetime.timedelta(
            hours=1)
        end = start + datetime.timedelta(hours=3)
        self._post({'reserved': 'True', 'lease_params': self._params(
            start=self._date(hours=1), end=self._date(hours=4))},
            server_extra={'min_count': 2})
        [lease] = self._leases()
        self.assertEqual([({'vcpus': 1, 'memory_mb': 512, 'disk_gb': 1}, 2,
                           start, end)], calls)
        allocations = db_api.allocation_list(self.db, lease_id=lease['id'])
        self.assertEqual(
            sorted(r['id'] for r in lease['reservations']),
            sorted(a['reservation_id'] for a in allocations))
        # Their servers wait shelved-offloaded, on no host, until the
        # start.
        self.assertEqual(
            [('SHELVED_OFFLOADED', None)] * 2,
            [(s['status'], s['OS-EXT-SRV-ATTR:host'])
             for s in self._servers()])

    def test_no_capacity_is_409_and_nothing_left(self):
        self.useFixture(base.fixtures.MockPatchObject(
            admission, 'allocate_instances', side_effect=admission.NoCapacity(
                what='1 instance', start='a', end='b', reason='full')))
        resp = self._post({'reserved': 'True', 'lease_params': self._params(
            start=self._date(hours=1), duration='1h')}, status=409)
        self.assertEqual(409, resp.body['conflictingRequest']['code'])
        self.assertIn('full', resp.body['conflictingRequest']['message'])
        self.assertNothingLeft()

    def test_multi_create_links_every_server(self):
        params = self._params(start='now', duration='1d')
        resp = self._post({'reserved': 'True', 'lease_params': params},
                          server_extra={'min_count': 2, 'max_count': 3})
        first = resp.body['server']['id']
        [lease] = self._leases()
        ids = [r['resource_id'] for r in sorted(
            lease['reservations'], key=lambda r: r['properties']['index'])]
        self.assertEqual(3, len(set(ids)))
        self.assertEqual(first, ids[0])
        servers = {s['id']: s for s in self._servers()}
        self.assertEqual(set(ids), set(servers))
        for server_id in ids:
            server = self._wait_for_state_change({'id': server_id}, 'ACTIVE')
            self.assertEqual(lease['id'], server['metadata']['lease_id'])

    def test_multi_create_with_return_reservation_id(self):
        params = self._params(start='now', duration='1d')
        resp = self._post({'reserved': 'True', 'lease_params': params},
                          server_extra={'min_count': 2,
                                        'return_reservation_id': True})
        self.assertIn('reservation_id', resp.body)
        [lease] = self._leases()
        ids = sorted(r['resource_id'] for r in lease['reservations'])
        self.assertEqual(sorted(s['id'] for s in self._servers()), ids)
        self.assertEqual(2, len(ids))
        for server_id in ids:
            self._wait_for_state_change({'id': server_id}, 'ACTIVE')

    def test_user_metadata_is_kept_and_lease_keys_replaced(self):
        params = self._params(start='now', duration='1d')
        resp = self._post({'lease_params': params}, server_extra={
            'metadata': {'owner': 'me', 'lease_id': 'forged'}})
        server = self._wait_for_state_change(resp.body['server'], 'ACTIVE')
        [lease] = self._leases()
        self.assertEqual({'owner': 'me', 'lease_id': lease['id'],
                          'lease_status': 'pending'}, server['metadata'])

    def test_policy_refuses_before_nova(self):
        self.set_policy({'nova_lease:leases:create': '!'})
        resp = self._post({'reserved': 'True', 'lease_params': self._params(
            duration='1h')}, status=403)
        self.assertIn('nova_lease:leases:create',
                      resp.body['forbidden']['message'])
        self.assertNothingLeft()

    def test_policy_change_applies_to_the_next_boot(self):
        # An edit of the policy file, of our rule or of a Nova rule that
        # it refers to, applies to the very next boot.
        params = self._params(start='now', duration='1h')
        self._post({'lease_params': params}, name='first')
        self._post({'lease_params': params}, name='second')
        for rules in ({'nova_lease:leases:create': '!'},
                      {'project_member_or_admin': 'role:admin'}):
            self.set_policy(rules)
            resp = self._post({'lease_params': params}, name='refused',
                              status=403)
            self.assertIn('nova_lease:leases:create',
                          resp.body['forbidden']['message'])
            self.set_policy({})
            self._post({'lease_params': params}, name='again')
        self.assertEqual(4, len(self._leases()))
        self.assertEqual(4, len(self._servers()))
        self._wait_all_active()

    def test_other_requests_pass_through(self):
        server = self._boot(name='plain')
        self.assertEqual({}, server['metadata'])
        self.assertEqual([], self._leases())
        resp = self._post({'reserved': 'False'}, name='opt-out')
        self._wait_for_state_change(resp.body['server'], 'ACTIVE')
        self.assertEqual([], self._leases())
        self.api.api_post('/servers', {}, check_response_status=[400])
        self.assertEqual(2, len(self.api.get_servers()))


class TestBadInput(LeaseApiBase):
    """Each bad input: 400 naming the field; no server, no lease."""

    def _bad(self, hints, field, server_extra=None):
        resp = self._post(hints, status=400, server_extra=server_extra)
        fault = resp.body['badRequest']
        self.assertEqual(400, fault['code'])
        self.assertIn(field, fault['message'])
        self.assertNothingLeft()
        return fault['message']

    def test_each_bad_input(self):
        ok = dict(start='now', duration='1h')
        cases = [
            ({'reserved': 'True', 'lease_params': '{"name": "x",'},
             'lease_params', 'not valid JSON'),
            ({'reserved': 'True', 'lease_params': self._params(
                colour='red', **ok)}, 'colour', 'unknown key'),
            ({'reserved': 'True', 'lease_params': self._params(
                start=self._date(hours=2), end=self._date(hours=1))},
             'end', 'must be after'),
            ({'reserved': 'True', 'lease_params': self._params(
                start=self._date(hours=-2), end=self._date(hours=1))},
             'start', 'in the past'),
            ({'reserved': 'True', 'lease_params': self._params(
                duration='400d')}, 'duration', 'maximum lease duration'),
            ({'reserved': 'True', 'lease_params': self._params(
                end=self._date(days=400))}, 'end', 'maximum lease duration'),
            ({'reserved': 'True'}, 'lease_params', 'required'),
            ({'reserved': 'yes', 'lease_params': self._params(**ok)},
             'reserved', 'True or False'),
            ({'reserved': ['True', 'False'],
              'lease_params': self._params(**ok)}, 'reserved',
             'more than once'),
            ({'reserved': 'False', 'lease_params': self._params(**ok)},
             'reserved', 'False'),
            ({'reserved': 'True', 'lease_params': {'duration': '1h'}},
             'lease_params', 'must be a string'),
            ({'reserved': 'True', 'lease_params': [{'duration': '1h'}]},
             'lease_params', 'string'),
            ({'reserved': 'True', 'lease_params': self._params(
                on_end='explode', **ok)}, 'on_end', 'one of'),
        ]
        for hints, field, words in cases:
            message = self._bad(hints, field)
            self.assertIn(words, message, hints)

    def test_internal_hints_are_refused(self):
        # The scheduler trusts them: only nova_lease sets them.
        for key in ('nova_lease_id', 'nova_lease_reservation'):
            for hints in ({key: 'x'}, {key: 'x', 'lease_params':
                                       self._params(duration='1h')}):
                message = self._bad(hints, key)
                self.assertIn('internal scheduler hint', message)

    def test_max_lease_duration_option(self):
        self.flags(max_lease_duration='2h', group='nova_lease_api')
        message = self._bad({'reserved': 'True', 'lease_params':
                             self._params(duration='3h')}, 'duration')
        self.assertIn('2h', message)
        self.flags(max_lease_duration='0', group='nova_lease_api')
        self._post({'reserved': 'True', 'lease_params': self._params(
            duration='5000d')})
        self.assertEqual(1, len(self._leases()))
        self._wait_all_active()

    def test_unknown_flavor(self):
        self._bad({'lease_params': self._params(duration='1h')},
                  'flavorRef', server_extra={'flavorRef': 'nope'})


class TestNothingOrphaned(LeaseApiBase):

    def test_nova_refuses_the_boot(self):
        params = self._params(duration='1h')
        resp = self._post({'reserved': 'True', 'lease_params': params},
                          status=400, server_extra={'imageRef': 'nope'})
        self.assertIn('nope', resp.body['badRequest']['message'])
        self.assertNothingLeft()

    def test_nova_create_fails(self):
        self.useFixture(base.fixtures.MockPatchObject(
            nova_compute_api.API, 'create',
            side_effect=nova_exception.PortInUse(port_id='p1')))
        self._post({'reserved': 'True', 'lease_params': self._params(
            duration='1h')}, status=409)
        self.assertNothingLeft()

    def test_recording_after_create_fails(self):
        self.useFixture(base.fixtures.MockPatchObject(
            leases, 'link_instances',
            side_effect=db_exc.DBConnectionError('db gone')))
        for extra in ({}, {'min_count': 2}):
            resp = self._post({'reserved': 'True', 'lease_params':
                               self._params(duration='1h')}, status=500,
                              server_extra=extra)
            message = resp.body['computeFault']['message']
            # The database's words stay in the log; the request id is
            # what the user gets.
            self.assertNotIn('db gone', message)
            self.assertIn(resp.headers['x-compute-request-id'], message)
            self.assertIn('were deleted', message)
            self.assertNothingLeft()

    def test_link_is_a_compare_and_set(self):
        # Someone else linked the reservation between the record and the
        # link: the link refuses (StatusConflict), everything goes.
        original = db_api.reservations_link

        def racing(db, links, **kwargs):
            for reservation_id, _ in links:
                db_api.reservation_update(db, reservation_id,
                                          {'resource_id': 'someone-else'})
            return original(db, links, **kwargs)

        self.useFixture(base.fixtures.MockPatchObject(
            db_api, 'reservations_link', side_effect=racing))
        resp = self._post({'reserved': 'True', 'lease_params':
                           self._params(duration='1h')}, status=500)
        message = resp.body['computeFault']['message']
        self.assertIn(resp.headers['x-compute-request-id'], message)
        self.assertIn('were deleted', message)
        self.assertNothingLeft()

    def test_finding_the_servers_fails(self):
        orig = nova_compute_api.API.get_all
        calls = []

        def get_all(api, *args, **kwargs):
            calls.append(args)
            if len(calls) == 1:
                raise RuntimeError('cell down')
            return orig(api, *args, **kwargs)

        with mock.patch.object(nova_compute_api.API, 'get_all', get_all):
            self._post({'reserved': 'True', 'lease_params':
                        self._params(duration='1h')}, status=500,
                       server_extra={'min_count': 2})
        self.assertNothingLeft()


class TestLinkInstances(LeaseApiBase):
    """leases.link_instances: one transaction, nothing read back."""

    def _lease(self, count):
        now = self.clock.now
        params = lease_params.LeaseParams(
            name='l', start=now, end=now + datetime.timedelta(hours=1),
            start_now=True)
        return instance_rtype.create_instance_lease(
            self.db, base.CONF, params, 'p', 'u',
            {'vcpus': 1, 'memory_mb': 512, 'disk_gb': 1}, count,
            flavor_id='1', now=now)

    @staticmethod
    def _by_index(reservations):
        return sorted(reservations, key=lambda r: r['properties']['index'])

    def test_fewer_servers_than_reservations(self):
        lease = self._lease(3)
        [start] = [e for e in lease['events']
                   if e['event_type'] == 'start_lease']
        self.assertIsNotNone(start['next_attempt_at'])     # held
        linked = leases.link_instances(self.db, lease, ['s0', 's1'])
        stored = db_api.lease_get(self.db, lease['id'])
        # The third reservation is gone; the start is released; what
        # link_instances returns is what is stored.
        self.assertEqual(['s0', 's1'], [
            r['resource_id'] for r in self._by_index(stored['reservations'])])
        for got in (linked, stored):
            self.assertEqual(
                [(r['id'], r['resource_id'])
                 for r in self._by_index(stored['reservations'])],
                [(r['id'], r['resource_id'])
                 for r in self._by_index(got['reservations'])])
            self.assertEqual(
                [None] * 3, [e['next_attempt_at'] for e in got['events']])
            self.assertEqual(self.clock.now,
                             self._by_index(got['reservations'])[0][
                                 'updated_at'])
        # The scheduler's change journal names every reservation linked
        # or deleted.
        journaled = {rid for _, _, rid in db_api.change_rows(self.db, 0)}
        self.assertLessEqual({r['id'] for r in lease['reservations']},
                             journaled)

    def test_a_reservation_is_linked_once(self):
        lease = self._lease(1)
        leases.link_instances(self.db, lease, ['s0'])
        self.assertRaises(db_api.StatusConflict, leases.link_instances,
                          self.db, lease, ['s1'])
        [res] = db_api.lease_get(self.db, lease['id'])['reservations']
        self.assertEqual('s0', res['resource_id'])

    def test_a_claimed_start_is_not_released(self):
        # The engine claimed the start meanwhile: the link refuses, and
        # rolls back its reservation update.
        lease = self._lease(1)
        [start] = [e for e in lease['events']
                   if e['event_type'] == 'start_lease']
        db_api.event_update(self.db, start['id'], {'status': 'IN_PROGRESS'})
        self.assertRaises(db_api.StatusConflict, leases.link_instances,
                          self.db, lease, ['s0'])
        [res] = db_api.lease_get(self.db, lease['id'])['reservations']
        self.assertIsNone(res['resource_id'])

    def test_more_servers_than_reservations(self):
        lease = self._lease(1)
        self.assertRaises(leases.LinkError, leases.link_instances, self.db,
                          lease, ['s0', 's1'])


class TestDefaultLease(LeaseApiBase):

    def setUp(self):
        super().setUp()
        self.flags(default_lease=True, group='nova_lease')

    def test_plain_boot_gets_a_30_day_lease(self):
        server = self._boot(name='lab-vm')
        [lease] = self._leases()
        self.assertEqual(datetime.timedelta(days=30),
                         lease['end_date'] - lease['start_date'])
        self.assertEqual('lab-vm', lease['name'])
        self.assertEqual(server['id'],
                         lease['reservations'][0]['resource_id'])
        self.assertTrue(lease['reservations'][0]['properties'][
            'default_lease'])
        self.assertEqual(lease['id'], server['metadata']['lease_id'])

    def test_lease_params_override_and_exempt_projects(self):
        self._post({'lease_params': self._params(duration='2h')},
                   name='own')
        [lease] = self._leases()
        self.assertEqual(datetime.timedelta(hours=2),
                         lease['end_date'] - lease['start_date'])
        self.flags(default_lease_exempt_projects=[self.api.project_id],
                   group='nova_lease')
        server = self._boot(name='exempt')
        self.assertEqual({}, server['metadata'])
        self.assertEqual(1, len(self._leases()))
        self._wait_for_state_change(
            {'id': lease['reservations'][0]['resource_id']}, 'ACTIVE')
