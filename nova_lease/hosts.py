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
"""Host reservations (physical:host): requests, matching and allocation.

* :func:`parse_host_request` validates one ``physical:host`` reservation
  of a Blazar v1 lease body into a :class:`HostRequest` (errors name the
  field, e.g. ``reservations[0].max``).
* :func:`host_matches` tells whether a registered host (a ``hosts`` row
  with its extra ``capabilities``) satisfies a request: availability zone,
  minimum ``vcpus`` / ``memory_mb`` / ``disk_gb``, capability extra specs
  with Nova's operators (``nova.scheduler.filters.extra_specs_ops``) and
  Blazar's ``hypervisor_properties`` / ``resource_properties`` queries.
* :func:`create_host_lease` records a lease, its host reservations, their
  whole-host allocations over ``[start, end + cleaning_time)`` and its
  events in ONE writer transaction, under per-host locks
  (``db.api.lock_hosts``), so that no host is ever booked twice, even by
  concurrent requests in several nova-api processes. A lease that cannot
  get ``min`` free hosts is refused with :class:`NotEnoughHosts` (409) and
  leaves nothing behind.

Extra specs (``extra_specs``, a JSON object of key to spec):

* ``capabilities:<path>`` (scoped): a fact of the host that Nova reports:
  ``vcpus``, ``memory_mb``, ``local_gb``, ``hypervisor_type``,
  ``hypervisor_version``, ``hypervisor_hostname``, ``service_host``,
  ``availability_zone``, and ``cpu_info:<key>[:<key>...]`` inside the
  hypervisor's cpu_info JSON (``capabilities:cpu_info:arch``).
* ``aggregate_instance_extra_specs:<key>`` (scoped): an extra capability
  registered with the host (``os-hosts``).
* ``<key>`` (unscoped): an extra capability, else a host fact.
* Keys with any other scope (``hw:``, ``trait:``, ``resources...``) are
  about flavors and are ignored, as Nova's filters ignore them.

Each spec is matched with ``extra_specs_ops.match`` (``s==``, ``>=``,
``<in>``, ``<or>``...); a bare value means string equality.

Queries (``hypervisor_properties`` on host facts, ``resource_properties``
on extra capabilities): Blazar's JSON syntax, given as a JSON string (as
Blazar takes it; ``""`` means none) or as the JSON array itself:
``["==", "$memory_mb", "4096"]``, ``["and", [">=", "$vcpus", "4"],
["==", "$gpu", "true"]]``. Blazar's ``and`` of comparisons is extended with
``or``, ``not`` and ``in`` (Nova's JsonFilter operators); comparisons are
numeric when both sides are numbers, else on strings.
"""

import dataclasses
import datetime
import json
import numbers
import threading

from nova.scheduler.filters import extra_specs_ops
from oslo_log import log as logging
from oslo_serialization import jsonutils

from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import params as lease_params

LOG = logging.getLogger(__name__)

RESOURCE_TYPE = 'physical:host'

#: Keys of a physical:host reservation in a lease body.
REQUEST_KEYS = frozenset({
    'resource_type', 'min', 'max', 'hypervisor_properties',
    'resource_properties', 'availability_zone', 'region', 'extra_specs',
    'vcpus', 'memory_mb', 'disk_gb', 'before_end'})
#: Blazar's reservation-level before_end actions.
BEFORE_END_ACTIONS = ('default', 'snapshot')
#: Host facts (columns of the hosts table, as the API names them).
FACTS = ('hypervisor_hostname', 'service_host', 'availability_zone',
         'vcpus', 'memory_mb', 'local_gb', 'cpu_info', 'hypervisor_type',
         'hypervisor_version')
_QUERY_COMPARISONS = {
    '=': lambda a, b: a == b,
    '==': lambda a, b: a == b,
    '!=': lambda a, b: a != b,
    '<': lambda a, b: a < b,
    '>': lambda a, b: a > b,
    '<=': lambda a, b: a <= b,
    '>=': lambda a, b: a >= b,
}
_QUERY_OPERATORS = frozenset(_QUERY_COMPARISONS) | {'and', 'or', 'not', 'in'}
MAX_HOSTS = 10000


