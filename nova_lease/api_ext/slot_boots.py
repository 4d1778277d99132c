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
"""``POST /servers`` with an instance reservation's flavor: the count.

A boot with the flavor of a Blazar instance reservation
(nova_lease.plugins.flavor: extra spec ``nova_lease:reservation``) is
counted against the reservation's slots before Nova sees it, for the
reservation's project while its lease is ACTIVE:

* the servers that hold a slot (nova_lease.plugins.flavor.holders: with
  the flavor, in any state, being built or resized away) leave
  ``slots left``;
* (with ``[nova_lease_api] instance_reservation_overflow = refuse``, the
  default; ``error`` passes every such boot on to Nova, as Blazar does,
  and LeaseFilter's refusal puts the servers over the slots in ERROR)
* ``min_count`` (1 if absent) over the slots left: 409 in Nova's fault
  format (``conflictingRequest``) naming the reservation, its slots left
  and its amount, nothing else; nothing is created. A 409, not Nova's
  403 of a quota: the count changes with the reservation's servers (one
  deleted frees a slot), as a conflict with the current state does;
* ``max_count`` over the slots left (``min_count`` within them): lowered
  to the slots left, as Nova lowers it to what a quota allows;
* lease hints (``reserved``, ``lease_params``) with such a flavor: 400
  (the server belongs to the reservation and its lease); the default
  lease does not apply.

Anything else (another project, a lease not ACTIVE, a flavor the caller
cannot see) goes to Nova untouched: Nova or LeaseFilter answer as they
would without this count.

The count is not a lock: two boots at the same instant may both pass it.
LeaseFilter then decides (nova_lease.scheduler.request): each instance
counts every other holder, the build requests older than its own
included, so only as many servers as there are slots get a host; the
others end in ERROR (NoValidHost).
"""

import threading
import time

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import timeutils
import webob.exc

from nova_lease.api_ext import boot_hints
from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease.plugins import flavor as flavor_plugin
from nova_lease.plugins.flavor import holders as slot_holders
from nova_lease.plugins.flavor import slots as slot_rules
from nova_lease import resource_types as types
from nova_lease import status

LOG = logging.getLogger(__name__)

#: ``[nova_lease_api] instance_reservation_overflow`` values.
OVERFLOW_REFUSE = 'refuse'
OVERFLOW_ERROR = 'error'

#: Seconds a flavor's reservation (or none) is reused without asking
#: Nova's API database. A flavor's extra specs are set when the lease API
#: makes it and never change.
FLAVOR_CACHE_SECONDS = 60


def _fault(exc_class, message):
    from nova.api.openstack import wsgi as os_wsgi
    return os_wsgi.Fault(exc_class(explanation=message))


class SlotBoots(object):
    """The count of boots with instance reservations' flavors; one per
    paste filter, thread-safe.
    """

    def __init__(self, conf_source):
        # conf_source(): nova.conf.CONF with the lease options (lazily).
        self._conf_source = conf_source
        self._lock = threading.Lock()
        # {flavor id: (expiry, reservation id or None)}
        self._flavors = {}

    def reservation_of(self, ctx, flavor_ref):
        """The reservation id if ``flavor_ref`` is an instance
        reservation's flavor, else None (also for a flavor that does not
        exist: Nova answers).
        """
        from nova.api.openstack import common
        from nova import exception as nova_exception
        from nova import objects

        if not isinstance(flavor_ref, (str, int)) or isinstance(
                flavor_ref, bool) or str(flavor_ref) == '':
            return None
        flavor_id = common.get_id_from_href(str(flavor_ref))
        now = time.monotonic()
        cached = self._flavors.get(flavor_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            flavor = objects.Flavor.get_by_flavor_id(ctx.elevated(),
                                                     flavor_id)
        except nova_exception.FlavorNotFound:
            return None
        found = (flavor.extra_specs or {}).get(flavor_plugin.FLAVOR_SPEC)
        with self._lock:
            if len(self._flavors) > 1000:
                self._flavors.clear()
            self._flavors[flavor_id] = (now + FLAVOR_CACHE_SECONDS, found)
        return found

    def check(self, ctx, rid, server, hints):
        """The answer to a boot with the flavor of reservation ``rid``:
        ``(fault, False)``, or ``(None, changed)`` to pass it on to Nova
        (``changed``: ``server`` has a lower ``max_count``).
        """
        for key in (boot_hints.RESERVED, boot_hints.LEASE_PARAMS):
            if key in hints:
                return _fault(webob.exc.HTTPBadRequest, (
                    "the flavor %s is instance reservation %s's: its "
                    "servers are the reservation's, they cannot have the "
                    "lease hint '%s'" % (rid, rid, key))), False
        try:
            counts = self._counts(ctx, rid)
        except Exception:
            # Not a lock anyway: LeaseFilter decides.
            LOG.exception('nova_lease: cannot count the servers of '
                          'instance reservation %s; the scheduler will',
                          rid)
            return None, False
        if counts is None:
            return None, False
        left, amount = counts
        if self._overflow() == OVERFLOW_ERROR:
            # As Blazar: the scheduler decides (LeaseFilter), the servers
            # over the slots end in ERROR.
            return None, False
        try:
            low = int(server.get('min_count', 1))
            high = int(server.get('max_count', low))
        except (TypeError, ValueError):
            return None, False      # Nova answers 400
        if low > left:
            return _fault(webob.exc.HTTPConflict, (
                'instance reservation %s has %d of its %d slot(s) left: '
                'this request asks for at least %d server(s) (every '
                'server with its flavor holds a slot, also shelved, in '
                'ERROR, or being built or resized)' % (
                    rid, left, amount, low))), False
        if high > left:
            LOG.info('Boot with the flavor of instance reservation '
                     '%(rid)s: max_count %(high)d lowered to the %(left)d '
                     'slot(s) left',
                     {'rid': rid, 'high': high, 'left': left})
            server['max_count'] = left
            return None, True
        return None, False

    def _overflow(self):
        try:
            return (self._conf_source().nova_lease_api
                    .instance_reservation_overflow)
        except (AttributeError, cfg.Error):
            return OVERFLOW_REFUSE

    def _counts(self, ctx, rid):
        """(slots left, amount) of reservation ``rid`` if it is an ACTIVE
        instance reservation of the caller's project, else None.
        """
        from nova import context as nova_context
        from nova import exception as nova_exception
        from nova import objects

        db = db_api.get_database(self._conf_source())
        now = timeutils.utcnow()
        try:
            res = db_api.reservation_get(db, rid)
            lease = db_api.lease_get(db, res['lease_id'])
        except exception.NotFound:
            return None
        if (not types.is_slots(res) or
                lease['status'] != status.LeaseStatus.ACTIVE or
                lease['project_id'] != ctx.project_id or
                lease['end_date'] <= now):
            return None
        slots = {}
        for allocation in db_api.allocation_list(db, reservation_id=rid):
            slots[allocation['host']] = slots.get(allocation['host'], 0) + 1
        admin = nova_context.get_admin_context()
        try:
            # (Read each time: a reservation's flavor is made again, with
            # another internal id, when its size changes.)
            flavor = objects.Flavor.get_by_flavor_id(admin, rid)
        except nova_exception.FlavorNotFound:
            return None
        holders = slot_holders.read(admin, flavor.id)
        return slot_rules.slots_left(slots, holders), sum(slots.values())
