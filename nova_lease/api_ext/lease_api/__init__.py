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
"""The Blazar-v1-compatible lease API, served inside nova-api.

Mounted by the paste filter under ``/v2.1/os-reservation`` (and
``/v2.1/<project_id>/os-reservation``); see doc/source/user/api.rst.
Resources, bodies and field names are Blazar v1's, so python-blazarclient
and ``openstack reservation ...`` work unchanged:

======  =================================  ====================  =====
Method  Path (below /os-reservation)       Rule                  OK
======  =================================  ====================  =====
GET     /leases[?all_projects=1]           leases:list[_all]     200
POST    /leases                            leases:create         201
GET     /leases/{id}                       leases:show           200
PUT     /leases/{id}                       leases:update         200
DELETE  /leases/{id}                       leases:delete         204
GET     /os-hosts                          os-hosts:list         200
POST    /os-hosts                          os-hosts:create       201
GET     /os-hosts/{id}                     os-hosts:show         200
PUT     /os-hosts/{id}                     os-hosts:update       200
DELETE  /os-hosts/{id}                     os-hosts:delete       204
GET     /os-hosts/allocations              os-hosts:allocations  200
GET     /os-hosts/{id}/allocation          os-hosts:allocations  200
GET     /os-hosts/properties               os-hosts:list         200
GET     /os-hosts/idle (1.3)               os-hosts:allocations  200
GET     /usage (1.4)                       usage:get[_all]       200
GET     /capacity (1.5)                    capacity:all|project  200
======  =================================  ====================  =====

A route marked (1.x) needs that microversion (``OpenStack-API-Version:
reservation 1.x``; see :mod:`.microversion`): without the header a
request is served at 1.0, Blazar's v1 exactly.

Errors are JSON in Blazar's shape, which python-blazarclient prints
(``{"error_code": 409, "error_name": "NotEnoughHosts", "error_message":
"..."}``): 400 for bad input (the message names the field), 403 when a
policy refuses, 404 for an unknown id -- and for a lease of another
project, so that lease ids of other projects cannot be probed -- 405 for
a wrong method, 409 for conflicts (no free hosts, a lease mid-transition).
Anything unexpected is logged and answered with a 500 in the same shape.

The package, as placement's API:

* :mod:`.router`: the route table (:data:`.router.ROUTES`: path template
  -> {method: handler and the schemas of its body and query string})
  and :func:`.router.handle`, called by the paste filter;
* :mod:`.handlers`: one module of handlers per resource (``leases``,
  ``hosts`` for ``/os-hosts``, ``usage`` for ``/usage``, ``root`` for
  the version document);
  :mod:`.lease_updates` validates the new dates of a ``PUT
  /leases/{id}``; every create, update, date change and delete goes
  through the booking pipeline (nova_lease.booking);
* :mod:`.schemas`: one module of JSON schemas per resource;
  :mod:`.validation` reads bodies and checks bodies and query strings
  against them before a handler runs, answering a refusal as a 400 in
  the shape and words of the parsers (:mod:`nova_lease.params`);
* :mod:`.views`: how leases, hosts and allocations are shown;
* :mod:`.errors`: the shared errors and JSON responses; :mod:`.common`:
  options, database and clock for the handlers;
* :mod:`.microversion`: the versions, what each adds, and the
  negotiation of the ``OpenStack-API-Version`` header.
"""
