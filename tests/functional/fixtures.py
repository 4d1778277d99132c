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
"""Fixtures for running nova_lease inside a real, in-process Nova.

* :class:`GeneratedPasteIni`: Nova's packaged api-paste.ini with the
  nova_lease filter added the way an operator adds it.
* :class:`ClockFixture`: one controllable clock for Nova, the engine and the
  tests (oslo_utils.timeutils override).
* :class:`FakeKeystone`: a minimal Keystone v3 (password tokens and a service
  catalog) plus the authtoken edge in front of the in-process Nova API, so
  unmodified python-novaclient and the ``nova`` CLI authenticate like real
  users do.
* :func:`run_nova_cli`: the real ``nova`` shell, in process.
"""

import collections
import configparser
import contextlib
import datetime
import io
import os
import re
import sys
import threading
import time
from unittest import mock
from urllib import parse as urlparse

import fixtures
from importlib import metadata
from keystoneauth1 import fixture as ks_fixture
from keystoneauth1.identity import v3 as ks_v3
from keystoneauth1 import session as ks_session
from nova import exception as nova_exception
from oslo_serialization import jsonutils
from oslo_utils import timeutils
from oslo_utils import uuidutils
from wsgi_intercept import interceptor

from nova_lease.sandbox import placement_edge

#: Name of the paste filter section an operator adds: [filter:nova_lease].
PASTE_FILTER_NAME = 'nova_lease'
PASTE_FILTER_FACTORY = (
    'nova_lease.api_ext.middleware:LeaseMiddleware.factory')
#: The filter of the lease API's version document, before authtoken.
VERSIONS_FILTER_NAME = 'nova_lease_versions'
VERSIONS_FILTER_FACTORY = (
    'nova_lease.api_ext.middleware:VersionsMiddleware.factory')
#: The harness's authtoken (see :func:`fake_authtoken_factory`).
FAKE_AUTHTOKEN_FACTORY = 'tests.functional.fixtures:fake_authtoken_factory'
#: Nova's two v2.1 composites; the filter goes in both, after
#: keystonecontext.
PASTE_COMPOSITES = ('composite:openstack_compute_api_v21',
                    'composite:openstack_compute_api_v21_legacy_v2_compatible')


def nova_packaged_paste_ini():
    """Return the path of the api-paste.ini installed with Nova.

    pip installs Nova's data_files under <prefix>/etc/nova/, not where
    Nova's ConfFixture default ($pybasedir/etc/nova) looks: find it through
    the distribution's file list.
    """
    for path in metadata.distribution('nova').files or ():
        if path.name == 'api-paste.ini' and 'etc' in path.parts:
            located = path.locate().resolve()
            if located.exists():
                return str(located)
    raise RuntimeError('api-paste.ini not found in the nova distribution')


def add_filter_to_paste_ini(text, name=PASTE_FILTER_NAME,
                            factory=PASTE_FILTER_FACTORY,
                            composites=PASTE_COMPOSITES, options=None):
    """Return api-paste.ini text edited the way an operator edits it.

    ``name`` is inserted right after ``keystonecontext`` and
    ``nova_lease_versions`` (the lease API's version document, read
    without a token) right before ``authtoken`` in the ``keystone``
    pipeline of each composite, and their ``[filter:...]`` sections are
    appended. Everything else (comments included) is kept as it is.
    """
    lines = text.splitlines(keepends=True)
    section, edited = None, set()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith('[') and stripped.endswith(']'):
            section = stripped[1:-1].strip()
            continue
        key, sep, value = line.partition('=')
        if (section in composites and sep and key.strip() == 'keystone'):
            items = value.split()
            for needed in ('keystonecontext', 'authtoken'):
                if needed not in items:
                    raise ValueError('no %s in [%s]' % (needed, section))
            if name not in items:
                items.insert(items.index('keystonecontext') + 1, name)
            if VERSIONS_FILTER_NAME not in items:
                items.insert(items.index('authtoken'), VERSIONS_FILTER_NAME)
            lines[i] = '%s= %s\n' % (key, ' '.join(items))
            edited.add(section)
    missing = set(composites) - edited
    if missing:
        raise ValueError('pipelines not found: %s'
                         % ', '.join(sorted(missing)))
    out = ''.join(lines)
    if not out.endswith('\n'):
        out += '\n'
    section_lines = ['', '[filter:%s]' % name,
                     'paste.filter_factory = %s' % factory]
    section_lines += ['%s = %s' % kv for kv in (options or {}).items()]
    section_lines += ['', '[filter:%s]' % VERSIONS_FILTER_NAME,
                      'paste.filter_factory = %s' % VERSIONS_FILTER_FACTORY]
    return out + '\n'.join(section_lines) + '\n'