class NotEnoughHosts(exception.Conflict):
    msg_fmt = '%(reason)s'


class HostHavingAllocations(exception.Conflict):
    msg_fmt = ('host %(host)s holds capacity promised to %(count)d '
               'reservation(s) that have not ended (leases %(leases)s): '
               'a registered host is leased whole, so it cannot be '
               'registered before they end or are deleted')


def _error(field, rule, fmt, *args):
    return lease_params.LeaseParamError(field, rule,
                                        fmt % args if args else fmt)


# -- requests ----------------------------------------------------------------

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
            'hypervisor_properties': _query_text(self.hypervisor_properties),
            'resource_properties': _query_text(self.resource_properties),
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


def _query_text(query):
    return jsonutils.dumps(query) if query else ''


def _int(value, field, minimum=0):
    """An int, or a string of digits (Blazar and its CLI send both)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _error(field, 'type', "'%s' must be an integer, got %s",
                     field, lease_params._json_type(value))
    if isinstance(value, str):
        text = value.strip()
        if not text.lstrip('+-').isdigit() or len(text) > 12:
            raise _error(field, 'type', "'%s' must be an integer, got %s",
                         field, lease_params._show(value))
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
                     lease_params._show(value))
    return lease_params.check_text(value, field).strip()


def _check_query(node, field):
    if not isinstance(node, list) or not node:
        raise _error(field, 'format', "'%s': every query term must be a "
                     "non-empty JSON array such as [\">=\", \"$vcpus\", "
                     "\"4\"], got %s", field, lease_params._show(node))
    op = node[0]
    if op not in _QUERY_OPERATORS:
        raise _error(field, 'format', "'%s': unknown query operator %s; "
                     "use one of %s", field, lease_params._show(op),
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
                         lease_params._show(args[0]))
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
                     lease_params._json_type(value))
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
                         field, key, lease_params._json_type(spec))
        specs[key] = lease_params.check_text(spec, '%s.%s' % (field, key))
    return specs


def parse_host_request(raw, field='reservations[0]', region_name=None):
    """Validate one physical:host reservation of a lease body.

    :param raw: the reservation object (``resource_type`` already
        checked by ``params.parse_lease_body``).
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
                     lease_params._show(before_end))
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


# -- matching ---------------------------------------------------------------

def host_facts(host):
    """The facts of a host row that requests can look at."""
    facts = {key: host.get(key) for key in FACTS}
    cpu_info = host.get('cpu_info')
    if isinstance(cpu_info, str) and cpu_info:
        try:
            facts['cpu_info'] = json.loads(cpu_info)
        except ValueError:
            pass
    facts['service_name'] = host.get('service_host')
    return facts


def _walk(facts, path):
    value = facts
    for part in path.split(':'):
        if isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return None
    return value


def _as_spec_value(value):
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return jsonutils.dumps(value)
    return str(value)


def _spec_value(host, facts, key):
    """(relevant, value) of extra spec ``key`` for a host."""
    scope, sep, rest = key.partition(':')
    capabilities = host.get('capabilities') or {}
    if sep:
        if scope == 'capabilities':
            return True, _walk(facts, rest)
        if scope == 'aggregate_instance_extra_specs':
            return True, capabilities.get(rest)
        return False, None
    if key in capabilities:
        return True, capabilities[key]
    return True, facts.get(key)


def _match_spec(value, spec):
    value = _as_spec_value(value)
    if value is None:
        return False
    try:
        return bool(extra_specs_ops.match(value, spec))
    except (ValueError, TypeError, IndexError):
        return False


def _number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Number):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _compare(op, left, right):
    a, b = _number(left), _number(right)
    if a is None or b is None:
        a, b = _as_spec_value(left), _as_spec_value(right)
        if a is None or b is None:
            return False
    return _QUERY_COMPARISONS[op](a, b)


