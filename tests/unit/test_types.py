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
"""The reservation types' registry, and the rule that nothing else
dispatches on a type string (nova_lease.resource_types).
"""

import ast
import os

import testtools

from nova_lease.booking import pipeline
from nova_lease import params
from nova_lease import resource_types as types

ROOT = os.path.join(os.path.dirname(__file__), '..', '..', 'nova_lease')
#: Where the types live: their own modules may name themselves.
HOME = os.path.join('plugins', '')
#: The one module that defines the type names.
REGISTRY = 'resource_types.py'
NAMES = frozenset(types.FACTS)
#: Names under which a module keeps a type name.
CONSTANTS = frozenset({'HOST', 'SLOTS', 'SERVER', 'RESOURCE_TYPE',
                       'API_TYPES', 'INSTANCE', 'FLAVOR'})


def _modules():
    for folder, _dirs, files in os.walk(ROOT):
        for name in files:
            if name.endswith('.py'):
                path = os.path.join(folder, name)
                yield os.path.relpath(path, ROOT), path


def _is_type_constant(node):
    """``types.HOST``, ``allocation.RESOURCE_TYPE``, ``HOST``..."""
    if isinstance(node, ast.Attribute):
        return node.attr in CONSTANTS
    return isinstance(node, ast.Name) and node.id in CONSTANTS


def _is_type_name(node):
    return isinstance(node, ast.Constant) and node.value in NAMES


def docstring_ids(tree):
    """The ids of the docstring nodes of a parsed module."""
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef,
                              ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr)}


def violations(relpath, source):
    """What a module does with type names that only the types may do."""
    found = []
    tree = ast.parse(source)
    docstrings = docstring_ids(tree)
    for node in ast.walk(tree):
        where = '%s:%s' % (relpath, getattr(node, 'lineno', '?'))
        if relpath != REGISTRY and _is_type_name(node) and (
                id(node) not in docstrings):
            found.append('%s: the type name %r is written out (use '
                         'nova_lease.resource_types)' % (where, node.value))
        if relpath.startswith(HOME) or relpath == REGISTRY:
            continue
        if isinstance(node, ast.Compare):
            operands = [node.left] + list(node.comparators)
            if any(_is_type_constant(o) for o in operands):
                found.append('%s: compares with a type (ask the type or '
                             'its facts)' % where)
            for o in operands:
                if isinstance(o, (ast.Tuple, ast.List, ast.Set)) and any(
                        _is_type_constant(e) for e in o.elts):
                    found.append('%s: compares with types' % where)
        if isinstance(node, ast.Dict) and any(
                k is not None and _is_type_constant(k) for k in node.keys):
            found.append('%s: a dict keyed by type (a dispatch table '
                         'outside the types)' % where)
    return found


class NoDispatchOutsideTheTypes(testtools.TestCase):

    def test_no_module_dispatches_on_a_type_string(self):
        found = []
        for relpath, path in _modules():
            with open(path) as f:
                found.extend(violations(relpath, f.read()))
        self.assertEqual([], found)

    def test_the_rule_catches_dispatch(self):
        for source in (
                "if r['resource_type'] == 'physical:host': pass",
                "if r['resource_type'] == types.HOST: pass",
                "x = r.resource_type in (types.SLOTS, types.SERVER)",
                "MOVES = {allocation.RESOURCE_TYPE: move}",
                "HOST = 'physical:host'"):
            self.assertNotEqual([], violations('usage.py', source), source)
        self.assertEqual([], violations(
            'usage.py', "f = types.of(r).whole_hosts\n"
                        "x = types.get(types.HOST)\n"
                        "'''virtual:instance reservations'''"))
        # A type's own modules may name their type.
        self.assertEqual([], violations(
            os.path.join('plugins', 'host', 'plugin.py'),
            "if r['resource_type'] == RESOURCE_TYPE: pass"))


class RegistryTest(testtools.TestCase):

    def test_every_type_is_loaded_with_its_hooks(self):
        for name in types.FACTS:
            kind = types.get(name)
            self.assertIsInstance(kind, types.ReservationType)
            self.assertEqual(name, kind.name)
            self.assertIs(types.FACTS[name], kind.facts)
        self.assertIs(types.get(types.SLOTS),
                      types.for_api('virtual:instance'))
        self.assertIs(types.get(types.HOST), types.for_api('physical:host'))
        self.assertIsNone(types.for_api('network:floatingip'))
        self.assertRaises(types.UnknownType, types.get, 'nope')
        self.assertEqual(['physical:host', 'virtual:instance',
                          'flavor:instance'], types.api_names())

    def test_booking_order_and_grouping(self):
        reservations = [{'id': 1, 'resource_type': types.SERVER},
                        {'id': 2, 'resource_type': types.SLOTS},
                        {'id': 3, 'resource_type': types.HOST},
                        {'id': 4, 'resource_type': types.SLOTS}]
        self.assertEqual(
            [(types.HOST, [3]), (types.SLOTS, [2, 4]), (types.SERVER, [1])],
            [(kind.name, [r['id'] for r in rs])
             for kind, rs in types.group(reservations)])

    def test_facts(self):
        self.assertTrue(types.is_whole_host({'resource_type': types.HOST}))
        self.assertTrue(types.is_slots({'resource_type': types.SLOTS}))
        self.assertTrue(types.is_one_server({'resource_type':
                                             types.SERVER}))
        self.assertEqual((types.SERVER,), types.SERVER_TYPES)
        self.assertEqual((types.SLOTS, types.SERVER), types.INSTANCE_TYPES)

    def test_an_update_of_a_type_without_updates_names_the_field(self):
        lease = {'id': 'L', 'reservations': [
            {'id': 'r1', 'resource_type': types.SERVER, 'properties': {}}]}
        e = self.assertRaises(params.LeaseParamError,
                              pipeline.parse_updates, lease,
                              [{'id': 'r1', 'amount': 2}])
        self.assertIn("'reservations[0]': a virtual:instance reservation "
                      "cannot be updated", str(e))
        e = self.assertRaises(params.LeaseParamError,
                              pipeline.parse_updates, lease,
                              [{'id': 'r2'}])
        self.assertIn('Invalid reservation IDs are: r2', str(e))
