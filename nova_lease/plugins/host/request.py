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
"""Host requests (physical:host): what a lease body asks for, validated.

:func:`parse_host_request` validates one ``physical:host`` reservation of
a Blazar v1 lease body into a :class:`HostRequest` (errors name the
field, e.g. ``reservations[0].max``): the number of hosts (``min`` /
``max``), the availability zone and region, minimum ``vcpus`` /
``memory_mb`` / ``disk_gb``, capability ``extra_specs`` (a JSON object of
key to spec) and Blazar's ``hypervisor_properties`` /
``resource_properties`` queries, whose syntax is checked here. What they
mean, and whether a host satisfies them, is
:mod:`nova_lease.plugins.host.matching`.

Pure: no database, no Nova.
"""

import dataclasses
import json
import numbers

from oslo_serialization import jsonutils

from nova_lease import params as lease_params

#: Keys of a physical:host reservation in a lease body.
REQUEST_KEYS = frozenset({
    'resource_type', 'min', 'max', 'hypervisor_properties',
    'resource_properties', 'availability_zone', 'region', 'extra_specs',
    'vcpus', 'memory_mb', 'disk_gb', 'before_end'})
#: Blazar's reservation-level before_end actions.
BEFORE_END_ACTIONS = ('default', 'snapshot')
#: The comparison operators of a query, and what they mean.
QUERY_COMPARISONS = {
    '=': lambda a, b: a == b,
    '==': lambda a, b: a == b,
    '!=': lambda a, b: a != b,
    '<': lambda a, b: a < b,
    '>': lambda a, b: a > b,
    '<=': lambda a, b: a <= b,
    '>=': lambda a, b: a >= b,
}
_QUERY_OPERATORS = frozenset(QUERY_COMPARISONS) | {'and', 'or', 'not', 'in'}
MAX_HOSTS = 10000
_error = lease_params.error


@dataclasses.dataclass(frozen=True)
class HostRequest:
    """A valid physical:host reservation request."""

    min: int
    max: int
    availability_zone: str | None = None
    region: str | None = None
    extra_specs: dict = dataclasses.field(default_factory=dict)
    vcpus: int = 0
    memory_mb: int = 0
    disk_gb: int = 0
    hypervisor_properties: list | None = None
    resource_properties: list | None = None
    before_end: str | None = None

    def properties(self):
        """The request as stored in the reservation's properties."""
        return {
            'min': self.min, 'max': self.max,
            'availability_zone': self.availability_zone,
            'region': self.region, 'extra_specs': dict(self.extra_specs),
            'vcpus': self.vcpus, 'memory_mb': self.memory_mb,
            'disk_gb': self.disk_gb,
            'hypervisor_properties': query_text(self.hypervisor_properties),
            'resource_properties': query_text(self.resource_properties),
            'before_end': self.before_end,
        }

    @classmethod
    def from_properties(cls, props):
        """The request back from a reservation's stored properties."""
        return cls(
            min=props['min'], max=props['max'],
            availability_zone=props.get('availability_zone'),
            region=props.get('region'),
            extra_specs=dict(props.get('extra_specs') or {}),
            vcpus=props.get('vcpus') or 0,
            memory_mb=props.get('memory_mb') or 0,
            disk_gb=props.get('disk_gb') or 0,
            hypervisor_properties=_parse_query(
                props.get('hypervisor_properties'), 'hypervisor_properties'),
            resource_properties=_parse_query(
                props.get('resource_properties'), 'resource_properties'),
            before_end=props.get('before_end'))


def query_text(query):
    return jsonutils.dumps(query) if query else ''


