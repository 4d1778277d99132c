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
"""Nothing nova_lease ships may import eventlet (Nova 34 refuses it)."""

import os
import subprocess
import sys
import textwrap

import testtools

_IMPORT_ALL = textwrap.dedent('''
    import pkgutil, sys
    import nova_lease
    names = sorted(m.name for m in pkgutil.walk_packages(
        nova_lease.__path__, 'nova_lease.'))
    for name in names:
        __import__(name)
    bad = sorted(m for m in sys.modules if m.split('.')[0] == 'eventlet')
    print(len(names), 'modules imported')
    sys.exit('eventlet imported: %s' % bad[:3] if bad else 0)
''')


def _run(prologue):
    env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1',
               PYTHONWARNINGS='ignore')
    return subprocess.run([sys.executable, '-c', prologue + _IMPORT_ALL],
                          env=env, capture_output=True, text=True,
                          timeout=300)


class NoEventletTest(testtools.TestCase):

    def _check(self, proc):
        self.assertEqual(0, proc.returncode, proc.stdout + proc.stderr)
        self.assertIn('modules imported', proc.stdout)

    def test_inside_nova_threading_mode(self):
        # What nova-api and nova-scheduler do at start-up: select the
        # threading backend and poison eventlet, then load our classes.
        self._check(_run('import nova.monkey_patch\n'
                         'nova.monkey_patch.patch()\n'))

    def test_own_commands(self):
        # What nova-lease-engine / -manage / -sandbox do: import
        # nova_lease.cmd first.
        self._check(_run('import nova_lease.cmd\n'))
