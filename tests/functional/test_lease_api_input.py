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
"""Clear errors, no leaks: free text and 500s, on SQLite and PostgreSQL.

* Every free-text field (lease names, extra capabilities of hosts, the
  strings of a host reservation, ids in paths and queries, the lease
  name of a boot hint) refuses control characters (NUL included:
  PostgreSQL cannot store it, and answered a 500) and unpaired surrogates
  with a 400 naming the field; nothing is left behind.
* A 500 carries no database text: the user gets a generic message with
  the request id, the nova-api log gets the details. The database error
  is a real one, raised by a trigger the test installs.
"""

import json

import sqlalchemy as sa

from nova_lease.db import api as db_api
from tests.functional import base
from tests.functional.db import fixtures as db_fixtures
from tests.functional import test_lease_api

PREFIX = test_lease_api.PREFIX
SECRET = 'secret-db-text-42'
BAD_TEXTS = ('nul\x00inside', 'line\nbreak', 'bell\x07', 'c1\x85',
             'surrogate\ud800')


class _InputTests(test_lease_api.LeaseAPIMixin):

    COMPUTES = {'host1': (8, 16384, 200), 'host2': (8, 16384, 200)}

    def _expect_400(self, method, url, body, field, api=None):
        api = api or self.admin_api
        call = {'POST': api.api_post, 'PUT': api.api_put}.get(method)
        if call is None:
            resp = api.api_get(url, check_response_status=[400])
        else:
            resp = call(url, body, check_response_status=[400])
        self.assertEqual(400, resp.status, (url, body))
        message = resp.body['error_message']
        self.assertIn(field, message, (url, body))
        return message

    def test_control_characters_are_400_naming_the_field(self):
        host = self._register('host1', gpu='true')
        lease = self._create(self._lease_body(self._at(hours=1),
                                              self._at(hours=2)))
        lease_url = PREFIX + '/leases/%s' % lease['id']
        counts = self._counts()
        for bad in BAD_TEXTS:
            self._expect_400('POST', PREFIX + '/leases', self._lease_body(
                self._at(hours=3), self._at(hours=4), name=bad), 'name',
                api=self.api)
            self._expect_400('PUT', lease_url, {'name': bad}, 'name',
                             api=self.api)
            for key, field in (
                    ('availability_zone',
                     'reservations[0].availability_zone'),
                    ('region', 'reservations[0].region'),
                    ('resource_properties',
                     'reservations[0].resource_properties'),
                    ('hypervisor_properties',
                     'reservations[0].hypervisor_properties')):
                value = bad
                if key.endswith('_properties'):
                    value = ['==', '$gpu', bad]
                self._expect_400('POST', PREFIX + '/leases', self._lease_body(
                    self._at(hours=3), self._at(hours=4),
                    reservations=[self._host_res(**{key: value})]), field,
                    api=self.api)
            self._expect_400('POST', PREFIX + '/leases', self._lease_body(
                self._at(hours=3), self._at(hours=4), reservations=[
                    self._host_res(extra_specs={'ssd': bad})]),
                'reservations[0].extra_specs.ssd', api=self.api)
            self._expect_400('POST', PREFIX + '/leases', self._lease_body(
                self._at(hours=3), self._at(hours=4), reservations=[
                    self._host_res(extra_specs={bad: 'true'})]),
                'reservations[0].extra_specs', api=self.api)
            self._expect_400('POST', PREFIX + '/os-hosts',
                             {'name': 'host2', 'rack': bad}, 'rack')
            self._expect_400('POST', PREFIX + '/os-hosts', {'name': bad},
                             'name')
            self._expect_400('PUT', PREFIX + '/os-hosts/%s' % host['id'],
                             {'values': {'gpu': bad}}, 'gpu')
        # Ids in paths and queries (percent-encoded, as clients send
        # them).
        for encoded in ('%00', 'x%0Ay', '%C2%85'):
            self._expect_400('GET', PREFIX + '/leases/' + encoded, None,
                             'lease_id', api=self.api)
            self._expect_400('GET', PREFIX + '/os-hosts/' + encoded, None,
                             'host_id')
            self._expect_400('GET', PREFIX + '/os-hosts/allocations'
                             '?lease_id=' + encoded, None, 'lease_id')
        # Nothing was recorded or changed.
        self.assertEqual(counts, self._counts())
        self.assertEqual(lease['name'], self.api.api_get(
            lease_url).body['lease']['name'])
        self.assertEqual('true', self.admin_api.api_get(
            PREFIX + '/os-hosts/%s' % host['id']).body['host']['gpu'])
        self.assertEqual(['host1'], [h['hypervisor_hostname'] for h in
                                     db_api.host_list(self.lease_db)])

    def test_boot_hint_lease_name_with_control_characters_is_400(self):
        for bad in BAD_TEXTS:
            body = {'server': self._build_server(
                name='vm', image_uuid=self.image_id, flavor_id='1',
                networks='none'), 'os:scheduler_hints': {
                    'reserved': 'True',
                    'lease_params': '{"name": %s, "duration": "1h"}'
                    % json.dumps(bad)}}
            resp = self.api.api_post('/servers', body,
                                     check_response_status=[400])
            message = resp.body['badRequest']['message']
            self.assertIn('lease_params', message)
            self.assertIn('name', message)
        # The server name is the lease name by default.
        body = {'server': self._build_server(
            name='vm\x00', image_uuid=self.image_id, flavor_id='1',
            networks='none'), 'os:scheduler_hints': {
                'reserved': 'True', 'lease_params': '{"duration": "1h"}'}}
        resp = self.api.api_post('/servers', body,
                                 check_response_status=[400])
        self.assertIn("'name'", resp.body['badRequest']['message'])
        self.assertEqual([], db_api.lease_list(self.lease_db))
        self.assertEqual([], self.api.get_servers())

    # -- 500s ----------------------------------------------------------------

    def _fail_in_database(self, table, when):
        """Make every ``when`` (INSERT/UPDATE) on table fail with SECRET."""
        raise NotImplementedError()

    def _assert_generic_500(self, resp, message):
        self.assertNotIn(SECRET, message)
        self.assertNotIn('insert into', message.lower())
        self.assertNotIn('update reservations', message.lower())
        self.assertIn(resp.headers['x-compute-request-id'], message)

    def test_lease_api_500_carries_no_database_text(self):
        self._register('host1')
        self._fail_in_database('leases', 'INSERT')
        resp = self.api.api_post(PREFIX + '/leases', self._lease_body(
            self._at(hours=1), self._at(hours=2)),
            check_response_status=[500])
        self._assert_generic_500(resp, resp.body['error_message'])
        self.assertEqual((0, 0, 0), self._counts())

    def test_boot_500_carries_no_database_text(self):
        # The lease is recorded, Nova creates the server, linking it to
        # the lease fails in the database: the server is deleted, the
        # lease removed, and the 500 says so without the database text.
        self._fail_in_database('reservations', 'UPDATE')
        hints = {'reserved': 'True',
                 'lease_params': '{"name": "l", "duration": "1h"}'}
        body = {'server': self._build_server(
            name='vm', image_uuid=self.image_id, flavor_id='1',
            networks='none'), 'os:scheduler_hints': hints}
        resp = self.api.api_post('/servers', body,
                                 check_response_status=[500])
        self._assert_generic_500(
            resp, resp.body['computeFault']['message'])
        self.assertEqual([], db_api.lease_list(self.lease_db))
        for server in self.admin_api.get_servers(
                search_opts={'all_tenants': 1}):
            self._wait_until_deleted(server)


