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
"""Schemas of ``/leases``: the shape of a lease body (Blazar v1).

They check keys, JSON types and required keys; the values (dates, their
order, durations, names, host requests) are checked by
:func:`nova_lease.params.parse_lease_body`,
:func:`nova_lease.plugins.host.request.parse_host_request` and the
handlers. JSON ``null`` counts as absent, so optional properties accept
it; a required one given as ``null`` is refused by the parser, in the
same words as a missing one.

Properties are listed in the order the parsers check them, so that the
first refusal is the one they would give. A ``description`` is the
requirement a refusal states: ``'retries' must be an integer, got a
string``.
"""

from nova_lease import params
from nova_lease.plugins.host import allocation as host_allocation
from nova_lease.plugins.host import request as host_request

_DATE = {'type': ['string', 'null'],
         'description': 'must be a date string (%s)'
                        % params.DATE_FORMATS_HELP}
_NAME = {'type': ['string', 'null'], 'format': 'text',
         'description': 'must be a string'}
# min, max and the sizes: an integer, or a string of digits (Blazar and
# its client send both).
_COUNT = {'type': ['integer', 'string', 'null'],
          'description': 'must be an integer'}

#: A physical:host reservation (the keys of host_request.REQUEST_KEYS). The
#: values whose refusal shows the value given (region, zone, queries,
#: before_end) are left to host_request.parse_host_request.
HOST_RESERVATION = {
    'additionalProperties': False,
    'x-unknown-key': "'%(key)s': unknown key; the keys of a physical:host "
                     "reservation are %(allowed)s",
    'properties': {
        'resource_type': {},
        'min': _COUNT,
        'max': _COUNT,
        'region': {},
        'before_end': {},
        'vcpus': _COUNT,
        'memory_mb': _COUNT,
        'disk_gb': _COUNT,
        'availability_zone': {},
        # (Its keys, then their values, are checked by the parser.)
        'extra_specs': {
            'type': ['object', 'string', 'null'],
            'description': 'must be an object of extra spec keys to values',
        },
        'hypervisor_properties': {},
        'resource_properties': {},
    },
}

RESERVATION = {
    'additionalProperties': False,
    'x-unknown-key': "'%(key)s': unknown key; the keys of a physical:host "
                     "reservation are %(allowed)s",
    'properties': {
        'resource_type': {'const': host_allocation.RESOURCE_TYPE},
        'min': _COUNT,
        'max': _COUNT,
        'region': {'description': "this cloud's region"},
        'before_end': {
            'description': ', '.join(host_request.BEFORE_END_ACTIONS)},
        'vcpus': _COUNT,
        'memory_mb': _COUNT,
        'disk_gb': _COUNT,
        'availability_zone': {'description': 'a zone name'},
        # (Its keys, then their values, are checked by the parser.)
        'extra_specs': {
            'type': ['object', 'string', 'null'],
            'description': 'must be an object of extra spec keys to values',
        },
        'hypervisor_properties': {'description': 'a Blazar JSON query'},
        'resource_properties': {'description': 'a Blazar JSON query'},
    },
}

RESERVATION = {
    'type': 'object',
    'description': 'must be an object',
    'properties': {
        'resource_type': {
            'type': 'string',
            'description': "must be a non-blank string such as "
                           "'virtual:instance'",
        },
    },
    'if': {'required': ['resource_type'],
           'properties': {
               'resource_type': {'const': host_allocation.RESOURCE_TYPE}}},
    'then': HOST_RESERVATION,
}

#: A lease (POST /leases), as params.parse_lease_body reads it.
LEASE = {
    'type': 'object',
    'additionalProperties': False,
    'properties': {
        'events': {'type': ['array', 'null'],
                   'description': 'must be an array'},
        'name': _NAME,
        'start_date': {'type': ['string', 'null'],
                       'description': 'must be "now" or a date string'},
        'end_date': _DATE,
        'before_end_date': _DATE,
        'on_end': {'type': ['string', 'null'],
                   'description': 'must be a string'},
        'retries': {'type': ['integer', 'null'],
                    'description': 'must be an integer'},
        'lease_type': {'type': ['string', 'null'],
                       'description': 'must be a string'},
        'reservations': {
            'type': ['array', 'null'],
            'description': 'must be an array of objects',
            'items': RESERVATION,
        },
    },
    'required': ['name', 'end_date'],
}

#: A lease update (PUT /leases/{lease_id}).
LEASE_UPDATE = {
    'type': 'object',
    'additionalProperties': False,
    'x-unknown-key': "'%(key)s': unknown key; a lease update may change "
                     "%(allowed)s",
    'properties': {
        'name': _NAME,
        'start_date': _DATE,
        'end_date': _DATE,
        'before_end_date': _DATE,
        # Refused when not empty: not changed by an update yet.
        'reservations': {},
    },
}


def _wrapped(schema):
    """``schema``, or ``{"lease": <schema>}`` (as Blazar takes both)."""
    return {
        'type': 'object',
        'x-wrapper': 'lease',
        'if': {'required': ['lease'], 'maxProperties': 1,
               'properties': {'lease': {'type': 'object'}}},
        'then': {'properties': {'lease': schema}},
        'else': schema,
    }


#: POST /leases
CREATE = _wrapped(LEASE)
#: PUT /leases/{lease_id}
UPDATE = _wrapped(LEASE_UPDATE)

_ALL_PROJECTS = {
    'type': 'string',
    'format': 'boolean',
    'x-reason': 'all_projects: must be a boolean such as 1 or true, got '
                '%(value)r',
}

#: GET /leases: ``all_projects`` (or Blazar's older ``all_tenants``,
#: read only without it). Other parameters are ignored.
LIST_QUERY = {
    'type': 'object',
    'properties': {'all_projects': _ALL_PROJECTS},
    'if': {'required': ['all_projects']},
    'else': {'properties': {'all_tenants': _ALL_PROJECTS}},
}