def use_fake_authtoken(text):
    """Point api-paste.ini's ``[filter:authtoken]`` at
    :func:`fake_authtoken_factory`: the authtoken edge of the harness,
    where keystonemiddleware's runs in the pipeline.
    """
    lines = text.splitlines(keepends=True)
    section, done = None, False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith('[') and stripped.endswith(']'):
            section = stripped[1:-1].strip()
            continue
        key, sep, _value = line.partition('=')
        if (section == 'filter:authtoken' and sep and
                key.strip() == 'paste.filter_factory'):
            lines[i] = 'paste.filter_factory = %s\n' % FAKE_AUTHTOKEN_FACTORY
            done = True
    if not done:
        raise ValueError('no [filter:authtoken] paste.filter_factory')
    return ''.join(lines)


class FakeAuthToken(object):
    """What keystonemiddleware's ``authtoken`` does, at its place in
    Nova's pipeline: a request without the identity of a valid token
    (the headers :class:`FakeKeystone`'s edge, or Nova's own test
    clients, set) is answered 401 there, so the filters before it
    (``nova_lease_versions``) and Nova's own version documents are
    reached without a token, exactly as in a deployment.
    """

    def __init__(self, application):
        self.application = application

    def __call__(self, environ, start_response):
        if environ.get('HTTP_X_AUTH_USER'):
            return self.application(environ, start_response)
        body = jsonutils.dump_as_bytes({'error': {
            'code': 401, 'title': 'Unauthorized',
            'message': 'The request you have made requires '
                       'authentication.'}})
        start_response('401 Unauthorized', [
            ('Content-Type', 'application/json'),
            ('Content-Length', str(len(body))),
            ('WWW-Authenticate', 'Keystone uri="keystone"')])
        return [body]


def fake_authtoken_factory(global_conf, **local_conf):
    """paste.deploy filter factory of :class:`FakeAuthToken`."""
    return FakeAuthToken


class GeneratedPasteIni(fixtures.Fixture):
    """Write Nova's packaged api-paste.ini plus the nova_lease filter.

    ``path`` is the generated file (point ``[wsgi] api_paste_config`` at
    it), ``source`` the packaged file it came from and ``pipelines`` the
    edited ``keystone`` pipelines, by composite section.
    """

    def __init__(self, source=None, options=None):
        super().__init__()
        self.source = source
        self.options = options

    def _setUp(self):
        self.source = self.source or nova_packaged_paste_ini()
        with open(self.source) as f:
            text = use_fake_authtoken(add_filter_to_paste_ini(
                f.read(), options=self.options))
        tmp = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(tmp, 'api-paste.ini')
        with open(self.path, 'w') as f:
            f.write(text)
        # Parse it back, as paste.deploy will, to fail here and not in
        # the API fixture if the edit broke the file.
        parser = configparser.ConfigParser(interpolation=None)
        parser.optionxform = str
        parser.read(self.path)
        self.pipelines = {sect: parser[sect]['keystone'].split()
                          for sect in PASTE_COMPOSITES}


