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
"""The compute hook: leased servers follow their lease between events.

It runs in nova-lease-engine and acts on Nova through
:class:`nova_lease.compute.ComputeClient` (the service user of
``[nova_lease_auth]``):

* :class:`InstanceEndpoint`, an oslo.messaging notification endpoint for
  Nova's versioned notifications, started by :func:`start_listener`
  (threading executor, listener pool ``nova_lease``):

  - ``instance.create.end`` of a server whose ``lease_id`` metadata names
    a lease of its project that has not started, and that is linked to
    it (a future lease's server built at its boot, by releases before
    servers were created at their lease's start): the server is marked
    reserved (metadata ``lease_status=reserved``, tag ``reserved``) and
    shelved, so that Nova offloads it and frees its host until the start
    (Nova offloads at once with its default ``shelved_offload_time = 0``;
    otherwise the reconcile pass offloads it). A future lease's server is
    created shelved-offloaded at its boot (nova_lease.api_ext.shelved)
    and never built before its start;
  - ``instance.delete.end`` of a leased server: its reservation is marked
    deleted, and a lease left without servers ends early (TERMINATED, its
    events cancelled), see
    :func:`nova_lease.plugins.instance.leases.instance_deleted`;
  - every notification it hears is also passed on to the hook's
    ``on_server_change`` (nova-lease-engine: its engine's
    ``observe_now``), so that a start waiting for that server looks at
    once instead of at its next poll.

* :func:`reconcile`, a pass the engine runs every ``[nova_lease_engine]
  reconcile_interval`` seconds: it repairs what a lost (or never sent)
  notification missed, so that leases work without notifications too,
  only slower.

Every action is idempotent: a notification handled twice, or handled and
then reconciled, does no harm. A failure is logged and left to the next
reconcile pass; notifications are never requeued.
"""

import threading

from oslo_log import log as logging
import oslo_messaging
from oslo_utils import timeutils

from nova_lease import compute
from nova_lease.db import api as db_api
from nova_lease import notifications
from nova_lease.plugins.instance import leases
from nova_lease import resource_types as types
from nova_lease import status
from nova_lease import wire

LOG = logging.getLogger(__name__)

RESERVED_TAG = wire.TAG_RESERVED
POOL = 'nova_lease'
CREATE_END = 'instance.create.end'
DELETE_END = 'instance.delete.end'

_L = status.LeaseStatus
_R = status.ReservationStatus
_SHELVED = ('SHELVED', 'SHELVED_OFFLOADED')


def _payload_data(payload):
    if isinstance(payload, dict) and 'nova_object.data' in payload:
        return payload['nova_object.data'] or {}
    return payload if isinstance(payload, dict) else {}


#: The compute API's status of a server with no task, per vm_state (as
#: nova.api.openstack.common maps them).
_STATUS_OF_STATE = {
    'active': 'ACTIVE', 'building': 'BUILD', 'stopped': 'SHUTOFF',
    'resized': 'VERIFY_RESIZE', 'paused': 'PAUSED',
    'suspended': 'SUSPENDED', 'rescued': 'RESCUE', 'error': 'ERROR',
    'deleted': 'DELETED', 'soft-delete': 'SOFT_DELETED',
    'shelved': 'SHELVED', 'shelved_offloaded': 'SHELVED_OFFLOADED'}


def server_of_payload(data):
    """The server as an instance notification's payload shows it: the
    compute API's ``id``, ``status`` and ``OS-EXT-STS:task_state`` (and
    ``tags`` when the payload has them); None when the payload does not
    say (the engine then looks at the server itself).
    """
    status = _STATUS_OF_STATE.get(data.get('state'))
    if not data.get('uuid') or status is None:
        return None
    server = {'id': data['uuid'], 'status': status,
              'OS-EXT-STS:task_state': data.get('task_state')}
    if isinstance(data.get('tags'), list):
        server['tags'] = data['tags']
    return server


