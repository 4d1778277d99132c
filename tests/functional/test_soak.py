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
"""The soak walk, bounded: a fixed seed and number of steps in the suite.

Long runs: ``python benchmarks/soak.py --steps N --seed S`` (see
tests/functional/soak.py).
"""

from nova_lease.audit import checks
from nova_lease.db import api as db_api
from tests.functional import soak

SEED = 2026
STEPS = 40


class SoakTest(soak.SoakCase):

    def test_walk_keeps_every_promise(self):
        walk = soak.Walk(self, SEED)
        steps, findings, failure = walk.run(STEPS)
        self.assertIsNone(failure, 'replay: python benchmarks/soak.py '
                          '--seed %d --steps %d' % (SEED, steps))
        self.assertEqual(STEPS, steps)
        # The walk did walk: most kinds of steps ran.
        self.assertGreaterEqual(len(walk.counts), 10, walk.counts)

        # What a failing step would report: for a lease a finding names,
        # its rows, its servers and its hosts (service, aggregates,
        # what runs and is promised there); for an overcommit, its host.
        leases = db_api.lease_list(self.lease_db)
        self.assertTrue(leases)
        host = sorted(soak.HOSTS)[0]
        evidence = walk._evidence([
            checks.Finding('broken_promise', leases[0]['id'], 'a test')])
        self.assertIn(leases[0]['id'], evidence['leases'])
        holders = ['server x', 'lease %s' % leases[-1]['id']]
        evidence = walk._evidence([
            checks.Finding('overcommit', host, 'a test',
                           {'holders': holders})])
        self.assertEqual(holders, evidence['holders'])
        self.assertEqual([leases[-1]['id']], list(evidence['leases']))
        self.assertIn(host, evidence['hosts'])
        for facts in evidence['hosts'].values():
            self.assertEqual({'servers', 'promised_now', 'service',
                              'registered', 'aggregates'}, set(facts))
