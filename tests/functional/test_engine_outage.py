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
"""A database that goes away for a few seconds does not stop the engine.

The engine reaches the database server through a TCP proxy in the test
process. Stopping the proxy closes every connection and refuses new ones
(what a database restart or a network cut looks like to the engine);
starting it again on the same port brings the database back.
"""

import os
import socket
import threading
import time

import fixtures
from oslotest import base as oslotest_base
import sqlalchemy as sa

from nova_lease.cmd import engine as engine_cmd
from nova_lease.db import api as db_api
from nova_lease.db import migration
from nova_lease.periodic import engine as lease_engine
from tests.functional.db import fixtures as db_fixtures
from tests.functional import test_engine_helpers as helpers


class TCPProxy(object):
    """Forwards 127.0.0.1:<port> to (host, port) until stopped."""

    def __init__(self, target):
        self.target = target
        self.port = 0
        self._sockets = set()
        self._lock = threading.Lock()
        self._listener = None

    def start(self):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(('127.0.0.1', self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,),
                         daemon=True).start()

    def stop(self):
        listener, self._listener = self._listener, None
        if listener is not None:
            # close() alone would leave the socket listening while the
            # accept thread is blocked on it (Linux): shutdown wakes it.
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _accept(self, listener):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst),
                                 daemon=True).start()

    def _pump(self, src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class _OutageTests(object):
    BACKEND = None

    def setUp(self):
        super().setUp()
        backend = db_fixtures.BACKENDS[self.BACKEND]
        db_fixtures.require(self, backend)
        url = sa.engine.make_url(
            self.useFixture(db_fixtures.EmptyDatabase(backend)).url)
        migration.upgrade(url.render_as_string(hide_password=False))
        self.db = db_api.Database(url)
        self.addCleanup(self.db.dispose)
        self.proxy = TCPProxy((url.host, url.port))
        self.proxy.start()
        self.addCleanup(self.proxy.stop)
        proxied = url.set(port=self.proxy.port).render_as_string(
            hide_password=False)
        tmp = self.useFixture(fixtures.TempDir()).path
        self.records = os.path.join(tmp, 'records.txt')
        config = helpers.write_config(
            os.path.join(tmp, 'engine.conf'),
            nova_lease={'connection': proxied, 'resource_plugins': 'noop',
                        'engine_max_sleep': 0.5},
            noop={'record_file': self.records})
        self.engine = lease_engine.Engine(
            engine_cmd.parse_args(['--config-file', config]))
        self.addCleanup(db_api.reset_databases)

    def _status(self, lease_id):
        return db_api.lease_get(self.db, lease_id)['status']

    def test_database_outage_does_not_stop_the_loop(self):
        now = helpers.utcnow()
        first, = helpers.create_noop_leases(
            self.db, [now - helpers.seconds(1)], helpers.seconds(3600),
            prefix='before')
        thread = threading.Thread(target=self.engine.run, daemon=True)
        thread.start()
        self.addCleanup(thread.join, 30)
        self.addCleanup(self.engine.stop)
        helpers.wait_for(lambda: self._status(first) == 'ACTIVE', 30,
                         message='the first lease to start')

        self.proxy.stop()
        second, = helpers.create_noop_leases(
            self.db, [helpers.utcnow() + helpers.seconds(1)],
            helpers.seconds(3600), prefix='during')
        time.sleep(4)
        self.assertTrue(thread.is_alive())
        self.assertGreater(self.engine.stats['db_errors'], 0)
        self.assertEqual('PENDING', self._status(second))

        self.proxy.start()
        helpers.wait_for(lambda: self._status(second) == 'ACTIVE', 30,
                         message='the second lease to start')
        self.assertTrue(thread.is_alive())
        self.engine.stop()
        thread.join(30)
        self.assertFalse(thread.is_alive())
        fired = [(r.action, r.lease_id)
                 for r in helpers.read_records(self.records)]
        self.assertEqual([('on_start', first), ('on_start', second)], fired)


class OutageMySQLTest(_OutageTests, oslotest_base.BaseTestCase):
    BACKEND = 'mysql'


class OutagePostgreSQLTest(_OutageTests, oslotest_base.BaseTestCase):
    BACKEND = 'postgresql'
