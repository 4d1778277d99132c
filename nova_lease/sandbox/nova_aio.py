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
"""An all-in-one Nova 34 in this process, in native threading mode.

:class:`NovaAllInOne` is a ``fixtures.Fixture``: ``setUp()`` brings
everything up, ``cleanUp()`` takes it down in reverse order. What runs:

* nova-api served by a threaded stdlib WSGI server on 127.0.0.1:<port>,
  loaded from an api-paste.ini generated from Nova's packaged one with the
  nova_lease filter right after ``keystonecontext`` (the operator way), and
  Nova's real keystonemiddleware ``auth_token`` configured against the
  sandbox's Keystone;
* nova-conductor, nova-scheduler (LeaseFilter + LeaseWeigher configured in
  ``[filter_scheduler]``) and one nova-compute per host with the fake virt
  driver, talking over oslo.messaging's in-process ``fake://`` transport
  (real asynchronous casts and calls; no notifications, which nothing in
  this process reads);
* SQLite databases (API, cell0, cell1, and nova_lease's side database) in
  files under ``<state>/nova``, rebuilt at every start, with the cells
  mapped like ``nova-manage cell_v2 simple_cell_setup``;
* Nova's own stand-ins for the services a sandbox has not got
  (nova.tests.fixtures: Placement in process, Glance, Neutron, Cinder).

The generated nova.conf is written to ``<state>/nova/nova.conf`` for
reference and for nova-lease-manage, and the configuration of
nova-lease-engine, which runs as a process of its own
(:mod:`nova_lease.sandbox.engine`), to
``<state>/nova/nova-lease-engine.conf``.
"""

import configparser
import os
import shutil
import threading
from unittest import mock
from wsgiref import simple_server

import fixtures
from importlib import metadata
from oslo_config import cfg
from oslo_log import log as logging

from nova_lease.sandbox import children
from nova_lease.sandbox import devstack
from nova_lease.sandbox import engine
from nova_lease.sandbox import images
from nova_lease.sandbox import placement_edge

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

HOST = '127.0.0.1'
#: host name -> (vcpus, memory_mb, disk_gb) of the fake compute hosts.
DEFAULT_HOSTS = {
    'host1': (4, 8192, 80),
    'host2': (4, 8192, 80),
    'host3': (8, 16384, 160),
}
#: (flavorid, name, vcpus, memory_mb, root_gb): Nova's classic flavors.
FLAVORS = (
    ('1', 'm1.tiny', 1, 512, 1),
    ('2', 'm1.small', 1, 2048, 20),
    ('3', 'm1.medium', 2, 4096, 40),
    ('4', 'm1.large', 4, 8192, 80),
    ('5', 'm1.xlarge', 8, 16384, 160),
)
DEFAULT_FLAVOR = '1'
#: The demo project's compute quota: room for a hundred m1.tiny servers,
#: running or shelved (shelved servers count too), where Nova's defaults
#: (10 instances, 20 cores) stop a user trying bursts of leases early.
DEMO_QUOTA = {'instances': 100, 'cores': 100, 'ram': 100 * 512}
LEASE_FILTER = 'nova_lease.scheduler.filters.LeaseFilter'
LEASE_WEIGHER = 'nova_lease.scheduler.weights.LeaseWeigher'
LEASE_PASTE_FILTER = 'nova_lease.api_ext.middleware:LeaseMiddleware.factory'
#: The filter's name in api-paste.ini, as in the install guide.
PASTE_FILTER_NAME = 'nova_lease'
#: The lease API's version document, before authtoken (read without a
#: token).
VERSIONS_PASTE_FILTER = (
    'nova_lease.api_ext.middleware:VersionsMiddleware.factory')
VERSIONS_FILTER_NAME = 'nova_lease_versions'
_PIPELINES = ('composite:openstack_compute_api_v21',
              'composite:openstack_compute_api_v21_legacy_v2_compatible')


def nova_paste_ini():
    """Path of the api-paste.ini that ships with the installed nova."""
    for path in metadata.distribution('nova').files or ():
        if path.name == 'api-paste.ini':
            return str(path.locate().resolve())
    raise RuntimeError('the installed nova has no api-paste.ini')


