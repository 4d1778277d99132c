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
"""Every name nova_lease writes into, or reads from, Nova: defined once.

Server metadata, server tags, scheduler hints, aggregate metadata, flavor
extra specs and the reason of the services the idle-host action disables
are read by other processes (nova-api, nova-scheduler, nova-compute, the
engine, the auditor) and by users and their tools; a name that differs in
one of them breaks a guarantee silently. Modules alias these constants
(``META_LEASE_ID = wire.SERVER_LEASE_ID``); tests/unit/test_wire.py
refuses a second definition of any of them.

Pure: no imports.
"""

# -- Boot hints (``nova boot --hint <name>=<value>``) -----------------------

#: ``--hint reserved=True``: boot a leased server.
HINT_RESERVED = 'reserved'
#: ``--hint lease_params='{...}'``: the lease of a leased server.
HINT_LEASE_PARAMS = 'lease_params'
#: ``--hint reservation=<id>``: boot onto a host reservation's hosts.
HINT_RESERVATION = 'reservation'
#: Internal hints: the nova-api filter adds them, LeaseFilter reads them (a
#: user who sends one gets a 400). The first boot of a leased server ...
HINT_INTERNAL_LEASE_ID = 'nova_lease_id'
#: ... and, in RequestSpecs written by earlier releases, the server that
#: nova-api created at a future lease's start.
HINT_INTERNAL_RESERVATION = 'nova_lease_reservation'

# -- Server metadata and tags -------------------------------------------------

#: The lease of a leased server.
SERVER_LEASE_ID = 'lease_id'
#: Its lease's state as the server's owner sees it.
SERVER_LEASE_STATUS = 'lease_status'
#: The reservation a server belongs to (set on servers booted with
#: ``--hint reservation`` and on those created at a lease's start).
SERVER_RESERVATION_ID = 'lease_reservation_id'
#: ``lease_status`` values written outside the engine's status changes.
SERVER_STATUS_PENDING = 'pending'
SERVER_STATUS_RESERVED = 'reserved'
#: The tag of a server waiting, shelved, for its lease's start.
TAG_RESERVED = 'reserved'

# -- Host reservations' aggregates (metadata) --------------------------------

AGGREGATE_RESERVATION_ID = 'nova_lease_reservation_id'
AGGREGATE_LEASE_ID = 'nova_lease_lease_id'
AGGREGATE_PROJECT_ID = 'nova_lease_project_id'

# -- Instance reservations' flavors (extra spec) ------------------------------

#: The extra spec naming a Blazar instance reservation's flavor's
#: reservation (read by LeaseFilter and the nova-api boot check).
FLAVOR_RESERVATION_SPEC = 'nova_lease:reservation'

# -- Side database: reservation properties Nova-facing code reads ------------

#: An instance lease admitted for a future start: its server is created
#: shelved-offloaded at the boot and unshelved at the start.
PROP_SHELVED_UNTIL_START = 'shelved_until_start'

# -- nova-compute services ---------------------------------------------------

#: What the disabled reason of a service the idle-host action disabled
#: starts with: the engine enables only those again, and a lease's start or
#: update wakes them.
IDLE_HOST_REASON = 'nova_lease idle host'

# -- Messaging ----------------------------------------------------------------

#: Nova's oslo.messaging exchange (``[DEFAULT] control_exchange`` as every
#: Nova process defaults it): Nova publishes its notifications there, the
#: engine listens and publishes there.
NOVA_EXCHANGE = 'nova'