def _resolve(term, values):
    if isinstance(term, str) and term.startswith('$'):
        return _walk(values, term[1:])
    return term


def evaluate_query(query, values):
    """Evaluate a checked Blazar query against a dict of values."""
    op, args = query[0], query[1:]
    if op == 'and':
        return all(evaluate_query(a, values) for a in args)
    if op == 'or':
        return any(evaluate_query(a, values) for a in args)
    if op == 'not':
        return not evaluate_query(args[0], values)
    left = _resolve(args[0], values)
    if left is None:
        return False
    if op == 'in':
        return any(_compare('==', left, _resolve(a, values))
                   for a in args[1:])
    return _compare(op, left, _resolve(args[1], values))


def host_matches(host, request):
    """True when the host row (with 'capabilities') satisfies request."""
    if request.availability_zone and (
            host.get('availability_zone') != request.availability_zone):
        return False
    if ((host.get('vcpus') or 0) < request.vcpus or
            (host.get('memory_mb') or 0) < request.memory_mb or
            (host.get('local_gb') or 0) < request.disk_gb):
        return False
    facts = host.get('_facts')
    if facts is None:
        facts = host_facts(host)
    for key, spec in request.extra_specs.items():
        relevant, value = _spec_value(host, facts, key)
        if relevant and not _match_spec(value, spec):
            return False
    if request.hypervisor_properties and not evaluate_query(
            request.hypervisor_properties, facts):
        return False
    if request.resource_properties and not evaluate_query(
            request.resource_properties, host.get('capabilities') or {}):
        return False
    return True


def _size_key(host):
    # Smallest hosts first, so that big hosts stay free for big requests.
    return (host.get('vcpus') or 0, host.get('memory_mb') or 0,
            host.get('local_gb') or 0, host['hypervisor_hostname'])


# -- the host registry, cached ------------------------------------------------
#
# Every allocation needs every registered host with its capabilities
# (1,000 hosts: several thousand rows, most of the cost of an allocation).
# The registry changes rarely, so each process keeps a copy, checked in
# every allocation transaction against the registry's generation, a row
# that every host writer of nova_lease.db.api moves in its transaction
# (db.api.host_fingerprint). Changes made by this process also bump a
# local generation (invalidate_host_cache).

_CACHE_LOCK = threading.Lock()
_HOST_CACHE = {}
_GENERATION = [0]


def invalidate_host_cache():
    """Forget the cached host registry (after registering a host...)."""
    with _CACHE_LOCK:
        _GENERATION[0] += 1
        _HOST_CACHE.clear()


def _cached_registry(session):
    """(host rows, fingerprint) as last read by this process, or None."""
    with _CACHE_LOCK:
        cached = _HOST_CACHE.get(str(db_api.url_of(session)))
        if cached is not None and cached[0] == _GENERATION[0]:
            return cached[1:]
    return None


def _read_registry(session):
    """(host rows, fingerprint) read in session's transaction, and kept."""
    key = str(db_api.url_of(session))
    with _CACHE_LOCK:
        generation = _GENERATION[0]
    fingerprint = db_api.host_fingerprint(session)
    rows = db_api.host_list(session, reservable=True)
    for row in rows:
        row['_facts'] = host_facts(row)
    with _CACHE_LOCK:
        if _GENERATION[0] == generation:
            _HOST_CACHE[key] = (generation, rows, fingerprint)
    return rows, fingerprint


# -- allocation -------------------------------------------------------------

def booked_end(end, cleaning_minutes):
    """Where an allocation for a lease ending at ``end`` stops."""
    return end + datetime.timedelta(minutes=cleaning_minutes or 0)


def _window_text(start, end, cleaning_minutes):
    text = '[%s, %s)' % (lease_params.format_short(start),
                         lease_params.format_short(end))
    if cleaning_minutes:
        text += ' plus %d minutes of cleaning time' % cleaning_minutes
    return text


_MATCH_CACHE_SIZE = 64