def write_paste_ini(path, with_plugin=True):
    """Write Nova's api-paste.ini with the nova_lease filter added.

    Exactly what the install guide tells operators to do: a
    ``[filter:nova_lease]`` section and ``nova_lease`` right after
    ``keystonecontext`` in the v2.1 pipelines, and
    ``nova_lease_versions`` right before ``authtoken``.
    """
    cp = configparser.ConfigParser(interpolation=None)
    cp.optionxform = str
    cp.read(nova_paste_ini())
    if with_plugin:
        for section in _PIPELINES:
            items = cp[section]['keystone'].split()
            items.insert(items.index('keystonecontext') + 1,
                         PASTE_FILTER_NAME)
            items.insert(items.index('authtoken'), VERSIONS_FILTER_NAME)
            cp[section]['keystone'] = ' '.join(items)
        cp['filter:%s' % PASTE_FILTER_NAME] = {
            'paste.filter_factory': LEASE_PASTE_FILTER}
        cp['filter:%s' % VERSIONS_FILTER_NAME] = {
            'paste.filter_factory': VERSIONS_PASTE_FILTER}
    with open(path, 'w') as f:
        f.write('# Generated by nova-lease-sandbox from Nova\'s '
                'api-paste.ini\n')
        cp.write(f)


def _default_filters():
    from nova.conf import scheduler as sched_conf
    for opt in sched_conf.filter_scheduler_opts:
        if opt.name == 'enabled_filters':
            return list(opt.default)
    raise RuntimeError('nova has no [filter_scheduler] enabled_filters')


def _sqlite(nova_dir, name):
    return 'sqlite:///%s' % os.path.join(nova_dir, name)


def lease_connection(nova_dir):
    """The side database URL: next to Nova's databases, rebuilt with them
    at every start (leases and registered hosts refer to Nova's servers,
    compute nodes and aggregates, which a restart forgets).
    """
    return _sqlite(nova_dir, 'nova_lease.sqlite')


def service_auth(keystone_url, passwords):
    """Keystone options of the ``nova`` service user (keystoneauth's)."""
    return {
        'auth_type': 'password',
        'auth_url': keystone_url,
        'username': 'nova',
        'password': passwords['nova'],
        'project_name': 'service',
        'user_domain_name': 'Default',
        'project_domain_name': 'Default',
        'region_name': 'RegionOne',
    }


#: The aggregate whose hosts the sandbox lends to best-effort leases.
BEST_EFFORT_AGGREGATE = 'best-effort'


def write_nova_conf(path, nova_dir, keystone_url, passwords,
                    with_plugin=True, debug=False, blazar_layout=False):
    """Write the sandbox's nova.conf (also read by nova-lease-manage)."""
    def sqlite(name):
        return _sqlite(nova_dir, name)

    filters = _default_filters()
    available = ['nova.scheduler.filters.all_filters']
    weighers = ['nova.scheduler.weights.all_weighers']
    if with_plugin:
        filters.append('LeaseFilter')
        available.append(LEASE_FILTER)
        weighers.append(LEASE_WEIGHER)
    auth = service_auth(keystone_url, passwords)
    sections = {
        'DEFAULT': {
            'debug': str(bool(debug)),
            'state_path': nova_dir,
            'transport_url': 'fake://',
            'compute_driver': 'fake.FakeDriver',
            'my_ip': HOST,
            'host': 'sandbox',
            'manager_shutdown_timeout': '1',
            'graceful_shutdown_timeout': '2',
            'instance_usage_audit': 'False',
            'heal_instance_info_cache_interval': '-1',
        },
        'api_database': {'connection': sqlite('nova_api.sqlite'),
                         'sqlite_synchronous': 'False'},
        'database': {'connection': sqlite('nova_cell1.sqlite'),
                     'sqlite_synchronous': 'False'},
        'wsgi': {'api_paste_config': os.path.join(nova_dir,
                                                  'api-paste.ini')},
        'keystone_authtoken': dict(auth, www_authenticate_uri=keystone_url),
        'filter_scheduler': {
            # A MultiStrOpt: one line per value.
            'available_filters': available,
            'enabled_filters': ','.join(filters),
            'weight_classes': ','.join(weighers),
        },
        'scheduler': {'discover_hosts_in_cells_interval': '-1'},
        'oslo_messaging_notifications': {
            '#': ['RPC and notifications use the fake:// transport, which',
                  'lives inside the sandbox process: nova-lease-engine, a',
                  'process of its own, could not hear them (and unread',
                  'ones pile up in memory). So Nova sends none, and the',
                  "engine's compute hook relies on its reconcile pass (see",
                  'nova-lease-engine.conf). Production: see the install',
                  'guide (doc/source/install/install.rst).'],
            'driver': 'noop',
        },
        'oslo_concurrency': {'lock_path': os.path.join(nova_dir, 'locks')},
        'nova_lease_database': {'connection': lease_connection(nova_dir)},
        'nova_lease_auth': dict(auth),
    }
    if with_plugin:
        # The demo's best-effort lease: the sandbox opts in, lends the
        # hosts of one aggregate (the demo makes it) and lets its members
        # ask (policy.yaml).
        policy_path = os.path.join(nova_dir, 'policy.yaml')
        with open(policy_path, 'w') as f:
            f.write('# Generated by nova-lease-sandbox: its members may '
                    'create best-effort leases.\n'
                    '"nova_lease:leases:create:best_effort": '
                    '"rule:project_member_or_admin"\n')
        sections['nova_lease_api'] = {
            'best_effort_enabled': 'True',
            'best_effort_aggregate': BEST_EFFORT_AGGREGATE,
        }
        if blazar_layout:
            # --devstack-layout stands for a Blazar deployment (its
            # acceptance suite runs there): a boot over an instance
            # reservation's slots ends in ERROR, as with Blazar.
            sections['nova_lease_api']['instance_reservation_overflow'] = (
                'error')
        sections['oslo_policy'] = {'policy_file': policy_path}
    lines = ['# Generated by nova-lease-sandbox; rewritten at every start.']
    for name, values in sections.items():
        lines.append('\n[%s]' % name)
        for key, value in values.items():
            for item in (value if isinstance(value, list) else [value]):
                lines.append('# %s' % item if key == '#' else
                             '%s = %s' % (key, item))
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')


