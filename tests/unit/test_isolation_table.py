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
"""The member-isolation table (tests/isolation_table.py) covers every
route of the lease API: a new endpoint needs its isolation row."""

import testtools

from nova_lease.api_ext.lease_api import microversion
from nova_lease.api_ext.lease_api import router
from tests import isolation_table as table


class IsolationTableTest(testtools.TestCase):

    def test_every_route_of_the_router_has_a_row(self):
        missing = sorted(table.routes() - table.covered())
        self.assertEqual([], missing,
                         'routes of the lease API without a row in '
                         'tests/isolation_table.py')

    def test_every_row_names_a_real_route(self):
        unknown = sorted(table.covered() - table.routes())
        self.assertEqual([], unknown)

    def test_rows_send_what_their_route_serves(self):
        for row in table.ROWS:
            method, template = row.route
            if method == 'NOVA':
                continue
            self.assertEqual(method, row.method, row)
            path = row.path[len(table.LEASES):].split('?')[0]
            matched, _kwargs = router._match(
                path, microversion.parse(microversion.MAX_VERSION))
            self.assertIs(router.ROUTES[template][method].handler,
                          matched[method].handler, row)

    def test_expected_answers_are_refusals_or_plain_successes(self):
        for row in table.ROWS:
            self.assertTrue(row.expect, row)
            for status in row.expect:
                self.assertIn(status, (200, 202, 400, 403, 404, 409), row)
            if row.needs is not None:
                self.assertIn(row.needs, ('F1', 'F2', 'gate'), row)

    def test_a_new_route_without_a_row_is_caught(self):
        routes = dict(router.ROUTES, **{'/new-thing': {
            'GET': router.Route(None)}})
        self.patch(router, 'ROUTES', routes)
        self.assertIn(('GET', '/new-thing'),
                      table.routes() - table.covered())
