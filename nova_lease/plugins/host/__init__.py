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
"""Host leases (``physical:host``): whole hosts reserved for a lease.

* :mod:`~nova_lease.plugins.host.request`: a reservation of a lease body,
  validated (:class:`~nova_lease.plugins.host.request.HostRequest`).
* :mod:`~nova_lease.plugins.host.matching`: whether a host satisfies a
  request (extra specs and Blazar's JSON queries).
* :mod:`~nova_lease.plugins.host.registry`: the reservable hosts
  (``os-hosts``), cached by each process.
* :mod:`~nova_lease.plugins.host.allocation`: which hosts a lease gets,
  booked in the side database (the lease API's side).
* :mod:`~nova_lease.plugins.host.plugin`: the resource plugin that moves
  the hosts in and out of the lease's Nova aggregate at its start and end
  (the engine's side; entry point ``physical:host``).
"""
