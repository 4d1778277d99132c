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
"""A Blazar instance reservation request (``virtual:instance`` or
``flavor:instance`` in the lease API), validated.

Rules (Blazar 18's, with messages naming the field):

* ``amount``: the number of instances, an integer (or a string of
  digits) of at least 1, at most :data:`MAX_AMOUNT`;
* ``virtual:instance``: ``vcpus`` (at least 1), ``memory_mb`` (at least
  1) and ``disk_gb`` (at least 0) are required;
* ``flavor:instance``: ``flavor_id`` names an existing flavor, whose
  vcpus, RAM and root, ephemeral and swap disk are the size of a slot;
* ``affinity``: true (every instance on one host), false (each on its
  own host) or null / absent / ``"None"`` (no constraint); Blazar's
  strings (``"True"``, ``"false"``...) are accepted;
* ``resource_properties``: a Blazar JSON query on the hosts' extra
  capabilities, ``""`` or absent for none.
"""

import dataclasses
import math

from oslo_utils import strutils

from nova_lease import params as lease_params
from nova_lease.plugins.flavor import API_TYPES
from nova_lease.plugins.flavor import BY_FLAVOR
from nova_lease.plugins.flavor import BY_SIZE
from nova_lease.plugins.host import request as host_request

#: Most instances one reservation may hold.
MAX_AMOUNT = 1000
_COMMON_KEYS = ('resource_type', 'amount', 'affinity',
                'resource_properties')
KEYS = {
    BY_SIZE: frozenset(_COMMON_KEYS + ('vcpus', 'memory_mb', 'disk_gb')),
    BY_FLAVOR: frozenset(_COMMON_KEYS + ('flavor_id',)),
}
_NONE_VALUES = (None, '', 'None', 'none', 'null')
_error = lease_params.error


@dataclasses.dataclass(frozen=True)
class SlotRequest:
    """``amount`` instance slots of one size, with their placement rule."""

    resource_type: str
    amount: int
    vcpus: int
    memory_mb: int
    disk_gb: int
    affinity: bool | None = None
    resource_properties: list | None = None
    flavor_id: str | None = None

    def host_request(self):
        """The registered hosts a slot may use, as a HostRequest."""
        return host_request.HostRequest(
            min=1, max=1, vcpus=self.vcpus, memory_mb=self.memory_mb,
            disk_gb=self.disk_gb,
            resource_properties=self.resource_properties)

    def properties(self, flavor_id=None, server_group_id=None):
        """What the reservation stores (and shows, as Blazar does)."""
        props = {
            'api_resource_type': self.resource_type,
            'amount': self.amount, 'vcpus': self.vcpus,
            'memory_mb': self.memory_mb, 'disk_gb': self.disk_gb,
            'affinity': self.affinity,
            'resource_properties': host_request.query_text(
                self.resource_properties),
            'flavor_id': flavor_id,
            'server_group_id': server_group_id,
        }
        if self.resource_type == BY_FLAVOR:
            props['source_flavor_id'] = self.flavor_id
        return props


def _affinity(value, field):
    if value in _NONE_VALUES:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and strutils.is_valid_boolstr(value):
        return strutils.bool_from_string(value, strict=True)
    raise _error(field, 'type', "'%s' must be true, false or null, got %s",
                 field, lease_params.quoted(value))


def flavor_size(flavor):
    """(vcpus, memory_mb, disk_gb) of a Nova flavor (dict or object):
    its root, ephemeral and swap disks, as placement counts them.
    """
    def get(key):
        value = flavor.get(key) if isinstance(flavor, dict) else getattr(
            flavor, key, 0)
        return int(value or 0)

    swap_gb = int(math.ceil(get('swap') / 1024.0))
    return (get('vcpus'), get('memory_mb'),
            get('root_gb') + get('ephemeral_gb') + swap_gb)


def parse_slot_request(raw, field, find_flavor=None):
    """Validate one instance reservation of a lease body.

    :param raw: the reservation object; its ``resource_type`` is one of
        :data:`nova_lease.plugins.flavor.API_TYPES`.
    :param field: how errors name it (``reservations[0]``).
    :param find_flavor: ``find_flavor(flavor_id, field)`` -> the flavor
        (dict or object with vcpus, memory_mb, root_gb, ephemeral_gb,
        swap), raising LeaseParamError when there is none.
    :raises LeaseParamError: (400) naming ``<field>.<key>``.
    """
    def name(key):
        return '%s.%s' % (field, key)

    rtype = raw['resource_type']
    if rtype not in API_TYPES:
        raise _error(name('resource_type'), 'choice', "'%s' must be one of "
                     "%s, got %s", name('resource_type'),
                     ', '.join(API_TYPES), lease_params.quoted(rtype))
    keys = KEYS[rtype]
    unknown = sorted(k for k in raw if k not in keys)
    if unknown:
        raise _error(name(unknown[0]), 'unknown_key', "'%s': unknown key; "
                     "the keys of a %s reservation are %s",
                     name(unknown[0]), rtype, ', '.join(sorted(keys)))
    required = ('amount',) + (('vcpus', 'memory_mb', 'disk_gb')
                              if rtype == BY_SIZE
                              else ('flavor_id',))
    for key in required:
        if raw.get(key) in (None, ''):
            raise _error(name(key), 'required', "Missing parameter %s ('%s'"
                         " is required)", key, name(key))
    amount = host_request.parse_count(raw['amount'], name('amount'), 1)
    if amount > MAX_AMOUNT:
        raise _error(name('amount'), 'range', "'%s' (%d) must be at most %d",
                     name('amount'), amount, MAX_AMOUNT)
    flavor_id = None
    if rtype == BY_SIZE:
        vcpus = host_request.parse_count(raw['vcpus'], name('vcpus'), 1)
        memory_mb = host_request.parse_count(raw['memory_mb'],
                                             name('memory_mb'), 1)
        disk_gb = host_request.parse_count(raw['disk_gb'], name('disk_gb'),
                                           0)
    else:
        flavor_id = raw['flavor_id']
        if not isinstance(flavor_id, (str, int)) or isinstance(flavor_id,
                                                               bool):
            raise _error(name('flavor_id'), 'type', "'%s' must be a flavor "
                         "id, got %s", name('flavor_id'),
                         lease_params.json_type(flavor_id))
        flavor_id = str(flavor_id)
        vcpus, memory_mb, disk_gb = flavor_size(
            find_flavor(flavor_id, name('flavor_id')))
    return SlotRequest(
        resource_type=rtype, amount=amount, vcpus=vcpus,
        memory_mb=memory_mb, disk_gb=disk_gb,
        affinity=_affinity(raw.get('affinity'), name('affinity')),
        resource_properties=host_request.parse_query(
            raw.get('resource_properties'), name('resource_properties')),
        flavor_id=flavor_id)
