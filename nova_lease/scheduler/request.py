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
"""What one scheduling request needs from the lease calendar.

:func:`resolve` decides, against a snapshot of the lease calendar, which
interval a request needs and where it may go (a :class:`Request`): a
request is leased only through the side database (its server is linked
to a live instance reservation, or it is the first boot of a leased
server). The ``lookup_*`` functions read the side database when the
snapshot does not know enough; :func:`resolve_with_lookups` resolves with
them. :func:`maybe_leased` tells, without the side database, whether a
request may be leased. doc/source/reference/scheduling.rst explains the rules.
"""

import collections
import math

import nova.conf
from oslo_log import log as logging
from oslo_serialization import jsonutils

from nova_lease import calendar
from nova_lease import conf as lease_conf
from nova_lease.db import api as db_api
from nova_lease import exception as lease_exception
from nova_lease import params
from nova_lease.plugins import flavor as flavor_plugin
from nova_lease.plugins.flavor import holders as slot_holders
from nova_lease.plugins.flavor import slots as slot_rules
from nova_lease import resource_types as types
from nova_lease.scheduler import snapshot
from nova_lease import status
from nova_lease import wire

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
lease_conf.register_opts(CONF)

UNLEASED = 'unleased'
LEASED = 'leased'
HOST_RESERVATION = 'host reservation'


class Request(collections.namedtuple(
        'Request', 'kind demand start end allowed exclude why reservation',
        defaults=(None,))):
    """What a request needs.

    :ivar kind: UNLEASED, LEASED or HOST_RESERVATION.
    :ivar demand: a calendar Demand.
    :ivar start, end: the interval (``end`` None: forever).
    :ivar allowed: None, or the set of the only hosts it may use.
    :ivar exclude: reservation ids whose allocations do not count against
        it (its own).
    :ivar why: how the interval was found (for logs).
    :ivar reservation: for HOST_RESERVATION, the hinted reservation id:
        only the hosts in its aggregate may take the request.
    """

    __slots__ = ()


def is_set(obj, name):
    """Whether field ``name`` of a Nova object (or attribute) is set."""
    try:
        return obj.obj_attr_is_set(name)
    except AttributeError:
        return getattr(obj, name, None) is not None


def demand_of(spec_obj):
    """The Demand of one instance of a RequestSpec (placement's sizes)."""
    flavor = spec_obj.flavor
    swap_gb = int(math.ceil((flavor.swap or 0) / 1024.0))
    is_bfv = is_set(spec_obj, 'is_bfv') and spec_obj.is_bfv
    root = 0 if is_bfv else flavor.root_gb
    return calendar.Demand(flavor.vcpus, flavor.memory_mb,
                           root + flavor.ephemeral_gb + swap_gb)


def hint(spec_obj, name):
    """Scheduler hint ``name`` of a RequestSpec (its first value)."""
    value = spec_obj.get_scheduler_hint(name)
    if isinstance(value, list):
        value = value[0] if value else None
    return value


def _instance_reservation(row, lease, items):
    props = row['properties'] or {}
    size = snapshot.size_from(jsonutils.dumps(props), items)
    return snapshot.Reservation(
        row['id'], lease['id'], lease['project_id'], row['resource_type'],
        row['resource_id'], lease['start_date'], lease['end_date'],
        lease['status'], size)


def _items(db, reservation_id):
    return [calendar.Item(a['host'], a['start_date'], a['end_date'],
                          a['vcpus'], a['memory_mb'], a['disk_gb'],
                          a['whole_host'], reservation_id)
            for a in db_api.allocation_list(db,
                                            reservation_id=reservation_id)]


def _live(lease, now):
    return (lease['status'] not in snapshot.DEAD_LEASES and
            lease['end_date'] > now)


