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
"""Schemas of ``/os-hosts``: registrations and extra capabilities.

A registration (``POST /os-hosts``) is the hypervisor hostname
(``name``) and extra capabilities: any other key whose name is not a
host field, whose value is a string, a number, a boolean or (in an
update: unset it) ``null``. Refusals are worded as the os-hosts API
always worded them: ``<field>: <reason>`` (``x-reason``, see
:mod:`..validation`). Free text in values is checked by the handler.
"""

#: Host columns a registration may not use as extra capability names.
HOST_FIELDS = frozenset({
    'id', 'name', 'hypervisor_hostname', 'hypervisor_type',
    'hypervisor_version', 'vcpus', 'cpu_info', 'memory_mb', 'local_gb',
    'service_name', 'service_host', 'availability_zone', 'trust_id',
    'reservable', 'status', 'created_at', 'updated_at', 'capabilities',
    'values'})
CAPABILITY_NAME_PATTERN = r'^[A-Za-z0-9_.:\-]+$'
#: Blazar's limit (and its message, which its clients and tests match).
CAPABILITY_NAME_MAX = 64


def _capabilities(field, fields):
    """An object of extra capabilities, refusals naming ``field``."""
    return {
        'propertyNames': {'allOf': [
            {'not': {'enum': sorted(fields)},
             'x-reason': "%s: '%%(value)s' is a host field, not an extra "
                         "capability" % field},
            {'maxLength': CAPABILITY_NAME_MAX,
             'x-reason': "Extra capability key too long (%s: at most %d "
                         "characters, got %%(value)r)"
                         % (field, CAPABILITY_NAME_MAX)},
            {'pattern': CAPABILITY_NAME_PATTERN,
             'x-reason': "%s: extra capability names are 1 to %d "
                         "letters, digits, '_', '-', '.' or ':', got "
                         "%%(value)r" % (field, CAPABILITY_NAME_MAX)},
        ]},
        'additionalProperties': {
            'type': ['string', 'number', 'boolean', 'null'],
            'x-reason': '%s.%%(key)s: an extra capability value is a '
                        'string or number' % field,
        },
    }


_NAME = {
    'type': 'string',
    'pattern': r'\S',
    'format': 'text',
    'x-reason': 'name: the hypervisor hostname of a compute node is '
                'required',
}

#: POST /os-hosts
CREATE = {
    'type': 'object',
    'properties': {'name': _NAME},
    'required': ['name'],
    **_capabilities('body', HOST_FIELDS - {'name'}),
}

_VALUES = {
    'type': 'object',
    'x-reason': 'values: must be an object of extra capabilities',
    **_capabilities('values', HOST_FIELDS),
}

#: PUT /os-hosts/{host_id}: ``{"values": {...}}`` or the capabilities
#: themselves.
UPDATE = {
    'type': 'object',
    'x-wrapper': 'values',
    'if': {'required': ['values'], 'maxProperties': 1},
    'then': {'properties': {'values': _VALUES}},
    'else': _VALUES,
}

# (Query parameters are always strings.)
_TEXT = {'type': 'string', 'format': 'text', 'description': 'must be text'}

#: GET /os-hosts/allocations and /os-hosts/{host_id}/allocation.
ALLOCATIONS_QUERY = {
    'type': 'object',
    'properties': {'lease_id': _TEXT, 'reservation_id': _TEXT},
}

#: GET /os-hosts/idle: dates as the lease API takes them, hours a number.
IDLE_QUERY = {
    'type': 'object',
    'properties': {'start': _TEXT, 'end': _TEXT, 'min_hours': _TEXT},
}

#: GET /os-hosts/properties: ``detail`` is read as a boolean (anything
#: else than a true value, such as 1 or true, is false).
PROPERTIES_QUERY = {
    'type': 'object',
    'properties': {'detail': {'type': 'string',
                              'description': 'must be text'}},
}
