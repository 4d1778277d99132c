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
"""The host registry (hosts reservable by physical:host leases, their
capabilities) and its change marker.
"""

from oslo_db import exception as db_exc
from oslo_utils import timeutils
import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects import sqlite as sqlite_dialect

from nova_lease.db import common
from nova_lease.db import models
from nova_lease.db import transaction

HOSTS = models.HOSTS
HOST_CAPABILITIES = models.HOST_CAPABILITIES
GENERATIONS = models.GENERATIONS


def _host_id(host_id):
    try:
        return int(host_id)
    except (TypeError, ValueError):
        raise common.HostNotFound(host=host_id)


def _with_capabilities(session, hosts):
    by_id = {}
    for host in hosts:
        host['capabilities'] = {}
        by_id[host['id']] = host
    if not hosts:
        return hosts
    stmt = sa.select(HOST_CAPABILITIES).where(
        HOST_CAPABILITIES.c.host_id.in_(list(by_id))).order_by(
            HOST_CAPABILITIES.c.capability_name)
    for row in session.execute(stmt):
        host = by_id.get(row.host_id)
        if host is not None:
            host['capabilities'][row.capability_name] = row.capability_value
    return hosts


def _capability_value(value):
    return value if isinstance(value, str) else str(value)


def _set_capabilities(session, host_id, capabilities):
    """Set (or, with a None value, delete) the given capabilities."""
    if not capabilities:
        return
    existing = set(session.execute(
        sa.select(HOST_CAPABILITIES.c.capability_name)
        .where(HOST_CAPABILITIES.c.host_id == host_id)).scalars())
    deleted = [name for name, value in capabilities.items()
               if value is None]
    if deleted:
        session.execute(sa.delete(HOST_CAPABILITIES).where(
            HOST_CAPABILITIES.c.host_id == host_id,
            HOST_CAPABILITIES.c.capability_name.in_(deleted)))
    new = []
    for name, value in sorted(capabilities.items()):
        if value is None:
            continue
        if name in existing:
            session.execute(sa.update(HOST_CAPABILITIES).where(
                HOST_CAPABILITIES.c.host_id == host_id,
                HOST_CAPABILITIES.c.capability_name == name).values(
                    capability_value=_capability_value(value)))
        else:
            new.append({'host_id': host_id, 'capability_name': name,
                        'capability_value': _capability_value(value)})
    if new:
        session.execute(sa.insert(HOST_CAPABILITIES), new)


def _host_get(session, where, host):
    row = session.execute(sa.select(HOSTS).where(where)).mappings().first()
    if row is None:
        raise common.HostNotFound(host=host)
    return _with_capabilities(session, [dict(row)])[0]


HOSTS_GENERATION = 'hosts'


def host_fingerprint_select():
    # (max(): one row, NULLs before the first host write.)
    return sa.select(
        sa.func.max(GENERATIONS.c.value).label('generation'),
        sa.func.max(GENERATIONS.c.updated_at).label('generation_at')).where(
            GENERATIONS.c.name == HOSTS_GENERATION)


def _bump_generation(session, name):
    """Count one more change of what ``name`` names (see Generation)."""
    backend = transaction.connection_of(session).dialect.name
    values = {'name': name, 'value': 1,
              'updated_at': common.naive_utc(timeutils.utcnow())}
    bumped = {'value': GENERATIONS.c.value + 1,
              'updated_at': values['updated_at']}
    if backend == 'mysql':
        stmt = mysql.insert(GENERATIONS).values(**values)
        stmt = stmt.on_duplicate_key_update(**bumped)
    else:
        module = postgresql if backend == 'postgresql' else sqlite_dialect
        stmt = module.insert(GENERATIONS).values(**values)
        stmt = stmt.on_conflict_do_update(index_elements=['name'],
                                          set_=bumped)
    session.execute(stmt)


def host_fingerprint(session):
    """A change marker of the host registry (the ``hosts`` generation:
    its value and time), in the caller's transaction (a Session or a
    Connection). Every host writer of this module moves it.
    """
    return tuple(str(v) for v in session.execute(
        host_fingerprint_select()).one())


