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
"""The split sandbox's configuration is the install guide's.

Drift is impossible while these pass: every option the guide sets is in
the generated files with the guide's value or a documented substitution
(guide.SUBSTITUTIONS); the sandbox sets no nova_lease option but the
guide's and the documented SANDBOX_EXTRAS; api-paste.ini has the guide's
sections; every Nova process that sends instance notifications gets the
guide's notification sections.
"""

import configparser
import os
import tempfile

import testtools

from nova_lease import conf as lease_conf
from nova_lease.sandbox import guide
from nova_lease.sandbox import split

PASSWORDS = {'nova': 'nova-secret', 'nova_lease': 'lease-secret'}


def _read(path):
    """{section: {option: [values]}} of an ini file (repeats kept)."""
    out = {}
    section = None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            if line.startswith('['):
                section = line[1:-1]
                out.setdefault(section, {})
                continue
            key, value = line.split('=', 1)
            out[section].setdefault(key.strip(), []).append(value.strip())
    return out


class GuideParserTest(testtools.TestCase):

    def test_literal_blocks_and_repeats(self):
        text = ('Intro::\n\n    [a]\n    # comment\n    x = 1\n    x = 2\n'
                '\nText::\n\n    not ini\n\n    [b]\n    y = z\n')
        self.assertEqual({'a': [('x', '1'), ('x', '2')]},
                         dict(guide.ini_settings(text)))

    def test_guide_has_every_section_the_sandbox_reads(self):
        nova, paste = guide.read()
        for section in ('nova_lease_database', 'nova_lease',
                        'nova_lease_api', 'nova_lease_engine',
                        'nova_lease_auth', 'filter_scheduler',
                        'notifications', 'oslo_messaging_notifications'):
            self.assertIn(section, nova)
        for section in ('composite:openstack_compute_api_v21',
                        'filter:nova_lease', 'filter:nova_lease_versions'):
            self.assertIn(section, paste)

    def test_apply_refuses_a_stale_substitution(self):
        values = {key: 'v' for key in guide.SUBSTITUTIONS}
        settings = {'nova_lease': [('freepool_aggregate', 'freepool')]}
        self.assertRaises(guide.GuideError, guide.apply, settings, values)


class SplitConfigDriftTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.state = tempfile.mkdtemp()
        self.addCleanup(_rmtree, self.state)
        self.layout = split.Layout(self.state, 5000, 8774, 8778, 9292)
        self.backends = split.Backends(self.state)
        self.files = split.write_config(self.layout, self.backends,
                                        PASSWORDS)
        self.values = split.guide_values(self.layout, self.backends,
                                         PASSWORDS)
        self.nova_guide, self.paste_guide = guide.read()

    def _expected(self, section, key, value):
        return self.values.get((section, key), value)

    def _guide_items(self, sections=None):
        for section, items in self.nova_guide.items():
            if sections is None or section in sections:
                for key, value in items:
                    yield section, key, value

    def _assert_guide_in(self, path, sections=None):
        conf = _read(path)
        for section, key, value in self._guide_items(sections):
            self.assertIn(section, conf, path)
            self.assertIn(self._expected(section, key, value),
                          conf[section].get(key, []),
                          '%s [%s] %s' % (os.path.basename(path), section,
                                          key))
        # And no value the guide does not give (a repeated option has
        # exactly the guide's values).
        for section, items in self.nova_guide.items():
            if sections is not None and section not in sections:
                continue
            for key in {k for k, _ in items}:
                want = [self._expected(section, key, v)
                        for k, v in items if k == key]
                self.assertEqual(want, conf[section][key])

    def test_nova_conf_has_every_guide_option(self):
        self._assert_guide_in(self.files['nova.conf'])

    def test_notifying_processes_have_the_notification_sections(self):
        for name, path in self.files.items():
            if name.startswith(('nova-cell', 'nova-compute-')):
                self._assert_guide_in(path, split.NOTIFICATION_SECTIONS)

    def test_no_nova_lease_option_beyond_the_guide_and_the_extras(self):
        groups = {getattr(group, 'name', group)
                  for group, _opts in lease_conf.list_opts()}
        allowed = {(s, k) for s, k, _v in self._guide_items()}
        allowed |= set(split.SANDBOX_EXTRAS)
        for name, path in self.files.items():
            if not name.endswith('.conf'):
                continue
            for section, options in _read(path).items():
                if (section not in groups and
                        not section.startswith('nova_lease')):
                    continue
                for key in options:
                    self.assertIn((section, key), allowed,
                                  '%s sets [%s] %s, which the install '
                                  'guide does not' % (name, section, key))

    def test_extras_are_not_in_the_guide(self):
        in_guide = {(s, k) for s, k, _v in self._guide_items()}
        self.assertEqual(set(), set(split.SANDBOX_EXTRAS) & in_guide)

    def test_substitutions_replace_only_placeholders(self):
        for section, key in guide.SUBSTITUTIONS:
            self.assertIn((section, key),
                          {(s, k) for s, k, _v in self._guide_items()})

    def test_paste_ini_has_the_guide_sections(self):
        cp = configparser.ConfigParser(interpolation=None)
        cp.optionxform = str
        cp.read(self.files['api-paste.ini'])
        for section, items in self.paste_guide.items():
            self.assertEqual(dict(items), dict(cp[section]), section)

    def test_guide_pipelines_are_novas_plus_the_two_filters(self):
        from nova_lease.sandbox import nova_aio
        cp = configparser.ConfigParser(interpolation=None)
        cp.read(nova_aio.nova_paste_ini())
        for section in nova_aio._PIPELINES:
            guide_items = dict(self.paste_guide[section])['keystone'].split()
            novas = cp[section]['keystone'].split()
            self.assertEqual(
                novas, [i for i in guide_items
                        if i not in ('nova_lease', 'nova_lease_versions')])

    def test_guide_enabled_filters_are_novas_default_plus_ours(self):
        from nova_lease.sandbox import nova_aio
        filters = dict(self.nova_guide['filter_scheduler'])[
            'enabled_filters'].split(',')
        self.assertEqual(nova_aio._default_filters() + ['LeaseFilter'],
                         filters)


def _rmtree(path):
    import shutil
    shutil.rmtree(path, ignore_errors=True)


class SplitRelayPortsTest(testtools.TestCase):
    """With relays (SplitSandbox(relays=True)), every process reaches
    MariaDB and RabbitMQ on the relays' ports, none on the servers'.
    """

    def test_urls_use_the_relay_ports(self):
        state = tempfile.mkdtemp()
        self.addCleanup(_rmtree, state)
        layout = split.Layout(state, 5000, 8774, 8778, 9292)
        backends = split.Backends(state)
        backends.mysql_port, backends.rabbit_port = 41001, 41002
        files = split.write_config(layout, backends, PASSWORDS)
        urls = []
        for name, path in files.items():
            with open(path) as f:
                for line in f:
                    if '://' in line and ('mysql' in line or
                                          'rabbit' in line):
                        urls.append((name, line.strip()))
        self.assertTrue(urls)
        for name, line in urls:
            self.assertNotIn(':%d/' % split.MYSQL_PORT, line, name)
            self.assertNotIn(':%d/' % split.RABBIT_PORT, line, name)
            self.assertTrue(':41001/' in line or ':41002/' in line,
                            (name, line))
