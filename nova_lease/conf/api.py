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
"""The [nova_lease_api] option group: read by nova-api only.

Each of these options was in ``[nova_lease]`` before, where it is still
read (``deprecated_group``) with a deprecation warning.
"""

from oslo_config import cfg

from nova_lease.conf import group
from nova_lease.conf import lease

GROUP_NAME = 'nova_lease_api'


GROUP = group.Group(
    GROUP_NAME, title='nova_lease options of nova-api',
    help='Read by nova-api only: the lease API, the boot-hint paste '
         'filter and the admission of leased boots. The options shared '
         'by several processes are in [nova_lease].')

API_OPTS = [
    cfg.IntOpt('cleaning_time',
               deprecated_group=lease.GROUP_NAME,
               default=0,
               min=0,
               help="""
Minutes kept free on a reserved host after a host lease ends and before the
next host lease on it may start.
"""),
    cfg.IntOpt('minutes_before_end_lease',
               deprecated_group=lease.GROUP_NAME,
               default=60,
               min=0,
               help="""
Minutes before a lease ends at which its before_end_lease event fires (the
lease.before_end notification, and the plugins' before_end action), unless
the lease sets before_end (before_end_date) itself.

A short lease is warned at most half of its length before its end: with the
default 60, a lease of two hours or more is warned 60 minutes before its
end, a 1-hour lease 30 minutes before, a 10-minute lease 5 minutes before
(never at its start). When a lease's end moves, the warning is armed again
for the new end; if that time has passed already, it fires at once.

Possible values: 0 (no before_end_lease event unless a lease asks for one),
or a number of minutes.
"""),
    cfg.StrOpt('default_lease_duration',
               deprecated_group=lease.GROUP_NAME,
               default='30d',
               help='Length of the lease given by default_lease. '
                    + lease.DURATION_HELP),
    cfg.StrOpt('max_lease_duration',
               deprecated_group=lease.GROUP_NAME,
               default='365d',
               help='Longest lease a project may ask for. '
                    + lease.DURATION_HELP + ' 0 means no limit.'),
    cfg.StrOpt('instance_reservation_overflow',
               deprecated_group=lease.GROUP_NAME,
               default='refuse',
               choices=[
                   ('refuse', "nova-api answers 409 (Nova's "
                              "conflictingRequest) to a boot with an "
                              "instance reservation's flavor whose "
                              "min_count is over the slots left, and "
                              "lowers a max_count over them; nothing is "
                              "created."),
                   ('error', "As Blazar: such a boot goes to Nova "
                             "untouched; the scheduler's LeaseFilter "
                             "gives the servers over the slots no host, "
                             "so they end in ERROR (NoValidHost), as "
                             "Blazar's acceptance tests expect.")],
               help="What a boot over the slots left of an instance "
                    "reservation (a Blazar flavor:instance or "
                    "virtual:instance reservation's flavor) gets. Either "
                    "way no reservation ever runs more servers than its "
                    "amount."),
    cfg.IntOpt('max_lease_retries',
               deprecated_group=lease.GROUP_NAME,
               default=10,
               min=0,
               help="""
The most retries a lease of type "retries" may ask for (its own retries,
lease_params retries or the lease API's retries); more is a 400.
"""),
    cfg.StrOpt('default_lease_type',
               deprecated_group=lease.GROUP_NAME,
               default='scheduled',
               choices=[
                   ('scheduled', 'any start; a failed start is retried '
                                 '(retries, else max_retries)'),
                   ('immediate', 'a lease that starts now is provisioned '
                                 'now or refused (409), never retried; one '
                                 'that starts later is scheduled'),
                   ('retries', 'a failed start is retried up to retries '
                               '(else max_retries) times'),
               ],
               help="""
The type of a lease that does not name one (the lease API's lease_type,
lease_params type). best_effort is never a default: a lease asks for it.
"""),
    cfg.BoolOpt('best_effort_enabled',
                deprecated_group=lease.GROUP_NAME,
                default=False,
                help="""
Whether the lease API takes best_effort host leases, which empty ordinary
compute hosts by migrating other projects' unleased servers away. Off by
default: a best_effort lease is then a 400 naming lease_type. On, creating
one also needs the policy rule nova_lease:leases:create:best_effort
(admin-only by default), and only the hosts of best_effort_aggregate are
ever emptied.
"""),
    cfg.StrOpt('best_effort_aggregate',
               deprecated_group=lease.GROUP_NAME,
               default=None,
               help="""
The name of the Nova host aggregate whose compute hosts a best_effort host
lease may empty (migrate their servers away) and take. Never any other
compute host: unset, or an aggregate that does not exist or is empty, no
host is a candidate and a best_effort lease that needs one is a 409. A host
of this aggregate is still left out when it is disabled, down, in another
aggregate that dedicates it to projects (filter_tenant_id metadata), locked
servers run on it, or it holds a promise (doc/source/admin/best-effort.rst).
"""),
    cfg.StrOpt('region_name',
               deprecated_group=lease.GROUP_NAME,
               help="""
Name of the region this Nova serves, as host reservations may name it.

A physical:host reservation whose ``region`` is another region is refused
with a 400 by the lease API. When unset, the region is ``[placement]
region_name`` of nova.conf, else ``RegionOne`` (Keystone's default).
"""),
    cfg.FloatOpt('admission_inventory_ttl',
                 deprecated_group=lease.GROUP_NAME,
                 default=30.0,
                 min=0.0,
                 help="""
Seconds nova-api reuses its copy of Nova's compute nodes (capacity and
usage of every host, and the free pool) to plan where a future instance
lease goes.

The copy only guides the plan: before anything is promised, the hosts a
plan chose are locked and read again, fresh, from placement (capacity and
usage, including the scheduler's latest claims) and from the free pool
and the host registry; a plan that does not fit is made again with what
was read. A plan that finds no room with the copy is made again with a
fresh read before a lease is refused. So a longer time saves database
reads on every leased boot (about 1,000 compute nodes a read), and only
makes the first choice less good when usage changes fast. When the copy
is older than this, the next admission still uses it while one thread of
nova-api reads the next copy in the background: no admission waits for
that read except the first of each nova-api process.

Possible values:

* 0: read the compute nodes at every admission.
* A positive number of seconds.

Related options:

* [nova_lease] freepool_aggregate
"""),
    cfg.IntOpt('capacity_member_min_hosts',
               deprecated_group=lease.GROUP_NAME,
               default=10,
               min=1,
               help="""
Fewest hosts a project member's view of GET
/v2.1/os-reservation/capacity may be narrowed to with its
availability_zone filter.

Over a few hosts, a member's free capacity shows exactly when another
project holds one of them. A member may filter by a zone only when it
counts at least this many hosts and the hosts of the zones that do not
pass number none or at least as many (else the unfiltered view less the
zones that pass would show them); a zone that holds every host passes.
Other zones are refused with a 403 naming availability_zone. The
unfiltered view always counts every host, and admins
(nova_lease:capacity:all) filter freely. On a cloud of fewer hosts,
members see the whole cloud only; an operator who wants no member view
at all sets nova_lease:capacity:project to admin only.

Possible values:

* 1: members may filter by any zone.
* A larger number of hosts.

Related options:

* none (the rule nova_lease:capacity:project decides who has the view)
"""),
]


def register_opts(conf):
    GROUP.register(conf, API_OPTS)


def list_opts():
    return GROUP.listing(API_OPTS)
