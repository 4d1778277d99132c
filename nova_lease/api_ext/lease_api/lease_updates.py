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
"""Changing and ending a lease: the transactions behind ``PUT`` and
``DELETE /leases/{id}`` (handlers in :mod:`.handlers.leases`).

Each is one writer transaction of the side database, retried on a
deadlock, that compares and sets the lease's status: the engine may
start or end the lease meanwhile (then :class:`LeaseBusy`, 409).
"""

from nova_lease.api_ext.lease_api import common
from nova_lease.api_ext.lease_api import reservation_updates
from nova_lease.db import api as db_api
from nova_lease import enforcement
from nova_lease import exception
from nova_lease import params as lease_params
from nova_lease.plugins import flavor as flavor_plugin
from nova_lease.plugins.flavor import allocation as slot_allocation
from nova_lease.plugins.host import allocation as host_allocation
from nova_lease.plugins.instance import leases as instance_leases
from nova_lease import status

_L = status.LeaseStatus
_E = status.EventStatus
_T = status.EventType


class LeaseBusy(exception.Conflict):
    msg_fmt = ('lease %(lease_id)s is %(status)s: %(action)s is not '
               'possible now%(hint)s')


def _parse_update_date(body, key, now):
    value = body.get(key)
    if value is None:
        return None
    if key == 'start_date' and isinstance(value, str) and (
            value.strip().lower() == 'now'):
        return now
    return lease_params.parse_datetime(value, key)


def check_update_body(body):
    """Refuse (400) an update the API does not take.

    Its keys and their types are checked by the schema
    (``schemas.leases.UPDATE``); its ``reservations`` by
    :func:`reservation_updates.parse`.
    """
    if 'name' in body and body['name'] is not None:
        lease_params.parse_name(body['name'], 'name')


def _new_window(lease, body, now):
    """(start, end, before_end) after the update, validated."""
    start = _parse_update_date(body, 'start_date', now)
    end = _parse_update_date(body, 'end_date', now)
    before_end = _parse_update_date(body, 'before_end_date', now)
    started = lease['status'] != _L.PENDING
    if start is not None and start != lease['start_date']:
        if started:
            raise lease_params.LeaseParamError(
                'start_date', 'unsupported', "'start_date' cannot change: "
                "the lease has started (%s)" % lease['status'])
        if start < now - lease_params.START_GRACE:
            raise lease_params.LeaseParamError(
                'start_date', 'past', "'start_date' (%s) is in the past "
                "(now is %s)" % (lease_params.format_short(start),
                                 lease_params.format_short(now)))
        start = max(start, now)
    else:
        start = lease['start_date']
    if end is None:
        end = lease['end_date']
    elif started and end < now.replace(second=0, microsecond=0):
        raise lease_params.LeaseParamError(
            'end_date', 'past', "'end_date' (%s) is in the past: a started "
            "lease can be shortened down to now (%s)" % (
                lease_params.format_short(end),
                lease_params.format_short(now)))
    elif started and end < now:
        # As in Blazar, whose dates have no seconds: an end in the
        # current minute ends the lease now.
        end = now
    if end <= start:
        raise lease_params.LeaseParamError(
            'end_date', 'order', "'end_date' (%s) must be after "
            "'start_date' (%s)" % (lease_params.format_short(end),
                                   lease_params.format_short(start)))
    limit = common.max_duration()
    if limit and end - start > limit:
        raise lease_params.LeaseParamError(
            'end_date', 'too_long', "'end_date' (%s) makes the lease %s "
            "long; the maximum lease duration is %s" % (
                lease_params.format_short(end),
                lease_params.format_duration(end - start),
                lease_params.format_duration(limit)))
    if before_end is not None and not start <= before_end < end:
        raise lease_params.LeaseParamError(
            'before_end_date', 'range', "'before_end_date' (%s) must be at "
            "or after 'start_date' and before 'end_date'"
            % lease_params.format_short(before_end))
    if before_end is not None and before_end < now:
        # (A started lease: its start may be in the past.)
        if before_end < now - lease_params.START_GRACE:
            raise lease_params.LeaseParamError(
                'before_end_date', 'past', "'before_end_date' (%s) is in "
                "the past (now is %s)" % (
                    lease_params.format_short(before_end),
                    lease_params.format_short(now)))
        before_end = now
    if before_end is None and (end != lease['end_date'] or
                               start != lease['start_date']):
        # Re-armed for the new end; when its default time has passed
        # already (a short lease extended late), the warning is due now:
        # before_end_date always names the warning still to come.
        before_end = lease_params.default_before_end(
            start, end, common.opts().minutes_before_end_lease)
        if before_end is not None:
            before_end = max(before_end, now)
    elif before_end is None:
        before_end = lease.get('before_end_date')
    return start, end, before_end


def _move_events(session, lease, start, end, before_end, now):
    events = {}
    for event in db_api.event_list(session, lease_id=lease['id']):
        events.setdefault(event['event_type'], []).append(event)
    undone = str(_E.UNDONE)

    def move(etype, when):
        for event in events.get(etype, ()):
            if event['status'] == undone and event['time'] != when:
                db_api.event_update(session, event['id'], {'time': when},
                                    expected_status=undone)

    move(_T.START_LEASE, start)
    move(_T.END_LEASE, end)
    befores = events.get(_T.BEFORE_END_LEASE, [])
    pending = [e for e in befores if e['status'] == undone]
    if before_end is None:
        for event in pending:
            db_api.event_destroy(session, event['id'])
    elif pending:
        move(_T.BEFORE_END_LEASE, before_end)
    elif before_end >= now or not befores:
        # Re-armed: the end moved after the warning had fired.
        db_api.event_create(session, {
            'lease_id': lease['id'], 'event_type': str(_T.BEFORE_END_LEASE),
            'time': max(before_end, now), 'status': undone})


