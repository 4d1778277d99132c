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
"""doc/source/admin/policy.rst has a row for every registered rule, with
the rule's default."""

import os
import re

import testtools

from nova_lease import policies

DOC = os.path.join(os.path.dirname(__file__), '..', '..', 'doc', 'source',
                   'admin', 'policy.rst')
#: A row of the list-table: ``* - ``<rule>``[ text]`` then ``- ``<default>``.
_ROW = re.compile(r'^   \* - ``(?P<rule>nova_lease:[^`]+)``[^\n]*\n'
                  r'(?:       [^\n]*\n)*'
                  r'     - ``(?P<default>[^`]+)``', re.MULTILINE)
#: The best-effort rule (F1).
BEST_EFFORT = 'nova_lease:leases:create:best_effort'


def documented():
    with open(DOC) as f:
        text = f.read()
    return {m.group('rule'): m.group('default') for m in _ROW.finditer(text)}


class PolicyTableTest(testtools.TestCase):

    def test_every_registered_rule_has_a_row_with_its_default(self):
        rows = documented()
        registered = {rule.name: rule.check_str
                      for rule in policies.list_rules()}
        self.assertEqual({}, {name: check for name, check in
                              registered.items()
                              if rows.get(name) != check})

    def test_every_row_is_a_registered_rule(self):
        registered = {rule.name for rule in policies.list_rules()}
        extra = set(documented()) - registered
        self.assertEqual(set(), extra)

    def test_best_effort_rule_is_admin_only(self):
        self.assertEqual('rule:context_is_admin', documented()[BEST_EFFORT])
        self.assertEqual('rule:context_is_admin', {
            rule.name: rule.check_str
            for rule in policies.list_rules()}[BEST_EFFORT])