class _LogHandler(simple_server.WSGIRequestHandler):
    """Send wsgiref's access log to the log file, not to stderr."""

    def log_message(self, fmt, *args):
        LOG.debug('%s %s', self.address_string(), fmt % args)


def lease_db_sync(conf):
    """Create/upgrade the nova_lease side database ([nova_lease_database]
    connection).

    Called once, after nova.conf is parsed and before nova-api loads its
    paste pipeline (so the middleware finds its tables). What
    ``nova-lease-manage db sync`` runs.
    """
    from nova_lease import conf as lease_conf
    from nova_lease.db import migration

    url = lease_conf.connection_url(conf)
    migration.upgrade(url)
    LOG.info('nova_lease side database ready: %s',
             url.split('://', 1)[0] + '://...')


class NovaAllInOne(fixtures.Fixture):
    """Nova 34 all-in-one (see the module docstring)."""

    def __init__(self, state_dir, port, keystone_url, passwords,
                 hosts=None, with_plugin=True, debug=False, progress=None,
                 devstack_port=None):
        super().__init__()
        self.state_dir = state_dir
        self.nova_dir = os.path.join(state_dir, 'nova')
        self.port = port
        self.keystone_url = keystone_url
        self.passwords = passwords
        self.hosts = dict(hosts or DEFAULT_HOSTS)
        self.with_plugin = with_plugin
        self.debug = debug
        self.progress = progress or (lambda msg: None)
        self.conf_path = os.path.join(self.nova_dir, 'nova.conf')
        self.engine_conf_path = os.path.join(self.nova_dir,
                                             engine.CONF_NAME)
        self.api_url = 'http://%s:%d/v2.1' % (HOST, port)
        self.services = {}
        self.image_id = None
        self.flavor_id = DEFAULT_FLAVOR
        self._server = None
        self.devstack_port = devstack_port

    # What nova.tests.fixtures' stand-ins expect from a "test".
    def stub_out(self, old, new):
        self.useFixture(fixtures.MonkeyPatch(old, new))

    def flags(self, **kw):
        group = kw.pop('group', None)
        for key, value in kw.items():
            CONF.set_override(key, value, group)
            self.addCleanup(CONF.clear_override, key, group)

    def configure(self):
        """Write nova.conf and api-paste.ini and parse them into CONF."""
        # Nova's databases and the lease database are rebuilt at every
        # start: the fake computes forget their instances when the process
        # ends anyway.
        if os.path.isdir(self.nova_dir):
            shutil.rmtree(self.nova_dir)
        for suffix in ('', '-wal', '-shm'):    # where earlier versions kept it
            try:
                os.unlink(os.path.join(self.state_dir,
                                       'nova_lease.sqlite' + suffix))
            except FileNotFoundError:
                pass
        os.makedirs(os.path.join(self.nova_dir, 'locks'))
        write_paste_ini(os.path.join(self.nova_dir, 'api-paste.ini'),
                        self.with_plugin)
        write_nova_conf(self.conf_path, self.nova_dir, self.keystone_url,
                        self.passwords, with_plugin=self.with_plugin,
                        debug=self.debug,
                        blazar_layout=self.devstack_port is not None)
        if self.with_plugin:
            engine.write_engine_conf(
                self.engine_conf_path,
                os.path.join(self.state_dir, engine.LOG_NAME),
                lease_connection(self.nova_dir),
                service_auth(self.keystone_url, self.passwords),
                debug=self.debug)
        from nova import config as nova_config
        from nova_lease import conf as lease_conf
        lease_conf.register_opts(CONF)
        nova_config.parse_args(['nova-lease-sandbox'],
                               default_config_files=[self.conf_path],
                               configure_db=True, init_rpc=False,
                               prog='nova-lease-sandbox')

    def _setUp(self):
        from nova import objects
        from nova.tests import fixtures as nova_fixtures

        objects.register_all()
        # Serialise SQLite writers per database file, and keep the fake
        # computes from sharing one node identity file.
        self.useFixture(nova_fixtures.DatabaseWriteLock())
        self.useFixture(nova_fixtures.ComputeNodeIdFixture())
        self._setup_rpc()
        self._setup_databases()
        self._setup_stand_ins()
        lease_db_sync(CONF)
        self.progress('nova: starting conductor, scheduler and %d computes'
                      % len(self.hosts))
        self._start_services()
        self._start_api()

    def _setup_rpc(self):
        from nova import rpc
        rpc.init(CONF)
        self.addCleanup(rpc.cleanup)

    def _setup_databases(self):
        from nova import context
        from nova.db import migration
        from nova import objects

        self.progress('nova: creating databases')
        migration.db_sync(database='api')
        migration.db_sync(database='main')
        # cell0 gets the same schema: copy the freshly migrated file.
        cell1_path = os.path.join(self.nova_dir, 'nova_cell1.sqlite')
        cell0_path = os.path.join(self.nova_dir, 'nova_cell0.sqlite')
        shutil.copyfile(cell1_path, cell0_path)
        for path in (cell0_path, cell1_path,
                     os.path.join(self.nova_dir, 'nova_api.sqlite')):
            _sqlite_wal(path)

        ctxt = context.get_admin_context()
        objects.CellMapping(
            ctxt, uuid=objects.CellMapping.CELL0_UUID, name='cell0',
            transport_url='none:///',
            database_connection='sqlite:///%s' % cell0_path).create()
        objects.CellMapping(
            ctxt, uuid='9b0b3e6c-2f0a-4c89-9a43-5e8f3d5a4c11', name='cell1',
            transport_url=CONF.transport_url,
            database_connection=CONF.database.connection).create()
        for flavorid, name, vcpus, ram, disk in FLAVORS:
            objects.Flavor(
                context=ctxt, flavorid=flavorid, name=name, vcpus=vcpus,
                memory_mb=ram, root_gb=disk, ephemeral_gb=0, swap=0,
                rxtx_factor=1.0, disabled=False, is_public=True).create()

    def _setup_stand_ins(self):
        from nova.tests import fixtures as nova_fixtures
        from nova.tests.functional import fixtures as func_fixtures

        self.progress('nova: starting placement and the glance/neutron/'
                      'cinder stand-ins')
        # Placement runs in process behind wsgi-intercept; the SDK fixture
        # lets nova's placement client skip the Keystone catalog.
        self.useFixture(nova_fixtures.OpenStackSDKFixture())
        self.placement = self.useFixture(func_fixtures.PlacementFixture())
        self.glance = self.useFixture(nova_fixtures.GlanceFixture(self))
        self.neutron = self.useFixture(nova_fixtures.NeutronFixture(self))
        self.cinder = self.useFixture(nova_fixtures.CinderFixture(self))
        self.image_id = self.glance.image1['id']

    def _start_service(self, name, host, before_start=None, **kwargs):
        from nova import service
        svc = service.Service.create(binary='nova-%s' % name, host=host,
                                     topic=name, **kwargs)
        if before_start is not None:
            before_start(svc)
        svc.start()
        self.services['%s/%s' % (name, host)] = svc
        self.addCleanup(self._stop_service, name, host, svc)
        return svc

    @staticmethod
    def _stop_service(name, host, svc):
        try:
            svc.stop()
        except Exception:
            LOG.exception('stopping nova-%s on %s failed', name, host)

    def _start_services(self):
        from nova.compute import rpcapi as compute_rpcapi
        from nova import context
        from nova import objects

        self._start_service('conductor', 'sandbox')
        self._start_service('scheduler', 'sandbox')
        driver_cls = _driver_class()
        for host, (vcpus, ram, disk) in sorted(self.hosts.items()):
            # The fake driver names its node after CONF.host and reads its
            # size from class attributes (at creation, and for the placement
            # inventory later): give each driver instance its own.
            def _size(svc, vcpus=vcpus, ram=ram, disk=disk):
                drv = svc.manager.driver
                drv.vcpus, drv.memory_mb, drv.local_gb = vcpus, ram, disk

            CONF.set_override('host', host)
            try:
                with mock.patch.multiple(driver_cls, vcpus=vcpus,
                                         memory_mb=ram, local_gb=disk):
                    self._start_service(
                        'compute', host, before_start=_size,
                        topic_alt=compute_rpcapi.RPC_TOPIC_ALT)
            finally:
                CONF.clear_override('host')
        ctxt = context.get_admin_context()
        mapped = objects.host_mapping.discover_hosts(ctxt)
        LOG.info('mapped hosts: %s', [m.host for m in mapped])

    def _start_api(self):
        from nova.api import wsgi as api_wsgi

        self.progress('nova: starting nova-api on %s' % self.api_url)
        _register_api_service(CONF.host)
        app = images.mount(api_wsgi.Loader().load_app('osapi_compute'),
                           images.ImageApp(self._images))
        app = images.mount(app, placement_edge.app(
            self.placement.endpoint), prefix=placement_edge.PREFIX)
        self._server = simple_server.make_server(
            HOST, self.port, app, server_class=children.ThreadingWSGIServer,
            handler_class=_LogHandler)
        self._serve(self._server, 'nova-api')
        if self.devstack_port is not None:
            self.progress('nova: DevStack layout on http://%s:%d '
                          '(/compute, /reservation/v1)'
                          % (HOST, self.devstack_port))
            self._serve(simple_server.make_server(
                HOST, self.devstack_port, devstack.DevStackLayout(app),
                server_class=children.ThreadingWSGIServer,
                handler_class=_LogHandler), 'devstack-layout')

    def _serve(self, server, name):
        thread = threading.Thread(target=server.serve_forever,
                                  kwargs={'poll_interval': 0.2},
                                  name=name, daemon=True)
        thread.start()
        self.addCleanup(self._stop_server, server, thread)

    def set_quota(self, session, project_id, quota):
        """PUT os-quota-sets of ``project_id`` as the admin ``session``.

        What ``openstack quota set --instances N ...`` does.
        """
        session.put('%s/os-quota-sets/%s' % (self.api_url, project_id),
                    json={'quota_set': dict(quota)})

    def _images(self):
        return list(self.glance.images.values())

    @staticmethod
    def _stop_server(server, thread):
        server.shutdown()
        server.server_close()
        thread.join(5)


def _register_api_service(host):
    """The nova-osapi_compute service record of this nova-api, created or
    brought to this Nova's service version, as Nova's own WSGI
    application does at its start.
    """
    from nova import context as nova_context
    from nova import exception as nova_exception
    from nova import objects

    ctxt = nova_context.get_admin_context()
    binary = 'nova-osapi_compute'
    service = objects.Service.get_by_host_and_binary(ctxt, host, binary)
    if service is not None:
        # A Service object always carries this Nova's version: saving it
        # records that version.
        service.save()
        return
    service = objects.Service(ctxt, host=host, binary=binary, topic=None,
                              report_count=0)
    try:
        service.create()
    except (nova_exception.ServiceTopicExists,
            nova_exception.ServiceBinaryExists):
        pass


def _driver_class():
    from oslo_utils import importutils
    return importutils.import_class('nova.virt.' + CONF.compute_driver)


def _sqlite_wal(path):
    import sqlite3
    conn = sqlite3.connect(path)
    try:
        conn.execute('PRAGMA journal_mode=WAL')
    finally:
        conn.close()
