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
"""The one booking path: every change of what a lease holds.

A lease created through the lease API or by a boot with lease hints, a
reservation update, a date change and a delete all go through
:mod:`.pipeline`, whose steps are the same for every reservation type
(nova_lease.resource_types):

1. the request's shape (the lease API's JSON schemas, the boot hints'
   parser) and its meaning (each type's ``parse``), checked by the
   caller before anything is written;
2. what must exist in Nova before the booking (an instance
   reservation's private flavor and server group: ``prepare``, undone
   when the booking is refused);
3. in ONE writer transaction of the side database, retried on a
   deadlock: the project's lock when a usage limit applies to it, each
   type's booking against the capacity calendar under its host locks
   (``book``, ``move``, ``apply_update``, ``release_after``), the lease
   and its events, then the usage limits of what the project now holds
   (nova_lease.enforcement.check_holding): a refusal rolls all of it
   back;
4. after the commit, what Nova must be told (``after_update``) and the
   engines woken.
"""
