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
"""The ``physical:host`` reservation type: whole hosts.

Its steps of the booking pipeline (nova_lease.booking.pipeline):

* parse: :func:`.request.parse_host_request`;
* book: free registered hosts that match, all or nothing, under their
  locks (:mod:`.allocation`); a best-effort lease hunts for the rest of
  its ``min`` (nova_lease.api_ext.best_effort) and is IN_PROGRESS;
* move: a PENDING lease keeps its hosts when they are free over the new
  window, else gets others; a started one keeps its hosts, whose end
  moves (extended only while they stay free);
* update (Blazar's rules, :func:`.allocation.update_host_reservation`):
  hosts that no longer match, or over ``max``, leave it (not once
  started); free matching hosts join it, and on a started lease go into
  its aggregate at once (out of the free pool, woken if the idle action
  disabled them);
* delete: a PENDING reservation holds nothing in Nova; a started one
  gives its hosts back from now on;
* show: a best-effort reservation shows how many hosts it took from the
  cloud (their names are the admin's).
"""

from oslo_utils import timeutils

from nova_lease.booking import pipeline
from nova_lease.calendar import offers
from nova_lease.db import api as db_api
from nova_lease import params as lease_params
from nova_lease.plugins.host import allocation
from nova_lease.plugins.host import registry
from nova_lease.plugins.host import request as host_request
from nova_lease import resource_types as types
from nova_lease import status

_error = lease_params.error

#: What a reservation update may give.
UPDATE_KEYS = frozenset({'id', 'resource_type', 'min', 'max',
                         'hypervisor_properties', 'resource_properties'})


class HostType(types.ReservationType):

    name = types.HOST
    order = 10
    best_effort = True
    # Blazar's host reservation has min, max, hypervisor_properties,
    # resource_properties and before_end.
    api_versions = {
        '1.1': ('best_effort_hosts',),
        '1.2': ('availability_zone', 'region', 'extra_specs', 'vcpus',
                'memory_mb', 'disk_gb'),
    }

    # -- create -------------------------------------------------------------

    def parse(self, raw, field, caller):
        return host_request.parse_host_request(raw, field, caller.region)

    def book(self, session, booking, items):
        requests = [(item.field, item.request) for item in items]
        start = booking.start
        stop = allocation.booked_end(booking.end, booking.cleaning)
        window = allocation.window_text(booking.start, booking.end,
                                        booking.cleaning)
        hunted = {}
        try:
            picks = allocation.allocate(session, requests, start, stop,
                                        window, ())
        except allocation.NotEnoughHosts:
            if booking.hunt is None:
                raise
            picks, hunted = allocation.hunt(session, requests, start, stop,
                                            window, booking.hunt)
        if hunted:
            booking.values['status'] = str(status.LeaseStatus.IN_PROGRESS)
        reservations = []
        for (field, request), (_f, chosen) in zip(requests, picks):
            properties = request.properties()
            if hunted.get(field):
                properties[allocation.BEST_EFFORT] = hunted[field]
            reservations.append({
                'resource_type': self.name,
                'status': 'pending',
                'properties': properties,
                'allocations': allocation.allocation_rows(chosen, start,
                                                          stop),
            })
            booking.taken.update(h['hypervisor_hostname'] for h in chosen)
        return reservations

    def offer_hosts(self, session, conf, request):
        hosts, _fingerprint = registry.read_registry(session)
        names = [h['hypervisor_hostname']
                 for h in registry.matching_hosts(hosts, request)]
        return offers.HostsRequest(request.min, request.max), names, None

    # -- date changes -------------------------------------------------------

    def move(self, session, conf, lease, reservations, start, end, now):
        cleaning = conf.nova_lease_api.cleaning_time
        if lease['status'] == status.LeaseStatus.PENDING:
            allocation.move_host_lease(session, lease, reservations, start,
                                       end, cleaning)
        elif end != lease['end_date']:
            allocation.extend_host_lease(session, lease, reservations, end,
                                         cleaning)

    # -- reservation updates ------------------------------------------------

    def parse_update(self, field, reservation, item):
        check_update_keys(field, item, self.name, UPDATE_KEYS)
        old = reservation['properties'] or {}
        raw = {'resource_type': self.name}
        for key in host_request.REQUEST_KEYS - {'resource_type'}:
            if old.get(key) not in (None, ''):
                raw[key] = old[key]
        for key in ('min', 'max', 'hypervisor_properties',
                    'resource_properties'):
            if key in item:
                raw[key] = item[key]
        return host_request.parse_host_request(raw, field)

    def apply_update(self, session, conf, update, start, end, now,
                     started):
        update.added, _removed = allocation.update_host_reservation(
            session, update.reservation, update.request, start, end,
            conf.nova_lease_api.cleaning_time, started=started,
            field=update.field)

    def after_update(self, caller, lease, update, started):
        if started and update.added:
            join_started(caller, update.reservation['id'], update.added,
                         caller.conf.nova_lease.freepool_aggregate)

    # -- delete -------------------------------------------------------------

    def holds_in_nova(self, reservation):
        # (Its aggregate is made at the start.)
        return False

    def release_after(self, session, conf, lease, reservations, when):
        allocation.extend_host_lease(session, lease, reservations, when,
                                     conf.nova_lease_api.cleaning_time)

    # -- show ---------------------------------------------------------------

    def show(self, reservation, out):
        hunt = out.pop(allocation.BEST_EFFORT, None)
        if hunt is not None:
            out['best_effort_hosts'] = len(hunt.get('hosts') or ())


def check_update_keys(field, item, shown, keys):
    """400 for keys of an update ``item`` that ``keys`` do not have."""
    unknown = sorted(k for k in item if k not in keys)
    if unknown:
        raise _error('%s.%s' % (field, unknown[0]), 'unknown_key',
                     "'%s.%s': a %s reservation update may change %s",
                     field, unknown[0], shown, ', '.join(sorted(
                         keys - {'id', 'resource_type'})))


def join_started(caller, reservation_id, hostnames, freepool):
    """Hosts that joined a started reservation: into its aggregate (out
    of ``freepool`` unless None), woken if the idle action disabled them
    (``caller.nova``: nova-api's in-process Nova).
    """
    for name in hostnames:
        service = _service_host(caller.db, name)
        caller.nova.move_to_aggregate(reservation_id, service, freepool)
        caller.nova.wake_host(service)


def wake_hosts(caller, hostnames):
    """Enable the nova-compute services of ``hostnames`` (hypervisor
    hostnames of registered hosts) that the idle action disabled
    (``caller.nova``: nova-api's in-process Nova).
    """
    for service in sorted({_service_host(caller.db, n) for n in hostnames}):
        caller.nova.wake_host(service)


def _service_host(db, name):
    try:
        return db_api.host_get_by_hostname(db, name).get(
            'service_host') or name
    except db_api.HostNotFound:
        return name


def create_host_lease(db, conf, values, requests, events, cleaning=None,
                      hunt=None, now=None):
    """Book a lease of host reservations through the pipeline (for
    callers without a request: tools, benchmarks, tests).

    :param requests: ``[(field, HostRequest)]``.
    :returns: the lease dict.
    :raises allocation.NotEnoughHosts: (409).
    """
    kind = types.get(types.HOST)
    return pipeline.create(db, pipeline.Booking(
        conf=conf, values=dict(values), events=list(events),
        items=[pipeline.Item(field, kind, request)
               for field, request in requests],
        now=now or timeutils.utcnow(), hunt=hunt, cleaning=cleaning))
