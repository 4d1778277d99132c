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
"""The install guide's configuration steps, read from the guide itself.

``nova-lease-sandbox --split`` configures its Nova the way
doc/source/install/install.rst tells operators to: it reads the ini
literal blocks of that page (the ``::`` blocks that start with a
``[section]`` line) and applies them on top of the base Nova
configuration a sandbox needs, replacing only the values listed in
:data:`SUBSTITUTIONS` (the guide's placeholders: database URL, Keystone
URL, password). A change to the guide changes the sandbox; the unit test
tests/unit/test_sandbox_guide.py fails if the two drift apart.
"""

import collections
import os

#: The install guide, relative to the top of a source checkout.
GUIDE = os.path.join('doc', 'source', 'install', 'install.rst')

#: (section, option) -> why the sandbox replaces the guide's value. The
#: values come from the sandbox (see :func:`apply`).
SUBSTITUTIONS = {
    ('nova_lease_database', 'connection'):
        "the sandbox's MariaDB database (the guide's placeholder host "
        "and password)",
    ('nova_lease_auth', 'auth_url'): "the sandbox's Keystone",
    ('nova_lease_auth', 'password'):
        "the nova_lease user's password, generated per state directory",
    ('oslo_messaging_notifications', 'transport_url'):
        "the sandbox's top-level RabbitMQ virtual host",
}

#: The ini sections of the guide that are api-paste.ini's, not nova.conf's.
PASTE_PREFIXES = ('composite:', 'filter:', 'app:', 'pipeline:')


class GuideError(Exception):
    pass


def guide_path():
    """The install guide of this source checkout."""
    top = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    path = os.path.join(top, GUIDE)
    if not os.path.exists(path):
        raise GuideError('the install guide (%s) is not next to the '
                         'nova_lease package: --split runs from a source '
                         'checkout' % GUIDE)
    return path


def literal_blocks(text):
    """The reStructuredText literal blocks (``::``) of ``text``."""
    lines = text.split('\n')
    blocks = []
    i = 0
    while i < len(lines):
        if not lines[i].rstrip().endswith('::'):
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j >= len(lines) or not lines[j].startswith(' '):
            i = j
            continue
        indent = len(lines[j]) - len(lines[j].lstrip())
        block = []
        while j < len(lines) and (not lines[j].strip() or
                                  lines[j][:indent].isspace()):
            block.append(lines[j][indent:])
            j += 1
        blocks.append('\n'.join(block).strip('\n'))
        i = j
    return blocks


def ini_settings(text):
    """The settings of every ini block of ``text``, in order.

    Returns an ordered ``{section: [(option, value), ...]}``; an option
    given twice (a MultiStrOpt such as ``available_filters``) appears
    twice. Comments and blank lines are skipped.
    """
    settings = collections.OrderedDict()
    for block in literal_blocks(text):
        if not block.lstrip().startswith('['):
            continue
        section = None
        for line in block.split('\n'):
            line = line.strip()
            if not line or line.startswith(('#', ';')):
                continue
            if line.startswith('[') and line.endswith(']'):
                section = line[1:-1].strip()
                settings.setdefault(section, [])
                continue
            if section is None or '=' not in line:
                raise GuideError('unexpected line in an ini block of the '
                                 'install guide: %r' % line)
            key, value = line.split('=', 1)
            settings[section].append((key.strip(), value.strip()))
    return settings


def read(path=None):
    """(nova.conf settings, api-paste.ini settings) of the guide."""
    with open(path or guide_path()) as f:
        settings = ini_settings(f.read())
    nova, paste = collections.OrderedDict(), collections.OrderedDict()
    for section, items in settings.items():
        target = paste if section.startswith(PASTE_PREFIXES) else nova
        target[section] = items
    return nova, paste


def apply(settings, values):
    """The guide's nova.conf settings with :data:`SUBSTITUTIONS` made.

    :param values: (section, option) -> the sandbox's value, for every key
        of :data:`SUBSTITUTIONS`.
    :returns: ``{section: {option: value or [values]}}`` (a list for an
        option the guide sets more than once).
    """
    missing = set(SUBSTITUTIONS) - set(values)
    if missing:
        raise GuideError('no sandbox value for %s' % sorted(missing))
    out = collections.OrderedDict()
    seen = set()
    for section, items in settings.items():
        opts = out.setdefault(section, collections.OrderedDict())
        for key, value in items:
            if (section, key) in SUBSTITUTIONS:
                value = values[(section, key)]
                seen.add((section, key))
            if key in opts:
                if not isinstance(opts[key], list):
                    opts[key] = [opts[key]]
                opts[key].append(value)
            else:
                opts[key] = value
    unused = set(SUBSTITUTIONS) - seen
    if unused:
        raise GuideError('the install guide no longer sets %s: update '
                         'nova_lease.sandbox.guide.SUBSTITUTIONS'
                         % sorted(unused))
    return out
