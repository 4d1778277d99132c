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
"""The virtual:instance resource plugin: the engine's side of VM leases.

* ``on_start``: unshelve the server (a future lease's server, created
  shelved-offloaded at its boot, see nova_lease.api_ext.shelved; or one
  shelved at the end of a lease); the scheduler's LeaseFilter admits it
  on the promised hosts only. Then wait until it is ACTIVE (a server
  that is already ACTIVE is a success; one still building is waited
  for; ERROR, or SHELVED_OFFLOADED again, e.g. no valid host, fails the
  attempt), set its metadata ``lease_status=active`` and remove its
  ``reserved`` tag. The waits are returned to the engine
  (:class:`nova_lease.plugins.base.Wait`), which watches all its waited
  servers at once, so that no worker is held while Nova builds.
* ``before_end``: nothing (the engine sends the ``lease.before_end``
  notification).
* ``on_end``: the lease's ``on_end`` (``[nova_lease_engine] on_end`` by
  default): ``delete`` the server (already gone is a success) or ``shelve`` it
  (metadata ``lease_status=terminated``, set before shelving since Nova
  refuses metadata changes of shelved servers; then shelved-offloaded).
* ``cancel``: the lease was deleted: delete the server.

Every step is idempotent and waits, at most ``[nova_lease_engine]
plugin_call_timeout`` seconds, until Nova has done it.
"""

import contextlib
import datetime
import functools
import threading
import time

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease import compute
from nova_lease.plugins import base
from nova_lease.plugins.instance import leases
from nova_lease import resource_types as types
from nova_lease import wire

LOG = logging.getLogger(__name__)

RESOURCE_TYPE = types.SERVER
RESERVED_TAG = wire.TAG_RESERVED
METADATA_STATUS = wire.SERVER_LEASE_STATUS

_SHELVED = ('SHELVED', 'SHELVED_OFFLOADED')
# Stable statuses in which the user has the server: nothing to unshelve.
_USABLE = ('ACTIVE', 'SHUTOFF', 'PAUSED', 'SUSPENDED', 'RESCUE',
           'VERIFY_RESIZE')


#: Seconds a request that makes Nova's scheduler place a server holds
#: the next ones back, at most: one that nova-api has not answered by
#: then (hung, or timed out and abandoned by the engine) no longer does.
PLACING_HOLD = 2.0


class _Pacer(object):
    """At most ``limit`` requests at once (0: no limit); a request that
    has not ended within ``hold`` seconds of its start no longer counts.

    So behind requests that nova-api is slow to answer, the next ones go
    one per ``hold`` seconds, never all at once.
    """

    def __init__(self, limit, hold):
        self._limit = limit
        self._hold = hold
        self._cond = threading.Condition()
        self._started = {}      # request token: when it began

    def _wait_turn(self):
        """Wait until fewer than ``limit`` requests count (lock held)."""
        while True:
            now = time.monotonic()
            counted = [t for t in self._started.values()
                       if now - t < self._hold]
            if len(counted) < self._limit:
                return now
            # Until the oldest counted request stops counting, or one
            # ends (notify).
            self._cond.wait(min(counted) + self._hold - now)

    @contextlib.contextmanager
    def __call__(self):
        if not self._limit:
            yield
            return
        token = object()
        with self._cond:
            self._started[token] = self._wait_turn()
        try:
            yield
        finally:
            with self._cond:
                del self._started[token]
                self._cond.notify()