def lookup_server(conf, uuid, now):
    """The live instance Reservation of server ``uuid`` and the hosts of
    its allocations, read from the side database; (None, ()) if none.

    For a request with an internal lease hint whose server the snapshot
    does not know as leased: the server may have been linked to its lease
    after the snapshot was read. One indexed query (plus two when found).
    """
    db = db_api.get_database(conf)
    for row in db_api.reservation_list(db, resource_id=uuid,
                                       resource_type=types.SERVER):
        if row['status'] in snapshot.DEAD_RESERVATIONS:
            continue
        lease = db_api.lease_get(db, row['lease_id'])
        if not _live(lease, now):
            continue
        items = _items(db, row['id'])
        return (_instance_reservation(row, lease, items),
                {item.host for item in items if item.end > now})
    return None, ()


def lookup_lease(conf, lease_id, now):
    """The live instance Reservations of lease ``lease_id``, read from the
    side database: [] when the lease is gone, over or dead.

    For a first boot (hint ``nova_lease_id``) of a lease the snapshot does
    not know: it may be younger than the snapshot, or over.
    """
    db = db_api.get_database(conf)
    try:
        lease = db_api.lease_get(db, lease_id)
    except lease_exception.NotFound:
        return []
    if not _live(lease, now):
        return []
    return [_instance_reservation(row, lease, ())
            for row in lease['reservations']
            if types.is_one_server(row) and
            row['status'] not in snapshot.DEAD_RESERVATIONS]


def lookup_reservation(conf, reservation_id, now):
    """A host Reservation and its allocated hosts, read from the side
    database; (None, ()) if unknown.

    For a ``reservation`` hint that the snapshot does not show ACTIVE:
    the lease may have started after the snapshot was read.
    """
    db = db_api.get_database(conf)
    try:
        row = db_api.reservation_get(db, reservation_id)
        lease = db_api.lease_get(db, row['lease_id'])
    except lease_exception.NotFound:
        return None, ()
    hosts = {a['host'] for a in db_api.allocation_list(
        db, reservation_id=reservation_id)}
    res = snapshot.Reservation(
        row['id'], lease['id'], lease['project_id'], row['resource_type'],
        row['resource_id'], lease['start_date'], lease['end_date'],
        lease['status'], None)
    return res, hosts


def flavor_reservation(spec_obj):
    """The instance reservation whose flavor the request boots with (the
    flavor's ``nova_lease:reservation`` extra spec), or None.
    """
    flavor = spec_obj.flavor if is_set(spec_obj, 'flavor') else None
    specs = getattr(flavor, 'extra_specs', None) or {}
    return specs.get(flavor_plugin.FLAVOR_SPEC)


def lookup_slots(conf, reservation_id, flavor):
    """``(slots, holders)`` of an instance reservation: its slots per host
    (side database) and the servers that hold them
    (nova_lease.plugins.flavor.holders, read from Nova: build requests,
    every cell, placement for the servers not on a host yet).
    """
    from nova import context as nova_context

    db = db_api.get_database(conf)
    slots = collections.Counter(a['host'] for a in db_api.allocation_list(
        db, reservation_id=reservation_id))
    if not is_set(flavor, 'id'):
        return slots, []
    ctx = nova_context.get_admin_context()
    return slots, slot_holders.read(
        ctx, flavor.id, locate=slot_holders.placement_locator(ctx, slots))


def _slots(spec_obj, demand, res, project, now, lookup_slots):
    """The Request of a server with an instance reservation's flavor: a
    new one gets a slot left by the servers ahead of it, one that holds a
    slot keeps it (nova_lease.plugins.flavor.slots).
    """
    if (res is None or not types.is_slots(res) or
            res.lease_status != status.LeaseStatus.ACTIVE or
            res.project_id != project or res.end <= now):
        return Request(HOST_RESERVATION, demand, now, now, set(), (),
                       'reservation %s is not an active instance '
                       'reservation of the project' % (
                           res.id if res is not None else '?'),
                       res.id if res is not None else None)
    uuid = spec_obj.instance_uuid if is_set(spec_obj, 'instance_uuid') \
        else None
    # (Unreadable: no slot.)
    slots, holders = _ask(lookup_slots, ({}, []),
                          'the slots of reservation %s' % res.id,
                          res.id, spec_obj.flavor)
    allowed, why = slot_rules.hosts_for(slots, holders, uuid)
    return Request(HOST_RESERVATION, demand, now, res.end, allowed,
                   (res.id,), 'instance reservation %s (%s)' % (res.id, why),
                   res.id)


