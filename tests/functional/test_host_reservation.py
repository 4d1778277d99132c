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
"""Host leases end to end: lease API -> engine -> physical:host plugin.

The engine is built as nova-lease-engine builds it (its own ConfigOpts
from a config file, a password session against the harness's Keystone,
python-novaclient at 2.96), with the physical:host plugin, and driven with
the harness clock.
"""


import datetime
import time

import fixtures

from nova_lease.db import api as db_api
from nova_lease.periodic import engine as lease_engine
from nova_lease.plugins.host import aggregates as host_aggregates
from nova_lease.plugins.host import plugin as host_plugin
from tests.functional import base
from tests.functional import test_lease_api

PREFIX = test_lease_api.PREFIX


class HostLeaseMixin(test_lease_api.LeaseAPIMixin):
    """Helpers for host-lease tests: an engine with the physical:host
    plugin (``self.engine``, ``self.plugin``) and boots with the
    ``reservation`` hint.
    """

    def setUp(self):
        super().setUp()
        self.engine, self.plugin = self._engine()

    #: Other resource plugins of the engine: {resource type: class}.
    MORE_PLUGINS = {}

    def _engine(self, **overrides):
        types = [host_plugin.RESOURCE_TYPE] + sorted(self.MORE_PLUGINS)
        options = {'resource_plugins': ','.join(types),
                   'max_retries': 1, 'retry_interval': 1,
                   'plugin_call_timeout': 60}
        options.update(overrides)
        conf = self.engine_conf(**options)
        plugin = host_plugin.HostPlugin(conf)
        plugins = {rtype: cls(conf)
                   for rtype, cls in self.MORE_PLUGINS.items()}
        plugins[host_plugin.RESOURCE_TYPE] = plugin
        engine = lease_engine.Engine(conf, plugins=plugins)
        self.addCleanup(engine.close)
        return engine, plugin

    def _lease(self, lease_id):
        return self.api.api_get(PREFIX + '/leases/%s' % lease_id).body[
            'lease']

    def _hosts_of(self, lease):
        return sorted(a['host'] for a in db_api.allocation_list(
            self.lease_db, lease_id=lease['id']))

    def _boot_hinted(self, reservation_id, name='hinted', api=None,
                     wait='ACTIVE'):
        """Boot with ``os:scheduler_hints: {"reservation": <id>}``, as
        ``nova boot --hint reservation=<id>`` sends it.
        """
        return self._boot({'reservation': reservation_id}, name=name,
                          api=api, wait=wait)

    def _host(self, server):
        return self.admin_api.get_server(server['id'])[
            'OS-EXT-SRV-ATTR:host']

    def _assert_no_valid_host(self, server):
        """The server ends in ERROR with a NoValidHost fault."""
        server = self._wait_for_state_change(server, 'ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        self.assertIsNone(server['OS-EXT-SRV-ATTR:host'])
        return server


class HostReservationTest(HostLeaseMixin, base.LeaseFunctionalBase):

    def test_host_lease_starting_now(self):
        self._register('host1', ssd='true')
        self._register('host2', ssd='false')
        res = self._host_res(
            availability_zone='nova',
            extra_specs={'ssd': 'true',
                         'capabilities:cpu_info:arch': 'x86_64'})
        lease = self._create(self._lease_body(
            'now', self._at(hours=2), reservations=[res]))
        reservation_id = lease['reservations'][0]['id']
        self.assertEqual(['host1'], self._hosts_of(lease))

        # Start: the reservation's aggregate holds the host, the free
        # pool does not any more.
        self.assertEqual(1, self.engine.process_due())
        lease = self._lease(lease['id'])
        self.assertEqual('ACTIVE', lease['status'])
        self.assertEqual('active', lease['reservations'][0]['status'])
        name = host_aggregates.aggregate_name(reservation_id)
        aggregate = self._aggregate(name)
        self.assertEqual(['host1'], aggregate['hosts'])
        self.assertEqual({
            host_aggregates.META_RESERVATION: reservation_id,
            host_aggregates.META_LEASE: lease['id'],
            host_aggregates.META_PROJECT: self.api.project_id,
        }, aggregate['metadata'])
        self.assertEqual(aggregate['id'],
                         lease['reservations'][0]['aggregate_id'])
        self.assertEqual(['host2'], self._aggregate('freepool')['hosts'])

        # A retried start is harmless.
        self.plugin.on_start(lease, db_api.reservation_get(
            self.lease_db, reservation_id))
        self.assertEqual(['host1'], self._aggregate(name)['hosts'])
        self.assertEqual(['host2'], self._aggregate('freepool')['hosts'])

        # A server left on the host at the end is deleted (the owner
        # boots it with the hint; tests/functional/
        # test_host_reservation_hint.py has the filter's cases).
        server = self._boot_hinted(reservation_id, name='on-reserved')
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])

        # End: before_end first (1 h before), then the end.
        self.clock.advance(hours=1)
        self.assertEqual(1, self.engine.process_due())
        self.clock.advance(hours=1)
        self.assertEqual(1, self.engine.process_due())
        self._wait_until_deleted(server)
        lease = self._lease(lease['id'])
        self.assertEqual('TERMINATED', lease['status'])
        self.assertEqual(['DONE', 'DONE', 'DONE'],
                         [e['status'] for e in lease['events']])
        self.assertIsNone(self._aggregate(name))
        self.assertEqual(['host1', 'host2'],
                         sorted(self._aggregate('freepool')['hosts']))
        # A retried end is harmless too.
        self.plugin.on_end(lease, db_api.reservation_get(
            self.lease_db, reservation_id))
        self.assertIsNone(self._aggregate(name))
        self.assertEqual(['host1', 'host2'],
                         sorted(self._aggregate('freepool')['hosts']))

    def test_lease_with_no_reservation_runs_its_course(self):
        # Valid in Blazar (reservations absent or empty): created with
        # python-blazarclient's lease.create, moved, started and ended by
        # the engine.
        from blazarclient import client as blazar_client
        client = blazar_client.Client(
            session=self.keystone.session('fake'),
            endpoint_override=self.keystone.reservation_url)
        lease = client.lease.create('empty', self._at(hours=1),
                                    self._at(hours=2), [], [])
        self.assertEqual(('PENDING', []),
                         (lease['status'], lease['reservations']))
        self.assertEqual(['start_lease', 'before_end_lease', 'end_lease'],
                         [e['event_type'] for e in lease['events']])
        # Without the key at all (REST), too.
        body = self._lease_body(self._at(hours=1), self._at(hours=2),
                                name='no-key')
        del body['reservations']
        other = self._create(body)
        self.assertEqual([], other['reservations'])
        # A pending one moves (nothing to re-book).
        other = client.lease.update(other['id'], end_date=self._at(hours=3))
        self.assertEqual(self._at(hours=3).replace(' ', 'T') + ':00.000000',
                         other['end_date'])

        self.clock.advance(hours=1)
        self.assertEqual(2, self.engine.process_due())
        self.assertEqual('ACTIVE', client.lease.get(lease['id'])['status'])
        self.clock.advance(hours=1)
        self.engine.process_due()
        self.assertEqual('TERMINATED',
                         client.lease.get(lease['id'])['status'])
        self.assertEqual('ACTIVE', self._lease(other['id'])['status'])
        self.clock.advance(hours=1)
        self.engine.process_due()
        self.assertEqual('TERMINATED', self._lease(other['id'])['status'])
        # Nothing was allocated, and the lease can be deleted.
        self.assertEqual([], db_api.allocation_list(self.lease_db))
        client.lease.delete(lease['id'])
        self.assertEqual([other['id']],
                         [x['id'] for x in client.lease.list()])

    def test_back_to_back_leases_both_run(self):
        self._register('host1')
        first = self._create(self._lease_body(
            self._at(hours=1), self._at(hours=2), name='first'))
        second = self._create(self._lease_body(
            self._at(hours=2), self._at(hours=3), name='second'))
        self._create(self._lease_body(
            self._at(hours=1, minutes=30), self._at(hours=2, minutes=30),
            name='third'), status=409)
        self.assertEqual(0, self.engine.process_due())
        self.clock.advance(hours=1)
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease(first['id'])['status'])
        self.assertEqual([], self._aggregate('freepool')['hosts'])
        # At 2 h the first ends before the second starts.
        self.clock.advance(hours=1)
        self.engine.process_due()
        self.assertEqual('TERMINATED', self._lease(first['id'])['status'])
        self.assertEqual('ACTIVE', self._lease(second['id'])['status'])
        res2 = self._lease(second['id'])['reservations'][0]['id']
        self.assertEqual(['host1'], self._aggregate(
            host_aggregates.aggregate_name(res2))['hosts'])
        self.clock.advance(hours=1)
        self.engine.process_due()
        self.assertEqual('TERMINATED', self._lease(second['id'])['status'])
        self.assertEqual(['host1'], self._aggregate('freepool')['hosts'])

    def test_back_to_back_start_waits_for_the_end(self):
        # The first lease's end takes its time (servers to clear, Nova
        # busy): the second lease's start on the same host must not run
        # beside it, or the end puts the host back into the free pool
        # after the start took it out.
        self._register('host1')
        first = self._create(self._lease_body(
            self._at(hours=1), self._at(hours=2), name='first'))
        second = self._create(self._lease_body(
            self._at(hours=2), self._at(hours=3), name='second'))
        self.clock.advance(hours=1)
        self.engine.process_due()
        slow_end = self.plugin.on_end

        def on_end(lease, reservation):
            time.sleep(1.0)
            return slow_end(lease, reservation)
        self.useFixture(fixtures.MockPatchObject(self.plugin, 'on_end',
                                                 side_effect=on_end))
        self.clock.advance(hours=1)
        self.engine.process_due()
        self.assertEqual('TERMINATED', self._lease(first['id'])['status'])
        self.assertEqual('ACTIVE', self._lease(second['id'])['status'])
        res2 = self._lease(second['id'])['reservations'][0]['id']
        self.assertEqual(['host1'], self._aggregate(
            host_aggregates.aggregate_name(res2))['hosts'])
        self.assertEqual([], self._aggregate('freepool')['hosts'])

    def test_delete_active_lease_ends_it_and_shelve_on_end(self):
        self._register('host1')
        lease = self._create(self._lease_body(
            'now', self._at(hours=5), on_end='shelve'))
        self.engine.process_due()
        lease = self._lease(lease['id'])
        self.assertEqual('ACTIVE', lease['status'])
        server = self._boot_hinted(lease['reservations'][0]['id'])
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])
        url = PREFIX + '/leases/%s' % lease['id']
        self.api.api_delete(url, check_response_status=[204])
        self.assertEqual(1, self.engine.process_due())
        lease = self._lease(lease['id'])
        self.assertEqual('TERMINATED', lease['status'])
        server = self.api.get_server(server['id'])
        self.assertEqual('SHELVED_OFFLOADED', server['status'])
        self.assertEqual(['host1'], self._aggregate('freepool')['hosts'])
        # Its RequestSpec keeps the hint of a reservation that is over:
        # it cannot be unshelved (NoValidHost,
        # doc/source/reference/scheduling.rst).
        self.api.post_server_action(server['id'], {'unshelve': None})
        self._wait_for_instance_action_event(
            server, 'unshelve', 'schedule_instances', 'Error')
        server = self.api.get_server(server['id'])
        self.assertEqual('SHELVED_OFFLOADED', server['status'])
        self.assertIsNone(server['OS-EXT-STS:task_state'])
        # The host is free right away for another lease.
        self._create(self._lease_body('now', self._at(hours=1)))
        # A TERMINATED lease is removed by a delete.
        self.api.api_delete(url, check_response_status=[204])
        self.api.api_get(url, check_response_status=[404])

    def test_aggregate_named_before_the_upgrade_is_released(self):
        # Aggregates are named after the reservation id (as in Blazar);
        # one made by an earlier release was "reservation-<id>": its
        # lease still ends cleanly.
        self._register('host1')
        lease = self._create(self._lease_body('now', self._at(hours=1)))
        rid = lease['reservations'][0]['id']
        self.engine.process_due()
        aggregate = self._aggregate(rid)
        self.assertEqual(['host1'], aggregate['hosts'])
        self.admin_api.api_put('/os-aggregates/%s' % aggregate['id'], {
            'aggregate': {'name': 'reservation-%s' % rid}})
        self.api.api_delete(PREFIX + '/leases/%s' % lease['id'],
                            check_response_status=[204])
        self.engine.process_due()
        self.assertEqual('TERMINATED', self._lease(lease['id'])['status'])
        self.assertEqual(['host1'], self._aggregate('freepool')['hosts'])
        self.assertIsNone(self._aggregate('reservation-%s' % rid))
        self.assertIsNone(self._aggregate(rid))

    def test_end_in_the_current_minute_ends_the_lease_now(self):
        # Blazar's dates have no seconds and it compares them with the
        # current minute: blazar-tempest-plugin's update test sends
        # "now + 30 s" cut to the minute, which may be seconds ago.
        self._register('host1')
        lease = self._create(self._lease_body('now', self._at(hours=1)))
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        self.clock.advance(minutes=5)
        if self.clock.now.second == 0:
            self.clock.advance(seconds=1)
        url = PREFIX + '/leases/%s' % lease['id']
        body = self.api.api_put(url, {'end_date': self._at(minutes=-1)},
                                check_response_status=[400]).body
        self.assertIn('is in the past', body['error_message'])
        this_minute = self._at()
        self.assertLess(this_minute, self.clock.now.strftime(
            '%Y-%m-%d %H:%M:%S'))
        updated = self.api.api_put(url, {'end_date': this_minute}).body[
            'lease']
        self.assertEqual(self.clock.now.strftime('%Y-%m-%dT%H:%M:%S'),
                         updated['end_date'][:19])
        self.engine.process_due()    # before_end_lease, end_lease
        self.assertEqual('TERMINATED', self._lease(lease['id'])['status'])
        self.assertEqual(['host1'], self._aggregate('freepool')['hosts'])

    def test_extend_and_shorten_active_lease(self):
        self._register('host1')
        lease = self._create(self._lease_body('now', self._at(hours=1)))
        self._create(self._lease_body(
            self._at(hours=3), self._at(hours=4), name='later'))
        self.engine.process_due()
        url = PREFIX + '/leases/%s' % lease['id']
        # The start is frozen; the end can grow while the host is free.
        body = self.api.api_put(url, {'start_date': self._at(hours=1)},
                                check_response_status=[400]).body
        self.assertIn('start_date', body['error_message'])
        updated = self.api.api_put(
            url, {'end_date': self._at(hours=2)}).body['lease']
        self.assertEqual(self._at(hours=2), updated['end_date'][:16].replace(
            'T', ' '))
        # The warning of the 1 h lease was due half-way (30 minutes
        # before its end, not at its start); the new end moves it 60
        # minutes before itself.
        befores = [(e['status'], e['time'][:16].replace('T', ' '))
                   for e in updated['events']
                   if e['event_type'] == 'before_end_lease']
        self.assertEqual([('UNDONE', self._at(hours=1))], sorted(befores))
        end_event = [e for e in updated['events']
                     if e['event_type'] == 'end_lease'][0]
        self.assertEqual(self._at(hours=2),
                         end_event['time'][:16].replace('T', ' '))
        body = self.api.api_put(url, {'end_date': self._at(hours=3,
                                                           minutes=30)},
                                check_response_status=[409]).body
        self.assertIn('host1', body['error_message'])
        self.assertIn('another lease', body['error_message'])
        self.assertEqual(updated['end_date'],
                         self._lease(lease['id'])['end_date'])
        # Shortened: the end event moves, the engine ends it then.
        self.api.api_put(url, {'end_date': self._at(minutes=30)})
        self.clock.advance(minutes=30)
        self.engine.process_due()
        self.assertEqual('TERMINATED', self._lease(lease['id'])['status'])