class ComputeHook(object):
    """The hook's actions (shared by the endpoint and the reconcile pass).

    Thread-safe. ``compute`` defaults to ``ComputeClient.from_conf(conf)``
    (built on first use), ``db`` to ``db_api.get_database(conf)``.
    ``on_server_change(server_id, server)``: told of every server a
    notification shows changed (``server``: as the notification shows
    it, see :func:`server_of_payload`), or None.
    """

    def __init__(self, conf, db=None, compute_client=None, notifier=None,
                 on_server_change=None):
        self.conf = conf
        self.db = db if db is not None else db_api.get_database(conf)
        self.notifier = notifier
        self.on_server_change = on_server_change
        self._compute = compute_client
        self._lock = threading.Lock()

    @property
    def compute(self):
        if self._compute is None:
            with self._lock:
                if self._compute is None:
                    self._compute = compute.ComputeClient.from_conf(
                        self.conf)
        return self._compute

    # -- reserve a server of a lease that has not started -----------------

    def _lease_of(self, server_id, metadata, project_id):
        """The lease a new server belongs to, or None."""
        lease_id = (metadata or {}).get(leases.META_LEASE_ID)
        if not lease_id:
            return None
        try:
            lease = db_api.lease_get(self.db, lease_id)
        except db_api.LeaseNotFound:
            LOG.debug('Server %(server)s names lease %(lease)s, which does '
                      'not exist (removed after a failed boot?)',
                      {'server': server_id, 'lease': lease_id})
            return None
        if project_id and lease['project_id'] != project_id:
            LOG.warning('Server %(server)s of project %(project)s names lease '
                        '%(lease)s of another project: ignored',
                        {'server': server_id, 'project': project_id,
                         'lease': lease_id})
            return None
        mine = [r for r in lease['reservations']
                if types.is_one_server(r) and
                r['resource_id'] in (server_id, None)]
        if not mine:
            LOG.warning('Server %(server)s names lease %(lease)s, which has '
                        'no reservation for it: ignored',
                        {'server': server_id, 'lease': lease_id})
            return None
        return lease

    @staticmethod
    def not_started(lease, now=None):
        now = now or timeutils.utcnow()
        return lease['status'] == _L.PENDING and lease['start_date'] > now

    def reserve(self, server_id, lease_id):
        """Mark the server reserved and shelve it (idempotent)."""
        LOG.info('Reserving server %(server)s until lease %(lease)s starts: '
                 'shelving it', {'server': server_id, 'lease': lease_id})
        self.compute.set_server_metadata(
            server_id, {leases.META_LEASE_STATUS: leases.META_RESERVED})
        self.compute.add_server_tag(server_id, RESERVED_TAG)
        try:
            self.compute.shelve_server(server_id)
        except compute.ComputeConflict as e:
            # Already shelved, or changing state: the reconcile pass looks
            # again later.
            LOG.info('Server %(server)s not shelved now: %(error)s',
                     {'server': server_id, 'error': e})

    def instance_created(self, data, now=None):
        """Handle instance.create.end; True if the server was reserved."""
        server_id = data.get('uuid')
        if not server_id:
            return False
        lease = self._lease_of(server_id, data.get('metadata'),
                               data.get('tenant_id'))
        if lease is None or not self.not_started(lease, now):
            return False
        if not any(r['resource_id'] == server_id
                   for r in lease['reservations']):
            # Not linked (yet): the reconcile pass shelves it once it is
            # linked. (A future lease's server is created shelved-offloaded
            # and is never built before its start.)
            LOG.debug('Server %(server)s is not linked to lease %(lease)s: '
                      'not shelved', {'server': server_id,
                                      'lease': lease['id']})
            return False
        if data.get('state') not in (None, 'active'):
            LOG.info('Server %(server)s of lease %(lease)s is %(state)s, not '
                     'active: not shelved', {'server': server_id,
                                             'lease': lease['id'],
                                             'state': data.get('state')})
            return False
        self.reserve(server_id, lease['id'])
        return True

    # -- a leased server is gone -------------------------------------------

    def instance_deleted(self, server_id, now=None):
        """Handle instance.delete.end; the ids of leases that ended."""
        ended = leases.instance_deleted(self.db, server_id, now=now)
        for lease_id in ended:
            self._notify(notifications.END, lease_id)
        return ended

    def _notify(self, event_type, lease_id):
        if self.notifier is None:
            return
        try:
            self.notifier.notify(event_type,
                                 db_api.lease_get(self.db, lease_id))
        except Exception:
            LOG.exception('Could not notify %(type)s of lease %(lease)s',
                          {'type': event_type, 'lease': lease_id})

    # -- reconcile ----------------------------------------------------------

    def reconcile(self, now=None):
        """Repair what lost notifications missed; return counters.

        * a not-yet-started lease's server that runs: reserved and shelved;
          one that is SHELVED (not offloaded): offloaded;
        * a leased server (lease PENDING, ACTIVE or ERROR) that no longer
          exists: handled as deleted;
        * a lease whose reservations were never linked for longer than
          ``leases.START_HOLD`` (nova-api died during the boot): its
          servers are found by their ``lease_id`` metadata and linked, or
          the lease ends.
        """
        now = now or timeutils.utcnow()
        stats = {'reserved': 0, 'offloaded': 0, 'vanished': 0, 'linked': 0,
                 'unlinked_ended': 0, 'errors': 0}
        for lease in db_api.lease_list(
                self.db, statuses=[str(_L.PENDING), str(_L.ACTIVE),
                                   str(_L.ERROR)]):
            try:
                self._reconcile_lease(lease, now, stats)
            except Exception:
                stats['errors'] += 1
                LOG.exception('Reconcile of lease %s failed', lease['id'])
        if any(stats.values()):
            LOG.info('Reconcile pass: %s', stats)
        return stats

    def _reconcile_lease(self, lease, now, stats):
        instance = [r for r in lease['reservations']
                    if types.is_one_server(r) and
                    r['status'] != _R.DELETED]
        unlinked = [r for r in instance if not r['resource_id']]
        if unlinked and lease['created_at'] + leases.START_HOLD < now:
            self._repair_unlinked(lease, unlinked, now, stats)
            lease = db_api.lease_get(self.db, lease['id'])
            instance = [r for r in lease['reservations']
                        if types.is_one_server(r) and
                        r['status'] != _R.DELETED and r['resource_id']]
        for reservation in instance:
            server_id = reservation['resource_id']
            if not server_id:
                continue
            try:
                server = self.compute.get_server(server_id)
            except compute.ServerNotFound:
                server = None
            if server is None or server.get('status') in ('DELETED',
                                                          'SOFT_DELETED'):
                LOG.info('Server %(server)s of lease %(lease)s vanished',
                         {'server': server_id, 'lease': lease['id']})
                stats['vanished'] += 1
                self.instance_deleted(server_id, now=now)
                continue
            if not self.not_started(lease, now):
                continue
            task = server.get('OS-EXT-STS:task_state')
            if task:
                continue
            if server.get('status') == 'ACTIVE':
                self.reserve(server_id, lease['id'])
                stats['reserved'] += 1
            elif server.get('status') == 'SHELVED':
                self.compute.shelve_offload_server(server_id)
                stats['offloaded'] += 1

    def _repair_unlinked(self, lease, unlinked, now, stats):
        found = [s['id'] for s in self.compute.list_servers(
            all_projects=True, tenant_id=lease['project_id'])
            if (s.get('metadata') or {}).get(leases.META_LEASE_ID) ==
            lease['id']]
        linked = {r['resource_id'] for r in lease['reservations']}
        found = [s for s in found if s not in linked]
        if found:
            LOG.warning('Lease %(lease)s: linking servers %(servers)s that '
                        'nova-api could not link', {'lease': lease['id'],
                                                    'servers': found})
            leases.link_instances(self.db, dict(
                lease, reservations=unlinked), found)
            stats['linked'] += len(found)
            return
        with self.db.writer() as session:
            for reservation in unlinked:
                db_api.reservation_update(
                    session, reservation['id'],
                    {'status': str(_R.DELETED)},
                    expected_status=reservation['status'],
                    expected={'resource_id': None})
            current = db_api.lease_get(session, lease['id'])
            if all(r['status'] == _R.DELETED
                   for r in current['reservations']):
                reason = ('the servers of the lease were never created or '
                          'never linked to it')
                if leases.end_early(session, current, reason, now):
                    stats['unlinked_ended'] += 1
                    LOG.warning('Lease %(lease)s ended: %(reason)s',
                                {'lease': lease['id'], 'reason': reason})


