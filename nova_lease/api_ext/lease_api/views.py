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
"""How the lease API shows leases, hosts and allocations (Blazar v1's
field names; dates as ``2017-12-26T12:00:00.000000``).

A view of a lease takes the microversion asked (:mod:`.microversion`):
the fields of a later version (:data:`LATER_FIELDS`) are left out, so
that a client at 1.0 sees Blazar v1's fields only. ``version=None``
shows every field.
"""

from nova_lease.api_ext.lease_api import microversion
from nova_lease import params as lease_params
from nova_lease import resource_types as types

#: (what, microversion) -> the fields of that version, left out of the
#: answers to an older client. (A reservation's are its type's:
#: ReservationType.api_versions.)
LATER_FIELDS = {
    ('lease', microversion.LEASE_DETAILS): (
        'status_reason', 'before_end_date', 'on_end', 'lease_type',
        'retries'),
    ('event', microversion.LEASE_DETAILS): (
        'attempts', 'last_error', 'next_attempt_at'),
}


def _older(out, what, version, later=None):
    """``out`` without the fields of ``what`` later than ``version``
    (``later``: {version: fields} instead of LATER_FIELDS').
    """
    if version is None:
        return out
    if later is None:
        later = {since: fields for (kind, since), fields
                 in LATER_FIELDS.items() if kind == what}
    for since, fields in later.items():
        if version < microversion.parse(since):
            for field in fields:
                out.pop(field, None)
    return out


def _dt(value):
    if isinstance(value, str) or value is None:
        return value
    return lease_params.format_datetime(value)


_RESERVATION_FIELDS = ('id', 'lease_id', 'resource_id', 'resource_type',
                       'status', 'aggregate_id', 'created_at', 'updated_at')


def format_reservation(reservation, version=None):
    """A reservation as Blazar shows it: its request flattened in."""
    out = {}
    for key, value in (reservation.get('properties') or {}).items():
        out[key] = value
    for key in _RESERVATION_FIELDS:
        value = reservation.get(key)
        out[key] = _dt(value) if key.endswith('_at') else value
    # Its type shows what is its own (e.g. the type an instance
    # reservation was asked with, how many hosts a best-effort one took
    # from the cloud).
    if types.of(reservation) is not None:
        kind = types.get(reservation['resource_type'])
        kind.show(reservation, out)
        _older(out, 'reservation', version, kind.api_versions)
    return out


def format_event(event, version=None):
    """An event as Blazar shows it, with its attempts: how many times
    the engine ran it, the last failure's reason and when it runs again.
    """
    return _older({
        'id': event['id'], 'lease_id': event['lease_id'],
        'event_type': event['event_type'], 'time': _dt(event['time']),
        'status': event['status'],
        'attempts': event.get('attempts') or 0,
        'last_error': event.get('last_error'),
        'next_attempt_at': _dt(event.get('next_attempt_at')),
        'created_at': _dt(event.get('created_at')),
        'updated_at': _dt(event.get('updated_at'))}, 'event', version)


def format_lease(lease, version=None):
    """A lease as Blazar v1 shows it, with the fields of ``version``."""
    return _older({
        'id': lease['id'], 'name': lease['name'],
        'project_id': lease['project_id'], 'user_id': lease['user_id'],
        'start_date': _dt(lease['start_date']),
        'end_date': _dt(lease['end_date']),
        'before_end_date': _dt(lease.get('before_end_date')),
        'status': lease['status'],
        'status_reason': lease.get('status_reason'),
        'degraded': False,
        'trust_id': None,
        'on_end': lease.get('on_end'),
        'lease_type': lease.get('lease_type') or 'scheduled',
        'retries': lease.get('retries'),
        'reservations': [format_reservation(r, version)
                         for r in lease.get('reservations') or ()],
        'events': [format_event(e, version)
                   for e in lease.get('events') or ()],
        'created_at': _dt(lease.get('created_at')),
        'updated_at': _dt(lease.get('updated_at')),
    }, 'lease', version)


def format_host(host):
    """A host as Blazar's os-hosts shows it (capabilities flattened)."""
    out = dict(host.get('capabilities') or {})
    out.update({
        'id': str(host['id']),
        'hypervisor_hostname': host['hypervisor_hostname'],
        'hypervisor_type': host.get('hypervisor_type'),
        'hypervisor_version': host.get('hypervisor_version'),
        'vcpus': host.get('vcpus'),
        'cpu_info': host.get('cpu_info'),
        'memory_mb': host.get('memory_mb'),
        'local_gb': host.get('local_gb'),
        'service_name': host.get('service_host'),
        'availability_zone': host.get('availability_zone'),
        'reservable': bool(host.get('reservable', True)),
        # Blazar's host has a status column that nothing sets.
        'status': None,
        'trust_id': None,
        'created_at': _dt(host.get('created_at')),
        'updated_at': _dt(host.get('updated_at')),
    })
    return out


def format_allocation(item):
    """A host's allocations (``os-hosts/allocations``)."""
    return {'resource_id': item['resource_id'],
            'reservations': [dict(r, start_date=_dt(r['start_date']),
                                  end_date=_dt(r['end_date']))
                             for r in item['reservations']]}


def format_idle_host(item):
    """A registered host with the periods nothing is promised on it."""
    host = item['host']
    periods = [{'start': _dt(s), 'end': _dt(e),
                'hours': round((e - s).total_seconds() / 3600.0, 2)}
               for s, e in item['periods']]
    return {'id': str(host['id']),
            'hypervisor_hostname': host['hypervisor_hostname'],
            'idle_periods': periods,
            'idle_hours': round(sum(p['hours'] for p in periods), 2),
            'idle_until': _dt(item['idle_until'])}


def format_usage(projects, start, end, now):
    """GET /usage: the window and nova_lease.usage's figures."""
    return {'start': _dt(start), 'end': _dt(end), 'now': _dt(now),
            'projects': [
                dict(p, leases=[dict(lease, start_date=_dt(
                    lease['start_date']), end_date=_dt(lease['end_date']))
                    for lease in p['leases']])
                for p in projects]}
