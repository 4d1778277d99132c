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
"""``benchmarks/faults.py --quick`` as a subprocess.

The fault drill on the split sandbox (an engine killed mid-start,
RabbitMQ cut for 30 s across starts, a nova-api worker killed
mid-request): skipped, saying why, when MariaDB or RabbitMQ is not
reachable on 127.0.0.1. About 7 minutes on a two-core machine (the full
drill, without ``--quick``: about 8).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import testtools

from nova_lease.sandbox import split

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
TIMEOUT = 1800
KEYS = ('faults', 'leases', 'lost_events', 'duplicate_events',
        'broken_promises', 'audit_findings', 'max_lag_s')


class FaultDrillTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.state = tempfile.mkdtemp(prefix='nova-lease-faults-')
        self.addCleanup(shutil.rmtree, self.state, ignore_errors=True)
        self.backends = split.Backends(self.state)
        try:
            self.backends.check()
        except split.SplitError as e:
            self.skipTest(str(e))

    def test_quick_drill(self):
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1')
        proc = subprocess.run(
            [sys.executable, os.path.join(TOP, 'benchmarks', 'faults.py'),
             '--quick', '--state-dir', self.state],
            env=env, stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=TIMEOUT)
        output = proc.stdout + proc.stderr
        lines = proc.stdout.strip().splitlines()
        self.assertTrue(lines, output[-6000:])
        result = json.loads(lines[-1])
        for key in KEYS:
            self.assertIn(key, result)
        self.assertEqual(['engine_kill_mid_start', 'rabbitmq_cut',
                          'api_worker_kill'], result['faults'],
                         output[-6000:])
        self.assertGreaterEqual(result['leases'], 11, result)
        for key in ('lost_events', 'duplicate_events', 'broken_promises',
                    'audit_findings'):
            self.assertEqual(0, result[key], lines[-1])
        self.assertEqual(0, proc.returncode, output[-6000:])
        # Nothing left: no database of the drill's sandbox.
        conn = self.backends._mysql()
        try:
            with conn.cursor() as cur:
                cur.execute('SHOW DATABASES')
                left = [row[0] for row in cur.fetchall()
                        if row[0].startswith(self.backends.prefix)]
        finally:
            conn.close()
        self.assertEqual([], left)
