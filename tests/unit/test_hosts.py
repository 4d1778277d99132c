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
"""Host requests: validation and matching (no database, no Nova)."""

import subprocess
import sys

import testtools

from nova_lease import params
from nova_lease.plugins.host import matching as host_matching
from nova_lease.plugins.host import request as host_request

HOST = {
    'id': 1, 'hypervisor_hostname': 'node1', 'service_host': 'node1',
    'availability_zone': 'az1', 'vcpus': 16, 'memory_mb': 65536,
    'local_gb': 500, 'hypervisor_type': 'QEMU', 'hypervisor_version': 8002,
    'cpu_info': '{"arch": "x86_64", "vendor": "Intel", '
                '"topology": {"sockets": 2}}',
    'capabilities': {'ssd': 'true', 'gpu': 'false', 'rack': 'r12',
                     'nic_gbps': '25'},
}


def parse(**raw):
    raw.setdefault('resource_type', 'physical:host')
    raw.setdefault('min', 1)
    raw.setdefault('max', 1)
    return host_request.parse_host_request(raw, 'reservations[0]', 'RegionOne')


class ParseHostRequestTest(testtools.TestCase):

    def _error(self, field, **raw):
        e = self.assertRaises(params.LeaseParamError, parse, **raw)
        self.assertEqual(field, e.field)
        self.assertIn(field, str(e))
        self.assertEqual(400, e.code)
        return e

    def test_valid(self):
        req = parse(min='1', max=3, availability_zone='az1',
                    region='RegionOne', vcpus='4', memory_mb=1024,
                    extra_specs='{"ssd": "true", "n": 2}',
                    hypervisor_properties='[">=", "$vcpus", "4"]',
                    resource_properties='', before_end='default')
        self.assertEqual((1, 3), (req.min, req.max))
        self.assertEqual({'ssd': 'true', 'n': '2'}, req.extra_specs)
        self.assertEqual(['>=', '$vcpus', '4'], req.hypervisor_properties)
        self.assertIsNone(req.resource_properties)
        self.assertEqual(4, req.vcpus)
        again = host_request.HostRequest.from_properties(req.properties())
        self.assertEqual(req, again)

    def test_errors(self):
        self._error('reservations[0].max', max=None)
        self._error('reservations[0].min', min='')
        self._error('reservations[0].max', min=3, max=2)
        self._error('reservations[0].min', min='one')
        self._error('reservations[0].min', min=1.0)
        self._error('reservations[0].min', min=True)
        self._error('reservations[0].min', min=0)
        self._error('reservations[0].vcpus', vcpus=-1)
        self._error('reservations[0].region', region='RegionTwo')
        self._error('reservations[0].before_end', before_end='explode')
        self._error('reservations[0].colour', colour='red')
        self._error('reservations[0].extra_specs', extra_specs='[1]')
        self._error('reservations[0].extra_specs.ssd',
                    extra_specs={'ssd': ['true']})
        self._error('reservations[0].hypervisor_properties',
                    hypervisor_properties='[">=", "$vcpus"')
        self._error('reservations[0].hypervisor_properties',
                    hypervisor_properties='["~", "$vcpus", "1"]')
        self._error('reservations[0].resource_properties',
                    resource_properties='[">=", "vcpus", "1"]')
        self._error('reservations[0].resource_properties',
                    resource_properties=['and'])


class HostMatchesTest(testtools.TestCase):

    def _matches(self, **raw):
        return host_matching.host_matches(HOST, parse(**raw))

    def test_sizes_and_zone(self):
        self.assertTrue(self._matches(vcpus=16, memory_mb=65536,
                                      disk_gb=500, availability_zone='az1'))
        self.assertFalse(self._matches(vcpus=17))
        self.assertFalse(self._matches(memory_mb=65537))
        self.assertFalse(self._matches(disk_gb=501))
        self.assertFalse(self._matches(availability_zone='nova'))

    def test_extra_specs(self):
        def specs(**kw):
            return self._matches(extra_specs=kw)

        self.assertTrue(specs(ssd='true'))
        self.assertFalse(specs(ssd='false'))
        self.assertTrue(specs(**{'aggregate_instance_extra_specs:ssd':
                                 'true'}))
        self.assertFalse(specs(**{'aggregate_instance_extra_specs:vcpus':
                                  '16'}))
        self.assertTrue(specs(**{'capabilities:cpu_info:arch': 'x86_64'}))
        self.assertTrue(specs(**{'capabilities:cpu_info:topology:sockets':
                                 '>= 2'}))
        self.assertFalse(specs(**{'capabilities:cpu_info:arch': 'aarch64'}))
        self.assertTrue(specs(**{'capabilities:vcpus': '>= 8'}))
        self.assertTrue(specs(**{'capabilities:hypervisor_type':
                                 's== QEMU'}))
        self.assertTrue(specs(rack='<or> r11 <or> r12'))
        self.assertTrue(specs(nic_gbps='>= 10'))
        self.assertFalse(specs(nic_gbps='>= 40'))
        self.assertTrue(specs(vcpus='16'))          # unscoped host fact
        self.assertFalse(specs(missing='true'))
        self.assertFalse(specs(rack='>= 3'))         # not a number
        self.assertTrue(specs(**{'hw:cpu_policy': 'dedicated'}))  # ignored

    def test_queries(self):
        def hyp(query):
            return self._matches(hypervisor_properties=query)

        def res(query):
            return self._matches(resource_properties=query)

        self.assertTrue(hyp('["=", "$memory_mb", "65536"]'))
        self.assertTrue(hyp('["and", [">=", "$vcpus", "8"], '
                            '["<", "$local_gb", 1000]]'))
        self.assertFalse(hyp('[">", "$vcpus", "16"]'))
        self.assertTrue(hyp('["==", "$cpu_info:arch", "x86_64"]'))
        self.assertTrue(hyp('["or", ["==", "$vcpus", 1], '
                            '["==", "$hypervisor_type", "QEMU"]]'))
        self.assertTrue(hyp('["in", "$hypervisor_type", "QEMU", "KVM"]'))
        self.assertFalse(hyp('["not", ["==", "$hypervisor_type", '
                             '"QEMU"]]'))
        self.assertFalse(hyp('["==", "$nothing", "x"]'))
        self.assertTrue(res('["==", "$ssd", "true"]'))
        self.assertTrue(res(['>=', '$nic_gbps', '10']))
        self.assertTrue(res('["!=", "$gpu", "true"]'))
        self.assertFalse(res('["==", "$vcpus", "16"]'))  # not a capability
        self.assertTrue(res('[]'))


class PureRequestTest(testtools.TestCase):

    def test_request_imports_neither_nova_nor_a_database(self):
        # Host requests are part of the pure core (validating a lease body
        # needs no Nova and no database).
        code = ('import sys\n'
                'import nova_lease.plugins.host.request\n'
                'print(sorted(m for m in sys.modules if m.split(".")[0] in '
                '("nova", "novaclient", "openstack", "sqlalchemy", '
                '"oslo_db")))\n')
        proc = subprocess.run([sys.executable, '-c', code],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertEqual('[]', proc.stdout.strip())