def _matching(hosts, request):
    """Hosts matching request, best first (memoised per host snapshot)."""
    key = (id(hosts), jsonutils.dumps(request.properties(), sort_keys=True))
    with _CACHE_LOCK:
        found = _MATCH_CACHE.get(key)
    if found is not None and found[0] is hosts:
        return found[1]
    matching = sorted((h for h in hosts if host_matches(h, request)),
                      key=_size_key)
    with _CACHE_LOCK:
        if len(_MATCH_CACHE) >= _MATCH_CACHE_SIZE:
            _MATCH_CACHE.clear()
        # Keep a reference to hosts, so that its id is not reused.
        _MATCH_CACHE[key] = (hosts, matching)
    return matching


_MATCH_CACHE = {}


def _pick(hosts, requests, busy_of, window):
    """Choose hosts for each request: [(field, [host rows])].

    Candidates are looked at best first, in small batches: one indexed
    query per batch tells which are booked over the window (``busy_of``),
    so a request rarely reads more than a few hosts' allocations.
    """
    taken = set()
    picks = []
    for field, request in requests:
        matching = _matching(hosts, request)
        chosen = []
        free = 0
        batch = max(16, 2 * request.max)
        for i in range(0, len(matching), batch):
            part = [h for h in matching[i:i + batch]
                    if h['hypervisor_hostname'] not in taken]
            busy = busy_of([h['hypervisor_hostname'] for h in part])
            for h in part:
                if h['hypervisor_hostname'] in busy:
                    continue
                free += 1
                if len(chosen) < request.max:
                    chosen.append(h)
            if len(chosen) >= request.max:
                break
        if len(chosen) < request.min:
            raise NotEnoughHosts(reason=(
                '%s: not enough free hosts for %s: %d reservable host(s) '
                'match the request, %d of them free, at least %d needed'
                % (field, window, len(matching), free, request.min)))
        taken.update(h['hypervisor_hostname'] for h in chosen)
        picks.append((field, chosen))
    return picks


class _RegistryChanged(Exception):
    pass


def _allocate(session, requests, start, stop, window, exclude_reservations):
    """Pick, lock and re-check hosts in the writer ``session``.

    The cached host registry is checked against its fingerprint by the
    first query that reads allocations (one round trip for both).
    """
    cached = _cached_registry(session)
    if cached is None:
        hosts, fingerprint = _read_registry(session)
        checked = True
    else:
        (hosts, fingerprint), checked = cached, False
    excluded = set(exclude_reservations or ())
    known_busy = set()

    def busy_hosts(names):
        nonlocal checked
        if checked:
            busy = db_api.allocation_busy(session, names, start, stop)
        else:
            busy, current = db_api.allocation_busy(
                session, names, start, stop, fingerprint=True)
            checked = True
            if current != fingerprint:
                raise _RegistryChanged()
        return {host for host, reservation_id in busy
                if reservation_id not in excluded}

    def busy_of(names):
        return known_busy | busy_hosts(
            [n for n in names if n not in known_busy])

    locked = set()
    while True:
        refused = None
        try:
            picks = _pick(hosts, requests, busy_of, window)
        except NotEnoughHosts as e:
            picks, refused = None, e
        except _RegistryChanged:
            picks = None
        if not checked:
            # (No allocation was read: nothing matched.)
            checked = db_api.host_fingerprint(session) == fingerprint
        if refused is not None and checked:
            raise refused
        if picks is None or not checked:
            # The registry changed since this process read it.
            hosts, fingerprint = _read_registry(session)
            checked = True
            known_busy = set()
            continue
        names = sorted({h['hypervisor_hostname']
                        for _field, chosen in picks for h in chosen})
        # Lock what we chose, then look again: a concurrent writer may
        # have booked one of them after our first read (READ COMMITTED:
        # this read sees what the previous lock holder committed).
        db_api.lock_hosts(session, [n for n in names if n not in locked])
        locked.update(names)
        lost = busy_hosts(names)
        if not lost:
            return picks
        LOG.debug('Hosts %s were booked concurrently; choosing again',
                  ', '.join(sorted(lost)))
        known_busy |= lost


