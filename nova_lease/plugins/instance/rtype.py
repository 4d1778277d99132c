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
"""The ``virtual:instance`` reservation type: VM leases, one server per
reservation, made by ``POST /servers`` with lease hints (not through the
lease API).

Its steps of the booking pipeline (nova_lease.booking.pipeline):

* book: one reservation per server the boot may create; a lease that
  starts later (or an ``immediate`` one) is admitted against the
  capacity calendar (nova_lease.capacity.admission), its promised
  hosts booked (its servers wait shelved-offloaded until the start:
  nova_lease.api_ext.shelved);
* move: a PENDING lease is admitted again over its new window; a
  started one keeps each server where it runs (nova_lease.plugins
  .instance.leases.move_instance_lease);
* update: none (a server's size is its flavor's);
* delete: its servers are Nova's: the engine ends the lease; what it
  was promised after now is released.
"""

import dataclasses
import typing

from oslo_utils import timeutils
from oslo_utils import uuidutils

from nova_lease.booking import pipeline
from nova_lease.capacity import admission
from nova_lease.db import api as db_api
from nova_lease import lease_events
from nova_lease import lease_types
from nova_lease.plugins.instance import leases
from nova_lease import resource_types as types
from nova_lease import status


@dataclasses.dataclass
class ServerRequest:
    """What a boot with lease hints books.

    :ivar sizes: ``{'vcpus', 'memory_mb', 'disk_gb'}`` of one server.
    :ivar count: how many servers the request may create (max_count).
    :ivar flavor_id: the boot's flavor.
    :ivar default: a ``default_lease`` one.
    :ivar admit: admitted against the calendar now (a later start, or an
        ``immediate`` lease).
    :ivar shelved: a future lease whose servers are created
        shelved-offloaded at the boot and unshelved at the start
        (nova_lease.api_ext.shelved).
    """

    sizes: dict
    count: int
    flavor_id: typing.Optional[str] = None
    default: bool = False
    admit: bool = True
    shelved: bool = False


class ServerType(types.ReservationType):

    name = types.SERVER
    order = 30
    start_field = 'lease_params.start'

    def book(self, session, booking, items):
        out = []
        for item in items:
            request = item.request
            rows = []
            for index in range(request.count):
                properties = dict(request.sizes, index=index)
                if request.shelved:
                    properties[leases.SHELVED_UNTIL_START] = True
                if request.flavor_id is not None:
                    properties['flavor_id'] = str(request.flavor_id)
                if request.default:
                    properties['default_lease'] = True
                rows.append({'id': uuidutils.generate_uuid(),
                             'resource_type': self.name,
                             'resource_id': None, 'status': 'pending',
                             'properties': properties})
            if request.admit:
                allocations = admission.allocate_instances(
                    session, booking.conf, request.sizes, request.count,
                    booking.start, booking.end)
                for row, allocation in zip(rows, allocations or ()):
                    row['allocations'] = [allocation]
            item.made = [row['id'] for row in rows]
            out.extend(rows)
        return out

    def move(self, session, conf, lease, reservations, start, end, now):
        leases.move_instance_lease(session, conf, lease, reservations,
                                   start, end, now)

    def release_after(self, session, conf, lease, reservations, when):
        db_api.allocation_cut(session, [r['id'] for r in reservations],
                              when)


def _booking(conf, params, project_id, user_id, request, now, hold):
    before_end = params.effective_before_end(
        conf.nova_lease_api.minutes_before_end_lease)
    events = lease_events.lease_events(params.start, params.end, before_end)
    hold_until = now + leases.START_HOLD
    for event in events:
        # (Every event gets the key: one INSERT for all of them.)
        event['next_attempt_at'] = None
        if (hold and event['event_type'] == status.EventType.START_LEASE
                and event['time'] < hold_until):
            event['next_attempt_at'] = hold_until
    lease_type, retries = lease_types.effective(
        params, conf, field='lease_params.retries')
    values = dict(pipeline.lease_values(params, project_id, user_id,
                                        before_end, lease_type, retries),
                  id=uuidutils.generate_uuid())
    # An immediate lease is admitted now, as a future one is: refused
    # (409) when its servers do not fit, its capacity promised otherwise.
    request.admit = not (params.start_now and
                         lease_type != lease_types.IMMEDIATE)
    return pipeline.Booking(
        conf=conf, values=values, events=events, now=now,
        items=[pipeline.Item('lease_params', types.get(types.SERVER),
                             request)],
        limits=not request.default)


def create_instance_lease(db, conf, params, project_id, user_id, flavor,
                          count, flavor_id=None, default=False,
                          shelved=False, now=None):
    """Record a PENDING lease for ``count`` servers of a boot; return the
    lease dict (through the booking pipeline).

    One reservation per server the request may create (``max_count``),
    not yet linked to a server (``resource_id`` NULL), its events, and,
    for a future start, the host allocations that admission control
    promised. The ``start_lease`` event is *held* (``next_attempt_at`` =
    now + ``leases.START_HOLD``) so that no engine starts the lease
    before its servers are linked (nova_lease.plugins.instance.leases).

    :param params: a :class:`nova_lease.params.LeaseParams`.
    :param flavor: ``{'vcpus', 'memory_mb', 'disk_gb'}`` (see
        ``leases.flavor_sizes``).
    :param default: a ``default_lease`` one (not checked against the
        usage limits; recorded in the reservations' properties).
    :param shelved: a future lease whose servers are created
        shelved-offloaded (recorded in the reservations' properties as
        ``leases.SHELVED_UNTIL_START``).
    :raises nova_lease.capacity.admission.NoCapacity: (409) a future
        lease does not fit.
    :raises nova_lease.enforcement.LimitExceeded: (403).
    """
    now = now or timeutils.utcnow()
    request = ServerRequest(sizes=dict(flavor), count=count,
                            flavor_id=flavor_id, default=default,
                            shelved=shelved)
    return pipeline.create(db, _booking(conf, params, project_id, user_id,
                                        request, now, hold=True))
