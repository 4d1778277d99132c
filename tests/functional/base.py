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
"""Base class for tests against a real, in-process Nova with nova_lease.

Nova runs as an operator would run it with the plugin: the paste filter is
in api-paste.ini (generated from Nova's packaged file), LeaseFilter and
LeaseWeigher are named in ``[filter_scheduler]``, ``[nova_lease]`` (and
``[nova_lease_api]``, ...) options are set in Nova's CONF. Nothing of
nova_lease is instantiated by the tests.
"""

import faulthandler
import functools
import importlib
import json
import os
import sys
import unittest
from unittest import mock
import warnings

import fixtures
import nova.conf
from nova.conf import scheduler as nova_scheduler_conf
from nova import context as nova_context
from nova import objects
from nova import test as nova_test
from nova.tests.functional.api import client as api_client
from nova.tests.functional import integrated_helpers
from novaclient import client as nova_client
from oslo_messaging import opts as oslo_messaging_opts
from oslo_utils import importutils
from sqlalchemy import exc as sqla_exc

from nova_lease.api_ext.lease_api import microversion
from nova_lease.capacity import admission
from nova_lease import conf as lease_conf
from nova_lease.db import api as db_api
from nova_lease.db import migration
from nova_lease import policy as lease_policy
# Nova loads LeaseFilter from its configuration inside a fixture that
# forbids os.uname(), which numpy (used by the capacity calendar) calls
# when it is first imported: import it before any test starts.
from nova_lease.scheduler import filters as _lease_filters  # noqa: F401
from tests.functional import fixtures as lease_fixtures

CONF = nova.conf.CONF
# oslo.messaging registers [DEFAULT] executor_thread_pool_size when a
# server is made; registered here so that setUp can set it before.
for _group, _opts in oslo_messaging_opts.list_opts():
    if _group in (None, 'DEFAULT'):
        CONF.register_opts([o for o in _opts
                            if o.name == 'executor_thread_pool_size'])
#: Workers of each RPC server's executor (see LeaseFunctionalBase.setUp).
RPC_WORKERS = 8
# The module of Nova's fixtures (``nova.tests.fixtures.nova`` as a dotted
# attribute path is the nova package: the fixtures package imports it).
nova_fixtures_module = importlib.import_module('nova.tests.fixtures.nova')
# Register [nova_lease*] and [nova_lease_auth] before any self.flags() on
# them (Nova itself never imports the plugin's options).
lease_conf.register_opts(CONF)

#: The microversion of the tests' python-novaclient clients (the highest
#: python-novaclient supports; Nova 34 goes up to 2.104).
NOVACLIENT_VERSION = '2.96'

#: The lease API microversion the project's tests speak: they use every
#: extension (a client that wants another sets ``reservation_version``
#: on itself: a version, or None for no header, i.e. 1.0).
LEASE_API_VERSION = microversion.MAX_VERSION

LEASE_FILTER_PATH = 'nova_lease.scheduler.filters.LeaseFilter'
LEASE_WEIGHER_PATH = 'nova_lease.scheduler.weights.LeaseWeigher'


_nova_request = api_client.TestOpenStackClient.request


def _request_at_lease_version(client, url, method='GET', body=None,
                              headers=None):
    """Nova's test client's ``request``, which also asks the lease API
    for the client's ``reservation_version`` (default
    :data:`LEASE_API_VERSION`), in the same ``OpenStack-API-Version``
    header as the compute microversion (the client refuses that header
    from its callers).
    """
    version = getattr(client, 'reservation_version', LEASE_API_VERSION)
    if '/os-reservation' in url and version is not None:
        headers = dict(headers or {})
        entry = '%s %s' % (microversion.SERVICE_TYPE, version)
        given = headers.get(microversion.HEADER)
        if not given:
            headers[microversion.HEADER] = entry
        elif microversion.SERVICE_TYPE not in given.lower():
            headers[microversion.HEADER] = '%s, %s' % (given, entry)
    return _nova_request(client, url, method=method, body=body,
                         headers=headers)


