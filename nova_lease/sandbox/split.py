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
"""``nova-lease-sandbox --split``: Nova as separate processes.

The same sandbox as the all-in-one one (Keystone, openrc files, the demo),
with Nova deployed the way the install guide (doc/source/install/
install.rst) deploys it, every process a child of the sandbox, on
127.0.0.1:

* Keystone (:mod:`nova_lease.sandbox.keystone`, on MariaDB), with
  ``image``, ``network``, ``placement``, ``compute`` and
  ``reservation`` in its catalog and the guide's ``nova_lease`` service
  user;
* Placement under gunicorn (1 worker);
* nova-api (``nova.wsgi.osapi_compute:application``) under gunicorn, 2
  worker processes;
* nova-scheduler and the super conductor (``nova.conf``);
* two cells, each with its conductor and its computes (fake driver):
  ``cell1`` has host1 and host2, ``cell2`` host3 (the demo migrates
  servers between host1 and host2, which Nova does within a cell only),
  set up with ``nova-manage`` (api_db sync, cell_v2 map_cell0,
  create_cell, db sync, discover_hosts);
* two nova-lease-engine processes on ``nova.conf``, as the guide runs it;
* the Glance and Neutron stand-ins (:mod:`nova_lease.sandbox.standins`);
* every database on MariaDB (127.0.0.1:3306, root, no password) and RPC
  and notifications on RabbitMQ (127.0.0.1:5672, guest): one virtual host
  for the top level and one per cell. Their names start with a prefix
  made from the state directory (:func:`prefix_for`); they are made at
  start and dropped at stop.

Configuration: the base Nova configuration below, with the install
guide's ini blocks applied (:mod:`nova_lease.sandbox.guide`) and the
nova_lease options of :data:`SANDBOX_EXTRAS`, nothing else. The files are
in ``<state>/split/etc``, the logs in ``<state>/split/log``.
"""

import collections
import configparser
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

from oslo_log import log as logging

from nova_lease.sandbox import children
from nova_lease.sandbox import demo as demo_mod
from nova_lease.sandbox import engine as engine_proc
from nova_lease.sandbox import guide
from nova_lease.sandbox import keystone as ks
from nova_lease.sandbox import nova_aio
from nova_lease.sandbox import openrc
from nova_lease.sandbox import proxy
from nova_lease.sandbox import runner
from nova_lease.sandbox import standins

LOG = logging.getLogger(__name__)

HOST = '127.0.0.1'
MYSQL_PORT = 3306
RABBIT_PORT = 5672
#: cell name -> its compute hosts.
CELLS = collections.OrderedDict([('cell1', ('host1', 'host2')),
                                 ('cell2', ('host3',))])
DATABASES = ('keystone', 'nova_api', 'nova_cell0', 'nova_cell1',
             'nova_cell2', 'placement', 'nova_lease')
VHOSTS = ('top', 'cell1', 'cell2')
API_WORKERS = 2
ENGINES = 2

#: nova_lease options the sandbox sets that the install guide does not,
#: (section, option) -> (value, why). Nothing else of nova_lease's is set.
SANDBOX_EXTRAS = collections.OrderedDict([
    (('nova_lease_api', 'best_effort_enabled'),
     ('True', "the demo's best-effort lease")),
    (('nova_lease_api', 'best_effort_aggregate'),
     (nova_aio.BEST_EFFORT_AGGREGATE, "the hosts the demo's best-effort "
      "lease may empty")),
    (('nova_lease_engine', 'engine_max_sleep'),
     (str(engine_proc.MAX_SLEEP), 'leases created through nova-api start '
      'within a second (default 10)')),
    (('nova_lease_engine', 'engine_shutdown_timeout'),
     (str(engine_proc.SHUTDOWN_TIMEOUT), 'a quick stop')),
    (('nova_lease', 'engine_heartbeat_timeout'),
     ('5', 'the other engine takes over the claims of a killed one '
      'within 5 s (default 10; heartbeats every second)')),
    (('nova_lease_engine', 'lost_delete_timeout'),
     ('60', 'a server delete Nova lost (the fault drill kills a nova-api '
      'worker mid-request) is found within a minute (default 15)')),
])


class SplitError(runner.SandboxError):
    pass


def prefix_for(state_dir):
    """The name prefix of a state directory's databases and vhosts."""
    digest = hashlib.sha1(os.path.realpath(state_dir).encode()).hexdigest()
    return 'nls%s_' % digest[:8]


