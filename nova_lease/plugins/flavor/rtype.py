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
"""The ``flavor:instance`` reservation type: Blazar's instance
reservations (the lease API's ``virtual:instance`` and
``flavor:instance``), ``amount`` instance slots on registered hosts.

Its steps of the booking pipeline (nova_lease.booking.pipeline):

* parse: :func:`.request.parse_slot_request` (a ``flavor:instance``
  request's flavor is looked up as the caller sees it);
* prepare: the reservation's private flavor (its id is the reservation
  id) and server group, made in Nova before the booking, removed when
  the booking is refused;
* book: the slots, under the locks of the hosts they may use, avoiding
  the hosts the lease's host reservations take (:mod:`.allocation`);
  after the commit, a booking that starts within ``[nova_lease]
  idle_host_wake_minutes`` wakes the slot hosts the idle action
  disabled (its start wakes them too: nova_lease.plugins.flavor.plugin);
* move: on the same hosts, when they still hold the slots;
* update (``amount``, size): the slots are chosen again before the
  start (and the flavor made again with a new size); after it only more
  slots can be added, and their hosts join the reservation's aggregate
  at once;
* delete: the flavor exists in Nova: the engine ends the lease; what the
  slots hold after now is released;
* show: the type the reservation was asked with.
"""

import dataclasses
import datetime

from oslo_utils import uuidutils

from nova_lease.calendar import offers
from nova_lease.db import api as db_api
from nova_lease.plugins import flavor as flavor_plugin
from nova_lease.plugins.flavor import allocation
from nova_lease.plugins.flavor import request as slot_request
from nova_lease.plugins.host import registry
from nova_lease.plugins.host import rtype as host_rtype
from nova_lease import resource_types as types

#: What a reservation update may give.
UPDATE_KEYS = frozenset({'id', 'resource_type', 'amount', 'vcpus',
                         'memory_mb', 'disk_gb'})
#: The reservation property that keeps the type it was asked with.
API_TYPE = 'api_resource_type'


class SlotType(types.ReservationType):

    name = types.SLOTS
    order = 20

    # -- create -------------------------------------------------------------

    def parse(self, raw, field, caller):
        return slot_request.parse_slot_request(raw, field,
                                               caller.nova.find_flavor)

    def prepare(self, caller, booking, item):
        rid = uuidutils.generate_uuid()
        item.made = (rid, caller.nova.make_flavor(rid, item.request))

    def unprepare(self, caller, item):
        if item.made is not None:
            caller.nova.discard_flavor(*item.made)

    def book(self, session, booking, items):
        booked = allocation.pick_slots(
            session, [(i.field, i.request) for i in items], booking.start,
            booking.end, booking.now, booking.taken,
            sizes=allocation.capacities(booking.conf))
        return [{'id': item.made[0], 'resource_type': self.name,
                 'status': 'pending',
                 'properties': item.request.properties(*item.made),
                 'allocations': allocations}
                for item, allocations in zip(items, booked)]

    def offer_hosts(self, session, conf, request):
        hosts, _fingerprint = registry.read_registry(session)
        names = [h['hypervisor_hostname'] for h in registry.matching_hosts(
            hosts, request.host_request())]
        known = allocation.capacities(conf)
        by_name = {h['hypervisor_hostname']: h for h in hosts}
        sizes = {n: allocation.size_of(by_name[n], known) for n in names}
        return (offers.SlotsRequest(request.vcpus, request.memory_mb,
                                    request.disk_gb, request.amount,
                                    request.affinity), names, sizes)

    def after_create(self, caller, booking, lease):
        # Slot hosts stay in the free pool, where the idle action may have
        # disabled them: a booking that starts within
        # idle_host_wake_minutes wakes them at once (its start does too).
        soon = booking.now + datetime.timedelta(
            minutes=caller.conf.nova_lease.idle_host_wake_minutes)
        if booking.start > soon:
            return
        rids = [item.made[0] for item in booking.items if item.type is self]
        host_rtype.wake_hosts(caller, {a['host'] for a in db_api
                                       .allocation_list(caller.db,
                                                        reservation_id=rids)})

    # -- date changes -------------------------------------------------------

    def move(self, session, conf, lease, reservations, start, end, now):
        allocation.rebook_slots(session, lease, reservations, start, end,
                                now, sizes=allocation.capacities(conf))

    # -- reservation updates ------------------------------------------------

    def parse_update(self, field, reservation, item):
        shown = self.shown_type(reservation)
        host_rtype.check_update_keys(field, item, shown, UPDATE_KEYS)
        old = reservation['properties'] or {}
        raw = {'resource_type': flavor_plugin.BY_SIZE,
               'amount': item.get('amount', old.get('amount')),
               'affinity': old.get('affinity'),
               'resource_properties': old.get('resource_properties')}
        for key in ('vcpus', 'memory_mb', 'disk_gb'):
            raw[key] = item.get(key, old.get(key))
        request = slot_request.parse_slot_request(raw, field)
        return dataclasses.replace(request, resource_type=shown,
                                   flavor_id=old.get('source_flavor_id'))

    def apply_update(self, session, conf, update, start, end, now,
                     started):
        old = update.reservation['properties'] or {}
        request = update.request
        update.resized = (request.vcpus, request.memory_mb,
                          request.disk_gb) != (
            old.get('vcpus'), old.get('memory_mb'), old.get('disk_gb'))
        update.added = allocation.update_slots(
            session, update.reservation, request, start, end, now,
            started=started, field=update.field,
            sizes=allocation.capacities(conf))

    def after_update(self, caller, lease, update, started):
        rid = update.reservation['id']
        if started:
            # (Slot hosts stay in the free pool.)
            host_rtype.join_started(caller, rid, update.added, None)
        elif update.resized:
            props = update.reservation['properties'] or {}
            caller.nova.resize_flavor(rid, update.request,
                                      props.get('server_group_id'))

    # -- delete -------------------------------------------------------------

    def release_after(self, session, conf, lease, reservations, when):
        db_api.allocation_cut(session, [r['id'] for r in reservations],
                              when)

    # -- show ---------------------------------------------------------------

    def shown_type(self, reservation):
        return (reservation.get('properties') or {}).get(API_TYPE,
                                                         self.name)

    def show(self, reservation, out):
        out['resource_type'] = out.pop(API_TYPE, self.name)