class InputSQLiteTest(_InputTests, base.LeaseFunctionalBase):

    def _fail_in_database(self, table, when):
        engine = sa.create_engine(self.lease_db_url)
        name = 'fail_%s_%s' % (table, when.lower())
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "CREATE TRIGGER %s BEFORE %s ON %s BEGIN "
                "SELECT RAISE(ABORT, '%s'); END" % (name, when, table,
                                                    SECRET))
        engine.dispose()


class InputPostgreSQLTest(_InputTests, base.LeaseFunctionalBase):

    def _setup_lease_db(self):
        backend = db_fixtures.POSTGRESQL
        db_fixtures.require(self, backend)
        self.lease_db_url = self.useFixture(
            db_fixtures.Database(backend)).url
        self.flags(connection=self.lease_db_url, group='nova_lease_database')
        self.addCleanup(db_api.reset_databases)

    def _fail_in_database(self, table, when):
        engine = sa.create_engine(self.lease_db_url)
        name = 'fail_%s_%s' % (table, when.lower())
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "CREATE FUNCTION %s() RETURNS trigger AS $$ BEGIN "
                "RAISE EXCEPTION '%s'; END $$ LANGUAGE plpgsql"
                % (name, SECRET))
            conn.exec_driver_sql(
                'CREATE TRIGGER %s BEFORE %s ON %s FOR EACH ROW EXECUTE '
                'FUNCTION %s()' % (name, when, table, name))
        engine.dispose()

        def drop():
            engine = sa.create_engine(self.lease_db_url)
            with engine.begin() as conn:
                conn.exec_driver_sql('DROP TRIGGER IF EXISTS %s ON %s'
                                     % (name, table))
                conn.exec_driver_sql('DROP FUNCTION IF EXISTS %s()' % name)
            engine.dispose()

        self.addCleanup(drop)