def _allocation_rows(hosts, start, stop):
    return [{'host': h['hypervisor_hostname'], 'start_date': start,
             'end_date': stop, 'vcpus': h.get('vcpus') or 0,
             'memory_mb': h.get('memory_mb') or 0,
             'disk_gb': h.get('local_gb') or 0, 'whole_host': True}
            for h in hosts]


@db_api.retry_on_deadlock
def create_host_lease(db, lease_values, requests, events,
                      cleaning_minutes=0):
    """Record a lease with physical:host reservations, all or nothing.

    :param db: a Database (the transaction is retried on deadlock).
    :param lease_values: the lease columns (``start_date``,
        ``end_date``... ; ``status`` PENDING).
    :param requests: ``[(field, HostRequest)]``, ``field`` naming the
        reservation in errors (``reservations[0]``).
    :param events: the event rows (``periodic.events.lease_events``).
    :param cleaning_minutes: kept free after the end on each host.
    :returns: the lease dict (as ``db.api.lease_get``).
    :raises NotEnoughHosts: (409) a request cannot get ``min`` hosts.
    """
    start, end = lease_values['start_date'], lease_values['end_date']
    stop = booked_end(end, cleaning_minutes)
    window = _window_text(start, end, cleaning_minutes)
    with db.writer() as session:
        picks = _allocate(session, requests, start, stop, window, ())
        reservations = []
        for (field, request), (_f, chosen) in zip(requests, picks):
            reservations.append({
                'resource_type': RESOURCE_TYPE,
                'status': 'pending',
                'properties': request.properties(),
                'allocations': _allocation_rows(chosen, start, stop),
            })
        return db_api.lease_create(session, lease_values, reservations,
                                   events)


def move_host_lease(session, lease, start, end, cleaning_minutes=0):
    """Re-book the host reservations of ``lease`` for [start, end).

    Runs in the caller's writer ``session`` (which also updates the lease
    and its events). The hosts the lease holds are kept when they are
    free over the new window; otherwise hosts are chosen again.

    :returns: ``{reservation_id: [hostnames]}``.
    :raises NotEnoughHosts: (409) the caller's transaction must roll back.
    """
    stop = booked_end(end, cleaning_minutes)
    window = _window_text(start, end, cleaning_minutes)
    reservations = [r for r in lease['reservations']
                    if r['resource_type'] == RESOURCE_TYPE]
    own = [r['id'] for r in reservations]
    current = {}
    for a in db_api.allocation_list(session, lease_id=lease['id']):
        current.setdefault(a['reservation_id'], []).append(a)
    names = sorted({a['host'] for allocs in current.values()
                    for a in allocs})
    db_api.lock_hosts(session, names)
    busy = {a['host'] for a in db_api.allocation_list(
        session, hosts=names, start=start, end=stop)
        if a['reservation_id'] not in own}
    result = {}
    if not busy:
        # Same hosts, new dates.
        for r in reservations:
            for a in current.get(r['id'], ()):
                db_api.allocation_update(session, a['id'], {
                    'start_date': start, 'end_date': stop})
            result[r['id']] = sorted(
                a['host'] for a in current.get(r['id'], ()))
        return result
    requests = [('reservation %s' % r['id'],
                 HostRequest.from_properties(r['properties']))
                for r in reservations]
    picks = _allocate(session, requests, start, stop, window, own)
    for r, (_field, chosen) in zip(reservations, picks):
        db_api.allocation_destroy_by_reservation(session, r['id'])
        for row in _allocation_rows(chosen, start, stop):
            db_api.allocation_create(session,
                                     dict(row, reservation_id=r['id']))
        result[r['id']] = sorted(h['hypervisor_hostname'] for h in chosen)
    return result


