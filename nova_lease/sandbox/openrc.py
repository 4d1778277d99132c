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
"""The sandbox's openrc files and generated passwords."""

import json
import os
import secrets
import shlex
import sys

USERS = ('admin', 'demo', 'nova')
_SECRETS = 'passwords.json'


def load_passwords(state_dir):
    """Return {user: password}; generated once per state directory."""
    path = os.path.join(state_dir, _SECRETS)
    try:
        with open(path) as f:
            passwords = json.load(f)
        if all(isinstance(passwords.get(u), str) for u in USERS):
            return passwords
    except (OSError, ValueError):
        pass
    passwords = {user: secrets.token_urlsafe(12) for user in USERS}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, 'w') as f:
        json.dump(passwords, f)
    return passwords


def openrc_env(user, password, auth_url, region, image_id, flavor_id):
    """The variables of one openrc file, in order."""
    return [
        ('OS_AUTH_URL', auth_url),
        ('OS_AUTH_TYPE', 'password'),
        ('OS_USERNAME', user),
        ('OS_PASSWORD', password),
        ('OS_PROJECT_NAME', user),
        ('OS_USER_DOMAIN_NAME', 'Default'),
        ('OS_PROJECT_DOMAIN_NAME', 'Default'),
        ('OS_IDENTITY_API_VERSION', '3'),
        ('OS_REGION_NAME', region),
        ('OS_INTERFACE', 'public'),
        ('NOVA_LEASE_IMAGE', image_id),
        ('NOVA_LEASE_FLAVOR', flavor_id),
    ]


def bin_dir():
    """The directory of the running interpreter's console scripts.

    The sandbox runs from the project's virtualenv, where the unmodified
    clients (``nova``, ``openstack``) are installed next to it.
    """
    return os.path.join(sys.prefix, 'bin')


def write_openrc(path, env, bindir=None):
    """Write ``env`` as an openrc file that works in a fresh shell.

    Besides the variables, the file puts ``bindir`` (by default
    :func:`bin_dir`) first on ``PATH``, so that ``nova`` and
    ``openstack`` are found after ``source`` without activating the
    virtualenv.
    """
    bindir = bin_dir() if bindir is None else bindir
    lines = ['# nova-lease-sandbox credentials: source this file.',
             '# Valid while the sandbox runs; rewritten at every start.']
    lines += ['export %s=%s' % (k, shlex.quote(v)) for k, v in env]
    lines += ['# The clients (nova, openstack) of the sandbox\'s virtualenv.',
              'export PATH=%s:"$PATH"' % shlex.quote(bindir)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, 'w') as f:
        f.write('\n'.join(lines) + '\n')


def read_openrc(path):
    """Parse an openrc written by write_openrc into a dict.

    Only the variables of :func:`openrc_env`: the ``PATH`` line is for a
    shell (it refers to the shell's own ``$PATH``) and is left out.
    """
    env = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith('export '):
                key, _, value = line[len('export '):].partition('=')
                if key == 'PATH':
                    continue
                env[key] = shlex.split(value)[0] if value else ''
    return env