def _free(port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
        return True
    except OSError:
        return False
    finally:
        sock.close()


# -- MariaDB and RabbitMQ ----------------------------------------------------

class Backends(object):
    """The sandbox's databases on MariaDB and vhosts on RabbitMQ."""

    def __init__(self, state_dir):
        self.prefix = prefix_for(state_dir)
        #: The ports the processes reach MariaDB and RabbitMQ on (relays'
        #: ports with SplitSandbox(relays=True)); the sandbox's own
        #: queries and rabbitmqctl go to the servers directly.
        self.mysql_port = MYSQL_PORT
        self.rabbit_port = RABBIT_PORT
        self.record = os.path.join(state_dir, 'split', 'backends.json')
        self.rabbitmqctl = (shutil.which('rabbitmqctl') or
                            shutil.which('rabbitmqctl', path='/usr/sbin'))

    def db_name(self, name):
        return self.prefix + name

    def vhost(self, name):
        return self.prefix + name

    def db_url(self, name, direct=False):
        """``direct``: to the server, not through a relay."""
        return ('mysql+pymysql://root@%s:%d/%s?charset=utf8mb4'
                % (HOST, MYSQL_PORT if direct else self.mysql_port,
                   self.db_name(name)))

    def transport_url(self, name):
        return 'rabbit://guest:guest@%s:%d/%s' % (HOST, self.rabbit_port,
                                                  self.vhost(name))

    def _mysql(self):
        import pymysql
        return pymysql.connect(host=HOST, port=MYSQL_PORT, user='root',
                               password='', connect_timeout=5,
                               autocommit=True)

    def check(self):
        """SplitError naming what is missing, if anything is."""
        missing = []
        try:
            self._mysql().close()
        except Exception as e:
            missing.append('MariaDB on %s:%d as root without a password '
                           '(%s)' % (HOST, MYSQL_PORT, e))
        sock = socket.socket()
        sock.settimeout(5)
        try:
            sock.connect((HOST, RABBIT_PORT))
        except OSError as e:
            missing.append('RabbitMQ on %s:%d (%s)' % (HOST, RABBIT_PORT, e))
        finally:
            sock.close()
        if self.rabbitmqctl is None:
            missing.append('rabbitmqctl (not on PATH nor in /usr/sbin)')
        elif not missing:
            try:
                self._ctl('list_vhosts')
            except SplitError as e:
                missing.append(str(e))
        if missing:
            raise SplitError('--split needs %s' % '; '.join(missing))

    def _ctl(self, *args):
        try:
            proc = subprocess.run([self.rabbitmqctl, '-q'] + list(args),
                                  capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise SplitError('rabbitmqctl %s failed: %s'
                             % (' '.join(args), e))
        if proc.returncode != 0:
            raise SplitError('rabbitmqctl %s failed (exit %d): %s' % (
                ' '.join(args), proc.returncode,
                (proc.stderr or proc.stdout).strip()[-500:]))
        return proc.stdout

    def _save(self, made):
        with open(self.record, 'w') as f:
            json.dump(made, f)

    def create(self):
        """Drop what an earlier run left, then make everything afresh."""
        os.makedirs(os.path.dirname(self.record), exist_ok=True)
        self.drop(everything=True)
        made = {'databases': [], 'vhosts': []}
        self._save(made)
        conn = self._mysql()
        try:
            with conn.cursor() as cur:
                for name in DATABASES:
                    cur.execute('CREATE DATABASE `%s` CHARACTER SET utf8mb4'
                                % self.db_name(name))
                    made['databases'].append(self.db_name(name))
                    self._save(made)
        finally:
            conn.close()
        for name in VHOSTS:
            vhost = self.vhost(name)
            made['vhosts'].append(vhost)
            self._save(made)
            self._ctl('add_vhost', vhost)
            self._ctl('set_permissions', '-p', vhost, 'guest', '.*', '.*',
                      '.*')

    def drop(self, everything=False):
        """Drop the databases and vhosts made.

        ``everything``: all that carry this state directory's prefix.
        """
        try:
            with open(self.record) as f:
                made = json.load(f)
        except (OSError, ValueError):
            made = {'databases': [], 'vhosts': []}
        databases, vhosts = set(made['databases']), set(made['vhosts'])
        if everything:
            conn = self._mysql()
            try:
                with conn.cursor() as cur:
                    cur.execute('SHOW DATABASES')
                    databases |= {row[0] for row in cur.fetchall()
                                  if row[0].startswith(self.prefix)}
            finally:
                conn.close()
            vhosts |= {line.strip() for line in
                       self._ctl('list_vhosts').splitlines()
                       if line.strip().startswith(self.prefix)}
        if databases:
            conn = self._mysql()
            try:
                with conn.cursor() as cur:
                    for name in sorted(databases):
                        cur.execute('DROP DATABASE IF EXISTS `%s`' % name)
            finally:
                conn.close()
        existing = None
        for vhost in sorted(vhosts):
            if existing is None:
                existing = set(self._ctl('list_vhosts').split())
            if vhost in existing:
                self._ctl('delete_vhost', vhost)
        try:
            os.unlink(self.record)
        except OSError:
            pass
        return sorted(databases), sorted(vhosts)

    def query(self, db, sql):
        conn = self._mysql()
        try:
            conn.select_db(self.db_name(db))
            with conn.cursor() as cur:
                cur.execute(sql)
                return cur.fetchall()
        finally:
            conn.close()


# -- child processes ----------------------------------------------------------

class Child(object):
    """One child process of its own process group, its output in a log.

    It gets SIGTERM from the kernel when the sandbox dies
    (``PR_SET_PDEATHSIG``, see :func:`nova_lease.sandbox.children.launch`);
    it is stopped with SIGTERM to its whole group (a gunicorn master and
    its workers), then SIGKILL.
    """

    def __init__(self, name, argv, log_path, env=None, cwd=None):
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self.cwd = cwd
        self.proc = None

    def start(self):
        with open(self.log_path, 'ab') as log:
            self.proc = children.launch(self.argv, log, env=self.env,
                                        cwd=self.cwd)
        return self

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def _group_alive(self):
        try:
            os.killpg(self.proc.pid, 0)
            return True
        except OSError:
            return False

    def stop(self, timeout=15.0):
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except OSError:
            pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.proc.poll()
            if self.proc.returncode is not None and not self._group_alive():
                break
            time.sleep(0.1)
        else:
            LOG.warning('%s (pid %d) did not stop in %d s; killing it',
                        self.name, self.proc.pid, timeout)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()


def _bin(name):
    path = os.path.join(os.path.dirname(sys.executable), name)
    if not os.access(path, os.X_OK):
        raise SplitError('%s is not installed next to %s (--split needs '
                         'it: pip install %s)' % (
                             name, sys.executable,
                             'gunicorn' if name == 'gunicorn' else 'nova'))
    return path


# -- configuration ----------------------------------------------------------

def _write_ini(path, sections, header):
    lines = ['# %s' % line for line in header]
    for name, values in sections.items():
        lines.append('\n[%s]' % name)
        for key, value in values.items():
            for item in (value if isinstance(value, list) else [value]):
                lines.append('%s = %s' % (key, item))
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')


def _merge(*layers):
    out = collections.OrderedDict()
    for layer in layers:
        for section, values in layer.items():
            out.setdefault(section, collections.OrderedDict()).update(values)
    return out


class Layout(object):
    """Where a split sandbox's files and ports are."""

    def __init__(self, state_dir, keystone_port, nova_port, placement_port,
                 standins_port):
        self.state_dir = state_dir
        self.dir = os.path.join(state_dir, 'split')
        self.etc = os.path.join(self.dir, 'etc')
        self.log = os.path.join(self.dir, 'log')
        self.keystone_url = 'http://%s:%d/v3' % (HOST, keystone_port)
        self.nova_url = 'http://%s:%d' % (HOST, nova_port)
        self.api_url = self.nova_url + '/v2.1'
        self.placement_url = 'http://%s:%d' % (HOST, placement_port)
        self.standins_url = 'http://%s:%d' % (HOST, standins_port)
        self.nova_port = nova_port
        self.placement_port = placement_port
        self.standins_port = standins_port
        self.conf_path = os.path.join(self.etc, 'nova.conf')
        self.paste_path = os.path.join(self.etc, 'api-paste.ini')
        self.placement_conf = os.path.join(self.etc, 'placement.conf')

    def cell_conf(self, cell):
        return os.path.join(self.etc, 'nova-%s.conf' % cell)

    def compute_conf(self, host):
        return os.path.join(self.etc, 'nova-compute-%s.conf' % host)

    def log_path(self, name):
        return os.path.join(self.log, '%s.log' % name)

    def catalog(self):
        """The Keystone catalog (name, type, description, URL)."""
        return [
            ('nova', 'compute', 'Nova compute API', self.api_url),
            ('nova_lease', 'reservation',
             'nova_lease reservation API (Blazar v1 compatible)',
             self.api_url + '/os-reservation'),
            ('placement', 'placement', 'Placement API', self.placement_url),
            ('glance', 'image', 'Image service stand-in (read-only)',
             self.standins_url + standins.IMAGE_PREFIX),
            ('neutron', 'network', 'Network service stand-in (empty)',
             self.standins_url + standins.NETWORK_PREFIX),
        ]


def service_auth(keystone_url, password, username='nova'):
    return collections.OrderedDict([
        ('auth_type', 'password'), ('auth_url', keystone_url),
        ('username', username), ('password', password),
        ('project_name', 'service'), ('user_domain_name', 'Default'),
        ('project_domain_name', 'Default'), ('region_name', 'RegionOne')])


def guide_values(layout, backends, passwords):
    """The sandbox's values of guide.SUBSTITUTIONS."""
    return {
        ('nova_lease_database', 'connection'): backends.db_url('nova_lease'),
        ('nova_lease_auth', 'auth_url'): layout.keystone_url,
        ('nova_lease_auth', 'password'): passwords['nova_lease'],
        ('oslo_messaging_notifications', 'transport_url'):
            backends.transport_url('top'),
    }


#: The guide's sections that nova-compute and the cell conductors need
#: too (they send the instance notifications).
NOTIFICATION_SECTIONS = ('notifications', 'oslo_messaging_notifications')


def write_config(layout, backends, passwords, debug=False,
                 guide_path=None):
    """Write every configuration file; return {name: path}.

    ``nova.conf``: nova-api, nova-scheduler, the super conductor, the
    engines and nova-lease-manage; ``nova-<cell>.conf``: the cell's
    conductor; ``nova-compute-<host>.conf``: one compute;
    ``api-paste.ini``; ``placement.conf``.
    """
    os.makedirs(layout.etc, exist_ok=True)
    nova_guide, paste_guide = guide.read(guide_path)
    applied = guide.apply(nova_guide, guide_values(layout, backends,
                                                   passwords))
    auth = service_auth(layout.keystone_url, passwords['nova'])
    base = collections.OrderedDict([
        ('DEFAULT', collections.OrderedDict([
            ('debug', str(bool(debug))),
            ('my_ip', HOST),
            ('state_path', layout.dir),
            # The fake driver with a stable node identity (its
            # compute_id file in the host's state_path), as a real
            # single-node driver: a restarted nova-compute starts again
            # (fake.FakeDriver writes no identity and refuses to).
            ('compute_driver', 'fake.FakeDriverWithoutFakeNodes'),
            ('graceful_shutdown_timeout', '5'),
            ('manager_shutdown_timeout', '2'),
            ('instance_usage_audit', 'False'),
            ('heal_instance_info_cache_interval', '-1'),
        ])),
        ('oslo_concurrency', {'lock_path': os.path.join(layout.dir,
                                                        'locks')}),
        ('placement', auth),
        ('neutron', auth),
        ('glance', {'region_name': ks.REGION}),
        ('conductor', {'workers': '1'}),
    ])
    notify = collections.OrderedDict(
        (name, applied[name]) for name in NOTIFICATION_SECTIONS)
    policy_path = os.path.join(layout.etc, 'policy.yaml')
    with open(policy_path, 'w') as f:
        f.write('# Generated by nova-lease-sandbox --split: its members '
                'may create best-effort leases.\n'
                '"nova_lease:leases:create:best_effort": '
                '"rule:project_member_or_admin"\n')
    extras = collections.OrderedDict()
    for (section, key), (value, _why) in SANDBOX_EXTRAS.items():
        extras.setdefault(section, collections.OrderedDict())[key] = value
    top = _merge(base, {
        'DEFAULT': {'transport_url': backends.transport_url('top'),
                    'host': 'controller'},
        'api_database': {'connection': backends.db_url('nova_api')},
        'database': {'connection': backends.db_url('nova_cell0')},
        'wsgi': {'api_paste_config': layout.paste_path},
        'keystone_authtoken': dict(auth,
                                   www_authenticate_uri=layout.keystone_url),
        'scheduler': {'workers': '1',
                      'discover_hosts_in_cells_interval': '-1'},
        'oslo_policy': {'policy_file': policy_path},
    }, applied, extras)
    header = ['Generated by nova-lease-sandbox --split from the install '
              'guide; rewritten at every start.']
    _write_ini(layout.conf_path, top,
               header + ['nova-api, nova-scheduler, the super conductor, '
                         'nova-lease-engine and nova-lease-manage.'])
    files = {'nova.conf': layout.conf_path}
    for cell, hosts in CELLS.items():
        cell_layer = _merge(base, {
            'DEFAULT': {'transport_url': backends.transport_url(cell),
                        'host': '%s-conductor' % cell},
            'database': {'connection': backends.db_url('nova_' + cell)},
        }, notify)
        _write_ini(layout.cell_conf(cell), cell_layer,
                   header + ['The conductor of %s.' % cell])
        files['nova-%s.conf' % cell] = layout.cell_conf(cell)
        for host in hosts:
            host_dir = os.path.join(layout.dir, host)
            os.makedirs(host_dir, exist_ok=True)
            # The cell conductors have no API database (superconductor
            # mode): the computes must not ask them for server groups
            # (Nova's cells documentation, "Operations requiring
            # upcalls"; DevStack sets the same).
            compute = _merge(cell_layer, {
                'DEFAULT': {'host': host, 'state_path': host_dir},
                'workarounds': {'disable_group_policy_check_upcall':
                                'True'}})
            del compute['database']     # computes reach it via conductor
            _write_ini(layout.compute_conf(host), compute,
                       header + ['nova-compute on %s (%s).' % (host, cell)])
            files['nova-compute-%s.conf' % host] = layout.compute_conf(host)
    write_paste(layout.paste_path, paste_guide)
    files['api-paste.ini'] = layout.paste_path
    _write_ini(layout.placement_conf, collections.OrderedDict([
        ('DEFAULT', {'debug': str(bool(debug))}),
        ('placement_database', {'connection': backends.db_url('placement')}),
        ('api', {'auth_strategy': 'keystone'}),
        ('keystone_authtoken', dict(
            auth, www_authenticate_uri=layout.keystone_url)),
    ]), header)
    files['placement.conf'] = layout.placement_conf
    return files


def write_paste(path, paste_guide):
    """Nova's api-paste.ini with the guide's sections put in."""
    cp = configparser.ConfigParser(interpolation=None)
    cp.optionxform = str
    cp.read(nova_aio.nova_paste_ini())
    for section, items in paste_guide.items():
        cp[section] = collections.OrderedDict(items)
    with open(path, 'w') as f:
        f.write('# Generated by nova-lease-sandbox --split: Nova\'s '
                'api-paste.ini with the install guide\'s sections.\n')
        cp.write(f)


# -- the sandbox ------------------------------------------------------------

class _SplitNova(object):
    """What the sandbox's main sequence and the demo read of "nova"."""

    def __init__(self, layout):
        self.conf_path = layout.conf_path
        self.api_url = layout.api_url
        self.image_id = standins.IMAGE['id']
        self.flavor_id = nova_aio.DEFAULT_FLAVOR

    def set_quota(self, session, project_id, quota):
        session.put('%s/os-quota-sets/%s' % (self.api_url, project_id),
                    json={'quota_set': dict(quota)})


class SplitSandbox(runner.Sandbox):
    """The sandbox with Nova in separate processes (module docstring)."""

    def __init__(self, state_dir, placement_port=8778, standins_port=9292,
                 relays=False, **kw):
        """``relays``: every process (and the set-up commands) reaches
        MariaDB and RabbitMQ through a :class:`nova_lease.sandbox.proxy.
        Relay` each (:attr:`relays`, {'mysql', 'rabbit'}), which the fault
        drill (benchmarks/faults.py) cuts and restores.
        """
        super().__init__(state_dir, **kw)
        self.use_relays = relays
        self.relays = {}
        self.placement_port = placement_port
        self.standins_port = standins_port
        self.layout = Layout(self.state_dir, self.keystone_port,
                             self.nova_port, placement_port, standins_port)
        self.backends = Backends(self.state_dir)
        self.children = []
        self.engines = []
        self._backends_made = False
        self._setup_procs = []
        self.demo_steps = None

    # -- helpers -------------------------------------------------------------

    def _run(self, name, argv, env=None):
        """Start a set-up command, its output in ``log/setup.log``.

        Wait for it with :meth:`_wait_all`; :meth:`stop` kills it if it
        still runs.
        """
        with open(self.layout.log_path('setup'), 'ab') as log:
            log.write(('--- %s: %s\n' % (name, ' '.join(argv))).encode())
            log.flush()
            proc = subprocess.Popen(argv, stdout=log,
                                    stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env)
        self._setup_procs.append(proc)
        return proc

    def _wait_all(self, procs):
        for name, proc in procs:
            try:
                code = proc.wait(900)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = 'timeout'
            if code != 0:
                raise SplitError('%s failed (%s); see %s' % (
                    name, code, self.layout.log_path('setup')))

    def _nova_manage(self, conf, *args):
        return ('nova-manage %s' % ' '.join(args), self._run(
            'nova-manage', [_bin('nova-manage'), '--config-file', conf] +
            list(args)))

    def _child(self, name, argv, env=None, cwd=None):
        child = Child(name, argv, self.layout.log_path(name), env=env,
                      cwd=cwd)
        child.start()
        self.children.append(child)
        LOG.info('started %s (pid %d)', name, child.pid)
        return child

    def _wait_http(self, url, what, timeout=180, child=None):
        import urllib.error
        import urllib.request
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5):
                    return
            except urllib.error.HTTPError:
                return        # it answers
            except OSError:
                pass
            if child is not None and not child.running():
                raise SplitError('%s exited with %s; see %s' % (
                    what, child.proc.returncode, child.log_path))
            if time.monotonic() > deadline:
                raise SplitError('%s did not answer on %s within %d s'
                                 % (what, url, timeout))
            time.sleep(0.3)

    def _env(self, **extra):
        env = dict(os.environ)
        env['OS_NOVA_DISABLE_EVENTLET_PATCHING'] = '1'
        env.update(extra)
        return env

    # -- start ---------------------------------------------------------------

    def _check_ports(self):
        ports = [('keystone', self.keystone_port), ('nova', self.nova_port),
                 ('placement', self.placement_port),
                 ('stand-ins', self.standins_port)]
        if len(set(p for _, p in ports)) != len(ports):
            raise SplitError('the ports of --split must differ: %s' % ports)
        for name, port in ports:
            if not _free(port):
                raise SplitError('%s port %s:%d is not free'
                                 % (name, HOST, port))

    def start(self):
        os.makedirs(self.state_dir, exist_ok=True)
        self._check_ports()
        _bin('gunicorn')
        self.backends.check()
        early = self._setup_logging()
        for path in (self.layout.etc, self.layout.log):
            if os.path.isdir(path):
                shutil.rmtree(path)
        os.makedirs(self.layout.log)
        os.makedirs(os.path.join(self.layout.dir, 'locks'), exist_ok=True)
        passwords = openrc.load_passwords(self.state_dir)
        passwords = _with_lease_password(self.state_dir, passwords)
        self.progress('state directory %s; logs in %s'
                      % (self.state_dir, self.layout.log))
        if self.use_relays:
            self._start_relays()
        self.progress('mariadb, rabbitmq: creating databases and vhosts '
                      '%s*' % self.backends.prefix)
        self._backends_made = True
        self.backends.create()
        # On MariaDB: on SQLite, the concurrent token requests of the
        # services starting together fail with "database is locked". Not
        # through the relay: the fault drill takes the database away from
        # Nova and the engines, not from the identity service.
        self.keystone = ks.Keystone(
            self.state_dir, self.keystone_port, self.nova_port, passwords,
            catalog=self.layout.catalog(),
            service_users=('nova', 'nova_lease'),
            connection=self.backends.db_url('keystone', direct=True))
        self.keystone.log_path = self.layout.log_path('keystone')
        ks_thread = threading.Thread(target=self._keystone_thread,
                                     name='keystone-setup', daemon=True)
        ks_thread.start()
        try:
            files = write_config(self.layout, self.backends, passwords,
                                 debug=self.debug)
        except guide.GuideError as e:
            raise SplitError(str(e))
        self.progress('configuration from the install guide in %s: %s'
                      % (self.layout.etc, ', '.join(sorted(files))))
        self.nova = _SplitNova(self.layout)
        self._setup_databases()
        self._start_nova()
        # The early handler stays: this process's log is <state>/nova.log.
        del early

        while ks_thread.is_alive():
            ks_thread.join(0.2)
        if self._ks_error is not None:
            raise SplitError('keystone failed to start: %s'
                             % self._ks_error)
        self._wait_http(self.layout.api_url, 'nova-api',
                        child=self.api)
        self._make_flavors()
        self._start_engines()
        self._set_demo_quota()
        self._write_openrc(passwords)
        self._show_processes()
        self.demo_steps = _demo_steps(self)

    def _start_relays(self):
        for name, port in (('mysql', MYSQL_PORT), ('rabbit', RABBIT_PORT)):
            self.relays[name] = proxy.Relay(port).start()
        self.backends.mysql_port = self.relays['mysql'].port
        self.backends.rabbit_port = self.relays['rabbit'].port
        self.progress('relays: MariaDB %s:%d -> %d, RabbitMQ %s:%d -> %d' % (
            HOST, self.backends.mysql_port, MYSQL_PORT, HOST,
            self.backends.rabbit_port, RABBIT_PORT))

    def _setup_databases(self):
        L = self.layout
        self.progress('nova-manage: api_db sync, db sync of cell0, cell1 '
                      'and cell2; placement-manage db sync; '
                      'nova-lease-manage db sync')
        procs = [self._nova_manage(L.conf_path, 'api_db', 'sync'),
                 self._nova_manage(L.conf_path, 'db', 'sync',
                                   '--local_cell')]
        procs += [self._nova_manage(L.cell_conf(cell), 'db', 'sync',
                                    '--local_cell') for cell in CELLS]
        procs.append(('placement-manage db sync', self._run(
            'placement-manage', [_bin('placement-manage'), '--config-file',
                                 L.placement_conf, 'db', 'sync'])))
        procs.append(('nova-lease-manage db sync', self._run(
            'nova-lease-manage', [_bin('nova-lease-manage'),
                                  '--config-file', L.conf_path, 'db',
                                  'sync'], env=self._env())))
        self._wait_all(procs[:1])
        self._wait_all([self._nova_manage(
            L.conf_path, 'cell_v2', 'map_cell0', '--database_connection',
            self.backends.db_url('nova_cell0'))])
        for cell in CELLS:
            self._wait_all([self._nova_manage(
                L.conf_path, 'cell_v2', 'create_cell', '--name', cell,
                '--transport-url', self.backends.transport_url(cell),
                '--database_connection',
                self.backends.db_url('nova_' + cell), '--verbose')])
        self._wait_all(procs[1:])
        self.progress('nova-manage: cells cell0, %s mapped'
                      % ', '.join(CELLS))

    def _start_nova(self):
        L = self.layout
        env = self._env()
        self.standins = self._child('standins', [
            sys.executable, '-m', 'nova_lease.sandbox.standins',
            '--port', str(L.standins_port), '--parent-pid',
            str(os.getpid())], env=env)
        self.placement = self._gunicorn(
            'placement', 'placement.wsgi.api:application', 1,
            L.placement_port, OS_PLACEMENT_CONFIG_DIR=L.etc)
        self.progress('starting the super conductor, nova-scheduler, a '
                      'conductor per cell and %d computes' % sum(
                          len(h) for h in CELLS.values()))
        self._child('nova-conductor', [
            _bin('nova-conductor'), '--config-file', L.conf_path,
            '--log-file', L.log_path('nova-conductor')], env=env)
        self._child('nova-scheduler', [
            _bin('nova-scheduler'), '--config-file', L.conf_path,
            '--log-file', L.log_path('nova-scheduler')], env=env)
        for cell, hosts in CELLS.items():
            self._child('nova-conductor-%s' % cell, [
                _bin('nova-conductor'), '--config-file', L.cell_conf(cell),
                '--log-file', L.log_path('nova-conductor-%s' % cell)],
                env=env)
            for host in hosts:
                self._child('nova-compute-%s' % host, [
                    _bin('nova-compute'), '--config-file',
                    L.compute_conf(host), '--log-file',
                    L.log_path('nova-compute-%s' % host)], env=env)
        self.progress('starting nova-api (gunicorn, %d workers) on %s'
                      % (API_WORKERS, L.api_url))
        self.api = self._gunicorn(
            'nova-api', 'nova.wsgi.osapi_compute:application', API_WORKERS,
            L.nova_port, OS_NOVA_CONFIG_DIR=L.etc,
            OS_NOVA_CONFIG_FILES='api-paste.ini;nova.conf')
        self._wait_http(L.placement_url, 'placement', child=self.placement)
        self._wait_http(L.standins_url + standins.IMAGE_PREFIX,
                        'the stand-ins', child=self.standins)
        self._wait_computes()

    def _gunicorn(self, name, app, workers, port, **env):
        """Serve a WSGI application with gunicorn.

        Its settings are in ``<state>/split/etc/<name>/gunicorn.conf.py``,
        where it starts (gunicorn reads that file from its working
        directory): Nova and Placement parse the command line of the
        process they run in, which must hold nothing but the program.
        """
        where = os.path.join(self.layout.etc, name)
        os.makedirs(where, exist_ok=True)
        with open(os.path.join(where, 'gunicorn.conf.py'), 'w') as f:
            f.write('# %s under gunicorn; written by nova-lease-sandbox '
                    '--split.\n' % name)
            for key, value in (('wsgi_app', app),
                               ('bind', '%s:%d' % (HOST, port)),
                               ('workers', workers), ('threads', 4),
                               ('timeout', 300), ('graceful_timeout', 5),
                               ('errorlog', '-'), ('proc_name', name),
                               ('control_socket_disable', True)):
                f.write('%s = %r\n' % (key, value))
        return self._child(name, [_bin('gunicorn')], env=self._env(**env),
                           cwd=where)

    def _wait_computes(self, timeout=600):
        deadline = time.monotonic() + timeout
        for cell, hosts in CELLS.items():
            while True:
                rows = self.backends.query(
                    'nova_' + cell, 'SELECT host FROM compute_nodes WHERE '
                    'deleted = 0')
                if set(hosts) <= {row[0] for row in rows}:
                    break
                for child in self.children:
                    if not child.running():
                        raise SplitError('%s exited with %s; see %s' % (
                            child.name, child.proc.returncode,
                            child.log_path))
                if time.monotonic() > deadline:
                    raise SplitError('the computes of %s did not start '
                                     'within %d s' % (cell, timeout))
                time.sleep(0.5)
        self._wait_all([self._nova_manage(
            self.layout.conf_path, 'cell_v2', 'discover_hosts',
            '--verbose')])
        self.progress('nova-manage cell_v2 discover_hosts: %s' % '; '.join(
            '%s: %s' % (cell, ', '.join(hosts))
            for cell, hosts in CELLS.items()))

    def _make_flavors(self):
        sess = self.keystone.admin_session()
        for flavorid, name, vcpus, ram, disk in nova_aio.FLAVORS:
            sess.post('%s/flavors' % self.layout.api_url, json={'flavor': {
                'id': flavorid, 'name': name, 'vcpus': vcpus, 'ram': ram,
                'disk': disk}})
        # A nova-api worker registers in nova_lease's process list when it
        # loads the paste filter: gunicorn (no preload) loads the
        # application as each worker starts; other WSGI servers may wait
        # for the worker's first request, so send a few (the kernel
        # spreads them over the workers).
        for _ in range(4 * API_WORKERS):
            sess.get('%s/servers' % self.layout.api_url)
        self.progress('nova: flavors %s created (as the admin)' % ', '.join(
            f[1] for f in nova_aio.FLAVORS))

    def _start_engines(self):
        for number in range(1, ENGINES + 1):
            engine = engine_proc.EngineProcess(
                self.layout.log, self.layout.conf_path,
                progress=self.progress,
                name='nova-lease-engine-%d' % number,
                extra_args=['--debug'])
            engine.start()
            self.engines.append(engine)
        for engine in self.engines:
            try:
                engine.wait_ready()
            except engine_proc.EngineError as e:
                raise SplitError(str(e))
        # The demo's crash step kills (and the sandbox restarts) the first.
        self.engine = self.engines[0]

    def _show_processes(self):
        proc = subprocess.run(
            [_bin('nova-lease-manage'), '--config-file',
             self.layout.conf_path, 'process', 'list'],
            capture_output=True, text=True, stdin=subprocess.DEVNULL,
            env=self._env(), timeout=120)
        with open(self.layout.log_path('process-list'), 'w') as f:
            f.write(proc.stdout + proc.stderr)
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        for line in lines:
            self.progress('  %s' % line)
        counts = collections.Counter()
        for line in lines:
            for binary in ('nova-api', 'nova-scheduler',
                           'nova-lease-engine'):
                if binary in line and ' up' in line:
                    counts[binary] += 1
        self.progress('nova-lease-manage process list: %d nova-api '
                      'workers, %d nova-scheduler, %d engines up' % (
                          counts['nova-api'], counts['nova-scheduler'],
                          counts['nova-lease-engine']))

    # -- stop -----------------------------------------------------------------

    def stop(self):
        # Set-up commands still running (a signal during start-up).
        for proc in self._setup_procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self._setup_procs = []
        for engine in self.engines:
            self.progress('stopping %s' % engine.name)
            try:
                engine.stop()
            except Exception:
                LOG.exception('stopping %s failed', engine.name)
        self.engines = []
        self.engine = None
        if self.children:
            self.progress('stopping nova-api, the scheduler, conductors, '
                          'computes, placement and the stand-ins')
            # nova-api first (no new requests), the rest together.
            api = [c for c in self.children if c.name == 'nova-api']
            for child in api:
                child.stop()
            threads = [threading.Thread(target=c.stop, daemon=True)
                       for c in self.children if c not in api]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            self.children = []
        if self.keystone is not None:
            self.progress('stopping keystone')
            self.keystone.stop()
            self.keystone = None
        for relay in self.relays.values():
            relay.stop()
        self.relays = {}
        if self._backends_made:
            self._backends_made = False
            try:
                databases, vhosts = self.backends.drop()
                self.progress('dropped databases %s and vhosts %s' % (
                    ', '.join(databases), ', '.join(vhosts)))
            except Exception as e:
                LOG.exception('dropping the databases and vhosts failed')
                self.progress('error: dropping the databases and vhosts '
                              'failed: %s' % e)


def _with_lease_password(state_dir, passwords):
    """``passwords`` with one for the guide's nova_lease service user.

    Generated once, kept in the same secrets file.
    """
    if 'nova_lease' in passwords:
        return passwords
    import secrets

    passwords = dict(passwords, nova_lease=secrets.token_urlsafe(12))
    path = os.path.join(state_dir, openrc._SECRETS)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, 'w') as f:
        json.dump(passwords, f)
    return passwords


