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

They check keys, JSON types and required keys, each node carrying the
message of its refusal (``description``: the requirement, as in
``'retries' must be an integer, got a string``; ``x-missing``: the
words of a missing key; see :mod:`..validation`). The values (dates,
their order, durations, names, host requests) are checked on the
shape-checked body by :func:`nova_lease.params.build_lease_body`,
:func:`nova_lease.plugins.host.request.parse_host_request` and the
handlers. JSON ``null`` counts as absent, so optional properties accept
it; a required one given as ``null`` is refused by the parser, in the
same words as a missing one.

The lease's own properties are the nodes of the ``lease_params`` boot
hint (:mod:`.lease_params`), so that both refuse a value alike; a date's
node also carries Blazar 18's words for its refusals by the parser
(``x-blazar-words``: rule -> message, ``%(value)s`` the value given),
which :mod:`..blazar_words` puts first: Blazar's clients and acceptance
tests match them.
"""

from nova_lease.api_ext.lease_api.schemas import lease_params as lp
from nova_lease.plugins.host import allocation as host_allocation

_DATE = lp.DATE
_NAME = lp.NAME
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

#: Blazar's words for a missing key of a lease body (its clients and
#: acceptance tests match them), then ours.
MISSING = "Missing parameter %(key)s ('%(field)s' is required)"
#: Blazar's date format, as its message for an unreadable date names it.
BLAZAR_DATE_FORMAT = '%Y-%m-%d %H:%M'
_INVALID_DATE = ('%%(value)s is an invalid date. Required format: %s'
                 % BLAZAR_DATE_FORMAT.replace('%', '%%'))


def _blazar_words(node, **words):
    """``node`` (a lease_params node) with Blazar's words by rule."""
    return dict(node, **{'x-blazar-words': words})


#: A lease (POST /leases), as validation.parse_lease_body reads it.
LEASE = {
    'type': 'object',
    'additionalProperties': False,
    'x-missing': MISSING,
    'properties': {
        'events': {'type': ['array', 'null'],
                   'description': 'must be an array'},
        'name': _NAME,
        'start_date': _blazar_words(
            lp.START, format=_INVALID_DATE,
            past='Start date must be later than current date'),
        'end_date': _blazar_words(
            _DATE, format=_INVALID_DATE,
            order='End date must be later than start date.'),
        'before_end_date': _blazar_words(_DATE, format=_INVALID_DATE),
        'on_end': lp.ON_END,
        'retries': lp.RETRIES,
        'lease_type': lp.LEASE_TYPE,
        'reservations': {
            'type': ['array', 'null'],
            'description': 'must be an array of objects',
            'items': RESERVATION,
        },
        # A flexible window (start_date "earliest", microversion 1.6):
        # checked by the handler (leases.flexible_window).
        'duration': lp.DURATION,
        'earliest_start': _DATE,
        'latest_start': _DATE,
    },
    'required': ['name'],
    # A flexible window has a duration instead of an end.
    'if': {'required': ['start_date'],
           'properties': {'start_date': {'const': 'earliest'}}},
    'then': {'required': ['duration'], 'x-missing': MISSING},
    'else': {'required': ['end_date'], 'x-missing': MISSING},
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