class IdleHostsTest(HostLeaseMixin, base.LeaseFunctionalBase):
    """``GET /os-hosts/idle``: when registered hosts have no demand."""

    CLOCK_START = datetime.datetime(2030, 1, 1, 12, 0, 0)

    def _idle(self, status=200, **query):
        url = PREFIX + '/os-hosts/idle'
        if query:
            url += '?' + '&'.join('%s=%s' % kv for kv in sorted(
                query.items()))
        resp = self.admin_api.api_get(url, check_response_status=[status])
        return resp.body

    def test_idle_periods_and_until(self):
        self._register('host1')
        self._register('host2')
        # host1 is promised from 14:00 to 15:00; host2 never.
        lease = self._create(self._lease_body('2030-01-01 14:00',
                                              '2030-01-01 15:00'))
        self.assertEqual(['host1'], self._hosts_of(lease))
        body = self._idle(start='2030-01-01%2012:00',
                          end='2030-01-01%2016:00', min_hours=1)
        hosts = {h['hypervisor_hostname']: h for h in body['hosts']}
        self.assertEqual(['host1', 'host2'], sorted(hosts))
        self.assertEqual(
            [('2030-01-01T12:00:00.000000', '2030-01-01T14:00:00.000000',
              2.0),
             ('2030-01-01T15:00:00.000000', '2030-01-01T16:00:00.000000',
              1.0)],
            [(p['start'], p['end'], p['hours'])
             for p in hosts['host1']['idle_periods']])
        self.assertEqual('2030-01-01T14:00:00.000000',
                         hosts['host1']['idle_until'])
        self.assertEqual((4.0, None), (hosts['host2']['idle_hours'],
                                       hosts['host2']['idle_until']))
        # At least 2.5 h in one piece: host2 only.
        body = self._idle(start='2030-01-01%2012:00',
                          end='2030-01-01%2016:00', min_hours=2.5)
        self.assertEqual(['host2'], [h['hypervisor_hostname']
                                     for h in body['hosts']])
        # A host that runs a server (an admin forced it there) is never
        # idle.
        forced = {'server': self._build_server(
            name='forced', image_uuid=self.image_id, flavor_id='1',
            networks='none', az='nova:host2')}
        self._wait_for_state_change(self.admin_api.post_server(forced),
                                    'ACTIVE')
        body = self._idle(start='2030-01-01%2012:00',
                          end='2030-01-01%2016:00', min_hours=2.5)
        self.assertEqual([], body['hosts'])
        # Defaults: from now, for a day.
        body = self._idle()
        self.assertEqual(('2030-01-01T12:00:00.000000',
                          '2030-01-02T12:00:00.000000'),
                         (body['start'], body['end']))
        # Bad input names the field; users may not ask.
        for query, field in (({'min_hours': 'many'}, 'min_hours'),
                             ({'end': '2029-12-31%2010:00'}, 'end'),
                             ({'start': 'soon'}, 'start')):
            body = self._idle(status=400, **query)
            self.assertIn("'%s'" % field, body['error_message'])
        self.api.api_get(PREFIX + '/os-hosts/idle',
                         check_response_status=[403])
