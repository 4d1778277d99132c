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
"""Instance reservations the way Blazar makes them: by flavor.

A lease API reservation of ``resource_type`` ``virtual:instance``
(``amount``, ``vcpus``, ``memory_mb``, ``disk_gb``, ``affinity``,
``resource_properties``) or ``flavor:instance`` (``flavor_id``,
``amount``, ``affinity``, ``resource_properties``) promises ``amount``
instance slots of that size on registered hosts (the free pool) over the
lease's interval:

* :mod:`.request`: the reservation request, validated;
* :mod:`.allocation`: the slots, chosen and booked under per-host locks
  in the lease's writer transaction (one allocation row per slot; host
  leases see those hosts busy);
* nova_lease.api_ext.nova_flavors: the reservation's private flavor (its
  id is the reservation id) and server group, made when the lease is;
* :mod:`.plugin`: the engine's side (``flavor:instance``): at start the
  slot hosts go into an aggregate named after the reservation (they stay
  in the free pool) and the project gets the flavor; at the end the
  servers booted with the flavor are deleted, then the flavor, the
  server group and the aggregate.

The reservation never has more servers than slots: nova-api counts a
boot with the flavor against the slots left (nova_lease.api_ext.
slot_boots: 409 beyond them), and LeaseFilter passes each instance only
on the reservation's hosts with a slot left, while the lease is ACTIVE
(nova_lease.scheduler.request), by the rules of :mod:`.slots` on the
servers :mod:`.holders` reads from Nova; a server that holds a slot
keeps it when it moves.
"""

from nova_lease import resource_types as types
from nova_lease import wire

#: The reservations' stored resource type (both Blazar types).
RESOURCE_TYPE = types.SLOTS
#: Blazar's two instance reservation types of the lease API: by size
#: (``virtual:instance``) and by flavor (``flavor:instance``).
API_TYPES = types.FACTS[types.SLOTS].api_names
BY_SIZE, BY_FLAVOR = API_TYPES
#: Flavor extra spec naming the reservation (read by LeaseFilter).
FLAVOR_SPEC = wire.FLAVOR_RESERVATION_SPEC
