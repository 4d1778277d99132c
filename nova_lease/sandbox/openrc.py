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


def write_openrc(path, env):
    lines = ['# nova-lease-sandbox credentials: source this file.',
             '# Valid while the sandbox runs; rewritten at every start.']
    lines += ['export %s=%s' % (k, shlex.quote(v)) for k, v in env]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, 'w') as f:
        f.write('\n'.join(lines) + '\n')


def read_openrc(path):
    """Parse an openrc written by write_openrc into a dict."""
    env = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith('export '):
                key, _, value = line[len('export '):].partition('=')
                env[key] = shlex.split(value)[0] if value else ''
    return env