def host_create(db, values):
    """Create a host; values may carry 'capabilities' {name: value}.

    Capability values are stored as strings. Returns the host dict (its
    columns plus 'capabilities'). Raises HostExists.
    """
    values = dict(values)
    capabilities = values.pop('capabilities', None) or {}
    row = common.clean(HOSTS, 'host', values)
    with transaction.writing(db) as session:
        try:
            result = session.execute(sa.insert(HOSTS).values(**row))
        except db_exc.DBDuplicateEntry:
            raise common.HostExists(host=row.get('hypervisor_hostname'))
        host_id = result.inserted_primary_key[0]
        _set_capabilities(session, host_id, capabilities)
        _bump_generation(session, HOSTS_GENERATION)
        return _host_get(session, HOSTS.c.id == host_id, host_id)


def host_get(db, host_id):
    """The host dict with 'capabilities'. Raises HostNotFound."""
    host_id = _host_id(host_id)
    with transaction.reading(db) as session:
        return _host_get(session, HOSTS.c.id == host_id, host_id)


def host_get_by_hostname(db, hypervisor_hostname):
    """The host dict with 'capabilities'. Raises HostNotFound."""
    with transaction.reading(db) as session:
        return _host_get(
            session, HOSTS.c.hypervisor_hostname == hypervisor_hostname,
            hypervisor_hostname)


def host_list(db, hostnames=None, reservable=None, ids=None):
    """Host dicts with 'capabilities', ordered by hypervisor_hostname."""
    stmt = sa.select(HOSTS)
    hostnames = common.as_list(hostnames)
    if hostnames is not None:
        stmt = stmt.where(HOSTS.c.hypervisor_hostname.in_(hostnames))
    if ids is not None:
        stmt = stmt.where(HOSTS.c.id.in_(list(ids)))
    if reservable is not None:
        stmt = stmt.where(HOSTS.c.reservable == bool(reservable))
    stmt = stmt.order_by(HOSTS.c.hypervisor_hostname)
    with transaction.reading(db) as session:
        return _with_capabilities(session, common.dicts(session.execute(stmt)))


def host_versions(db, reservable=None):
    """{host id: version}: a host's version changes with every write of
    the host or its capabilities (host_update sets updated_at, to the
    microsecond), and a host created anew has a new one (its created_at),
    whatever its id. A version is only compared with another: the dates
    come as the database's text (no date parsed for a thousand hosts).
    """
    stmt = sa.select(HOSTS.c.id, sa.cast(HOSTS.c.created_at, sa.String),
                     sa.cast(HOSTS.c.updated_at, sa.String))
    if reservable is not None:
        stmt = stmt.where(HOSTS.c.reservable == bool(reservable))
    with transaction.reading(db) as session:
        return {host_id: (created, updated)
                for host_id, created, updated in session.execute(stmt)}


def host_update(db, host_id, values):
    """Update a host; its dict. Raises HostNotFound or HostExists.

    values may carry 'capabilities': the given names are set, a None
    value deletes that capability, other capabilities are kept.
    """
    host_id = _host_id(host_id)
    values = dict(values)
    capabilities = values.pop('capabilities', None) or {}
    values = common.clean(HOSTS, 'host', values)
    values['updated_at'] = timeutils.utcnow()
    with transaction.writing(db) as session:
        try:
            result = session.execute(sa.update(HOSTS).where(
                HOSTS.c.id == host_id).values(**values))
        except db_exc.DBDuplicateEntry:
            raise common.HostExists(host=values.get('hypervisor_hostname'))
        if result.rowcount != 1:
            raise common.HostNotFound(host=host_id)
        _set_capabilities(session, host_id, capabilities)
        _bump_generation(session, HOSTS_GENERATION)
        return _host_get(session, HOSTS.c.id == host_id, host_id)


def host_destroy(db, host_id):
    """Delete a host and its capabilities. Raises HostNotFound."""
    host_id = _host_id(host_id)
    with transaction.writing(db) as session:
        result = session.execute(
            sa.delete(HOSTS).where(HOSTS.c.id == host_id))
        if result.rowcount != 1:
            raise common.HostNotFound(host=host_id)
        _bump_generation(session, HOSTS_GENERATION)
