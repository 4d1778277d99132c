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
"""A lease's new dates, from ``PUT /leases/{id}`` (handlers in
:mod:`.handlers.leases`): validated against the lease, with the move of
its events they make. The booking pipeline (nova_lease.booking.pipeline)
applies them in its transaction, with every reservation's.
"""

from nova_lease.api_ext.lease_api import common
from nova_lease.booking import pipeline
from nova_lease.db import api as db_api
from nova_lease import params as lease_params
from nova_lease import status

_L = status.LeaseStatus
_E = status.EventStatus
_T = status.EventType


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
    (``schemas.leases.UPDATE``); its ``reservations`` by the pipeline
    (each reservation's type).
    """
    if 'name' in body and body['name'] is not None:
        lease_params.parse_name(body['name'], 'name')


def new_window(lease, body, now):
    """The :class:`nova_lease.booking.pipeline.Window` after the update,
    validated against ``lease`` (as it is in the pipeline's transaction).
    """
    start = _parse_update_date(body, 'start_date', now)
    end = _parse_update_date(body, 'end_date', now)
    before_end = _parse_update_date(body, 'before_end_date', now)
    started = lease['status'] != _L.PENDING
    if start is not None and start != lease['start_date']:
        if started:
            raise lease_params.LeaseParamError(
                'start_date', 'unsupported', "'start_date' cannot change: "
                "the lease has started (%s)" % lease['status'])
        lease_params.check_not_past(start, now, 'start_date')
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
    # (The rules of a new lease's dates, params'.)
    lease_params.check_order(end, start, 'end_date', 'start_date')
    lease_params.check_length(end - start, common.max_duration(),
                              'end_date', lease_params.format_short(end))
    if before_end is not None:
        lease_params.check_within(
            before_end, lease_params.format_short(before_end), start, end,
            'before_end_date', 'start_date', 'end_date')
    if before_end is not None and before_end < now:
        # (A started lease: its start may be in the past.)
        lease_params.check_not_past(before_end, now, 'before_end_date')
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

    def move_events(session, current):
        _move_events(session, current, start, end, before_end, now)

    return pipeline.Window(start, end, before_end, move_events)


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