def _watchdog(test):
    """Past OS_TEST_TIMEOUT (which oslotest's fixture turns into an
    exception in the test's own thread), give the test a minute more to
    clean up; then print every thread's stack and end the test process,
    so that a hang fails the run with its stacks instead of stalling it.
    """
    try:
        timeout = int(os.environ.get('OS_TEST_TIMEOUT') or 0)
    except ValueError:
        return
    if timeout > 0:
        faulthandler.dump_traceback_later(
            timeout + 60, exit=True, file=sys.__stderr__)
        test.addCleanup(faulthandler.cancel_dump_traceback_later)


def run_case(case):
    """Run one test case of a benchmark (benchmarks/) with its output on
    stderr; True if it passed.

    A benchmark's length is set by its arguments, not by the suite's
    per-test timeout (OS_TEST_TIMEOUT), which is switched off.
    """
    os.environ['OS_TEST_TIMEOUT'] = '0'
    suite = unittest.TestSuite([case])
    return unittest.TextTestRunner(stream=sys.stderr, verbosity=0).run(
        suite).wasSuccessful()


def nova_default_opt(name, group='filter_scheduler'):
    """Return the default of one of Nova's [filter_scheduler] options."""
    for opt_group, opts in nova_scheduler_conf.list_opts().items():
        if opt_group.name == group:
            for opt in opts:
                if opt.name == name:
                    return opt.default
    raise LookupError('%s.%s' % (group, name))


def scheduler_flags():
    """The [filter_scheduler] options an operator sets for nova_lease."""
    return {
        'available_filters': (
            list(nova_default_opt('available_filters')) +
            [LEASE_FILTER_PATH]),
        'enabled_filters': (
            list(nova_default_opt('enabled_filters')) + ['LeaseFilter']),
        'weight_classes': (
            list(nova_default_opt('weight_classes')) + [LEASE_WEIGHER_PATH]),
    }


