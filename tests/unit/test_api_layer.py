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
"""The code nova-api and nova-scheduler run does not know the engine.

The engine runs in nova-lease-engine, never in nova-api: it finds the
leases nova-api creates or changes by its probe of the side database.
Nothing the API or the scheduler runs may import the engine's loop, not
even inside a function; nor does the compute hook, which is handed the
engine it runs next to.
"""

import ast
import os

import testtools

_ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'nova_lease')
#: The packages of nova-api and nova-scheduler.
_API_SIDE = ('api_ext', 'scheduler')
#: The engine's loop and its command.
_ENGINE = ('nova_lease.periodic.engine', 'nova_lease.cmd.engine')


def _imports(tree):
    """The modules (and ``package.name`` of from-imports) a tree imports,
    at any depth, with their line numbers.
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module, node.lineno
            for alias in node.names:
                yield '%s.%s' % (node.module, alias.name), node.lineno


def engine_imports(source, path='<source>'):
    return ['%s:%d %s' % (path, line, name)
            for name, line in _imports(ast.parse(source, path))
            if name in _ENGINE]


class ApiSideImportsTest(testtools.TestCase):

    def test_the_check_sees_an_import_inside_a_function(self):
        source = ('def after_create():\n'
                  '    from nova_lease.periodic import engine\n'
                  '    engine.wake()\n')
        self.assertEqual(['x.py:2 nova_lease.periodic.engine'],
                         engine_imports(source, 'x.py'))
        self.assertEqual([], engine_imports(
            'from nova_lease import lease_events as events\n', 'x.py'))

    def _found(self, packages):
        found = []
        for package in packages:
            self.assertTrue(os.path.isdir(os.path.join(_ROOT, package)))
            for folder, _dirs, files in os.walk(os.path.join(_ROOT,
                                                             package)):
                for name in sorted(files):
                    if not name.endswith('.py'):
                        continue
                    path = os.path.join(folder, name)
                    with open(path) as f:
                        found += engine_imports(
                            f.read(), os.path.relpath(path, _ROOT))
        return found

    def test_api_and_scheduler_do_not_import_the_engine(self):
        self.assertEqual([], self._found(_API_SIDE))

    def test_the_compute_hook_is_given_its_engine(self):
        # It runs next to the engine in nova-lease-engine, which hands it
        # the engine's observe_now (cmd.engine.start_compute_hook).
        self.assertEqual([], self._found(['compute_hook']))
