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
"""Instance leases: record, link, undo and end them (the service layer).

Used by the paste filter (``POST /servers`` with lease hints) and the
compute hook. Each function is one writer transaction of the side
database; none talks to Nova.

Life of an instance lease created by a boot:

1. ``create_instance_lease`` (nova_lease.plugins.instance.rtype,
   through the booking pipeline, before Nova sees the request): a
   PENDING lease with one ``virtual:instance`` reservation per server that
   may be created (``max_count``), not yet linked to a server
   (``resource_id`` NULL), its events, and, for a future start, the host
   allocations that admission control promised. The ``start_lease`` event
   is *held* (``next_attempt_at`` = now + :data:`START_HOLD`) so that no
   engine starts the lease before its servers are linked.
2. :func:`link_instances` (after Nova's 202): the server ids go into the
   reservations, the reservations (and allocations) of servers Nova did
   not create (multi-create below ``max_count``) are deleted, the start
   hold is released.
3. Or :func:`destroy_lease` when Nova refused the request, or the servers
   had to be deleted: the lease goes as if it never was.

A boot for a future lease goes the same way; its servers are created
shelved-offloaded and need no capacity until the start (see
nova_lease.api_ext.shelved); their reservations carry
:data:`SHELVED_UNTIL_START`.

:func:`instance_deleted` is the compute hook's: a leased server is gone,
its reservation is marked deleted, and a lease whose servers are all gone
ends early (:func:`end_early`).
"""

import datetime

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease.capacity import admission
from nova_lease.capacity import inventory as nova_inventory
from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import resource_types as types
from nova_lease import status
from nova_lease import wire

LOG = logging.getLogger(__name__)

RESOURCE_TYPE = types.SERVER

#: How long the start of a new lease waits for its servers to be linked.
#: The link normally follows within milliseconds and releases the hold; a
#: nova-api that died in between leaves an unlinked lease that the compute
#: hook's reconcile pass repairs or ends.
START_HOLD = datetime.timedelta(minutes=5)

#: Server metadata keys set on leased servers.
META_LEASE_ID = wire.SERVER_LEASE_ID
META_LEASE_STATUS = wire.SERVER_LEASE_STATUS
#: The reservation a server belongs to (servers created at their lease's
#: start, found by it after a crash between their creation and the link).
META_RESERVATION_ID = wire.SERVER_RESERVATION_ID
#: Reservation property: a future lease's server, created shelved-offloaded
#: at the boot and unshelved at the start (nova_lease.api_ext.shelved).
SHELVED_UNTIL_START = wire.PROP_SHELVED_UNTIL_START
#: ``lease_status`` values (the engine's plugin sets active / terminated).
META_PENDING = wire.SERVER_STATUS_PENDING
META_RESERVED = wire.SERVER_STATUS_RESERVED

_L = status.LeaseStatus
_R = status.ReservationStatus
_E = status.EventStatus

#: Who cancels events when a lease ends early (recorded as the claimer).
CANCELLER = 'nova-lease-compute-hook'


class LinkError(exception.NovaLeaseException):
    msg_fmt = 'Could not link servers to lease %(lease_id)s: %(reason)s'


def flavor_sizes(flavor):
    """{'vcpus', 'memory_mb', 'disk_gb'} of a Nova flavor (object/dict)."""
    def get(name):
        if isinstance(flavor, dict):
            return flavor.get(name) or 0
        return getattr(flavor, name, 0) or 0
    return {'vcpus': int(get('vcpus')), 'memory_mb': int(get('memory_mb')),
            'disk_gb': int(get('root_gb')) + int(get('ephemeral_gb'))}


def link_instances(db, lease, server_ids):
    """Link ``server_ids`` (in creation order) to the lease's reservations.

    Reservations beyond ``len(server_ids)`` are deleted (with their
    allocations); the start hold is released. One transaction. Returns
    the lease dict.

    :raises LinkError: more servers than reservations.
    """
    reservations = sorted(
        (r for r in lease['reservations']
         if r['resource_type'] == RESOURCE_TYPE),
        key=lambda r: (r['properties'] or {}).get('index', 0))
    if len(server_ids) > len(reservations):
        raise LinkError(lease_id=lease['id'],
                        reason='%d servers for %d reservations'
                        % (len(server_ids), len(reservations)))
    now = timeutils.utcnow()
    links = list(zip((r['id'] for r in reservations), server_ids))
    linked = [dict(reservation, resource_id=server_id, updated_at=now)
              for reservation, server_id in zip(reservations, server_ids)]
    events = []
    release = []
    for event in lease['events']:
        if (event['event_type'] == status.EventType.START_LEASE and
                event.get('next_attempt_at') is not None and
                not event.get('attempts')):
            release.append(event['id'])
            event = dict(event, next_attempt_at=None, updated_at=now)
        events.append(event)
    # One transaction of prepared statements (the boot path).
    db_api.reservations_link(
        db, links, drop=[r['id'] for r in reservations[len(server_ids):]],
        release_events=release, event_status=str(_E.UNDONE), now=now)
    # The lease as it now is (not read again: only this request knows it).
    others = [r for r in lease['reservations']
              if r['resource_type'] != RESOURCE_TYPE]
    return dict(lease, reservations=others + linked, events=events)


def destroy_lease(db, lease_id):
    """Delete a lease that never took effect; False if already gone."""
    try:
        db_api.lease_destroy(db, lease_id)
    except db_api.LeaseNotFound:
        return False
    LOG.info('Removed lease %s', lease_id)
    return True


