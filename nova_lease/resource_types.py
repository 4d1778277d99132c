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
"""The reservation types: the one place that knows each of them.

A reservation of a lease is of one type, stored in
``reservations.resource_type``:

=====================  ====================================================
``physical:host``      whole compute hosts (the lease API's host
                       reservations, best-effort ones included)
``flavor:instance``    instance slots on registered hosts: Blazar's
                       instance reservations (the lease API's
                       ``virtual:instance`` and ``flavor:instance``)
``virtual:instance``   one server made through ``POST /servers`` with
                       lease hints (a VM lease)
=====================  ====================================================

Every type is a :class:`ReservationType` that declares how its
reservations are parsed, booked, moved (date changes), updated, shown,
released and deleted; its engine plugin (``nova_lease.resource_plugins``)
starts and ends them. The types are found with stevedore in the
:data:`NAMESPACE` entry point namespace, on first use. Nothing outside the
types compares a type string: callers ask :func:`get`, :func:`for_api`
and the facts of :data:`FACTS` (what a reservation holds), which this
module keeps for the readers below the types (the database layer, the
scheduler's snapshot, the auditor); tests/unit/test_types.py checks that
rule. This module imports only the pure core (nova_lease.params) and
stevedore.

Every change of what a lease holds goes through one pipeline
(nova_lease.booking): the types' hooks are its steps.
"""

import collections
import threading

from stevedore import extension

from nova_lease import params

#: Stored types (the wire names of ``resource_type``).
HOST = 'physical:host'
SLOTS = 'flavor:instance'
SERVER = 'virtual:instance'

NAMESPACE = 'nova_lease.reservation_types'


class Facts(collections.namedtuple(
        'Facts', 'name api_names whole_hosts one_server counts_amount')):
    """What a reservation of a type holds (pure; for every reader).

    :ivar api_names: the lease API's ``resource_type`` values that make
        it (empty: not made through the lease API).
    :ivar whole_hosts: its allocations are whole hosts.
    :ivar one_server: it is one server (``resource_id``: its uuid).
    :ivar counts_amount: it holds ``amount`` instances of its size
        (properties ``amount``, ``vcpus``, ``memory_mb``, ``disk_gb``).
    """

    __slots__ = ()

    @property
    def instances(self):
        """It holds instances (servers or slots), not whole hosts."""
        return not self.whole_hosts


FACTS = {
    HOST: Facts(HOST, (HOST,), whole_hosts=True, one_server=False,
                counts_amount=False),
    SLOTS: Facts(SLOTS, ('virtual:instance', 'flavor:instance'),
                 whole_hosts=False, one_server=False, counts_amount=True),
    SERVER: Facts(SERVER, (), whole_hosts=False, one_server=True,
                  counts_amount=False),
}

#: The stored types of instance reservations (servers and slots).
INSTANCE_TYPES = tuple(sorted(n for n, f in FACTS.items() if f.instances))
#: The stored types whose reservations are one server each.
SERVER_TYPES = tuple(sorted(n for n, f in FACTS.items() if f.one_server))


class UnknownType(LookupError):
    """No reservation type of that name."""


def facts(name):
    """The :class:`Facts` of stored type ``name``.

    :raises UnknownType: not a type nova_lease knows.
    """
    try:
        return FACTS[name]
    except KeyError:
        raise UnknownType(name) from None


def of(reservation):
    """The :class:`Facts` of a reservation (a dict or row), or None for a
    type of no resource (the noop plugin's, in tests and benchmarks).
    """
    rtype = reservation['resource_type'] if isinstance(
        reservation, dict) else reservation.resource_type
    return FACTS.get(rtype)


def is_whole_host(reservation):
    found = of(reservation)
    return found is not None and found.whole_hosts


def is_one_server(reservation):
    found = of(reservation)
    return found is not None and found.one_server


def is_slots(reservation):
    found = of(reservation)
    return found is not None and found.counts_amount


def stored_for_api(api_name):
    """The stored type that the lease API's ``resource_type`` makes, or
    None.
    """
    for name, f in FACTS.items():
        if api_name in f.api_names:
            return name
    return None


def api_names():
    """Every ``resource_type`` the lease API takes (host reservations
    first).
    """
    return [n for f in FACTS.values() for n in f.api_names]