def extend_host_lease(session, lease, new_end, cleaning_minutes=0):
    """Move the end of a started host lease, keeping its hosts.

    Shortening always works; extending works only if every host of the
    lease is free until the new end (plus cleaning time).

    :raises NotEnoughHosts: (409) a host is booked by another lease.
    """
    stop = booked_end(new_end, cleaning_minutes)
    own = {r['id'] for r in lease['reservations']}
    allocations = db_api.allocation_list(session, lease_id=lease['id'])
    names = sorted({a['host'] for a in allocations})
    db_api.lock_hosts(session, names)
    if new_end > lease['end_date']:
        clash = [a for a in db_api.allocation_list(
            session, hosts=names, start=booked_end(lease['end_date'],
                                                   cleaning_minutes),
            end=stop) if a['reservation_id'] not in own]
        if clash:
            raise NotEnoughHosts(reason=(
                "end_date: the lease cannot be extended to %s: host(s) %s "
                "are reserved by another lease from %s" % (
                    lease_params.format_short(new_end),
                    ', '.join(sorted({a['host'] for a in clash})),
                    lease_params.format_short(
                        min(a['start_date'] for a in clash)))))
    for a in allocations:
        db_api.allocation_update(session, a['id'], {'end_date': stop})


@db_api.retry_on_deadlock
def register_host(db, values, now):
    """Record a reservable host, unless allocations still hold it.

    One writer transaction under the host's lock (``db.api.lock_hosts``,
    the lock admission control and host allocation take before they
    promise a host): an allocation on the host that ends after ``now``
    (an instance lease admitted there, or anything left of an earlier
    registration) refuses the registration, and no admission can promise
    the host between the check and the insert.

    :param values: the hosts-table columns (``hypervisor_hostname``...)
        and ``capabilities``.
    :returns: the host dict (as ``db.api.host_get``).
    :raises HostHavingAllocations: (409) naming the leases.
    :raises nova_lease.db.api.HostExists: (409) registered already.
    """
    name = values['hypervisor_hostname']
    with db.writer() as session:
        db_api.lock_hosts(session, [name])
        held = db_api.allocation_list(session, hosts=[name], start=now)
        if held:
            rids = sorted({a['reservation_id'] for a in held})
            leases = sorted({db_api.reservation_get(session, rid)[
                'lease_id'] for rid in rids})
            raise HostHavingAllocations(host=name, count=len(rids),
                                        leases=', '.join(leases))
        return db_api.host_create(session, values)


def unregister_host(db, host, now):
    """Undo :func:`register_host` unless an allocation holds the host now.

    Returns True if the host row was removed.
    """
    name = host['hypervisor_hostname']
    with db.writer() as session:
        db_api.lock_hosts(session, [name])
        if db_api.allocation_list(session, hosts=[name], start=now):
            return False
        db_api.host_destroy(session, host['id'])
        return True


def host_allocations(db, hosts=None, lease_id=None, reservation_id=None,
                     start=None, end=None):
    """Blazar's allocations: ``[{'resource_id', 'reservations': [...]}]``.

    One entry per registered host (``hosts``: host rows; all by default),
    each listing the reservations that hold it (``id``, ``lease_id``,
    ``start_date``, ``end_date``, as booked).
    """
    with db.reader() as session:
        if hosts is None:
            hosts = db_api.host_list(session)
        allocations = db_api.allocation_list(
            session, start=start, end=end, lease_id=lease_id,
            reservation_id=reservation_id)
        # Any reservation's (an instance lease's allocation on a host
        # registered later names its lease too).
        leases = db_api.reservation_lease_ids(
            session, [a['reservation_id'] for a in allocations])
    by_host = {}
    for a in allocations:
        by_host.setdefault(a['host'], []).append({
            'id': a['reservation_id'],
            'lease_id': leases.get(a['reservation_id']),
            'start_date': a['start_date'], 'end_date': a['end_date']})
    filtered = lease_id is not None or reservation_id is not None
    result = []
    for host in hosts:
        items = by_host.get(host['hypervisor_hostname'], [])
        if filtered and not items:
            continue
        result.append({'resource_id': str(host['id']),
                       'reservations': items})
    return result
