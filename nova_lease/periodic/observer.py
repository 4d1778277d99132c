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
"""Observing what the engine asked of Nova (plugin Waits).

A plugin method that asked Nova for something slow (an unshelve, a boot)
returns a :class:`nova_lease.plugins.base.Wait` instead of waiting: the
engine's worker is then free, and the :class:`Observer` (one thread per
engine, started when the first Wait comes) watches the servers and
resumes each job once its server is where the Wait wants it:

* at once when the server's versioned notification comes (the compute
  hook calls :meth:`Observer.observe_now`): as the notification shows
  the server when that ends the wait, else with one GET of the server;
* else at a batched poll, one list of the servers changed since the
  previous list (or since the earliest wait began, if later), every poll
  interval of the compute client; while
  notifications reach the engine, only every ``engine_max_sleep``
  seconds, as a safety net for a lost one (see :meth:`poll_interval`);
* a Wait that outlives ``plugin_call_timeout`` fails its job.
"""

import collections
import threading
import time

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease import compute
from nova_lease.periodic import jobs

LOG = logging.getLogger(__name__)


class Observer(object):
    """Watches the servers the Waits of one engine's jobs wait for.

    :param engine_id: the engine's id, for messages.
    :param opts: the ``[nova_lease_engine]`` options.
    :param resume: called as ``resume(entry, server, error)`` when a
        :class:`nova_lease.periodic.jobs.Waiting` is over (``error``: why
        it failed, or None); it raises RuntimeError when the engine is
        stopping.

    Thread-safe. Lock order: a caller that holds the engine's lock may
    call :meth:`add` and :meth:`drop`; the observer never calls back into
    the engine while it holds its own lock.
    """

    def __init__(self, engine_id, opts, resume):
        self.engine_id = engine_id
        self.opts = opts
        self._resume = resume
        self._lock = threading.Lock()
        self.waiting = []           # the Waiting entries watched
        # Waited servers that sent a notification: {id: the server as
        # the notification shows it, or None}.
        self._notified = {}
        self._poll_due = None       # monotonic time of the next batched poll
        # When the last batched list of each compute client that worked
        # was sent (UTC), by id(client).
        self._listed = {}
        # Nova's notifications reach this process (see poll_interval).
        self._notices_flow = False
        self._event = threading.Event()
        self._thread = None
        self._stopped = False

    @property
    def notices_flow(self):
        """True while Nova's notifications count as reaching the engine
        (its batched poll of waited servers is then a safety net; see
        :meth:`poll_interval`).
        """
        return self._notices_flow

    def add(self, entries):
        """Watch these Waiting entries (see :meth:`start`)."""
        with self._lock:
            self.waiting.extend(entries)

    def drop(self, job):
        """Stop watching the entries of job."""
        with self._lock:
            self.waiting = [e for e in self.waiting if e.job is not job]

    def start(self):
        """Start the observer's thread if needed, and have it look now."""
        with self._lock:
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(
                    target=self._loop, name='lease-observer', daemon=True)
                self._thread.start()
        self._event.set()

    def stop(self):
        """Have the thread return (the engine is stopping)."""
        self._stopped = True
        self._event.set()

    def observe_now(self, server_id=None, server=None):
        """A server changed (thread-safe; e.g. it sent a notification):
        if a start waits for it, look at it now instead of at the next
        batched poll; without a server id, poll all the waited servers
        now. ``server``: the server as the notification shows it; when it
        shows the wait over, no request is sent to look at it (else one
        GET of that server).
        """
        if server_id is not None:
            self._notices_flow = True
        if not self.waiting:
            return
        with self._lock:
            if server_id is None:
                self._poll_due = time.monotonic()
            elif any(e.wait.server_id == server_id for e in self.waiting):
                self._notified[server_id] = server
            else:
                return
        self._event.set()

    def _loop(self):
        """Watch the waited servers: one batched poll per interval, and
        a look at each server that sent a notification meanwhile.
        """
        while not self._stopped:
            with self._lock:
                entries = list(self.waiting)
                if not entries:
                    self._poll_due = None
            if not entries:
                self._event.wait(self.opts.engine_max_sleep)
                self._event.clear()
                continue
            interval = min(getattr(e.plugin.compute, 'poll_interval', 1.0)
                           for e in entries)
            with self._lock:
                if self._poll_due is None:
                    # New waits: their first batched look is one
                    # interval on (or sooner, at a notification).
                    self._poll_due = time.monotonic() + self.poll_interval(
                        interval)
                delay = self._poll_due - time.monotonic()
            if delay > 0 and not self._notified:
                self._event.wait(delay)
            self._event.clear()
            with self._lock:
                notified, self._notified = self._notified, {}
                entries = list(self.waiting)
                full = time.monotonic() >= self._poll_due
                if full:
                    self._poll_due = time.monotonic() + self.poll_interval(
                        interval)
            try:
                if full:
                    self.poll(entries, notified)
                elif notified:
                    self.poll_notified(entries, notified)
            except Exception:
                LOG.exception('Lease engine %s: error while watching '
                              'servers', self.engine_id)

    def poll_interval(self, interval):
        """Seconds to the next batched poll.

        While Nova's notifications reach this process, each waited server
        is looked at when its own notification comes, and the batched
        poll, a list of every server changed since the earliest wait, is
        only the safety net for a lost one: it runs every
        ``engine_max_sleep`` seconds instead of every ``interval`` (in a
        burst of a hundred starts, a list per second costs Nova more than
        the starts). Notifications count as reaching it once one came,
        until a batched poll finds a wait over that no notification
        announced (see :meth:`_poll`).
        """
        if self._notices_flow:
            return max(interval, self.opts.engine_max_sleep)
        return interval

    def poll(self, entries, notified=()):
        """One list of the servers changed since the last list, or since
        the earliest wait began if it began later, per compute client
        (``notified``: the waited servers whose notification came since
        the last look).

        A server whose wait the last list saw not over is in the next one
        when its wait ends (the change moves its ``updated_at``), so a
        burst of a hundred starts is not listed whole every time.
        """
        groups = collections.defaultdict(list)
        for entry in entries:
            groups[id(entry.plugin.compute)].append(entry)
        for key, group in groups.items():
            client = group[0].plugin.compute
            sent = timeutils.utcnow()
            listed = self._listed.get(key)
            if listed is not None:
                listed -= jobs.CHANGES_MARGIN
            try:
                changed = client.list_servers_changed_since(
                    min(e.since if listed is None else max(e.since, listed)
                        for e in group))
                self._listed[key] = sent
            except Exception as e:
                LOG.warning('Lease engine %(id)s: cannot list the servers '
                            'it waits for (%(error)s); trying again',
                            {'id': self.engine_id, 'error': e})
                changed = {}
            for entry in group:
                server_id = entry.wait.server_id
                if (self._look(entry, client, changed) and
                        self._notices_flow and server_id not in notified
                        and server_id not in self._notified):
                    # Over, and its notification has not come: do not
                    # count on them until the next one.
                    LOG.debug('Lease engine %(id)s: %(what)s is over '
                              'without a notification; polling every '
                              '%(interval)s s', {
                                  'id': self.engine_id, 'what': entry.what,
                                  'interval': getattr(
                                      client, 'poll_interval', 1.0)})
                    self._notices_flow = False

    def poll_notified(self, entries, notified):
        """Look at the waited servers that sent a notification: as the
        notification shows them when that ends their wait (a finished
        unshelve), else with one GET each (a batched poll lists every
        server changed since the earliest wait, a hundred in a burst of
        starts).
        """
        servers = {}
        for entry in entries:
            server_id = entry.wait.server_id
            if server_id not in notified:
                continue
            client = entry.plugin.compute
            shown = notified[server_id]
            if shown is not None and entry.wait.outcome(shown) == 'done':
                self._look(entry, client, {server_id: shown})
                continue
            key = (id(client), server_id)
            if key not in servers:
                try:
                    servers[key] = {server_id: client.get_server(server_id)}
                except Exception as e:
                    # Seen at the next batched poll.
                    LOG.debug('Lease engine %(id)s: cannot read server '
                              '%(server)s: %(error)s',
                              {'id': self.engine_id, 'server': server_id,
                               'error': e})
                    servers[key] = {}
            self._look(entry, client, servers[key])

    def _look(self, entry, client, changed):
        """Resume the entry's job if its wait is over; True if it was."""
        if entry.job.guard.cancelled:
            self._unwatch(entry)
            return False
        server = changed.get(entry.wait.server_id)
        outcome = entry.wait.outcome(server) if server is not None else None
        error = None
        if outcome is None and time.monotonic() > entry.deadline:
            # One last look of its own before giving up.
            try:
                server = client.get_server(entry.wait.server_id)
            except compute.ServerNotFound:
                server = None
            except Exception:
                pass
            outcome = entry.wait.outcome(server)
            if outcome is None:
                error = jobs.PluginTimeout(
                    what=entry.what, timeout=self.opts.plugin_call_timeout)
        if outcome == 'failed':
            error = entry.wait.failure(server)
        if outcome is None and error is None:
            return False
        if not self._unwatch(entry):
            return False
        try:
            self._resume(entry, server, error)
        except RuntimeError:    # stopping: its claim is released
            pass
        return True

    def _unwatch(self, entry):
        with self._lock:
            try:
                self.waiting.remove(entry)
            except ValueError:
                return False
        return True
