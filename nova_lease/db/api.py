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
"""The nova_lease side database: every function, by resource.

This module gathers the public functions of the modules of nova_lease.db
(one per resource, as placement's objects): :mod:`.leases`,
:mod:`.reservations`, :mod:`.events`, :mod:`.allocations`, :mod:`.hosts`,
:mod:`.locks`, the change journal (:mod:`.changes`), the capacity reads
(:mod:`.capacity`), the engine's claims (:mod:`.claims`) and the processes
(:mod:`.processes`), on the transactions of :mod:`.transaction` (oslo.db's
enginefacade). They have no business rules: which status may follow which
lives in nova_lease.status; here a status is a string and
``expected_status`` is a compare-and-set guard.

Conventions:

* Every function takes ``db`` first: a :class:`Database`, or a Session
  yielded by ``Database.reader()``/``Database.writer()`` to run inside the
  caller's transaction (e.g. ``lock_hosts`` + ``allocation_list`` +
  ``lease_create`` as one admission-control transaction). A function that
  writes refuses a reader session.
* Functions return plain dicts (detached, JSON-friendly except that
  datetimes stay naive UTC ``datetime``), or lists of them.
* Missing rows raise a ``*NotFound`` (404); a failed compare-and-set raises
  :class:`StatusConflict` (409); a duplicate id/name raises a
  ``*Exists`` (409); an unknown field raises :class:`InvalidField` (400).
  Database failures surface as oslo_db exceptions (``DBConnectionError``,
  ``DBDeadlock``, ...). Callers that open their own transactions may wrap
  them with :data:`retry_on_deadlock`.
"""

from nova_lease.db import actions
from nova_lease.db import allocations
from nova_lease.db import capacity
from nova_lease.db import changes
from nova_lease.db import claims
from nova_lease.db import common
from nova_lease.db import events
from nova_lease.db import hosts
from nova_lease.db import leases
from nova_lease.db import locks
from nova_lease.db import processes
from nova_lease.db import reservations
from nova_lease.db import transaction

# Transactions.
Database = transaction.Database
TransactionError = transaction.TransactionError
get_database = transaction.get_database
cached_database = transaction.cached_database
reset_databases = transaction.reset_databases
retry_on_deadlock = transaction.retry_on_deadlock
url_of = transaction.url_of

# Errors and the order of events due at the same time.
EVENT_TYPE_ORDER = common.EVENT_TYPE_ORDER
LeaseNotFound = common.LeaseNotFound
ReservationNotFound = common.ReservationNotFound
EventNotFound = common.EventNotFound
AllocationNotFound = common.AllocationNotFound
HostNotFound = common.HostNotFound
StatusConflict = common.StatusConflict
LeaseExists = common.LeaseExists
ReservationExists = common.ReservationExists
EventExists = common.EventExists
HostExists = common.HostExists
InvalidField = common.InvalidField

# Leases.
lease_create = leases.lease_create
lease_get = leases.lease_get
lease_list = leases.lease_list
lease_names = leases.lease_names
lease_update = leases.lease_update
lease_destroy = leases.lease_destroy

# Reservations and boot requests.
reservation_create = reservations.reservation_create
reservation_get = reservations.reservation_get
reservation_list = reservations.reservation_list
reservation_update = reservations.reservation_update
reservation_destroy = reservations.reservation_destroy
reservations_link = reservations.reservations_link
reservation_lease_ids = reservations.reservation_lease_ids

# Events.
event_create = events.event_create
event_get = events.event_get
event_list = events.event_list
event_next_time = events.event_next_time
event_update = events.event_update
event_destroy = events.event_destroy

# Host allocations.
allocation_create = allocations.allocation_create
allocation_list = allocations.allocation_list
allocation_busy = allocations.allocation_busy
allocation_update = allocations.allocation_update
allocation_destroy = allocations.allocation_destroy
allocation_destroy_by_reservation = (
    allocations.allocation_destroy_by_reservation)
allocation_cut = allocations.allocation_cut

# The host registry.
HOSTS_GENERATION = hosts.HOSTS_GENERATION
host_fingerprint = hosts.host_fingerprint
host_create = hosts.host_create
host_get = hosts.host_get
host_get_by_hostname = hosts.host_get_by_hostname
host_list = hosts.host_list
host_versions = hosts.host_versions
host_update = hosts.host_update
host_destroy = hosts.host_destroy

# Named locks.
lock = locks.lock
lock_hosts = locks.lock_hosts

# The change journal.
CHANGE_RETENTION = changes.CHANGE_RETENTION
change_prune = changes.change_prune
change_probe = changes.change_probe
change_rows = changes.change_rows

# Capacity reads.
live_allocation_rows = capacity.live_allocation_rows
live_reservation_rows = capacity.live_reservation_rows
span_lookback = capacity.span_lookback
window_allocation_items = capacity.window_allocation_items
window_allocation_rows = capacity.window_allocation_rows
linked_instance_rows = capacity.linked_instance_rows
registered_hostnames = capacity.registered_hostnames
project_live_lease_count = capacity.project_live_lease_count
project_instance_rows = capacity.project_instance_rows
project_host_rows = capacity.project_host_rows
live_reservations_with_allocations = (
    capacity.live_reservations_with_allocations)
live_reservation_allocation_rows = capacity.live_reservation_allocation_rows

# The engine's claims.
EVENT_LIFECYCLE_ORDER = claims.EVENT_LIFECYCLE_ORDER
END_LOOKBACK = claims.END_LOOKBACK
engine_claim_events = claims.engine_claim_events
engine_complete_events = claims.engine_complete_events
engine_refresh_claims = claims.engine_refresh_claims
engine_release_events = claims.engine_release_events
engine_recover_events = claims.engine_recover_events
engine_next_event_time = claims.engine_next_event_time
engine_claims_held = claims.engine_claims_held
engine_claim_held = claims.engine_claim_held
engine_probe = claims.engine_probe

# Processes and the database identity.
database_identity = processes.database_identity
database_identity_create = processes.database_identity_create
process_register = processes.process_register
process_heartbeat = processes.process_heartbeat
process_stop = processes.process_stop
process_list = processes.process_list
process_prune = processes.process_prune
engine_release_dead = processes.engine_release_dead

# The action journal of the engine's gate.
action_record = actions.action_record
action_update = actions.action_update
action_list = actions.action_list
action_purge = actions.action_purge
server_links = actions.server_links