class InstanceEndpoint(object):
    """oslo.messaging endpoint for Nova's versioned instance notifications.
    """

    filter_rule = oslo_messaging.NotificationFilter(
        event_type=r'^instance\.(create|delete|unshelve)\.end$')

    def __init__(self, hook):
        self.hook = hook

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        data = _payload_data(payload)
        LOG.debug('Compute hook: %(type)s of server %(server)s received',
                  {'type': event_type, 'server': data.get('uuid')})
        # The engine may be waiting for this server (a start it issued):
        # it looks now instead of at its next poll.
        if self.hook.on_server_change is not None:
            self.hook.on_server_change(data.get('uuid'),
                                       server_of_payload(data))
        try:
            if event_type == CREATE_END:
                self.hook.instance_created(data)
            elif event_type == DELETE_END and data.get('uuid'):
                self.hook.instance_deleted(data['uuid'])
        except Exception:
            LOG.exception('Compute hook: %(type)s of server %(server)s '
                          'failed; the reconcile pass will repair it',
                          {'type': event_type, 'server': data.get('uuid')})
        return oslo_messaging.NotificationResult.HANDLED


def start_listener(conf, hook, transport=None):
    """Start the hook's notification listener; return it (started).

    ``transport`` defaults to the notification transport of ``conf``
    (``[oslo_messaging_notifications] transport_url``, else
    ``[DEFAULT] transport_url``). Stop it with ``listener.stop()`` then
    ``listener.wait()``.
    """
    if transport is None:
        transport = oslo_messaging.get_notification_transport(conf)
    targets = [oslo_messaging.Target(topic=topic)
               for topic in conf.nova_lease_engine.notification_topics]
    listener = oslo_messaging.get_notification_listener(
        transport, targets, [InstanceEndpoint(hook)], executor='threading',
        pool=POOL)
    listener.start()
    LOG.info('Compute hook listening on %s (pool %s)',
             ', '.join(conf.nova_lease_engine.notification_topics), POOL)
    return listener


class Reconciler(object):
    """Runs :meth:`ComputeHook.reconcile` in a daemon thread.

    Every ``[nova_lease_engine] reconcile_interval`` seconds; the engine
    process starts it.
    """

    def __init__(self, hook, interval=None):
        self.hook = hook
        self.interval = (hook.conf.nova_lease_engine.reconcile_interval
                         if interval is None else interval)
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        if not self.interval:
            return self
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='lease-reconcile')
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(self.interval):
            try:
                self.hook.reconcile()
            except Exception:
                LOG.exception('Reconcile pass failed')

    def stop(self, timeout=10):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