class ReservationType(object):
    """The behaviour of one reservation type (see the module doc).

    The booking pipeline (nova_lease.booking.pipeline) calls the hooks;
    a type that does not take part in a step keeps the default, which
    refuses what it cannot do with a message that names the field.
    ``booking`` is a :class:`nova_lease.booking.pipeline.Booking`,
    ``item`` an ``Item``, ``update`` an ``Update``, ``caller`` a
    ``Caller``; ``session`` is the pipeline's writer session.
    """

    #: The stored type (a key of :data:`FACTS`).
    name = None
    #: Types with a lower order book first in a create (host
    #: reservations before instance slots, which avoid their hosts).
    order = 50
    #: The field a refusal of its start names (usage limits).
    start_field = 'start_date'
    #: A best-effort lease may hunt for its reservations.
    best_effort = False
    #: The keys of its reservations (in a lease body and as shown) that
    #: are not Blazar v1's, by the lease API microversion that has them
    #: (nova_lease.api_ext.lease_api.microversion): {'1.2': ('region',
    #: ...)}. A client at an older version neither sends nor sees them.
    api_versions = {}

    @property
    def facts(self):
        return FACTS[self.name]

    def __repr__(self):
        return '<reservation type %s>' % self.name

    # -- create -------------------------------------------------------------

    def parse(self, raw, field, caller):
        """The request of a lease body's reservation ``raw`` (its shape
        checked by the schema); LeaseParamError (400) naming the field.
        """
        raise NotImplementedError(self.name)

    def prepare(self, caller, booking, item):
        """Make what Nova must have before the booking (``item.made``)."""

    def unprepare(self, caller, item):
        """Undo :meth:`prepare` (the booking was refused)."""

    def book(self, session, booking, items):
        """The reservation rows of ``items`` (dicts for
        ``db.api.lease_create``, their allocations nested), booked
        under host locks; 409 when they do not fit.
        """
        raise NotImplementedError(self.name)

    def offer_hosts(self, session, conf, request):
        """What an offer search (nova_lease.booking.offers) for
        ``request`` looks at: ``(calendar request, host names, sizes)``,
        the calendar request a ``nova_lease.calendar.offers.
        HostsRequest`` or ``SlotsRequest``, the candidate hosts (in the
        order the booking prefers) and, for slots, ``{host: (vcpus,
        memory_mb, disk_gb)}``. A type that cannot be offered refuses
        (LeaseParamError naming ``resource_type``).
        """
        raise params.error('resource_type', 'unsupported', "'%s' "
                           "reservations have no offers", self.name)

    def after_insert(self, session, booking, lease):
        """After the lease's rows are written (same transaction)."""

    def after_create(self, caller, booking, lease):
        """After the booking committed: tell Nova (``caller.nova``)."""

    # -- date changes -------------------------------------------------------

    def move(self, session, conf, lease, reservations, start, end, now):
        """Move ``reservations`` (this type's of ``lease``) to
        ``[start, end)``; 409 when they do not fit there.
        """
        raise NotImplementedError(self.name)

    # -- reservation updates ------------------------------------------------

    def parse_update(self, field, reservation, item):
        """The new request of ``reservation`` from an update body's
        ``item``; LeaseParamError (400) naming ``field.<key>``.
        """
        shown = self.shown_type(reservation)
        raise params.error(field, 'unsupported', "'%s': a %s reservation "
                           "cannot be updated (change the lease's dates)",
                           field, shown)

    def apply_update(self, session, conf, update, start, end, now,
                     started):
        """Book ``update`` (409 when it does not fit)."""
        raise NotImplementedError(self.name)

    def after_update(self, caller, lease, update, started):
        """After the update committed: tell Nova."""

    # -- delete -------------------------------------------------------------

    def holds_in_nova(self, reservation):
        """Whether a PENDING reservation holds something in Nova (then
        deleting its lease ends it through the engine).
        """
        return True

    def release_after(self, session, conf, lease, reservations, when):
        """Release what ``reservations`` hold after ``when`` (the lease
        ends now).
        """
        raise NotImplementedError(self.name)

    # -- show ---------------------------------------------------------------

    def shown_type(self, reservation):
        """The ``resource_type`` the lease API shows."""
        return self.name

    def show(self, reservation, out):
        """Adjust ``out``, the reservation as the lease API shows it
        (its properties flattened in), in place.
        """


_lock = threading.Lock()
_loaded = {}


def _load():
    manager = extension.ExtensionManager(NAMESPACE, invoke_on_load=True)
    found = {ext.name: ext.obj for ext in manager.extensions}
    missing = sorted(set(FACTS) - set(found))
    if missing:
        raise UnknownType('reservation types without an entry point in %s: '
                          '%s (reinstall nova_lease)' % (
                              NAMESPACE, ', '.join(missing)))
    return found


def get(name):
    """The :class:`ReservationType` of stored type ``name``.

    :raises UnknownType: not a type nova_lease knows.
    """
    facts(name)
    if not _loaded:
        with _lock:
            if not _loaded:
                _loaded.update(_load())
    return _loaded[name]


def for_api(api_name):
    """The :class:`ReservationType` the lease API's ``resource_type``
    makes, or None.
    """
    name = stored_for_api(api_name)
    return None if name is None else get(name)


def group(reservations):
    """``[(type, [reservations of that type])]``, in booking order."""
    found = {}
    for r in reservations:
        found.setdefault(r['resource_type'], []).append(r)
    return [(kind, found[kind.name]) for kind in by_order(found)]


def by_order(names):
    """The types of stored type ``names`` (each once), in booking
    order.
    """
    return sorted({get(n) for n in names}, key=lambda t: (t.order, t.name))
