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
"""Horizon with blazar-dashboard for the sandbox (``--dashboard``).

Horizon and blazar-dashboard, unmodified from their releases, live in a
virtualenv of their own (``.venv-dashboard``, made by tools/sandbox.sh
--dashboard from tools/dashboard-requirements.txt): Horizon pins Django
and a few dozen static-file packages that the product does not need.
:func:`install` deploys them there as their install guides say: Horizon's
``openstack_dashboard/local/local_settings.py`` (:data:`LOCAL_SETTINGS`,
which reads the sandbox's values from the environment, so one virtualenv
serves any number of sandboxes) and blazar-dashboard's ``enabled`` files
copied into ``openstack_dashboard/local/enabled``.
:class:`Dashboard` runs Horizon as a child process (Django's threaded
server, ``--insecure`` so it also serves the static files, on 127.0.0.1)
against the sandbox's Keystone; its output goes to
``<state>/dashboard.log``.
"""

import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request

from oslo_log import log as logging

from nova_lease.sandbox import children

LOG = logging.getLogger(__name__)

HOST = '127.0.0.1'
LOG_NAME = 'dashboard.log'
PID_NAME = 'dashboard.pid'
#: Environment variables LOCAL_SETTINGS reads.
ENV_KEYSTONE = 'NOVA_LEASE_DASHBOARD_KEYSTONE_URL'
ENV_STATE = 'NOVA_LEASE_DASHBOARD_STATE_DIR'
ENV_SECRET = 'NOVA_LEASE_DASHBOARD_SECRET_KEY'
ENV_HOST = 'NOVA_LEASE_DASHBOARD_HOST'

#: Horizon's local_settings.py for the sandbox.
LOCAL_SETTINGS = '''\
# Written by nova-lease-sandbox (nova_lease.sandbox.dashboard): Horizon's
# settings for the sandbox. The sandbox's values come from the environment
# that nova-lease-sandbox --dashboard gives Horizon.
import os

_STATE = os.environ['%(state)s']

DEBUG = False
ALLOWED_HOSTS = [os.environ.get('%(host)s', '127.0.0.1'), 'localhost']
SECRET_KEY = os.environ['%(secret)s']

OPENSTACK_HOST = '127.0.0.1'
OPENSTACK_KEYSTONE_URL = os.environ['%(keystone)s']
OPENSTACK_KEYSTONE_DEFAULT_ROLE = 'member'
OPENSTACK_KEYSTONE_DEFAULT_DOMAIN = 'Default'
OPENSTACK_ENDPOINT_TYPE = 'publicURL'

# One process (Django's threaded server): memory is cache enough.
CACHES = {'default': {
    'BACKEND': 'django.core.cache.backends.locmem.LocMemCache'}}
SESSION_ENGINE = 'django.contrib.sessions.backends.cache'

# Static files are served from the installed packages (runserver
# --insecure); compiled stylesheets go to the state directory.
STATIC_ROOT = os.path.join(_STATE, 'static')
MEDIA_ROOT = os.path.join(_STATE, 'media')
COMPRESS_OFFLINE = False
COMPRESS_ENABLED = False
COMPRESS_ROOT = STATIC_ROOT

# The sandbox has no network service (Neutron) and no volume service.
OPENSTACK_NEUTRON_NETWORK = {
    'enable_router': False,
    'enable_quotas': False,
    'enable_ipv6': False,
    'enable_distributed_router': False,
    'enable_ha_router': False,
    'enable_fip_topology_check': False,
}
OPENSTACK_HYPERVISOR_FEATURES = {
    'can_set_mount_point': False,
    'can_set_password': False,
    'requires_keypair': False,
    'enable_quotas': True,
}
OPENSTACK_CINDER_FEATURES = {'enable_backup': False}

TIME_ZONE = 'UTC'

LOGGING = {
    'version': 1,
    'disable_existing_loggers': False,
    'formatters': {'plain': {
        'format': '%%(asctime)s %%(levelname)s %%(name)s %%(message)s'}},
    'handlers': {'console': {'class': 'logging.StreamHandler',
                             'formatter': 'plain'}},
    'root': {'handlers': ['console'], 'level': 'INFO'},
    'loggers': {
        'django.db.backends': {'level': 'WARNING'},
        'keystoneauth': {'level': 'WARNING'},
        'urllib3': {'level': 'WARNING'},
        'iso8601': {'level': 'WARNING'},
    },
}
''' % {'state': ENV_STATE, 'host': ENV_HOST, 'secret': ENV_SECRET,
       'keystone': ENV_KEYSTONE}


#: What the child runs: Django's server, ended when the sandbox that
#: started it is gone (as the sandbox's Keystone is). Its arguments: the
#: sandbox's pid, the address, the state directory (unused: it names the
#: process's sandbox in ps).
_RUN = '''\
import os, sys, threading, time
parent = int(sys.argv[1])
def _watch():
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)
threading.Thread(target=_watch, daemon=True).start()
from django.core.management import execute_from_command_line
execute_from_command_line(['django-admin', 'runserver', '--noreload',
                           '--insecure', sys.argv[2]])
'''


