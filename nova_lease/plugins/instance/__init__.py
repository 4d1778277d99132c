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
"""Instance leases (``virtual:instance``): servers that live for a lease.

* :mod:`~nova_lease.plugins.instance.leases`: the service layer that
  records, links, undoes and ends instance leases in the side database
  (the paste filter's and the compute hook's side; no Nova calls).
* :mod:`~nova_lease.plugins.instance.plugin`: the resource plugin that
  creates or unshelves a lease's servers at its start and deletes or
  shelves them at its end (the engine's side; entry point
  ``virtual:instance``).
"""
