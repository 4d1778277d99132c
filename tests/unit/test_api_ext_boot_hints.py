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
"""The boot-hint rules of the paste filter (no Nova running)."""

import datetime

from oslo_serialization import jsonutils
import testtools

from nova_lease.api_ext import boot_hints
from nova_lease import params
from tests import unit

NOW = datetime.datetime(2026, 11, 20, 10, 0)


class HintRulesTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = unit.lease_conf_opts()

    def _request(self, hints, project='p1', name='vm'):
        return boot_hints.lease_request(self.conf, hints, project, name, NOW)

    def test_reserved_values(self):
        for value, expected in (('True', True), ('TRUE', True),
                                (' false ', False), (['True'], True),
                                (['true', 'true'], True), (True, True),
                                (False, False)):
            self.assertEqual(expected, boot_hints.parse_reserved(
                {'reserved': value}), value)
        self.assertIsNone(boot_hints.parse_reserved({}))
        for value in ('1', 'yes', '', [], [1], 3, ['True', 'False'],
                      {'a': 1}):
            e = self.assertRaises(boot_hints.HintError,
                                  boot_hints.parse_reserved,
                                  {'reserved': value})
            self.assertEqual('reserved', e.field)
            self.assertIn('reserved', str(e))
            self.assertEqual(400, e.code)

    def test_no_hints_no_lease(self):
        self.assertIsNone(self._request({}))
        self.assertIsNone(self._request({'reserved': 'False'}))
        self.assertIsNone(self._request({'other': 'x'}))

    def test_lease_params_string_or_list(self):
        raw = jsonutils.dumps({'start': 'now', 'duration': '2h'})
        for hints in ({'reserved': 'True', 'lease_params': raw},
                      {'lease_params': [raw]},
                      {'reserved': ['True'], 'lease_params': [raw, raw]}):
            request = self._request(hints)
            self.assertFalse(request.default)
            self.assertEqual('vm', request.params.name)
            self.assertEqual(NOW, request.params.start)
            self.assertEqual(NOW + datetime.timedelta(hours=2),
                             request.params.end)

    def test_refusals_name_the_field(self):
        raw = jsonutils.dumps({'duration': '2h'})
        for hints, field in (
                ({'reserved': 'True'}, 'lease_params'),
                ({'reserved': 'False', 'lease_params': raw}, 'reserved'),
                ({'lease_params': {'duration': '2h'}}, 'lease_params'),
                ({'lease_params': 42}, 'lease_params'),
                ({'lease_params': [raw, '{}']}, 'lease_params'),
                ({'lease_params': '{"x": 1}'}, 'x'),
                ({'lease_params': '{"duration": "366d"}'}, 'duration')):
            e = self.assertRaises(params.exception.Invalid, self._request,
                                  hints)
            self.assertEqual(field, e.field, hints)
            self.assertIn(field, str(e))

    def test_max_lease_duration(self):
        self.conf.set_override('max_lease_duration', '1h', 'nova_lease_api')
        e = self.assertRaises(params.LeaseParamError, self._request,
                              {'lease_params': '{"duration": "61m"}'})
        self.assertIn('1h', str(e))
        self.conf.set_override('max_lease_duration', '0', 'nova_lease_api')
        self.assertEqual(
            NOW + datetime.timedelta(days=5000),
            self._request({'lease_params': '{"duration": "5000d"}'})
            .params.end)

    def test_bad_option_is_not_the_users_fault(self):
        self.conf.set_override('max_lease_duration', 'a year',
                               'nova_lease_api')
        e = self.assertRaises(boot_hints.BadOption, self._request,
                              {'lease_params': '{"duration": "1h"}'})
        self.assertEqual(500, e.code)
        self.assertIn("[nova_lease_api] 'max_lease_duration'", str(e))

    def test_default_lease(self):
        self.conf.set_override('default_lease', True, 'nova_lease')
        self.conf.set_override('default_lease_exempt_projects', ['lab-admin'],
                               'nova_lease')
        request = self._request({}, name='lab-vm')
        self.assertTrue(request.default)
        self.assertEqual(('lab-vm', NOW, NOW + datetime.timedelta(days=30)),
                         (request.params.name, request.params.start,
                          request.params.end))
        self.assertEqual('default lease', self._request({}, name='').params
                         .name)
        self.assertIsNone(self._request({}, project='lab-admin'))
        # lease_params still wins; reserved=False does not opt out.
        request = self._request({'lease_params': '{"duration": "1h"}'})
        self.assertFalse(request.default)
        self.assertTrue(self._request({'reserved': 'False'}).default)

    def test_count(self):
        self.assertEqual(1, boot_hints.server_count({}))
        self.assertEqual(3, boot_hints.server_count({'min_count': '3'}))
        self.assertEqual(5, boot_hints.server_count({'min_count': 2,
                                                     'max_count': 5}))
        for bad in ({'min_count': 'x'}, {'min_count': 0},
                    {'min_count': 3, 'max_count': 2}, {'max_count': None}):
            self.assertIsNone(boot_hints.server_count(bad))
