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
"""``PUT /leases/{id}`` with ``reservations``: Blazar's reservation updates.

Each item names one of the lease's reservations by ``id`` and gives the
values that change (Blazar's rules):

* ``physical:host``: ``min``, ``max``, ``hypervisor_properties``,
  ``resource_properties``. Hosts that no longer match, or over ``max``,
  leave the reservation (refused once the lease has started); free
  matching hosts join it up to ``max`` (at least ``min``, else 409). On
  an ACTIVE lease the new hosts go into the reservation's aggregate at
  once (and leave the free pool).
* ``virtual:instance`` and ``flavor:instance``: ``amount``, ``vcpus``,
  ``memory_mb``, ``disk_gb``. Before the start the slots are chosen again
  (and the reservation's flavor remade with the new size); after it, only
  more slots can be added.

Everything is re-admitted in the update's transaction: a refusal changes
nothing. :func:`parse` checks the body; :func:`apply` books;
:func:`after_commit` tells Nova.
"""

import dataclasses

from oslo_log import log as logging

from nova_lease.api_ext.lease_api import common
from nova_lease.api_ext import nova_flavors
from nova_lease.api_ext import nova_hosts
from nova_lease.db import api as db_api
from nova_lease import params as lease_params
from nova_lease.plugins import flavor as flavor_plugin
from nova_lease.plugins.flavor import allocation as slot_allocation
from nova_lease.plugins.flavor import request as slot_request
from nova_lease.plugins.host import allocation as host_allocation
from nova_lease.plugins.host import request as host_request

LOG = logging.getLogger(__name__)
_error = lease_params.error

HOST_KEYS = frozenset({'id', 'resource_type', 'min', 'max',
                       'hypervisor_properties', 'resource_properties'})
SLOT_KEYS = frozenset({'id', 'resource_type', 'amount', 'vcpus',
                       'memory_mb', 'disk_gb'})


@dataclasses.dataclass
class Change:
    """One reservation's update: the new request, and what it did."""

    field: str
    reservation: dict
    request: object
    added: list = dataclasses.field(default_factory=list)
    resized: bool = False


def _host_change(field, reservation, item):
    old = reservation['properties'] or {}
    raw = {'resource_type': host_allocation.RESOURCE_TYPE}
    for key in host_request.REQUEST_KEYS - {'resource_type'}:
        if old.get(key) not in (None, ''):
            raw[key] = old[key]
    for key in ('min', 'max', 'hypervisor_properties',
                'resource_properties'):
        if key in item:
            raw[key] = item[key]
    return Change(field, reservation,
                  host_request.parse_host_request(raw, field))


def _slot_change(field, reservation, item):
    old = reservation['properties'] or {}
    kind = old.get('api_resource_type') or 'virtual:instance'
    raw = {'resource_type': 'virtual:instance',
           'amount': item.get('amount', old.get('amount')),
           'affinity': old.get('affinity'),
           'resource_properties': old.get('resource_properties')}
    for key in ('vcpus', 'memory_mb', 'disk_gb'):
        raw[key] = item.get(key, old.get(key))
    request = slot_request.parse_slot_request(raw, field)
    request = dataclasses.replace(request, resource_type=kind,
                                  flavor_id=old.get('source_flavor_id'))
    resized = (request.vcpus, request.memory_mb, request.disk_gb) != (
        old.get('vcpus'), old.get('memory_mb'), old.get('disk_gb'))
    return Change(field, reservation, request, resized=resized)


def parse(lease, items):
    """The changes an update body's ``reservations`` asks for.

    :raises LeaseParamError: (400) naming ``reservations[i].<key>``.
    """
    if not isinstance(items, list):
        raise _error('reservations', 'type', "'reservations' must be an "
                     "array of objects")
    by_id = {r['id']: r for r in lease['reservations']}
    changes = []
    for i, item in enumerate(items):
        field = 'reservations[%d]' % i
        if not isinstance(item, dict):
            raise _error(field, 'type', "'%s' must be an object", field)
        if item.get('id') in (None, ''):
            raise _error(field + '.id', 'required', "Missing parameter "
                         "reservation ID ('%s.id' is required)", field)
        reservation = by_id.get(item['id'])
        if reservation is None:
            raise _error(field + '.id', 'choice', "Please enter valid "
                         "reservation IDs. Invalid reservation IDs are: %s "
                         "(not a reservation of lease %s)",
                         item['id'], lease['id'])
        rtype = reservation['resource_type']
        shown = (reservation['properties'] or {}).get(
            'api_resource_type', rtype)
        given = item.get('resource_type')
        if given is not None and given != shown:
            raise _error(field + '.resource_type', 'unsupported', "Cannot "
                         "update parameter resource_type (%s is a %s "
                         "reservation)", item['id'], shown)
        keys = HOST_KEYS if rtype == host_allocation.RESOURCE_TYPE else (
            SLOT_KEYS if rtype == flavor_plugin.RESOURCE_TYPE else None)
        if keys is None:
            raise _error(field, 'unsupported', "'%s': a %s reservation "
                         "cannot be updated (change the lease's dates)",
                         field, shown)
        unknown = sorted(k for k in item if k not in keys)
        if unknown:
            raise _error('%s.%s' % (field, unknown[0]), 'unknown_key',
                         "'%s.%s': a %s reservation update may change %s",
                         field, unknown[0], shown, ', '.join(sorted(
                             keys - {'id', 'resource_type'})))
        if rtype == host_allocation.RESOURCE_TYPE:
            changes.append(_host_change(field, reservation, item))
        else:
            changes.append(_slot_change(field, reservation, item))
    return changes


def apply(session, changes, start, end, now, started):
    """Book the changes in the update's writer ``session``."""
    cleaning = common.opts().cleaning_time
    sizes = None
    for change in changes:
        if isinstance(change.request, host_request.HostRequest):
            change.added, _removed = host_allocation.update_host_reservation(
                session, change.reservation, change.request, start, end,
                cleaning, started=started, field=change.field)
        else:
            if sizes is None:
                sizes = slot_allocation.capacities(common.CONF)
            change.added = slot_allocation.update_slots(
                session, change.reservation, change.request, start, end,
                now, started=started, field=change.field, sizes=sizes)


def after_commit(ctx, lease, changes):
    """Tell Nova: hosts that joined a started reservation go into its
    aggregate (host reservations: out of the free pool too); the flavor
    of a resized instance reservation is made again with its new size.
    """
    started = lease['status'] != 'PENDING'
    freepool = common.opts().freepool_aggregate
    db = common.db()
    for change in changes:
        rid = change.reservation['id']
        if isinstance(change.request, host_request.HostRequest):
            if started:
                for name in change.added:
                    service = db_api.host_get_by_hostname(
                        db, name).get('service_host') or name
                    nova_hosts.move_to_aggregate(ctx, rid, service, freepool)
            continue
        if started:
            for name in change.added:
                service = db_api.host_get_by_hostname(
                    db, name).get('service_host') or name
                nova_hosts.move_to_aggregate(ctx, rid, service, None)
        elif change.resized:
            props = change.reservation['properties'] or {}
            nova_flavors.resize(ctx, rid, change.request,
                                props.get('server_group_id'))
