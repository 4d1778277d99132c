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
"""The events of a lease (pure: no I/O, no clock).

Whoever records a lease passes :func:`lease_events` to
``db.api.lease_create(..., events=...)`` so that the events are inserted
in the same transaction as the lease.
"""

from nova_lease import status


def lease_events(start_date, end_date, before_end_date=None):
    """The event rows of a lease: start, end and (optional) before-end.

    ``before_end_date`` is the lease's effective before-end time (see
    ``nova_lease.params.LeaseParams.effective_before_end``), or None for
    no before_end_lease event; it is clamped into [start, end].
    """
    if end_date <= start_date:
        raise ValueError('a lease must end after it starts')
    events = [{'event_type': str(status.EventType.START_LEASE),
               'time': start_date,
               'status': str(status.EventStatus.UNDONE)}]
    if before_end_date is not None:
        at = min(max(before_end_date, start_date), end_date)
        events.append({'event_type': str(status.EventType.BEFORE_END_LEASE),
                       'time': at,
                       'status': str(status.EventStatus.UNDONE)})
    events.append({'event_type': str(status.EventType.END_LEASE),
                   'time': end_date,
                   'status': str(status.EventStatus.UNDONE)})
    return events