class InstancePlugin(base.ComputePlugin):
    resource_type = RESOURCE_TYPE

    def __init__(self, conf, compute_client=None):
        super().__init__(conf, compute_client=compute_client)
        # Requests that make Nova's scheduler place a server, at most
        # engine_placing_requests at once (conf/lease.py says why).
        self._placing = _Pacer(conf.nova_lease_engine.engine_placing_requests,
                               PLACING_HOLD)

    @property
    def _timeout(self):
        return self.conf.nova_lease_engine.plugin_call_timeout

    @staticmethod
    def _server_id(lease, reservation):
        server_id = reservation.get('resource_id')
        if not server_id:
            raise base.PluginError(
                reason='reservation %s of lease %s has no server id; the '
                       'server was never linked to the lease'
                       % (reservation.get('id'), lease.get('id')))
        return server_id

    def _stable(self, server_id, wanted):
        """Wait until the server has no task and is in a known state."""
        return self.compute.wait_for_server(server_id, wanted,
                                            self._timeout)

    def on_start(self, lease, reservation):
        gate = self._gate(lease, reservation)
        server_id = self._server_id(lease, reservation)
        # The common case without a look first: a server shelved until
        # its start. Nova refuses (409) what is not shelved or busy; that
        # server is then looked at.
        try:
            with self._placing():
                gate.unshelve_server(server_id, why='the lease starts')
        except compute.ComputeNotFound:
            raise self._gone(lease, server_id) from None
        except compute.ComputeConflict:
            return self._look(gate, lease, server_id)
        LOG.info('Unshelving server %(server)s for lease %(lease)s',
                 {'server': server_id, 'lease': lease['id']})
        return self._unshelving(gate, lease, server_id)

    def _look(self, gate, lease, server_id):
        try:
            server = self.compute.get_server(server_id)
        except compute.ServerNotFound:
            raise self._gone(lease, server_id) from None
        return self._start(gate, lease, server_id, server)

    @staticmethod
    def _gone(lease, server_id):
        return base.ResourceGone(
            server_id,
            reason='server %s of lease %s (%s) no longer exists; it cannot '
                   'be started' % (server_id, lease['id'], lease.get('name')))

    def resource_gone(self, db, resource_id):
        """As when the hook hears the server's deletion: the reservation
        is deleted and the lease ends early if none is left.
        """
        return leases.instance_deleted(db, resource_id)

    def _building(self, gate, lease, server_id):
        """Wait until the server is stable, then look again."""
        return base.Wait(
            server_id, _USABLE + _SHELVED,
            functools.partial(self._start, gate, lease, server_id),
            what='server %s of lease %s to be built or stable'
                 % (server_id, lease['id']))

    def _unshelving(self, gate, lease, server_id):
        # A failed unshelve (no valid host) puts the server back in
        # SHELVED_OFFLOADED without a task: that is a failure.
        return base.Wait(
            server_id, ('ACTIVE',),
            functools.partial(self._started, gate, server_id),
            fail_statuses=('ERROR',) + _SHELVED,
            what='server %s of lease %s to be unshelved'
                 % (server_id, lease['id']))

    def _start(self, gate, lease, server_id, server):
        """The next step of a start, from the server as it is now.

        Returns a :class:`~nova_lease.plugins.base.Wait` while Nova works
        (a build, an unshelve, another task): the engine's worker is free
        meanwhile.
        """
        status = server.get('status')
        if server.get('OS-EXT-STS:task_state') or status not in (
                _USABLE + _SHELVED + ('ERROR',)):
            # Busy.
            return self._building(gate, lease, server_id)
        if status == 'ERROR':
            raise base.Wait(server_id, ('ACTIVE',), None).failure(server)
        if status in _SHELVED:
            LOG.info('Unshelving server %(server)s for lease %(lease)s',
                     {'server': server_id, 'lease': lease['id']})
            try:
                with self._placing():
                    gate.unshelve_server(server_id, why='the lease starts')
            except compute.ComputeConflict:
                # Being unshelved meanwhile (another attempt): wait.
                LOG.info('Server %s is already changing state', server_id)
            return self._unshelving(gate, lease, server_id)
        return self._started(gate, server_id, server)

    def _started(self, gate, server_id, server):
        gate.set_server_metadata(server_id, {METADATA_STATUS: 'active'},
                                 why='the lease starts')
        # Nova shows a server's tags (compute API 2.26 and later): a
        # server without the tag costs no request.
        tags = server.get('tags')
        if tags is None or RESERVED_TAG in tags:
            gate.delete_server_tag(server_id, RESERVED_TAG,
                                   why='the lease starts')

    def before_end(self, lease, reservation):
        """Nothing: the engine notifies lease.before_end."""

    def on_end(self, lease, reservation):
        action = lease.get('on_end') or self.conf.nova_lease_engine.on_end
        if action == 'shelve':
            self._shelve(lease, reservation)
        else:
            self._delete(lease, reservation)

    def cancel(self, lease, reservation):
        self._delete(lease, reservation)

    def _delete(self, lease, reservation):
        server_id = self._server_id(lease, reservation)
        LOG.info('Deleting server %(server)s at the end of lease %(lease)s',
                 {'server': server_id, 'lease': lease['id']})
        gate = self._gate(lease, reservation)
        why = 'the lease ends'
        if self._unless_delete_lost(gate, server_id):
            why += ' (again: Nova lost the delete)'
        if not gate.delete_server(server_id, why=why):
            return
        # While it waits, it looks for a lost delete every
        # lost_delete_timeout seconds.
        lost = self.conf.nova_lease_engine.lost_delete_timeout
        deadline = time.monotonic() + self._timeout
        while True:
            left = deadline - time.monotonic()
            try:
                self.compute.wait_for_server(
                    server_id, (), max(0.0, min(left, lost)), gone_ok=True,
                    fail_statuses=())
                return
            except compute.ServerStatusTimeout:
                if left <= lost:
                    raise
            if self._unless_delete_lost(gate, server_id):
                if not gate.delete_server(
                        server_id, why='the lease ends (again: Nova lost '
                        'the delete)'):
                    return

    def _unless_delete_lost(self, gate, server_id):
        """A server ``deleting`` since longer than ``lost_delete_timeout``:
        Nova lost that delete (nova-api died after setting the task state
        and before its cast; the fault drill found it) and ignores every
        later one. Reset its state, so that the delete goes through; True
        if it did.
        """
        try:
            server = self.compute.get_server(server_id)
        except compute.ServerNotFound:
            return False
        if server.get('OS-EXT-STS:task_state') != 'deleting':
            return False
        updated = timeutils.normalize_time(
            timeutils.parse_isotime(server['updated']))
        timeout = self.conf.nova_lease_engine.lost_delete_timeout
        if timeutils.utcnow() - updated < datetime.timedelta(
                seconds=timeout):
            return False      # a delete under way: wait for it
        LOG.warning('Server %(server)s is deleting since %(since)s, longer '
                    'than lost_delete_timeout (%(timeout)d s): Nova lost '
                    'that delete; resetting its state to delete it again',
                    {'server': server_id, 'since': server['updated'],
                     'timeout': timeout})
        gate.reset_server_state(
            server_id, why='its delete was lost: deleting since %s'
            % server['updated'])
        return True

    def _shelve(self, lease, reservation):
        server_id = self._server_id(lease, reservation)
        gate = self._gate(lease, reservation)
        try:
            server = self._stable(server_id,
                                  _USABLE + _SHELVED + ('ERROR',))
        except compute.ServerNotFound:
            LOG.info('Server %(server)s of lease %(lease)s is already gone',
                     {'server': server_id, 'lease': lease['id']})
            return
        if server['status'] not in _SHELVED:
            # Nova refuses metadata changes of shelved servers: first.
            if server['status'] in _USABLE:
                gate.set_server_metadata(
                    server_id, {METADATA_STATUS: 'terminated'},
                    why='the lease ends')
            LOG.info('Shelving server %(server)s at the end of lease '
                     '%(lease)s', {'server': server_id, 'lease': lease['id']})
            try:
                gate.shelve_server(server_id, why='the lease ends')
            except compute.ComputeConflict:
                LOG.info('Server %s is already changing state', server_id)
            server = self.compute.wait_for_server(server_id, _SHELVED,
                                                  self._timeout)
        if server['status'] == 'SHELVED':
            gate.shelve_offload_server(server_id, why='the lease ends')
            self.compute.wait_for_server(server_id, ('SHELVED_OFFLOADED',),
                                         self._timeout)