class DashboardError(Exception):
    pass


def default_python():
    """The dashboard virtualenv's python: NOVA_LEASE_DASHBOARD_PYTHON, or
    ``.venv-dashboard`` next to the product's virtualenv.
    """
    env = os.environ.get('NOVA_LEASE_DASHBOARD_PYTHON')
    if env:
        return env
    return os.path.join(os.path.dirname(sys.prefix), '.venv-dashboard',
                        'bin', 'python')


def _package_dir(python, package):
    out = subprocess.run(
        [python, '-c', 'import importlib.util, os, sys; '
         'spec = importlib.util.find_spec(sys.argv[1]); '
         'print(os.path.dirname(spec.origin))', package],
        capture_output=True, text=True, stdin=subprocess.DEVNULL,
        timeout=120)
    if out.returncode != 0:
        raise DashboardError(
            '%s cannot import %s: install the dashboard with '
            'tools/sandbox.sh --dashboard (%s)'
            % (python, package, out.stderr.strip().splitlines()[-1:]))
    return out.stdout.strip()


def _write_if_changed(path, text):
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    with open(path, 'w') as f:
        f.write(text)


def install(python):
    """Deploy blazar-dashboard into Horizon and write local_settings.py
    (idempotent). Returns Horizon's openstack_dashboard directory.
    """
    if not os.access(python, os.X_OK):
        raise DashboardError(
            'no dashboard virtualenv (%s): run tools/sandbox.sh --dashboard, '
            'which makes it from tools/dashboard-requirements.txt' % python)
    horizon = _package_dir(python, 'openstack_dashboard')
    blazar = _package_dir(python, 'blazar_dashboard')
    local = os.path.join(horizon, 'local')
    _write_if_changed(os.path.join(local, 'local_settings.py'),
                      LOCAL_SETTINGS)
    enabled = os.path.join(blazar, 'enabled')
    for name in sorted(os.listdir(enabled)):
        if name.startswith('_') and name.endswith('.py') and \
                name != '__init__.py':
            with open(os.path.join(enabled, name)) as f:
                _write_if_changed(os.path.join(local, 'enabled', name),
                                  f.read())
    return horizon


class Dashboard(children.PidFileChild):
    """Horizon as a child process of the sandbox."""

    what = 'the dashboard'

    def __init__(self, state_dir, port, keystone_url, python=None):
        self.state_dir = state_dir
        self.dir = os.path.join(state_dir, 'dashboard')
        self.port = port
        self.keystone_url = keystone_url
        self.python = python or default_python()
        self.url = 'http://%s:%d/' % (HOST, port)
        self.log_path = os.path.join(state_dir, LOG_NAME)
        self.pid_path = os.path.join(state_dir, PID_NAME)
        self.proc = None

    def _secret(self):
        path = os.path.join(self.dir, 'secret_key')
        try:
            with open(path) as f:
                key = f.read().strip()
            if key:
                return key
        except OSError:
            pass
        key = secrets.token_urlsafe(48)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, 'w') as f:
            f.write(key + '\n')
        return key

    def start(self):
        install(self.python)
        os.makedirs(self.dir, exist_ok=True)
        env = dict(os.environ)
        for name in ('OS_NOVA_DISABLE_EVENTLET_PATCHING', 'PYTHONPATH'):
            env.pop(name, None)
        env.update({
            'DJANGO_SETTINGS_MODULE': 'openstack_dashboard.settings',
            ENV_KEYSTONE: self.keystone_url,
            ENV_STATE: self.dir,
            ENV_SECRET: self._secret(),
            ENV_HOST: HOST,
            'PYTHONUNBUFFERED': '1',
        })
        self.spawn([self.python, '-c', _RUN, str(os.getpid()),
                    '%s:%d' % (HOST, self.port), self.state_dir],
                   env=env, cwd=self.dir)

    def wait_ready(self, timeout=300.0):
        """Wait until the login page answers 200 (the first answer
        compiles Horizon's stylesheets: half a minute or more).
        """
        deadline = time.monotonic() + timeout
        url = self.url + 'auth/login/'
        while True:
            if self.proc.poll() is not None:
                raise DashboardError('the dashboard exited with %s; see %s'
                                     % (self.proc.returncode,
                                        self.log_path))
            try:
                with urllib.request.urlopen(url, timeout=timeout) as resp:
                    if resp.status == 200:
                        return
            except urllib.error.HTTPError as e:
                raise DashboardError('the dashboard answers %s on %s; see '
                                     '%s' % (e.code, url, self.log_path))
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise DashboardError('the dashboard did not answer on %s '
                                     'within %d s' % (url, timeout))
            time.sleep(0.5)