class ClockFixture(fixtures.Fixture):
    """A controllable "now" shared by Nova, the engine and the tests.

    Built on ``oslo_utils.timeutils`` override: every
    ``timeutils.utcnow()`` (Nova's created_at/updated_at, instance actions,
    service heartbeats, nova_lease's own code) returns the fixture's time,
    which only moves when the test calls :meth:`advance` or
    :meth:`advance_to`. Real-time waits (``time.sleep``, ``time.monotonic``,
    RPC timeouts) and SQLAlchemy are untouched, so jumps of days are safe
    (freezegun is not: it also ages the DB connection pool).

    Other components learn that the clock moved through
    :meth:`add_listener` (called synchronously, in the advancing thread,
    with ``(old, new)``), or by waiting on :attr:`condition` /
    :meth:`wait_until` (e.g. an engine thread sleeping until its next due
    event). Times are naive UTC datetimes, like Nova's.
    """

    def __init__(self, start=None):
        super().__init__()
        self._start = start
        self.condition = threading.Condition()
        self.generation = 0
        self._listeners = []

    def _setUp(self):
        start = self._start
        if start is None:
            start = timeutils.utcnow().replace(microsecond=0)
        if start.tzinfo is not None:
            start = timeutils.normalize_time(start)
        # oslo.utils 10 deprecates the override functions in favour of
        # mock.patch(timeutils.utcnow), but a patch misses the references
        # taken at import time (Nova's models use
        # ``default=timeutils.utcnow``); the override is seen by all.
        self.useFixture(fixtures.WarningsFilter([{
            'action': 'ignore', 'category': DeprecationWarning,
            'message': r'(set_time_override|clear_time_override|'
                       r'advance_time_delta|advance_time_seconds) is '
                       r'deprecated'}]))
        timeutils.set_time_override(start)
        self.addCleanup(timeutils.clear_time_override)
        self.addCleanup(self._listeners.clear)
        self.start = start

    @property
    def now(self):
        """The current (fixture) time, a naive UTC datetime."""
        return timeutils.utcnow()

    def add_listener(self, callback):
        """Call ``callback(old, new)`` after every move; return a remover."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback)

    def advance(self, delta=0, **kwargs):
        """Move the clock forward; return the new now.

        ``delta`` is a timedelta or a number of seconds; keyword arguments
        are timedelta's and add to it (``advance(hours=2)``). The clock
        never goes back.
        """
        if not isinstance(delta, datetime.timedelta):
            delta = datetime.timedelta(seconds=delta)
        delta += datetime.timedelta(**kwargs)
        if delta < datetime.timedelta(0):
            raise ValueError('the clock does not go back (%s)' % delta)
        with self.condition:
            old = self.now
            timeutils.advance_time_delta(delta)
            new = self.now
            self.generation += 1
            self.condition.notify_all()
        for callback in list(self._listeners):
            callback(old, new)
        return new

    def advance_to(self, when):
        """Move the clock forward to ``when`` (naive UTC); return now."""
        if when.tzinfo is not None:
            when = timeutils.normalize_time(when)
        return self.advance(max(when - self.now, datetime.timedelta(0)))

    def follow_real_time(self, interval=0.02):
        """Let the clock move with real time from now on; return a stopper.

        A thread advances the clock by the real time elapsed, every
        ``interval`` seconds, until the returned function is called or the
        fixture is cleaned up; :meth:`advance` and :meth:`advance_to` still
        jump. For runs that time Nova itself (benchmarks/wakeup.py): the
        timestamps Nova and the engine write then differ as they do in a
        deployment, where a frozen clock stamps a whole burst with one
        instant.
        """
        stop = threading.Event()

        def tick():
            last = time.monotonic()
            while not stop.wait(interval):
                now = time.monotonic()
                self.advance(now - last)
                last = now
        ticker = threading.Thread(target=tick, name='clock-ticker',
                                  daemon=True)
        ticker.start()

        def stopper():
            stop.set()
            ticker.join()
        self.addCleanup(stopper)
        return stopper

    def wait_until(self, when, timeout=None):
        """Block until the clock reaches ``when``; False on real timeout."""
        with self.condition:
            return self.condition.wait_for(lambda: self.now >= when,
                                           timeout=timeout)


#: The users the fake Keystone knows, and their roles. The user ids are
#: those of nova's OSAPIFixture clients: the stubbed keystonecontext makes
#: 'admin' an admin (is_admin) and the others plain project users.
DEFAULT_USERS = {
    'admin': ['reader', 'member', 'admin'],
    'fake': ['reader', 'member'],
    'reader': ['reader'],
    'other': ['other'],
}

Token = collections.namedtuple('Token', 'user_id project_id roles')

_IDENTITY_HEADERS = ('HTTP_X_AUTH_USER', 'HTTP_X_AUTH_PROJECT_ID',
                     'HTTP_X_ROLES', 'HTTP_X_USER_ID', 'HTTP_X_USER_NAME',
                     'HTTP_X_PROJECT_ID', 'HTTP_X_PROJECT_NAME',
                     'HTTP_X_IDENTITY_STATUS', 'HTTP_X_SERVICE_CATALOG')


class FakeKeystone(fixtures.Fixture):
    """A minimal Keystone v3 and authtoken edge for the in-process Nova.

    One wsgi-intercepted host serves:

    * ``/identity/v3``: version discovery and ``POST /auth/tokens`` with the
      password method (any user of :attr:`users`, password
      :attr:`PASSWORD`, scoped to any project id), answering a token with a
      service catalog: ``identity`` -> ``/identity``, ``compute`` ->
      ``/v2.1``, ``reservation`` ->
      ``/v2.1/os-reservation``, ``image`` -> ``/image``;
    * ``/image/v2/images...``: image look-ups from Nova's GlanceFixture (the
      ``nova`` CLI resolves ``--image`` through the catalog's image
      service);
    * ``/placement...``: the placement API of Nova's PlacementFixture (at
      ``placement_url``), as the token's user (an admin token is
      placement's admin), for clients that read placement through the
      catalog (``nova-lease-manage audit``);
    * everything else: Nova's API (the paste app the OSAPIFixture loaded)
      behind an edge that turns a valid X-Auth-Token into identity headers
      (the ones the stubbed keystonecontext reads); without them the
      harness's authtoken in Nova's pipeline (:func:`fake_authtoken_factory`,
      where keystonemiddleware's runs) answers 401.

    So clients use ordinary keystoneauth password sessions and catalog
    look-ups, exactly as against a real cloud (see :meth:`session`).
    """

    PASSWORD = 'secret'
    DOMAIN_ID = 'default'
    REGION = 'RegionOne'

    def __init__(self, nova_app, glance, project_id, users=None,
                 placement_url=None):
        super().__init__()
        self.nova_app = nova_app
        self.placement_url = placement_url
        self.glance = glance
        self.project_id = project_id
        self.users = dict(users or DEFAULT_USERS)
        self.tokens = {}
        self._lock = threading.Lock()

    def _setUp(self):
        host = 'keystone-%s' % uuidutils.generate_uuid(dashed=False)
        self.url = 'http://%s:80' % host
        self.auth_url = self.url + '/identity/v3'
        self.compute_url = self.url + '/v2.1'
        self.reservation_url = self.compute_url + '/os-reservation'
        self.image_url = self.url + '/image'
        self.placement_edge_url = self.url + '/placement'
        intercept = interceptor.RequestsInterceptor(lambda: self._app,
                                                    url=self.url)
        intercept.install_intercept()
        self.addCleanup(intercept.uninstall_intercept)

    def session(self, user='fake', project_id=None):
        """Return a keystoneauth Session authenticated as ``user``."""
        auth = ks_v3.Password(
            auth_url=self.auth_url, username=user, password=self.PASSWORD,
            user_domain_id=self.DOMAIN_ID,
            project_id=project_id or self.project_id,
            project_domain_id=self.DOMAIN_ID)
        return ks_session.Session(auth=auth)

    # -- WSGI ---------------------------------------------------------------

    def _app(self, environ, start_response):
        path = environ.get('PATH_INFO', '')
        if path == '/identity' or path.startswith('/identity/'):
            status, headers, body = self._identity(environ, path[9:])
        elif path == '/image' or path.startswith('/image/'):
            status, headers, body = self._image(environ, path[6:])
        elif self.placement_url and (path == '/placement' or
                                     path.startswith('/placement/')):
            return self._placement(environ, start_response, path[10:])
        else:
            return self._nova(environ, start_response, path)
        data = jsonutils.dump_as_bytes(body)
        headers = headers + [('Content-Type', 'application/json'),
                             ('Content-Length', str(len(data)))]
        start_response(status, headers)
        return [data]

    def _nova(self, environ, start_response, path):
        for key in _IDENTITY_HEADERS:
            environ.pop(key, None)
        token = self.tokens.get(environ.get('HTTP_X_AUTH_TOKEN'))
        # Without a valid token the request goes on without an identity:
        # the harness's authtoken (fake_authtoken_factory), where
        # keystonemiddleware's is in Nova's pipeline, answers 401.
        if token is not None:
            environ.update({
                # what nova's stubbed keystonecontext reads
                'HTTP_X_AUTH_USER': token.user_id,
                'HTTP_X_AUTH_PROJECT_ID': token.project_id,
                'HTTP_X_ROLES': ','.join(token.roles),
                # what keystonemiddleware's authtoken sets
                'HTTP_X_USER_ID': token.user_id,
                'HTTP_X_PROJECT_ID': token.project_id,
                'HTTP_X_IDENTITY_STATUS': 'Confirmed',
            })
        return self.nova_app(environ, start_response)

    def _placement(self, environ, start_response, path):
        token = self.tokens.get(environ.get('HTTP_X_AUTH_TOKEN'))
        if token is None:
            start_response('401 Unauthorized',
                           [('Content-Type', 'application/json')])
            return [b'{"errors": [{"status": 401}]}']
        # Placement's noauth2 edge: "admin" is its admin, "user:project"
        # anyone else, with the roles the token has.
        return placement_edge.forward(
            environ, start_response, self.placement_url + path,
            token.user_id, token.project_id, token.roles, timeout=None)

    def _identity(self, environ, path):
        method = environ['REQUEST_METHOD']
        if method == 'GET' and path in ('', '/'):
            return '300 Multiple Choices', [], ks_fixture.DiscoveryList(
                href=self.url + '/identity', v2=False)
        if method == 'GET' and path in ('/v3', '/v3/'):
            return '200 OK', [], {
                'version': ks_fixture.V3Discovery(self.auth_url)}
        if method == 'POST' and path == '/v3/auth/tokens':
            return self._issue_token(environ)
        return '404 Not Found', [], {'error': {
            'code': 404, 'title': 'Not Found', 'message': path}}

    def _issue_token(self, environ):
        length = int(environ.get('CONTENT_LENGTH') or 0)
        try:
            auth = jsonutils.loads(environ['wsgi.input'].read(length))['auth']
            password = auth['identity']['password']['user']
            user = password.get('id') or password.get('name')
            project = auth['scope']['project']
            project_id = project.get('id') or project.get('name')
        except (ValueError, KeyError, TypeError):
            return '400 Bad Request', [], {'error': {
                'code': 400, 'title': 'Bad Request',
                'message': 'password auth scoped to a project expected'}}
        if user not in self.users or password.get('password') != (
                self.PASSWORD):
            return '401 Unauthorized', [], {'error': {
                'code': 401, 'title': 'Unauthorized',
                'message': 'The request you have made requires '
                           'authentication.'}}
        roles = self.users[user]
        token_id = uuidutils.generate_uuid(dashed=False)
        with self._lock:
            self.tokens[token_id] = Token(user, project_id, tuple(roles))
        # keystoneauth checks expiry against the real clock, not ours.
        expires = (datetime.datetime.now(datetime.timezone.utc) +
                   datetime.timedelta(days=1))
        body = ks_fixture.V3Token(
            expires=expires, user_id=user, user_name=user,
            user_domain_id=self.DOMAIN_ID, project_id=project_id,
            project_name=project_id, project_domain_id=self.DOMAIN_ID,
            methods=['password'])
        for role in roles:
            body.add_role(name=role)
        # identity: OpenStackClient's commands build an identity client
        # (server list does, to resolve --user and --project if given).
        services = [('identity', 'keystone', self.url + '/identity'),
                    ('compute', 'nova', self.compute_url),
                    ('reservation', 'nova_lease', self.reservation_url),
                    ('image', 'glance', self.image_url)]
        if self.placement_url:
            services.append(('placement', 'placement',
                             self.placement_edge_url))
        for stype, name, url in services:
            body.add_service(stype, name=name).add_standard_endpoints(
                public=url, internal=url, admin=url, region=self.REGION)
        return '201 Created', [('X-Subject-Token', token_id)], body

    def _image(self, environ, path):
        if path in ('', '/'):
            # Version discovery (openstacksdk needs it; glance answers it
            # without a token).
            return '300 Multiple Choices', [], {'versions': [{
                'id': 'v2.16', 'status': 'CURRENT', 'links': [{
                    'rel': 'self', 'href': self.image_url + '/v2/'}]}]}
        if self.tokens.get(environ.get('HTTP_X_AUTH_TOKEN')) is None:
            return '401 Unauthorized', [], {'error': {'code': 401}}
        if path.startswith('/v2/images/'):
            try:
                return '200 OK', [], self.glance.show(None, path[11:])
            except nova_exception.ImageNotFound:
                return '404 Not Found', [], {'error': {'code': 404}}
        if path in ('/v2/images', '/v2/images/'):
            query = urlparse.parse_qs(environ.get('QUERY_STRING', ''))
            images = self.glance.detail(None)
            for key, field in (('id', 'id'), ('name', 'name'),
                               ('names', 'name')):
                for value in query.get(key, ()):
                    wanted = set(value[3:].split(',') if
                                 value.startswith('in:') else [value])
                    images = [i for i in images if i.get(field) in wanted]
            return '200 OK', [], {'images': images}
        return '404 Not Found', [], {'error': {'code': 404}}


class ReaderPreferringLock(object):
    """A reader-writer lock whose readers never wait for a waiting writer.

    Nova's CellDatabases test fixture guards its cell switching with
    fasteners' ReaderWriterLock, which makes new readers wait for a
    waiting writer. A reader that gathers from the cells in threads of its
    own (whose reads need the lock too) then deadlocks with any thread
    that asks to write meanwhile: a hang of the harness, not of Nova, which
    any test whose engine workers or observer call Nova's API while the
    test itself does (the soak walk after a few hundred steps, a test in
    the suite now and then: the run hangs for good). Same interface
    (``read_lock()``, ``write_lock()``, reentrant per thread); installed
    for every functional test by tests/functional/base.py.
    """

    def __init__(self):
        self._cond = threading.Condition()
        self._readers = {}
        self._writer = None
        self._depth = 0

    @contextlib.contextmanager
    def read_lock(self):
        me = threading.get_ident()
        with self._cond:
            while self._writer not in (None, me):
                self._cond.wait()
            self._readers[me] = self._readers.get(me, 0) + 1
        try:
            yield self
        finally:
            with self._cond:
                self._readers[me] -= 1
                if not self._readers[me]:
                    del self._readers[me]
                self._cond.notify_all()

    @contextlib.contextmanager
    def write_lock(self):
        me = threading.get_ident()
        with self._cond:
            while (self._writer not in (None, me) or
                   any(reader != me for reader in self._readers)):
                self._cond.wait()
            self._writer = me
            self._depth += 1
        try:
            yield self
        finally:
            with self._cond:
                self._depth -= 1
                if not self._depth:
                    self._writer = None
                self._cond.notify_all()


def untargeted_to_default_cell(cells, context):
    """``CellDatabases._wrap_get_context_manager`` for one compute cell.

    A targeted context keeps its cell; an untargeted one gets the default
    cell's database (cell1), as a service of that cell gets its own
    [database] connection in a deployment, instead of the database of
    whichever cell another thread targeted last.
    """
    connection = getattr(context, 'db_connection', None)
    if connection:
        return connection
    return cells._default_ctxt_mgr


CLIResult = collections.namedtuple('CLIResult', 'exit_code stdout stderr')

# Environment variables the nova shell reads; cleared for an in-process run
# so that the caller's environment (an openrc) cannot leak into tests.
_CLIENT_ENV_PREFIXES = ('OS_', 'NOVA_', 'NOVACLIENT_')
_KEEP_ENV = ('OS_NOVA_DISABLE_EVENTLET_PATCHING', 'OS_STDOUT_CAPTURE',
             'OS_STDERR_CAPTURE', 'OS_LOG_CAPTURE', 'OS_TEST_TIMEOUT',
             'OS_DEBUG', 'NOVACLIENT_UUID_CACHE_DIR')


class Hang(object):
    """A request held by :meth:`FaultInjector.hang` until released.

    ``reached`` is set when the matching request arrives, ``thread`` is
    the client thread that sent it (wsgi-intercept runs the application
    in the caller's thread), ``done`` is set once Nova has answered it
    (after :meth:`release`, unless the answer itself is held).
    """

    def __init__(self):
        self.reached = threading.Event()
        self.released = threading.Event()
        self.done = threading.Event()
        self.thread = None

    def release(self):
        self.released.set()


class FaultInjector(object):
    """WSGI wrapper in front of nova-api: a fault for matching requests.

    A rule matches a method, a path regex and a substring of the body
    (e.g. ``'"unshelve"'`` for the unshelve server action). ``times=None``
    fails forever; ``status`` is the fault's code (500). ``calls`` counts
    the matching requests by rule name, ``faults`` the ones answered with
    a fault. :meth:`hang` holds matching requests instead (a Nova that
    does not answer). ``requests`` lists every request that reached the
    injector: ``(thread, method, path, body)``, in arrival order.
    """

    def __init__(self, app):
        self.app = app
        self.rules = {}
        self.hangs = {}
        self.calls = collections.Counter()
        self.faults = collections.Counter()
        self.requests = []
        self._lock = threading.Lock()

    def fail(self, name, method, path, body=None, times=None, status=500):
        self.rules[name] = (method, re.compile(path), body, times, status)

    def hang(self, name, method, path, body=None, answered=False):
        """Hold the first matching request until the returned
        :class:`Hang` is released; Nova then answers it (as it is then).

        With ``answered``, Nova does the request at once and its answer
        is held (a reply lost on its way until the release).
        """
        hang = Hang()
        self.hangs[name] = (method, re.compile(path), body, hang, answered)
        return hang

    def _held_answer(self, hang, environ, start_response):
        started = []
        body = self.app(environ, lambda *args: started.append(args))
        try:
            body = list(body)
        finally:
            hang.done.set()
        hang.released.wait(300)
        start_response(*started[0])
        return body

    def clear(self):
        """Stop injecting (the counters are kept)."""
        self.rules.clear()

    @staticmethod
    def _body(environ):
        length = int(environ.get('CONTENT_LENGTH') or 0)
        data = environ['wsgi.input'].read(length) if length else b''
        environ['wsgi.input'] = io.BytesIO(data)
        return data

    def __call__(self, environ, start_response):
        method = environ['REQUEST_METHOD']
        path = environ.get('PATH_INFO', '')
        data = self._body(environ)
        with self._lock:
            self.requests.append((threading.current_thread(), method, path,
                                  data))
        for name, (m, regex, needle, hang, answered) in list(
                self.hangs.items()):
            if (m == method and regex.search(path) and
                    (needle is None or needle.encode() in data)):
                with self._lock:
                    if self.hangs.pop(name, None) is None:
                        continue
                hang.thread = threading.current_thread()
                hang.reached.set()
                if answered:
                    return self._held_answer(hang, environ, start_response)
                hang.released.wait(300)
                try:
                    return self.app(environ, start_response)
                finally:
                    hang.done.set()
        for name, (m, regex, needle, times, code) in list(
                self.rules.items()):
            if m != method or not regex.search(path):
                continue
            if needle is not None and needle.encode() not in data:
                continue
            with self._lock:
                self.calls[name] += 1
                inject = times is None or self.faults[name] < times
                if inject:
                    self.faults[name] += 1
            if inject:
                body = jsonutils.dump_as_bytes({'computeFault': {
                    'code': code, 'message': 'injected fault %s' % name}})
                start_response('%d Injected' % code, [
                    ('Content-Type', 'application/json'),
                    ('Content-Length', str(len(body)))])
                return [body]
        return self.app(environ, start_response)


@contextlib.contextmanager
def _clean_client_env():
    with mock.patch.dict(os.environ):
        for key in list(os.environ):
            if key.startswith(_CLIENT_ENV_PREFIXES) and key not in _KEEP_ENV:
                del os.environ[key]
        yield


def run_nova_cli(argv):
    """Run the real ``nova`` command line in this process.

    ``novaclient.shell.main`` is called as the ``nova`` console script
    calls it (errors are printed as ``ERROR (Class): message`` and exit 1).
    Returns a :data:`CLIResult` with the exit code and the captured output.
    """
    from novaclient import shell as nova_shell

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with _clean_client_env(), \
            mock.patch.object(sys, 'stdout', out), \
            mock.patch.object(sys, 'stderr', err):
        try:
            nova_shell.main(list(argv))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return CLIResult(code, out.getvalue(), err.getvalue())


def run_openstack_cli(argv):
    """Run the real ``openstack`` command line (OpenStackClient) in this
    process; return a :data:`CLIResult`.
    """
    from openstackclient import shell as osc_shell

    out, err = io.StringIO(), io.StringIO()
    with _clean_client_env(), \
            mock.patch.object(sys, 'stdout', out), \
            mock.patch.object(sys, 'stderr', err):
        try:
            code = osc_shell.main(list(argv))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return CLIResult(code, out.getvalue(), err.getvalue())