def _ask(lookup, default, what, *args):
    """lookup(*args), or ``default`` (logged) if it fails."""
    try:
        return lookup(*args)
    except Exception:
        LOG.exception('nova_lease: cannot look up %s', what)
        return default


def _linked(spec_obj, demand, res, hosts, snap, now):
    """The Request of a server linked to the live reservation ``res``."""
    if res.end <= now:
        return Request(UNLEASED, demand, now, None, None, (),
                       'its lease %s is over' % res.lease_id)
    if res.start > now:
        # Built before its lease starts (a lease made before servers were
        # created at their start): it is shelved right away.
        return Request(LEASED, demand, now, res.start, None, (),
                       'lease %s not started' % res.lease_id)
    if hosts is None:
        hosts = {item.host for item in snap.allocations.get(res.id, ())
                 if item.end > now}
    ignore = set(spec_obj.ignore_hosts or ()) \
        if is_set(spec_obj, 'ignore_hosts') else set()
    allowed = hosts if hosts and not hosts & ignore else None
    return Request(LEASED, demand, now, res.end, allowed, (res.id,),
                   'lease %s' % res.lease_id)


def _first_boot(demand, lease_id, uuid, project, snap, now, lookup_lease):
    """The Request of the first boot of a server of lease ``lease_id``
    (hint ``nova_lease_id``), or None when it is not one: the lease is
    over or unknown, of another project, or every reservation of it is
    linked to another server (Nova reloads the hint for every move).
    """
    rids = snap.by_lease.get(lease_id) or ()
    found = [snap.reservations[rid] for rid in rids
             if rid in snap.reservations]
    if not found and lookup_lease is not None:
        found = _ask(lookup_lease, [], 'lease %s' % lease_id, lease_id, now)
    found = [r for r in found if types.is_one_server(r) and
             r.end > now]
    if not found or found[0].project_id != project:
        return None
    if not any(r.resource_id in (None, uuid) for r in found):
        return None
    res = found[0]
    end = res.end if res.start <= now else res.start
    return Request(LEASED, demand, now, max(end, now), None, (),
                   'first boot of lease %s' % lease_id)


def _hinted(reservation_id, snap, now, lookup_reservation):
    """(Reservation or None, its hosts or None) of a reservation a
    request names: from the snapshot, or read when the snapshot does not
    show it ACTIVE (its lease may have started since).
    """
    res = snap.reservations.get(reservation_id)
    if lookup_reservation is not None and (
            res is None or res.lease_status != status.LeaseStatus.ACTIVE):
        return _ask(lookup_reservation, (None, None),
                    'reservation %s' % reservation_id, reservation_id, now)
    return res, None


