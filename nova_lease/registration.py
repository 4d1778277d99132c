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
"""Which processes use the side database, and is it the right one.

Every process of nova_lease checks its side database when it starts:

* ``[nova_lease_database] connection`` must be set (no implicit per-host
  SQLite file): :class:`nova_lease.exception.DatabaseNotConfigured` otherwise;
* the database must have an identity row (made by ``nova-lease-manage db
  sync``): :class:`nova_lease.exception.DatabaseNotReady` otherwise;
* the process logs the database (URL without password) and its identity,
  and registers itself in the ``processes`` table (binary, host, pid,
  started, heartbeat), so that ``nova-lease-manage process list`` shows
  every process that uses this database, and nova-lease-engine can warn
  about a nova-scheduler that Nova reports up but that never registered
  here.

nova-api (the paste filter) and nova-scheduler (LeaseFilter,
LeaseWeigher) call :func:`register_nova_process` when Nova loads them; it
refuses, by raising, to let them start without the database. They beat
every :data:`NOVA_HEARTBEAT_INTERVAL` seconds from one daemon thread per
process (a forked worker registers itself again). nova-lease-engine
registers and beats itself (nova_lease.periodic.engine), faster.
"""

import os
import socket
import threading

from oslo_db import exception as db_exc
from oslo_log import log as logging
import sqlalchemy as sa

from nova_lease import conf as lease_conf
from nova_lease.db import api as db_api
from nova_lease import exception

LOG = logging.getLogger(__name__)

#: Seconds between two heartbeats of nova-api and nova-scheduler processes.
NOVA_HEARTBEAT_INTERVAL = 60.0
#: A process of these binaries is shown "up" while its last heartbeat is
#: younger than this many of its intervals.
UP_INTERVALS = 3

API = 'nova-api'
SCHEDULER = 'nova-scheduler'
ENGINE = 'nova-lease-engine'


def safe_url(url):
    """The URL as text, without its password."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return '<invalid URL>'


def check_database(conf, db=None):
    """Check the side database of ``conf`` (or ``db``); return (db,
    identity).

    :raises DatabaseNotConfigured: [nova_lease_database] connection is empty.
    :raises DatabaseNotReady: the database has no identity (no schema, or
        one older than this code).
    :raises oslo_db.exception.DBConnectionError: it cannot be reached.
    """
    if db is None:
        db = db_api.get_database(conf)
    url = db.url
    try:
        identity = db_api.database_identity(db)
    except db_exc.DBConnectionError:
        raise
    except (db_exc.DBError, sa.exc.SQLAlchemyError) as e:
        # No such table: the schema is missing or too old.
        LOG.debug('No identity in %s: %s', safe_url(url), e)
        identity = None
    if identity is None:
        raise exception.DatabaseNotReady(url=safe_url(url))
    return db, identity


def register(db, binary, name=None, host=None):
    """Insert this process's row; return it."""
    return db_api.process_register(db, {
        'binary': binary, 'name': name,
        'host': host or socket.gethostname(), 'pid': os.getpid()})


def log_database(binary, url, identity):
    LOG.info('%(binary)s (pid %(pid)d) uses the nova_lease database '
             '%(url)s, identity %(identity)s',
             {'binary': binary, 'pid': os.getpid(), 'url': safe_url(url),
              'identity': identity})


class _Registry(object):
    """The registrations of the Nova processes of this interpreter."""

    def __init__(self):
        self._lock = threading.Lock()
        # {(url, binary): [conf, host, db, process id]}
        self._entries = {}
        self._pid = os.getpid()
        self._thread = None
        self._wakeup = threading.Event()

    def register(self, conf, binary, host):
        url = lease_conf.connection_url(conf)
        key = (url, binary)
        with self._lock:
            entry = self._entries.get(key)
            db = db_api.get_database(conf)
            if (entry is not None and entry[2] is db and
                    self._pid == os.getpid()):
                return entry[3]
        db, identity = check_database(conf, db)
        row = register(db, binary, host=host)
        log_database(binary, url, identity)
        with self._lock:
            self._entries[key] = [conf, host, db, row['id']]
            self._start()
        return row['id']

    def _start(self):
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._beat, name='nova-lease-heartbeat', daemon=True)
            self._thread.start()

    def _beat(self):
        while True:
            self._wakeup.wait(NOVA_HEARTBEAT_INTERVAL)
            self._wakeup.clear()
            with self._lock:
                entries = list(self._entries.items())
            for (url, binary), (conf, host, db, process_id) in entries:
                if db is not db_api.cached_database(url):
                    # Forgotten (db_api.reset_databases): tests.
                    with self._lock:
                        self._entries.pop((url, binary), None)
                    continue
                try:
                    if db_api.process_heartbeat(db, process_id) is None:
                        row = register(db, binary, host=host)
                        with self._lock:
                            self._entries[(url, binary)][3] = row['id']
                except Exception as e:
                    LOG.warning('%(binary)s could not beat in the '
                                'nova_lease database: %(error)s',
                                {'binary': binary, 'error': e})

    def after_fork_in_child(self):
        # A forked worker (e.g. of nova-api) is a process of its own:
        # register it; the parent's thread does not exist here.
        entries = list(self._entries.items())
        self._lock = threading.Lock()
        self._entries = {}
        self._pid = os.getpid()
        self._thread = None
        self._wakeup = threading.Event()
        if entries:
            threading.Thread(target=self._register_again, args=(entries,),
                             name='nova-lease-register', daemon=True).start()

    def _register_again(self, entries):
        for (url, binary), (conf, host, db, process_id) in entries:
            try:
                self.register(conf, binary, host)
            except Exception as e:
                LOG.error('%(binary)s (pid %(pid)d) could not register in '
                          'the nova_lease database: %(error)s',
                          {'binary': binary, 'pid': os.getpid(),
                           'error': e})


_REGISTRY = _Registry()
os.register_at_fork(after_in_child=lambda: _REGISTRY.after_fork_in_child())


def register_nova_process(conf, binary):
    """Check the side database and register this Nova process.

    For code that Nova loads at start (the paste filter in nova-api, the
    scheduler filter and weigher): ``conf`` is Nova's CONF, the host is
    its ``[DEFAULT] host`` (the host Nova's services table shows).
    Idempotent per database and binary. Returns the process row id.

    :raises DatabaseNotConfigured, DatabaseNotReady, DBConnectionError:
        the process must not start.
    """
    try:
        host = conf.host
    except Exception:     # a bare ConfigOpts (tools)
        host = None
    try:
        return _REGISTRY.register(conf, binary, host or socket.gethostname())
    except exception.NovaLeaseException as e:
        LOG.error('%(binary)s cannot start with nova_lease: %(error)s',
                  {'binary': binary, 'error': e})
        raise
    except db_exc.DBError as e:
        LOG.error('%(binary)s cannot start with nova_lease: the nova_lease '
                  'database %(url)s cannot be used: %(error)s',
                  {'binary': binary,
                   'url': safe_url(lease_conf.connection_url(conf)),
                   'error': e})
        raise