def _cancel_events(session, lease, reason, now):
    for event in lease['events']:
        if event['status'] != _E.UNDONE:
            continue
        db_api.event_update(
            session, event['id'],
            {'status': str(_E.IN_PROGRESS), 'claimed_by': CANCELLER,
             'claimed_at': now}, expected_status=str(_E.UNDONE))
        db_api.event_update(
            session, event['id'],
            {'status': str(_E.DONE), 'last_error': 'cancelled: %s' % reason},
            expected_status=str(_E.IN_PROGRESS),
            expected={'claimed_by': CANCELLER})


def end_early(session, lease, reason, now=None):
    """In a writer session: end ``lease`` now, its UNDONE events cancelled.

    A PENDING lease goes to TERMINATED; an ACTIVE (or ERROR) one through
    TERMINATING to TERMINATED. Returns the new status, or None when the
    lease is in a status the engine owns (STARTING, TERMINATING, ...) or
    already ended: then nothing changes.
    """
    now = now or timeutils.utcnow()
    current = lease['status']
    if any(e['status'] == _E.IN_PROGRESS for e in lease['events']):
        return None
    if current == _L.PENDING:
        path = [_L.TERMINATED]
    elif current in (_L.ACTIVE, _L.ERROR):
        path = [_L.TERMINATING, _L.TERMINATED]
    else:
        return None
    _cancel_events(session, lease, reason, now)
    # The capacity promised to the lease after now goes with it.
    db_api.allocation_cut(session, [r['id'] for r in lease['reservations']],
                          now)
    old = current
    for new in path:
        status.check_transition(status.LEASE, old, new)
        db_api.lease_update(session, lease['id'],
                            {'status': str(new), 'status_reason': reason,
                             'updated_at': now},
                            expected_status=str(old))
        old = new
    return old


def instance_deleted(db, server_id, now=None):
    """A leased server is gone: mark its reservation(s) deleted.

    A lease whose virtual:instance reservations are then all deleted, and
    that has no other kind of reservation, ends early. Returns the list of
    lease ids that ended. Leases the engine is working on (an event
    IN_PROGRESS, or STARTING/TERMINATING) are left to the engine.
    """
    now = now or timeutils.utcnow()
    ended = []
    for reservation in db_api.reservation_list(
            db, resource_id=server_id, resource_type=RESOURCE_TYPE):
        if reservation['status'] == _R.DELETED:
            continue
        with db.writer() as session:
            lease = db_api.lease_get(session, reservation['lease_id'])
            if lease['status'] not in (_L.PENDING, _L.ACTIVE, _L.ERROR) or (
                    any(e['status'] == _E.IN_PROGRESS
                        for e in lease['events'])):
                LOG.debug('Server %(server)s deleted while lease %(lease)s '
                          'is %(status)s: left to the engine',
                          {'server': server_id, 'lease': lease['id'],
                           'status': lease['status']})
                continue
            status.check_transition(status.RESERVATION,
                                    reservation['status'], _R.DELETED)
            db_api.reservation_update(
                session, reservation['id'], {'status': str(_R.DELETED)},
                expected_status=reservation['status'])
            LOG.info('Server %(server)s of lease %(lease)s was deleted',
                     {'server': server_id, 'lease': lease['id']})
            lease = db_api.lease_get(session, lease['id'])
            rest = [r for r in lease['reservations']
                    if r['status'] != _R.DELETED]
            if rest:
                continue
            reason = ('every server of the lease was deleted (last: %s)'
                      % server_id)
            if end_early(session, lease, reason, now):
                LOG.info('Lease %(lease)s ended early: %(reason)s',
                         {'lease': lease['id'], 'reason': reason})
                ended.append(lease['id'])
    return ended


def move_instance_lease(session, conf, lease, reservations, start, end, now,
                        inventory=None):
    """Re-admit the VM ``reservations`` of ``lease`` for [start, end).

    In the caller's writer ``session`` (which also updates the lease and
    its events):

    * shortened (same start, earlier end): the allocations end earlier;
    * a PENDING lease moved or extended: its allocations are chosen
      again by admission control over the new window (the servers are
      placed at the start on the new promised hosts);
    * an ACTIVE lease extended: each running server must still fit on its
      own host from the old end to the new one, next to what runs there
      and what other leases were promised (admission control on that one
      host; a running server cannot change host by a date change).

    :raises nova_lease.capacity.admission.NoCapacity: (409) it does not
        fit; the caller's transaction must roll back.
    """
    own = [r for r in reservations
           if r['status'] in (str(_R.PENDING), str(_R.ACTIVE))]
    if not own:
        return
    allocations = db_api.allocation_list(
        session, reservation_id=[r['id'] for r in own])
    old_start, old_end = lease['start_date'], lease['end_date']
    if start == old_start and end <= old_end:
        for a in allocations:
            db_api.allocation_update(session, a['id'], {'end_date': end})
        return
    if lease['status'] == str(_L.PENDING) and allocations:
        for r in own:
            db_api.allocation_destroy_by_reservation(session, r['id'])
        sizes = own[0]['properties'] or {}
        chosen = admission.allocate_instances(
            session, conf, sizes, len(own), start, end, inventory=inventory)
        for r, allocation in zip(own, chosen):
            db_api.allocation_create(session,
                                     dict(allocation, reservation_id=r['id']))
        return
    # Started (or starting now, without allocations): each server stays
    # where it runs.
    if inventory is None:
        inventory = nova_inventory.default_inventory(conf)
    running = inventory.leased_servers(
        {r['resource_id'] for r in own if r.get('resource_id')})
    for r in own:
        where = running.get(r.get('resource_id'))
        if where is None:
            continue
        node, _size = where
        admission.allocate_instances(
            session, conf, r['properties'] or {}, 1, max(old_end, now), end,
            inventory=inventory, hosts={node})
    for a in allocations:
        db_api.allocation_update(session, a['id'], {'end_date': end})