# -- the demo's split-only steps ----------------------------------------------

#: How soon the engine must end the lease of a server its user deleted.
DELETE_ENDS_LEASE_WITHIN = 2.0


def _notification_counts(sandbox):
    counts = {}
    for engine in sandbox.engines:
        try:
            with open(engine.log_path, 'rb') as f:
                text = f.read().decode('utf-8', 'replace')
        except OSError:
            text = ''
        counts[engine.name] = text.count('Compute hook: instance.')
    return counts


def _demo_steps(sandbox):
    def _deleted_server_ends_lease(demo):
        before = sum(_notification_counts(sandbox).values())
        demo_mod._boot_leased(demo, 'demo-vm6', {
            'name': 'demo-deleted', 'start': 'now', 'duration': '1h'},
            'ACTIVE')
        server_id = demo.booked_servers.pop()
        api = demo_mod.Reservation(demo.env)

        def _linked():
            server = demo.compute.get(server_id)
            return (server.metadata.get('lease_status') == 'active' and
                    server.metadata.get('lease_id'))

        lease_id = demo.wait_for('the lease to start', _linked)
        demo.say('lease %s ACTIVE; nova delete demo-vm6', lease_id)
        t0 = time.monotonic()
        demo.compute.delete(server_id)
        demo.wait_for('deletion', lambda: not demo.compute.exists(
            server_id), interval=0.05)
        gone = time.monotonic()
        status = None
        while time.monotonic() - gone < 30:
            try:
                status = api.get_lease(lease_id)['status']
            except Exception:
                status = 'gone'
            if status != 'ACTIVE':
                break
            time.sleep(0.05)
        ended = time.monotonic()
        demo.say('server %s gone after %.2f s; its lease %s %s %.2f s '
                 'later', server_id, gone - t0, lease_id, status,
                 ended - gone)
        if status == 'ACTIVE' or ended - gone > DELETE_ENDS_LEASE_WITHIN:
            raise demo_mod.DemoFailed(
                'the lease of a deleted server did not end within %.0f s'
                % DELETE_ENDS_LEASE_WITHIN)
        after = sum(_notification_counts(sandbox).values())
        if after <= before:
            raise demo_mod.DemoFailed('the engines logged no notification '
                                      'of that server')

    def _notifications(demo):
        counts = _notification_counts(sandbox)
        for name, count in sorted(counts.items()):
            demo.say('%s received %d instance notifications of Nova '
                     '(its log)', name, count)
        if not sum(counts.values()):
            raise demo_mod.DemoFailed('no engine received a notification')

    steps = demo_mod.default_steps()
    return steps + [
        demo_mod.Step('delete a leased VM: its lease ends within %.0f s '
                      '(the engine hears Nova)' % DELETE_ENDS_LEASE_WITHIN,
                      _deleted_server_ends_lease),
        demo_mod.Step('count the Nova notifications the engines received',
                      _notifications),
    ]