def resolve(spec_obj, snap, now, conf=CONF, lookup=None,
            lookup_reservation=None, lookup_lease=None,
            lookup_slots=None):
    """The :class:`Request` of ``spec_obj``.

    See doc/source/reference/scheduling.rst.

    A request is leased only through the side database: its server is
    linked to a live instance reservation, or it is the first boot of a
    leased server, which the nova-api filter marks with an internal hint
    (``nova_lease_id``; ``nova_lease_reservation`` on servers created by
    releases that created a future lease's server at its start).
    ``lease_params`` and
    ``reserved`` are never read here, nor ``[nova_lease] default_lease``.

    The lookups read the side database when the snapshot does not know
    enough: ``lookup(uuid, now)`` -> (Reservation or None, allocated
    hosts) for a server with an internal hint that the snapshot does not
    show linked; ``lookup_lease(lease_id, now)`` -> [Reservation] for a
    first boot of a lease the snapshot does not know;
    ``lookup_reservation(id, now)`` -> (Reservation or None,
    hosts) for a host ``reservation`` hint the snapshot does not show
    ACTIVE; ``lookup_slots(reservation_id, flavor)`` -> (slots per host,
    holders) for a request with an instance reservation's flavor, which
    is decided by that reservation's slots before anything else.
    """
    demand = demand_of(spec_obj)
    uuid = spec_obj.instance_uuid if is_set(spec_obj, 'instance_uuid') \
        else None
    project = spec_obj.project_id if is_set(spec_obj, 'project_id') \
        else None
    lease_id = hint(spec_obj, params.LEASE_ID_HINT)
    older_id = hint(spec_obj, params.RESERVATION_HINT)
    slot_id = flavor_reservation(spec_obj)
    if slot_id:
        # The reservation's flavor decides, whatever the hints: its
        # servers are counted against its slots, never leased otherwise.
        res, _hosts = _hinted(slot_id, snap, now, lookup_reservation)
        return _slots(spec_obj, demand, res, project, now, lookup_slots)
    res = snap.servers.get(uuid) if uuid else None
    hosts = None
    if res is None and uuid and (lease_id or older_id) and (
            lookup is not None):
        res, hosts = _ask(lookup, (None, None),
                          'the lease of server %s' % uuid, uuid, now)
    if res is not None:
        return _linked(spec_obj, demand, res, hosts, snap, now)
    if lease_id:
        request = _first_boot(demand, lease_id, uuid, project, snap, now,
                              lookup_lease)
        if request is not None:
            return request

    reservation_id = hint(spec_obj, 'reservation')
    if reservation_id:
        res, hosts = _hinted(reservation_id, snap, now, lookup_reservation)
        if (res is None or not types.is_whole_host(res) or
                res.lease_status != status.LeaseStatus.ACTIVE or
                res.project_id != project or res.end <= now):
            return Request(HOST_RESERVATION, demand, now, now, set(), (),
                           'reservation %s is not an active host '
                           'reservation of the project' % reservation_id,
                           reservation_id)
        if hosts is None:
            hosts = {item.host for item in snap.allocations.get(res.id, ())}
        return Request(HOST_RESERVATION, demand, now, res.end, hosts,
                       (res.id,), 'reservation %s' % res.id, res.id)
    if lease_id:
        return Request(UNLEASED, demand, now, None, None, (),
                       'lease %s is over or not this server\'s' % lease_id)
    return Request(UNLEASED, demand, now, None, None, (), 'no lease')


def resolve_with_lookups(spec_obj, snap, now, conf):
    """:func:`resolve`, with the ``lookup_*`` functions reading the side
    database of ``conf``.
    """
    return resolve(
        spec_obj, snap, now, conf,
        lookup=lambda uuid, when: lookup_server(conf, uuid, when),
        lookup_reservation=lambda rid, when: lookup_reservation(
            conf, rid, when),
        lookup_lease=lambda lid, when: lookup_lease(conf, lid, when),
        lookup_slots=lambda rid, flavor: lookup_slots(conf, rid, flavor))


#: Scheduler hints that make a request leased or a host reservation's
#: (the lease middleware's, the lease API's and the engine's): without
#: the side database such a request cannot be checked.
LEASE_HINTS = (wire.HINT_LEASE_PARAMS, wire.HINT_RESERVATION,
               wire.HINT_INTERNAL_LEASE_ID, wire.HINT_INTERNAL_RESERVATION)


def maybe_leased(spec_obj, conf=CONF):
    """Whether a request may be leased, told without the side database.

    True with any lease hint (also ``reserved=True``) or when the default
    lease applies to the request's project: conservative (a server whose
    lease has ended still carries its hints).
    """
    hints = spec_obj.scheduler_hints \
        if is_set(spec_obj, 'scheduler_hints') else None
    hints = hints or {}
    if any(name in hints for name in LEASE_HINTS):
        return True
    if flavor_reservation(spec_obj):
        return True
    if str(hint(spec_obj, wire.HINT_RESERVED)).lower() == 'true':
        return True
    group = conf.nova_lease
    project = spec_obj.project_id if is_set(spec_obj, 'project_id') \
        else None
    return bool(group.default_lease) and \
        project not in group.default_lease_exempt_projects