class LeaseFunctionalBase(integrated_helpers._IntegratedTestBase):
    """A real Nova (API, conductor, scheduler, computes, Placement) with the
    nova_lease plugin loaded from configuration, and a controllable clock.

    Attributes after setUp:

    * ``api`` / ``admin_api``: Nova's test REST clients (user ``fake``,
      member; user ``admin``), at the latest microversion, and the lease
      API's :data:`LEASE_API_VERSION` (a client's ``reservation_version``
      overrides it);
    * ``nova`` / ``admin_nova``: python-novaclient clients at
      :data:`NOVACLIENT_VERSION`, authenticated through :attr:`keystone`;
    * ``keystone``: the :class:`~tests.functional.fixtures.FakeKeystone`
      (``auth_url``, ``compute_url``, ``session(user)``);
    * ``clock``: the :class:`~tests.functional.fixtures.ClockFixture`;
    * ``paste_ini``: the :class:`~tests.functional.fixtures.GeneratedPasteIni`;
    * ``lease_db_url``: this test's ``[nova_lease_database] connection``;
    * ``computes``: {host: nova.service.Service}, from :attr:`COMPUTES`;
    * ``image_id``: a bootable image of the GlanceFixture.
    """

    REQUIRES_LOCKING = False
    ADMIN_API = False
    microversion = 'latest'

    #: Compute hosts to start: {host: (vcpus, memory_mb, local_gb)}.
    COMPUTES = {'host1': (4, 8192, 100), 'host2': (8, 16384, 200)}
    #: Where the clock starts (naive UTC datetime); None: now, whole second.
    CLOCK_START = None
    #: Extra options of the [filter:nova_lease] section of api-paste.ini.
    PASTE_FILTER_OPTIONS = None
    #: Nova's CPU, RAM and disk allocation ratios (and initial ones) for
    #: the computes; 1.0: a host of N vcpus holds N vcpus. None: Nova's
    #: defaults (CPU 4.0).
    ALLOCATION_RATIO = None

    def setUp(self):
        _watchdog(self)
        # Before Nova's fixtures are built: its cell lock deadlocks when
        # our engine threads call the API while the test does. (By the
        # module object: the dotted path resolves to the nova package.)
        self.useFixture(fixtures.MockPatchObject(
            nova_fixtures_module, 'ReaderWriterLock',
            lease_fixtures.ReaderPreferringLock))
        # And it sends a database access with an untargeted context to the
        # cell another thread targeted last: a compute's resource tracker
        # writing while the API lists servers (which targets cell0) finds
        # no compute node (ComputeNodeNotFound, ServiceNotFound, the build
        # fails). Every service here runs in cell1, whose database is what
        # their [database] connection would be.
        self.useFixture(fixtures.MockPatchObject(
            nova_fixtures_module.CellDatabases, '_wrap_get_context_manager',
            lease_fixtures.untargeted_to_default_cell))
        # Every service's RPC server here runs in this one process, each
        # with oslo.messaging's threading executor: up to
        # executor_thread_pool_size (64) workers each, kept until the
        # server stops, and every idle worker wakes once a second
        # (futurist's ThreadWorker.MAX_IDLE_FOR). A long test (the soak)
        # grew to ~350 of them, which spent most of the process's CPU
        # time and GIL on those wake-ups. One process needs far fewer.
        self.flags(executor_thread_pool_size=RPC_WORKERS)
        # Nova's test clients speak the lease API at LEASE_API_VERSION.
        self.useFixture(fixtures.MockPatchObject(
            api_client.TestOpenStackClient, 'request',
            _request_at_lease_version))
        super().setUp()
        self.keystone = self.useFixture(lease_fixtures.FakeKeystone(
            self.api_fixture.app(), self.glance, self.api.project_id,
            placement_url=self.placement.fixture.endpoint))
        self.nova = self.novaclient('fake')
        self.admin_nova = self.novaclient('admin')
        self.image_id = self.glance.image1['id']

    def _clear_attrs(self):
        # pytest compatibility: pytest's unittest support deletes the test
        # method attribute it set on the instance after the run; nova's
        # cleanup would have removed it already (AttributeError).
        name = self._testMethodName
        keep = self.__dict__.get(name)
        super()._clear_attrs()
        if keep is not None:
            self.__dict__[name] = keep

    def _setup_services(self):
        # Called by _IntegratedTestBase.setUp after Nova's ConfFixture,
        # databases and WarningsFixture, before any service starts: the
        # scheduler reads [filter_scheduler] and the API loads
        # api_paste_config when they start.

        # SQLAlchemy 2.1 deprecates noload(), which Nova still uses, and
        # Nova's WarningsFixture turns that warning into an error (a 500).
        # Harmless on 2.0.x; WarningsFixture restores the filters.
        warnings.filterwarnings(
            'ignore', message=r'The noload\(\) option is deprecated',
            category=sqla_exc.SADeprecationWarning)

        self.clock = self.useFixture(
            lease_fixtures.ClockFixture(self.CLOCK_START))
        self.clock.add_listener(self._on_clock_moved)

        self.paste_ini = self.useFixture(lease_fixtures.GeneratedPasteIni(
            options=self.PASTE_FILTER_OPTIONS))
        self.flags(api_paste_config=self.paste_ini.path, group='wsgi')
        self.flags(group='filter_scheduler', **scheduler_flags())

        tmp = self.useFixture(fixtures.TempDir()).path
        self.lease_db_url = 'sqlite:///%s' % os.path.join(
            tmp, 'nova_lease.sqlite')
        self.flags(connection=self.lease_db_url, group='nova_lease_database')
        # novaclient keeps a name/uuid completion cache under $HOME.
        self.useFixture(fixtures.EnvironmentVariable(
            'NOVACLIENT_UUID_CACHE_DIR', os.path.join(tmp, 'novaclient')))
        self._setup_lease_db()
        if self.ALLOCATION_RATIO is not None:
            # Before the computes report.
            for resource in ('cpu', 'ram', 'disk'):
                self.flags(**{
                    '%s_allocation_ratio' % resource: self.ALLOCATION_RATIO,
                    'initial_%s_allocation_ratio' % resource:
                        self.ALLOCATION_RATIO})

        super()._setup_services()

    def _setup_lease_db(self):
        """Create the side database at ``self.lease_db_url``.

        The schema is created from the models and stamped at head (what
        ``nova-lease-manage db sync`` gives, faster); ``[nova_lease]
        connection`` of Nova's CONF points at it, so
        ``db_api.get_database(CONF)`` (the paste filter's database) is
        this one. Cached Database objects are disposed of at cleanup.
        """
        migration.create_schema(self.lease_db_url)
        self.addCleanup(db_api.reset_databases)
        # Admission's copy of the compute nodes is of this test's Nova.
        self.addCleanup(admission.reset)
        # The lease API's enforcer is built on this test's options.
        lease_policy.reset()
        self.addCleanup(lease_policy.reset)

    def set_policy(self, rules):
        """Write rules into the operator's policy file, as an operator
        would edit Nova's policy.yaml; the lease API reads it at its next
        check. The first call points ``[oslo_policy] policy_file`` at a
        file of this test.
        """
        path = getattr(self, '_policy_path', None)
        if path is None:
            path = self._policy_path = os.path.join(
                self.useFixture(fixtures.TempDir()).path, 'policy.yaml')
            self.flags(policy_file=path, group='oslo_policy')
            lease_policy.reset()
        with open(path, 'w') as f:
            json.dump(rules, f)
        # A newer mtime at each edit, as edits seconds apart would have.
        self._policy_edits = getattr(self, '_policy_edits', 0) + 10
        mtime = os.stat(path).st_mtime + self._policy_edits
        os.utime(path, (mtime, mtime))

    def _setup_compute_service(self):
        first = None
        for host, (vcpus, memory_mb, local_gb) in self.COMPUTES.items():
            service = self._start_compute_with(host, vcpus, memory_mb,
                                               local_gb)
            first = first or service
        return first

    def _start_compute_with(self, host, vcpus=None, memory_mb=None,
                            local_gb=None):
        """Start a fake compute ``host`` with the given resources.

        The fake virt driver reads its attributes vcpus, memory_mb and
        local_gb (class defaults) when it is created and whenever it
        reports its inventory; they become the Placement inventory of the
        host's resource provider.
        """
        driver_cls = importutils.import_class(
            'nova.virt.' + CONF.compute_driver)
        sizes = {name: value for name, value in (
            ('vcpus', vcpus), ('memory_mb', memory_mb),
            ('local_gb', local_gb)) if value is not None}
        with mock.patch.multiple(driver_cls, **sizes):
            service = self._start_compute(host)
        # update_provider_tree() reads them again (self.vcpus, ...) each
        # time the resource tracker reports: keep them on the instance.
        for name, value in sizes.items():
            setattr(service.manager.driver, name, value)
        return service

    def _on_clock_moved(self, old, new):
        # Services report their heartbeat every report_interval of *real*
        # time, stamped with the (moved) clock; without a fresh one, a jump
        # longer than service_down_time makes every compute look down to
        # the scheduler (ComputeFilter). Report now, as they would have.
        # A clock that follows real time (follow_real_time) moves in steps
        # of milliseconds, between the services' own reports: no report
        # for a step under a second.
        if (new - old).total_seconds() < 1:
            return
        # Each row is written in its cell's database, named explicitly:
        # Nova's CellDatabases fixture sends an untargeted write (the
        # conductor's and the scheduler's service_ref) to whichever cell
        # another thread targeted last, where the row is not
        # (ServiceNotFound under load).
        default = self.cell_mappings[nova_test.CELL1_NAME]
        services = [(self.conductor, default), (self.scheduler, default)]
        services += [
            (service, getattr(self.host_mappings.get(host), 'cell_mapping',
                              None) or default)
            for host, service in self.computes.items()]
        admin = nova_context.get_admin_context()
        for service, cell in services:
            ref = getattr(service, 'service_ref', None)
            if ref is None:
                continue
            with nova_context.target_cell(admin, cell) as cctxt:
                row = objects.Service.get_by_id(cctxt, ref.id)
                row.report_count += 1
                row.save()

    # -- helpers ------------------------------------------------------------

    def promise(self, host, start, end, vcpus):
        """A PENDING instance lease of another project holding ``vcpus``
        (512 MB, 1 GB) on ``host`` from ``start`` to ``end``: capacity
        admission control promised, written to the side database.
        """
        db_api.lease_create(db_api.get_database(CONF), {
            'name': 'promise-%s' % host, 'project_id': 'other',
            'start_date': start, 'end_date': end, 'status': 'PENDING',
        }, reservations=[{
            'resource_type': 'virtual:instance', 'status': 'pending',
            'properties': {'vcpus': vcpus, 'memory_mb': 512, 'disk_gb': 1},
            'allocations': [{'host': host, 'start_date': start,
                             'end_date': end, 'vcpus': vcpus,
                             'memory_mb': 512, 'disk_gb': 1}],
        }])

    def move_fails(self, server, action, body, api=None):
        """A resize or cold migration (``body``, instance action
        ``action``) ends in NoValidHost; the server stays ACTIVE where it
        was. Returns the server.
        """
        where = self.admin_api.get_server(server['id'])[
            'OS-EXT-SRV-ATTR:host']
        # The harness runs RPC casts as calls, so conductor's NoValidHost
        # reaches the API (a 500 here; a deployment answers 202 and
        # records the failed action, as here too).
        error = self.assertRaises(
            api_client.OpenStackApiException,
            (api or self.admin_api).post_server_action, server['id'], body)
        self.assertIn('NoValidHost', str(error))
        self._assert_resize_migrate_action_fail(server, action,
                                                'NoValidHost')
        server = self._wait_for_server_parameter(
            server, {'status': 'ACTIVE', 'OS-EXT-STS:task_state': None})
        self.assertEqual(where, server['OS-EXT-SRV-ATTR:host'])
        return server

    def _boot(self, hints=None, name=None, flavor='1', image=None,
              wait='ACTIVE', api=None, networks='none'):
        """Boot one server through the REST API (and the nova_lease filter).

        ``hints`` go in ``os:scheduler_hints`` as given (values should be
        strings, as the CLI sends them). Waits for status ``wait`` unless
        it is None; returns the server.
        """
        api = api or self.api
        body = {'server': self._build_server(
            name=name, image_uuid=image or self.image_id, flavor_id=flavor,
            networks=networks)}
        if hints is not None:
            body['os:scheduler_hints'] = hints
        server = api.post_server(body)
        if wait:
            server = self._wait_for_state_change(server, wait)
        return server

    def novaclient(self, user='fake', project_id=None,
                   version=NOVACLIENT_VERSION):
        """Return a python-novaclient Client authenticated as ``user``."""
        return nova_client.Client(
            version, session=self.keystone.session(user, project_id))

    def nova_cli_result(self, *args, user='fake', project_id=None,
                        version=NOVACLIENT_VERSION):
        """Run ``nova <args>`` in process; return a CLIResult."""
        return lease_fixtures.run_nova_cli(
            self._cli_auth(user, project_id) +
            ['--os-compute-api-version', version] +
            [str(arg) for arg in args])

    def _cli_auth(self, user, project_id):
        """The options that authenticate a client CLI as ``user``."""
        return [
            '--os-auth-type', 'password',
            '--os-auth-url', self.keystone.auth_url,
            '--os-username', user,
            '--os-password', self.keystone.PASSWORD,
            '--os-user-domain-id', self.keystone.DOMAIN_ID,
            '--os-project-id', project_id or self.api.project_id,
            '--os-project-domain-id', self.keystone.DOMAIN_ID,
            '--os-region-name', self.keystone.REGION,
        ]

    def _cli_exit(self, cli, args, result, expect_exit):
        """Fail the test unless ``result`` exited ``expect_exit``;
        return its standard output.
        """
        if result.exit_code != expect_exit:
            self.fail('%s %s exited %s (expected %s)\nstdout:\n%s\n'
                      'stderr:\n%s' % (cli, ' '.join(map(str, args)),
                                       result.exit_code, expect_exit,
                                       result.stdout, result.stderr))
        return result.stdout

    def nova_cli(self, *args, expect_exit=0, **kwargs):
        """Run ``nova <args>`` in process; return its standard output.

        Fails the test if the exit code is not ``expect_exit``. Keyword
        arguments are those of :meth:`nova_cli_result`.
        """
        return self._cli_exit('nova', args,
                              self.nova_cli_result(*args, **kwargs),
                              expect_exit)

    def openstack_cli(self, *args, user='fake', project_id=None,
                      expect_exit=0):
        """Run ``openstack <args>`` (OpenStackClient) in process as
        ``user``; return its standard output (fails the test on another
        exit code).
        """
        result = lease_fixtures.run_openstack_cli(
            self._cli_auth(user, project_id) + [str(arg) for arg in args])
        return self._cli_exit('openstack', args, result, expect_exit)

    def engine_conf(self, **options):
        """The engine's ConfigOpts, as nova-lease-engine builds it.

        Writes a config file with ``options`` (each in its group:
        [nova_lease], [nova_lease_engine], ...), the
        [nova_lease_database] ``connection`` (by default this test's side
        database) and a [nova_lease_auth]
        service user (the admin) for the in-process compute API, and parses
        it with the engine's own parser.
        """
        from nova_lease.cmd import engine as engine_cmd
        from nova_lease import conf as lease_conf

        connection = options.pop('connection', self.lease_db_url)
        path = os.path.join(
            os.path.dirname(self.lease_db_url[len('sqlite:///'):]),
            'engine.conf')
        with open(path, 'w') as f:
            groups = {}
            for key, value in options.items():
                groups.setdefault(lease_conf.group_of(key), []).append(
                    '%s = %s\n' % (key, value))
            for group, lines in sorted(groups.items()):
                f.write('[%s]\n%s' % (group, ''.join(lines)))
            f.write('[nova_lease_database]\nconnection = %s\n' % connection)
            f.write('[nova_lease_auth]\n'
                    'auth_type = password\n'
                    'auth_url = %s\n'
                    'username = admin\n'
                    'password = %s\n'
                    'user_domain_id = default\n'
                    'project_id = %s\n'
                    'project_domain_id = default\n'
                    'region_name = %s\n'
                    % (self.keystone.auth_url, self.keystone.PASSWORD,
                       self.api.project_id, self.keystone.REGION))
        return engine_cmd.parse_args(['--config-file', path])

    def spy_on(self, cls, name, materialize=None):
        """Record the calls of method ``cls.name``, which still does its work.

        ``materialize``: index of a positional argument (after ``self``)
        that may be an iterator (e.g. the hosts a filter's filter_all gets
        from the previous filter); it is turned into a list first so that
        both the recorder and the method see every item.

        Returns a Mock whose calls are ``(instance, *args, **kwargs)``: the
        spy sits on the class, so it sees the instances Nova built from its
        configuration. (``mock.patch.object(..., autospec=True,
        side_effect=original)`` does not work here: Nova's tests replace
        mock's patcher with oslotest's, whose autospec drops ``self``.)
        """
        original = getattr(cls, name)
        recorder = mock.Mock(name='%s.%s' % (cls.__name__, name))

        @functools.wraps(original)
        def spy(instance, *args, **kwargs):
            if materialize is not None:
                args = list(args)
                args[materialize] = list(args[materialize])
            recorder(instance, *args, **kwargs)
            return original(instance, *args, **kwargs)

        self.useFixture(fixtures.MockPatchObject(cls, name, new=spy))
        return recorder

    def api_pipeline(self, prefix='/v2.1'):
        """Return the loaded middleware chain of an API prefix, outermost
        first (``/v2.1`` or the legacy ``/v2``), ending with Nova's router.
        """
        urlmap = self.api_fixture.app()
        for (domain, url), app in urlmap.applications:
            if url == prefix + '/+':
                break
        else:
            raise LookupError('no %s/+ application in the urlmap' % prefix)
        chain = [app]
        while getattr(chain[-1], 'application', None) is not None:
            chain.append(chain[-1].application)
        return chain