def _int(value, field, minimum=0):
    """An int, or a string of digits (Blazar and its CLI send both)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _error(field, 'type', "'%s' must be an integer, got %s",
                     field, lease_params.json_type(value))
    if isinstance(value, str):
        text = value.strip()
        if not text.lstrip('+-').isdigit() or len(text) > 12:
            raise _error(field, 'type', "'%s' must be an integer, got %s",
                         field, lease_params.quoted(value))
        value = int(text)
    if value < minimum:
        raise _error(field, 'range', "'%s' (%d) must be at least %d", field,
                     value, minimum)
    if value > 2 ** 31 - 1:
        raise _error(field, 'range', "'%s' (%d) is too large", field, value)
    return value


def _str(value, field):
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 255:
        raise _error(field, 'type', "'%s' must be a non-blank string of at "
                     "most 255 characters, got %s", field,
                     lease_params.quoted(value))
    return lease_params.check_text(value, field).strip()


def _check_query(node, field):
    if not isinstance(node, list) or not node:
        raise _error(field, 'format', "'%s': every query term must be a "
                     "non-empty JSON array such as [\">=\", \"$vcpus\", "
                     "\"4\"], got %s", field, lease_params.quoted(node))
    op = node[0]
    if op not in _QUERY_OPERATORS:
        raise _error(field, 'format', "'%s': unknown query operator %s; "
                     "use one of %s", field, lease_params.quoted(op),
                     ', '.join(sorted(_QUERY_OPERATORS)))
    args = node[1:]
    if op in ('and', 'or'):
        if not args:
            raise _error(field, 'format', "'%s': '%s' needs at least one "
                         "term", field, op)
        for arg in args:
            _check_query(arg, field)
    elif op == 'not':
        if len(args) != 1:
            raise _error(field, 'format', "'%s': 'not' takes one term",
                         field)
        _check_query(args[0], field)
    else:
        if len(args) < 2 or (op != 'in' and len(args) != 2):
            raise _error(field, 'format', "'%s': '%s' takes %s", field, op,
                         'a $variable and values' if op == 'in'
                         else 'two operands')
        if not isinstance(args[0], str) or not args[0].startswith('$'):
            raise _error(field, 'format', "'%s': the first operand of '%s' "
                         "must be a $variable, got %s", field, op,
                         lease_params.quoted(args[0]))
        for arg in args:
            if isinstance(arg, (list, dict)) or arg is None:
                raise _error(field, 'format', "'%s': operands of '%s' must "
                             "be strings or numbers", field, op)
            if isinstance(arg, str):
                lease_params.check_text(arg, field)


def _parse_query(value, field):
    """A Blazar JSON query (string or array) -> array, or None for none."""
    if value is None or value == '' or value == []:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as e:
            raise _error(field, 'format', "'%s' is not valid JSON (%s)",
                         field, e) from None
        if value == []:
            return None
    _check_query(value, field)
    return value


def _parse_extra_specs(value, field):
    if value is None or value == '':
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as e:
            raise _error(field, 'format', "'%s' is not valid JSON (%s)",
                         field, e) from None
    if not isinstance(value, dict):
        raise _error(field, 'type', "'%s' must be an object of extra spec "
                     "keys to values, got %s", field,
                     lease_params.json_type(value))
    specs = {}
    for key, spec in value.items():
        if not key or len(key) > 255:
            raise _error(field, 'format', "'%s' has an empty or too long "
                         "key", field)
        lease_params.check_text(key, field)
        if isinstance(spec, bool):
            spec = 'true' if spec else 'false'
        elif isinstance(spec, numbers.Number):
            spec = str(spec)
        if not isinstance(spec, str):
            raise _error('%s.%s' % (field, key), 'type', "'%s.%s' must be a "
                         "string such as \"true\" or \">= 4\", got %s",
                         field, key, lease_params.json_type(spec))
        specs[key] = lease_params.check_text(spec, '%s.%s' % (field, key))
    return specs


def parse_host_request(raw, field='reservations[0]', region_name=None):
    """Validate one physical:host reservation of a lease body.

    :param raw: the reservation object (``resource_type`` already
        checked by ``validation.parse_lease_body``).
    :param field: how errors name the reservation.
    :param region_name: this cloud's region; a request naming another one
        is refused.
    :raises LeaseParamError: (400) naming ``<field>.<key>``.
    """
    def name(key):
        return '%s.%s' % (field, key)

    unknown = sorted(k for k in raw if k not in REQUEST_KEYS)
    if unknown:
        raise _error(name(unknown[0]), 'unknown_key', "'%s': unknown key; "
                     "the keys of a physical:host reservation are %s",
                     name(unknown[0]), ', '.join(sorted(REQUEST_KEYS)))
    for key in ('min', 'max'):
        if raw.get(key) in (None, ''):
            raise _error(name(key), 'required', "'%s' is required (the "
                         "number of hosts)", name(key))
    low = _int(raw['min'], name('min'), 1)
    high = _int(raw['max'], name('max'), 1)
    if high < low:
        raise _error(name('max'), 'order', "'%s' (%d) must not be less "
                     "than '%s' (%d)", name('max'), high, name('min'), low)
    if high > MAX_HOSTS:
        raise _error(name('max'), 'range', "'%s' (%d) must be at most %d",
                     name('max'), high, MAX_HOSTS)
    region = _str(raw.get('region'), name('region'))
    if region is not None and region_name and region != region_name:
        raise _error(name('region'), 'choice', "'%s' (%s) is not this "
                     "cloud's region (%s): ask the lease API of that "
                     "region", name('region'), region, region_name)
    before_end = raw.get('before_end')
    if before_end is not None and before_end not in BEFORE_END_ACTIONS:
        raise _error(name('before_end'), 'choice', "'%s' must be one of %s,"
                     " got %s", name('before_end'),
                     ', '.join(BEFORE_END_ACTIONS),
                     lease_params.quoted(before_end))
    sizes = {}
    for key in ('vcpus', 'memory_mb', 'disk_gb'):
        value = raw.get(key)
        sizes[key] = 0 if value in (None, '') else _int(value, name(key), 0)
    return HostRequest(
        min=low, max=high,
        availability_zone=_str(raw.get('availability_zone'),
                               name('availability_zone')),
        region=region,
        extra_specs=_parse_extra_specs(raw.get('extra_specs'),
                                       name('extra_specs')),
        hypervisor_properties=_parse_query(raw.get('hypervisor_properties'),
                                           name('hypervisor_properties')),
        resource_properties=_parse_query(raw.get('resource_properties'),
                                         name('resource_properties')),
        before_end=before_end, **sizes)


#: The validators other reservation types share (Blazar's counts and
#: JSON queries).
parse_count = _int
parse_query = _parse_query