def _check_changeable(lease, action):
    """409 unless the lease is PENDING or ACTIVE."""
    if lease['status'] not in (_L.PENDING, _L.ACTIVE):
        raise LeaseBusy(lease_id=lease['id'], status=lease['status'],
                        action=action,
                        hint='' if status.is_terminal(
                            status.LEASE, lease['status'])
                        else '; retry in a moment')


@db_api.retry_on_deadlock
def update_lease(db, lease, body, now):
    """Apply a checked update body.

    :returns: ``(the lease as updated, [reservation_updates.Change])``:
        what the caller tells Nova once committed
        (:func:`reservation_updates.after_commit`).
    """
    cleaning = common.opts().cleaning_time
    changes = []
    with db.writer() as session:
        current = db_api.lease_get(session, lease['id'])
        values = {}
        if body.get('name') is not None:
            values['name'] = body['name']
        dates = ('start_date', 'end_date', 'before_end_date')
        if any(body.get(k) is not None for k in dates):
            _check_changeable(current, 'changing its dates')
            others = sorted({
                r['resource_type'] for r in current['reservations']
                if r['resource_type'] not in (
                    host_allocation.RESOURCE_TYPE,
                    flavor_plugin.RESOURCE_TYPE,
                    instance_leases.RESOURCE_TYPE)})
            if others:
                raise lease_params.LeaseParamError(
                    'end_date' if body.get('end_date') else 'start_date',
                    'unsupported', "the dates of a lease with %s "
                    "reservations cannot be changed yet" % ', '.join(others))
            start, end, before_end = _new_window(current, body, now)
            if start != current['start_date'] or end > current['end_date']:
                # Usage limits ([nova_lease_enforcement]): 403 naming them.
                host_ids = {r['id'] for r in current['reservations']
                            if r['resource_type'] ==
                            host_allocation.RESOURCE_TYPE}
                enforcement.check_host_lease(
                    common.CONF, session, current['project_id'], start, end,
                    len({a['host'] for a in db_api.allocation_list(
                        session, lease_id=current['id'])
                        if a['reservation_id'] in host_ids}), now,
                    lease_id=current['id'])
            if current['status'] == _L.PENDING:
                host_allocation.move_host_lease(session, current, start,
                                                end, cleaning)
            elif end != current['end_date']:
                host_allocation.extend_host_lease(session, current, end,
                                                  cleaning)
            if any(r['resource_type'] == flavor_plugin.RESOURCE_TYPE
                   for r in current['reservations']):
                slot_allocation.rebook_slots(
                    session, current, start, end, now,
                    sizes=slot_allocation.capacities(common.CONF))
            instance_leases.move_instance_lease(session, common.CONF,
                                                current, start, end, now)
            values.update(start_date=start, end_date=end,
                          before_end_date=before_end)
            _move_events(session, current, start, end, before_end, now)
        if body.get('reservations'):
            _check_changeable(current, 'changing its reservations')
            changes = reservation_updates.parse(current, body['reservations'])
            reservation_updates.apply(
                session, changes, values.get('start_date',
                                             current['start_date']),
                values.get('end_date', current['end_date']), now,
                started=current['status'] != _L.PENDING)
        if not values and not changes:
            return current, changes
        values['updated_at'] = now
        # Compare-and-set: the engine may have started or ended it since.
        return db_api.lease_update(session, current['id'], values,
                                   expected_status=current['status']), changes


@db_api.retry_on_deadlock
def delete_lease(db, lease_id, now):
    """Delete or end a lease; returns 'deleted' or 'ending'."""
    cleaning = common.opts().cleaning_time
    with db.writer() as session:
        lease = db_api.lease_get(session, lease_id)
        state = lease['status']
        only_hosts = all(r['resource_type'] == host_allocation.RESOURCE_TYPE
                         for r in lease['reservations'])
        if state == _L.TERMINATED or (state == _L.PENDING and only_hosts):
            # Nothing was provisioned (or everything was released): the
            # rows go, allocations with them (cascade).
            db_api.lease_update(session, lease_id, {'updated_at': now},
                                expected_status=state)
            db_api.lease_destroy(session, lease_id)
            return 'deleted'
        if state in (_L.STARTING, _L.TERMINATING):
            raise LeaseBusy(lease_id=lease_id, status=state,
                            action='deleting it',
                            hint='; retry in a moment')
        # Started (or failed), or holding Nova resources already: end it
        # now; the engine releases the resources and the lease becomes
        # TERMINATED.
        events = db_api.event_list(session, lease_id=lease_id)
        for event in events:
            if event['status'] != _E.UNDONE:
                continue
            if event['event_type'] == _T.END_LEASE:
                db_api.event_update(session, event['id'], {'time': now},
                                    expected_status=str(_E.UNDONE))
            elif state in (_L.PENDING, _L.IN_PROGRESS) or (
                    event['event_type'] == _T.BEFORE_END_LEASE):
                db_api.event_destroy(session, event['id'])
        if any(r['resource_type'] == host_allocation.RESOURCE_TYPE
               for r in lease['reservations']):
            host_allocation.extend_host_lease(session, lease, min(now, lease[
                'end_date']), cleaning)
        # The capacity other reservations (instances) were promised goes
        # with the lease: nothing of it after now.
        db_api.allocation_cut(
            session, [r['id'] for r in lease['reservations']
                      if r['resource_type'] != host_allocation.RESOURCE_TYPE],
            min(now, lease['end_date']))
        db_api.lease_update(session, lease_id,
                            {'end_date': min(now, lease['end_date']),
                             'updated_at': now},
                            expected_status=state)
        return 'ending'
