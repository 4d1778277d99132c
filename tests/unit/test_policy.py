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
"""The lease API rules, checked by an oslo.policy enforcer on Nova's
configuration."""

import os
import subprocess
import sys

import fixtures
from nova import conf as nova_conf
from nova import context as nova_context
from nova import policy as nova_policy
from nova.tests.fixtures import conf as nova_conf_fixture
import testtools

from nova_lease import policies
from nova_lease.policies import host as host_rules
from nova_lease.policies import lease as lease_rules
from nova_lease import policy

PROJECT = 'p1'
OTHER = 'p2'


def _ctx(roles, project=PROJECT):
    return nova_context.RequestContext(
        user_id='u', project_id=project, roles=roles,
        is_admin='admin' in roles)


class PolicyTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        # Nova's own option fixture parses its CONF (no files) and undoes
        # every override afterwards.
        self.useFixture(nova_conf_fixture.ConfFixture(nova_conf.CONF))
        # Secure-RBAC defaults, explicitly: Nova's functional fixtures change
        # this option's default in the test process.
        nova_conf.CONF.set_override('enforce_new_defaults', True,
                                    group='oslo_policy')
        nova_policy.reset()
        self.addCleanup(nova_policy.reset)
        policy.reset()
        self.addCleanup(policy.reset)
        self.policy_file = os.path.join(self.useFixture(
            fixtures.TempDir()).path, 'policy.yaml')

    def _write_policy(self, text):
        """Write the operator's policy file (Nova's) and point at it."""
        with open(self.policy_file, 'w') as f:
            f.write(text)
        # A newer mtime at each edit, as edits seconds apart would have.
        self.edits = getattr(self, 'edits', 0) + 10
        mtime = os.stat(self.policy_file).st_mtime + self.edits
        os.utime(self.policy_file, (mtime, mtime))
        nova_conf.CONF.set_override('policy_file', self.policy_file,
                                    group='oslo_policy')

    def _can(self, ctx, rule, project=PROJECT):
        return policy.authorize(ctx, rule, {'project_id': project},
                                fatal=False)

    def test_member_manages_own_leases_only(self):
        member = _ctx(['reader', 'member'])
        for rule in (lease_rules.LIST, lease_rules.SHOW, lease_rules.CREATE,
                     lease_rules.UPDATE, lease_rules.DELETE):
            self.assertTrue(self._can(member, rule), rule)
            self.assertFalse(self._can(member, rule, project=OTHER), rule)
        self.assertFalse(self._can(member, lease_rules.LIST_ALL))

    def test_reader_reads_but_does_not_write(self):
        reader = _ctx(['reader'])
        self.assertTrue(self._can(reader, lease_rules.SHOW))
        self.assertFalse(self._can(reader, lease_rules.CREATE))
        self.assertFalse(self._can(reader, lease_rules.DELETE))

    def test_legacy_defaults_follow_nova(self):
        # With enforce_new_defaults=False Nova's persona rules fall back to
        # its deprecated "admin or owner" rules: any role in the owning
        # project may then write, exactly as for Nova's own APIs.
        nova_conf.CONF.set_override('enforce_new_defaults', False,
                                    group='oslo_policy')
        policy.reset()
        reader = _ctx(['reader'])
        self.assertTrue(self._can(reader, lease_rules.CREATE))
        self.assertFalse(self._can(reader, lease_rules.CREATE,
                                   project=OTHER))
        self.assertFalse(self._can(reader, host_rules.CREATE))

    def test_hosts_are_admin_only(self):
        member = _ctx(['reader', 'member'])
        admin = _ctx(['reader', 'member', 'admin'])
        for rule in (host_rules.LIST, host_rules.SHOW, host_rules.CREATE,
                     host_rules.UPDATE, host_rules.DELETE,
                     host_rules.ALLOCATIONS):
            self.assertFalse(self._can(member, rule), rule)
            self.assertTrue(self._can(admin, rule), rule)
        self.assertTrue(self._can(admin, lease_rules.LIST_ALL))

    def test_fatal_raises_403(self):
        exc = self.assertRaises(
            policy.PolicyNotAuthorized, policy.authorize,
            _ctx(['reader', 'member']), host_rules.CREATE,
            {'project_id': PROJECT})
        self.assertEqual(403, exc.code)

    def test_operator_override_in_nova_policy(self):
        self._write_policy('{}\n')
        self.assertFalse(self._can(_ctx(['member']), host_rules.LIST))
        policy.reset()
        self._write_policy('"%s": "@"\n' % host_rules.LIST)
        self.assertTrue(self._can(_ctx(['member']), host_rules.LIST))

    def test_override_of_a_nova_persona_rule_applies(self):
        # Our defaults refer to Nova's persona rules: an operator who
        # narrows one in Nova's policy file narrows ours with it.
        member = _ctx(['reader', 'member'])
        self._write_policy('{}\n')
        self.assertTrue(self._can(member, lease_rules.CREATE))
        policy.reset()
        self._write_policy('"project_member_or_admin": "role:admin"\n')
        self.assertFalse(self._can(member, lease_rules.CREATE))

    def test_policy_file_change_applies_at_the_next_check(self):
        self._write_policy('{}\n')
        member = _ctx(['reader', 'member'])
        self.assertTrue(self._can(member, lease_rules.CREATE))
        self._write_policy('"%s": "!"\n' % lease_rules.CREATE)
        self.assertFalse(self._can(member, lease_rules.CREATE))
        self._write_policy('{}\n')
        self.assertTrue(self._can(member, lease_rules.CREATE))

    def test_scope_mismatch_is_a_refusal(self):
        # A system-scoped token on a project rule: a 403, as in Nova.
        ctx = nova_context.RequestContext(user_id='u', roles=['admin'],
                                          system_scope='all')
        self.assertFalse(self._can(ctx, lease_rules.CREATE))
        self.assertRaises(policy.PolicyNotAuthorized, policy.authorize,
                          ctx, lease_rules.CREATE, {'project_id': PROJECT})

    def test_rules_named_and_documented(self):
        names = [r.name for r in policies.list_rules()]
        self.assertEqual(len(names), len(set(names)))
        for rule in policies.list_rules():
            self.assertTrue(rule.name.startswith('nova_lease:'))
            self.assertTrue(rule.description)
            self.assertTrue(rule.operations)

    def test_sample_generator(self):
        gen = os.path.join(os.path.dirname(sys.executable),
                           'oslopolicy-sample-generator')
        out = subprocess.run([gen, '--namespace', 'nova_lease'],
                             capture_output=True, text=True, check=True,
                             timeout=120).stdout
        for rule in policies.list_rules():
            self.assertIn('"%s"' % rule.name, out)

    def test_enforcer_entry_point(self):
        code = ('from nova_lease import policy; e = policy.get_enforcer(); '
                'print(sorted(r for r in e.registered_rules '
                'if r.startswith("nova_lease:"))[:1], '
                '"project_reader_or_admin" in e.registered_rules)')
        out = subprocess.run([sys.executable, '-c', code],
                             capture_output=True, text=True, timeout=120,
                             env=dict(os.environ,
                                      OS_NOVA_DISABLE_EVENTLET_PATCHING='1'))
        self.assertEqual(0, out.returncode, out.stderr)
        self.assertIn("['nova_lease:capacity:all'] True", out.stdout)
