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
"""Who imports whom: no cycle between modules nor between packages, no
new hidden one, and the architecture page's picture as the code is
(tools/import_map.py).
"""

import importlib.util
import os

import testtools

_TOOL = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'tools', 'import_map.py')
_spec = importlib.util.spec_from_file_location('import_map', _TOOL)
import_map = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(import_map)

_N = 'nova_lease.'

#: The project imports made inside a function, and why. An import inside
#: a function hides a cycle from Python's import order (and from this
#: test's cycle check): none may be added, and each one removed leaves
#: this list (the test says so).
KNOWN_INNER = {
    # Loaded only when used: the sandbox's parts (Nova's test fixtures,
    # the split deployment) for the command that asks for them, its
    # options and tables once Nova's fixtures have set nova.conf up, and
    # alembic's env.py, which alembic runs as a script.
    ('cmd.sandbox', 'sandbox.runner'): 'lazy',
    ('cmd.sandbox', 'sandbox.split'): 'lazy',
    ('sandbox.runner', 'sandbox.nova_aio'): 'lazy',
    ('sandbox.nova_aio', 'conf'): 'lazy',
    ('sandbox.nova_aio', 'db.migration'): 'lazy',
    ('db.alembic.env', 'db.api'): 'script',
}


def _short(module):
    return module[len(_N):] if module.startswith(_N) else module


class ImportMapTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.edges, self.inner = import_map.graph()

    def test_the_reader_sees_imports_in_functions_and_methods(self):
        known = {'nova_lease.a': 'a.py', 'nova_lease.b': 'b.py',
                 'nova_lease.b.c': 'c.py'}
        source = ('import os\n'
                  'from nova_lease import a\n'
                  'class K:\n'
                  '    def m(self):\n'
                  '        from nova_lease.b import c\n'
                  'def f():\n'
                  '    import nova_lease.b\n')
        top, inner = import_map.imports(source, known)
        self.assertEqual({'nova_lease.a'}, top)
        self.assertEqual({('nova_lease.b.c', 5), ('nova_lease.b', 7)},
                         inner)

    def test_the_cycle_finder_finds_one(self):
        self.assertEqual([['a', 'b', 'c']], import_map.cycles(
            {'a': {'b'}, 'b': {'c'}, 'c': {'a', 'd'}, 'd': set()}))
        self.assertEqual([], import_map.cycles({'a': {'b'}, 'b': set()}))

    def test_no_module_imports_itself_through_others(self):
        self.assertEqual([], import_map.cycles(self.edges))

    def test_no_new_import_inside_a_function(self):
        found = {(_short(m), _short(t))
                 for m, hidden in self.inner.items() for t, _ in hidden}
        self.assertEqual(set(), found - set(KNOWN_INNER),
                         'a project import inside a function hides a '
                         'cycle: import at module level')
        self.assertEqual(set(), set(KNOWN_INNER) - found,
                         'gone: remove it from KNOWN_INNER')

    def test_no_part_imports_itself_through_others(self):
        # Dependencies point one way between the parts of nova_lease
        # (first-level packages and modules), as between modules.
        self.assertEqual([], import_map.cycles(
            import_map.parts_graph(self.edges)))

    def test_the_architecture_page_shows_the_code(self):
        with open(import_map.INCLUDE) as f:
            self.assertEqual(import_map.render(), f.read(),
                             'run: python tools/import_map.py --write')
