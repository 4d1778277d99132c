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
"""Every wire name (what nova_lease writes into or reads from Nova) is
defined once, in nova_lease.wire.
"""

import ast
import os

import testtools

from nova_lease import wire
from tests.unit import test_types

ROOT = os.path.join(os.path.dirname(__file__), '..', '..', 'nova_lease')
HOME = 'wire.py'
#: name -> value of every wire constant.
WIRE = {k: v for k, v in vars(wire).items()
        if k.isupper() and isinstance(v, str)}
VALUES = frozenset(WIRE.values())
#: Values no other string of the code base can mean: they may not appear
#: as a literal anywhere else (the generic ones, 'reserved', 'lease_id',
#: are only refused as a module constant's value).
DISTINCT = frozenset(v for v in VALUES
                     if 'nova_lease' in v or v == wire.SERVER_RESERVATION_ID)
#: The database migrations keep the names they were written with.
SKIP = (os.path.join('db', 'alembic', ''),)


def _modules():
    for folder, _dirs, files in os.walk(ROOT):
        for name in files:
            if name.endswith('.py'):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, ROOT)
                if rel != HOME and not rel.startswith(SKIP):
                    yield rel, path


#: Words in the name of a module constant that keeps a wire name.
WIRE_WORDS = ('META', 'TAG', 'HINT', 'KEY', 'SPEC', 'PREFIX', 'REASON',
              'PARAMS', 'RESERVED', 'SHELVED_UNTIL_START')


def _wire_like(target):
    return isinstance(target, ast.Name) and any(
        w in target.id for w in WIRE_WORDS)


def violations(source):
    found = []
    tree = ast.parse(source)
    docstrings = test_types.docstring_ids(tree)
    for node in tree.body:
        if (isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and node.value.value in VALUES
                and any(_wire_like(t) for t in node.targets)):
            found.append('line %d: a second definition of %r'
                         % (node.lineno, node.value.value))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and id(node) not in docstrings
                and isinstance(node.value, str)
                and node.value in DISTINCT):
            found.append('line %d: the literal %r' % (node.lineno,
                                                      node.value))
    return sorted(set(found))


class WireNamesTest(testtools.TestCase):

    def test_the_rule_sees_a_second_definition(self):
        self.assertTrue(violations("TAG = 'reserved'\n"))
        self.assertTrue(violations("x = {'nova_lease_lease_id': 1}\n"))
        self.assertEqual([], violations(
            '"""The nova_lease_lease_id key."""\nTAG = wire.TAG_RESERVED\n'))

    def test_every_wire_name_is_defined_once(self):
        found = {}
        for rel, path in _modules():
            with open(path) as f:
                bad = violations(f.read())
            if bad:
                found[rel] = bad
        self.assertEqual({}, found)

    def test_wire_is_pure(self):
        with open(os.path.join(ROOT, HOME)) as f:
            tree = ast.parse(f.read())
        self.assertFalse([n for n in ast.walk(tree)
                          if isinstance(n, (ast.Import, ast.ImportFrom))])

    def test_names_are_distinct_where_they_share_a_namespace(self):
        server_meta = [wire.SERVER_LEASE_ID, wire.SERVER_LEASE_STATUS,
                       wire.SERVER_RESERVATION_ID]
        hints = [wire.HINT_RESERVED, wire.HINT_LEASE_PARAMS,
                 wire.HINT_RESERVATION, wire.HINT_INTERNAL_LEASE_ID,
                 wire.HINT_INTERNAL_RESERVATION]
        aggregate = [wire.AGGREGATE_RESERVATION_ID, wire.AGGREGATE_LEASE_ID,
                     wire.AGGREGATE_PROJECT_ID]
        for names in (server_meta, hints, aggregate):
            self.assertEqual(len(names), len(set(names)))
