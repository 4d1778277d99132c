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
"""The [nova_lease_enforcement] option group: usage limits per project."""

from oslo_config import cfg

from nova_lease.conf import group

GROUP_NAME = 'nova_lease_enforcement'

_LIMIT_HELP = """
Checked when a lease is created (a boot with lease hints, POST
/os-reservation/leases) and when its dates change (PUT
/os-reservation/leases/{id}); a request over the limit is refused with a
403 that names this option, and nothing is recorded.

Possible values:

* 0 (the default): no limit.
* A positive number.

Related options:

* exempt_projects
"""


GROUP = group.Group(
    GROUP_NAME, title='nova_lease usage enforcement',
    help='Limits on what one project may lease (Blazar\'s usage '
         'enforcement). The longest lease is [nova_lease_api] '
         'max_lease_duration. Read by the nova-api paste filter from '
         'nova.conf.')

ENFORCEMENT_OPTS = [
    cfg.StrOpt('max_start_ahead',
               default='0',
               help="""
How far in the future a lease may start.

A lease whose start is further from now than this is refused (403), so
that no project books capacity years ahead. A duration is a number of
seconds, or a number followed by "m" (minutes), "h" (hours) or "d"
(days), e.g. "365d". No limit by default, as in Blazar (whose own
acceptance tests lease hosts in 2050).

Possible values:

* 0: no limit (default).
* A duration.

Related options:

* exempt_projects
"""),
    cfg.IntOpt('max_leases_per_project',
               default=0,
               min=0,
               help="""
Most leases a project may hold that have not ended (any status but
TERMINATED and ERROR, end in the future), counting the new one.
""" + _LIMIT_HELP),
    cfg.IntOpt('max_promised_vcpus',
               default=0,
               min=0,
               help="""
Most vCPUs the instance leases of a project may hold at any one time:
the peak, over the new lease's interval, of the flavors' vCPUs of every
server of the project's leases that have not ended, the new lease's
included (default leases count too). Host leases count in
max_promised_hosts.
""" + _LIMIT_HELP),
    cfg.IntOpt('max_promised_memory_mb',
               default=0,
               min=0,
               help="""
Most RAM, in MB, the instance leases of a project may hold at any one time
(the peak, as for max_promised_vcpus).
""" + _LIMIT_HELP),
    cfg.IntOpt('max_promised_disk_gb',
               default=0,
               min=0,
               help="""
Most disk, in GB, the instance leases of a project may hold at any one
time (the peak, as for max_promised_vcpus).
""" + _LIMIT_HELP),
    cfg.IntOpt('max_promised_hosts',
               default=0,
               min=0,
               help="""
Most compute hosts the host leases of a project may hold at any one time:
the peak, over the new lease's interval, of the hosts allocated to the
project's host leases, plus the ``max`` of each host reservation of the
new lease (or, for a lease whose dates change, its own hosts).
""" + _LIMIT_HELP),
    cfg.ListOpt('exempt_projects',
                default=[],
                help="""
Project ids to which no limit of this group applies (operators' own
projects). [nova_lease_api] max_lease_duration still applies.
"""),
]


def register_opts(conf):
    GROUP.register(conf, ENFORCEMENT_OPTS)


def list_opts():
    return GROUP.listing(ENFORCEMENT_OPTS)
