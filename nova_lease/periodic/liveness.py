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
"""An engine's registration, heartbeats, and its look at the others.

:meth:`Liveness.register` records the engine in the side database's
``processes`` table when it starts (a database without schema stops it
there). Its ``heartbeat`` chore (nova_lease.periodic.chores) then beats
every ``engine_heartbeat_interval`` seconds and watches the other
engines' heartbeat counters: the claims of an engine whose counter has
not moved for ``engine_heartbeat_timeout`` seconds (by this engine's
clock) are released at once, so that a killed engine's events run again
within seconds. Why heartbeats and not only the claims' time-out: a
claim outlives the longest plugin call (``engine_claim_timeout``, many
minutes), a heartbeat is missed within seconds. Its ``service-check``
chore checks that every nova-scheduler that Nova reports up registered
in the same lease database (:meth:`Liveness.check_registrations`).
"""

import datetime
import time

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease.periodic import chores as engine_chores
from nova_lease.plugins import base as plugin_base
from nova_lease import registration

LOG = logging.getLogger(__name__)


class Liveness(object):
    """Registration and heartbeats of one engine (see the module doc).

    :param engine: the :class:`nova_lease.periodic.engine.Engine`: its
        ``conf``, ``db``, ``engine_id``, ``opts``, ``stats``,
        ``plugins``, ``wake()`` and ``held_event_ids()`` are used.
    """

    def __init__(self, engine):
        self._engine = engine
        self.conf = engine.conf
        self.db = engine.db
        self.opts = engine.opts
        self.shared = engine.shared
        self.engine_id = engine.engine_id
        self.stats = engine.stats
        self.process_id = None
        self.identity = None
        self._next_check = None     # monotonic time of the next service check
        self._observed = {}     # {process id: (heartbeats, monotonic)}
        self._last_look = None  # monotonic time of the last look at them
        self._beat_failing = False
        self._last_prune = None

    def add_chores(self, chores):
        """Add the ``heartbeat`` and ``service-check`` chores to
        ``chores`` (a :class:`nova_lease.periodic.chores.Chores`).
        """
        chores.add('heartbeat', self.beat,
                   lambda: self.opts.engine_heartbeat_interval)
        chores.add('service-check', self.service_check,
                   self._service_check_spacing)

    def stop(self):
        """Record the engine's stop."""
        self.unregister()

    def register(self, at_start=False):
        """Register this engine in the processes table (once).

        At start, a database without schema raises DatabaseNotReady; an
        unreachable one is retried by the heartbeat thread.
        """
        if self.process_id is not None:
            return
        try:
            db, self.identity = registration.check_database(self.conf,
                                                            self.db)
            row = registration.register(self.db, registration.ENGINE,
                                        name=self.engine_id)
        except exception.DatabaseNotReady:
            if at_start:
                raise
            LOG.error('Lease engine %s: the nova_lease database has no '
                      'schema any more', self.engine_id)
            return
        except Exception as e:
            LOG.warning('Lease engine %(id)s could not register in the '
                        'nova_lease database (retrying): %(error)s',
                        {'id': self.engine_id, 'error': e})
            return
        self.process_id = row['id']
        registration.log_database(registration.ENGINE,
                                  self.db.url, self.identity)

    def unregister(self):
        if self.process_id is None:
            return
        try:
            db_api.process_stop(self.db, self.process_id)
        except Exception as e:
            LOG.warning('Lease engine %(id)s could not record its stop: '
                        '%(error)s', {'id': self.engine_id, 'error': e})

    def beat(self):
        """One heartbeat, and a look at the other engines' heartbeats."""
        self.register()
        if self.process_id is None:
            return
        now = time.monotonic()
        try:
            was = db_api.process_heartbeat(self.db, self.process_id)
            if was is None:      # our row was pruned: register again
                self.process_id = None
                self.register()
                return
            rows = db_api.process_list(self.db, binary=registration.ENGINE,
                                       running=True)
        except Exception as e:
            if not self._beat_failing:
                LOG.warning('Lease engine %(id)s could not beat in the '
                            'database: %(error)s',
                            {'id': self.engine_id, 'error': e})
            self._beat_failing = True
            self._last_look = None
            return
        if self._beat_failing:
            LOG.info('Lease engine %s beats again', self.engine_id)
            self._beat_failing = False
        if was:
            LOG.warning('Lease engine %(id)s was taken for dead (%(why)s): '
                        'the claims it held were released, and its '
                        'running actions send nothing more to Nova',
                        {'id': self.engine_id, 'why': was})
        timeout = self.shared.engine_heartbeat_timeout
        last, self._last_look = self._last_look, now
        if last is None or now - last > timeout / 2.0:
            # We did not watch (start, or this process was stalled): time
            # counts from now for everyone.
            self._observed = {pid: (count, now) for pid, (count, _)
                              in self._observed.items()}
        dead = []
        observed = {}
        for row in rows:
            if row['id'] == self.process_id:
                continue
            seen = self._observed.get(row['id'])
            if seen is None or seen[0] != row['heartbeats']:
                observed[row['id']] = (row['heartbeats'], now)
                continue
            observed[row['id']] = seen
            if now - seen[1] > timeout:
                dead.append((row, now - seen[1]))
        self._observed = observed
        for row, silent in dead:
            self._release_dead(row, silent)
        self._prune()

    def _release_dead(self, row, silent):
        keep = ()
        if row['name'] == self.engine_id:
            # A previous process with our name: our own jobs stay ours.
            keep = self._engine.held_event_ids()
        reason = ('no heartbeat for %.0f s, seen by engine %s'
                  % (silent, self.engine_id))
        marked, released = db_api.engine_release_dead(
            self.db, row['id'], row['heartbeats'], reason, keep=keep,
            alive=[self.process_id])
        if marked:
            self._observed.pop(row['id'], None)
            LOG.warning('Lease engine %(name)s (host %(host)s, pid %(pid)s) '
                        'has not beaten for %(silent).0f s: taken for dead',
                        {'name': row['name'], 'host': row['host'],
                         'pid': row['pid'], 'silent': silent})
        # (Not marked with claims left: locked by a transaction of its
        # own still open; the next beat releases them.)
        if released:
            self.stats['recovered'] += len(released)
            LOG.warning('Released %(n)d claim(s) of engine %(name)s (no '
                        'heartbeat for %(silent).0f s): %(events)s',
                        {'n': len(released), 'name': row['name'],
                         'silent': silent,
                         'events': ', '.join(
                             '%s %s of lease %s' % (e['event_type'], e['id'],
                                                    e['lease_id'])
                             for e in released)})
            self._engine.wake()

    #: Rows of processes not seen for this long are deleted.
    PROCESS_RETENTION = datetime.timedelta(days=7)

    def _prune(self):
        now = time.monotonic()
        if self._last_prune is not None and now - self._last_prune < 3600:
            return
        self._last_prune = now
        try:
            db_api.process_prune(self.db, timeutils.utcnow()
                                 - self.PROCESS_RETENTION)
        except Exception as e:
            LOG.debug('Could not prune old process rows: %s', e)

    def _compute_client(self):
        for plugin in self._engine.plugins.values():
            if isinstance(plugin, plugin_base.ComputePlugin):
                return plugin.compute
        return None

    def check_registrations(self):
        """Warn about nova-scheduler services that never registered here.

        Nova reports them up (compute API, os-services), but no process
        row of theirs is in this side database: they schedule without
        LeaseFilter, or with another [nova_lease_database] connection.
        Returns the warnings logged.
        """
        client = self._compute_client()
        if client is None:
            LOG.debug('No compute plugin: Nova services are not checked')
            return []
        services = client.list_services(binary=registration.SCHEDULER)
        up = {s.get('host') for s in services if s.get('state') == 'up'}
        registered = {r['host'] for r in db_api.process_list(
            self.db, binary=registration.SCHEDULER)}
        identity = self.identity or db_api.database_identity(self.db)
        warnings = []
        for host in sorted(h for h in up - registered if h):
            message = (
                '%s on host %s is up but has never registered in this lease '
                'database (%s, identity %s): it does not run LeaseFilter '
                'against it. Check its [nova_lease_database] connection and '
                '[filter_scheduler] enabled_filters, and compare with '
                'nova-lease-manage process list'
                % (registration.SCHEDULER, host,
                   registration.safe_url(self.db.url), identity))
            LOG.warning(message)
            warnings.append(message)
        return warnings

    #: Seconds between service checks until the first one succeeds
    #: (Nova may start after the engine).
    FIRST_CHECK_RETRY = 60

    def _service_check_spacing(self):
        interval = self.opts.engine_service_check_interval
        return min(interval, self.FIRST_CHECK_RETRY) if interval else (
            self.FIRST_CHECK_RETRY)

    def service_check(self):
        """The ``service-check`` chore: until the first check succeeds,
        every minute; then every ``engine_service_check_interval`` (0:
        never again).
        """
        now = time.monotonic()
        if self._next_check is not None and now < self._next_check:
            return None
        self._next_check = now + self.FIRST_CHECK_RETRY
        self.check_registrations()
        interval = self.opts.engine_service_check_interval
        if not interval:
            return engine_chores.DONE
        self._next_check = now + interval
        return None
