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
"""The [nova_lease] option group."""

from oslo_config import cfg

GROUP_NAME = 'nova_lease'
lease_group = cfg.OptGroup(
    GROUP_NAME, title='nova_lease options',
    help='Resource reservation (leases) inside Nova. These options are read '
         'by the nova-api paste filter, the scheduler filter and weigher, '
         'and the nova-lease-engine service, all from nova.conf.')

DURATION_HELP = ('A duration is a number of seconds, or a number followed by '
                 '"m" (minutes), "h" (hours) or "d" (days), e.g. "90m".')

LEASE_OPTS = [
    cfg.StrOpt('connection',
               default='',
               secret=True,
               help="""
SQLAlchemy URL of the nova_lease side database.

Possible values:

* Empty (the default): an SQLite file named nova_lease.sqlite under
  [DEFAULT] state_path. Good for one all-in-one host only.
* Any SQLAlchemy URL, e.g. mysql+pymysql://nova_lease:PASS@db/nova_lease
  or postgresql+psycopg2://nova_lease:PASS@db/nova_lease.

Related options:

* Run nova-lease-manage db sync after changing it.
"""),
    cfg.StrOpt('freepool_aggregate',
               default='freepool',
               help="""
Name of the host aggregate that holds the reservable compute hosts.

Hosts in this aggregate are reserved only through host leases
(physical:host); the scheduler places no unleased instance on them.
"""),
    cfg.IntOpt('cleaning_time',
               default=0,
               min=0,
               help="""
Minutes kept free on a reserved host after a host lease ends and before the
next host lease on it may start.
"""),
    cfg.IntOpt('minutes_before_end_lease',
               default=60,
               min=0,
               help="""
Minutes before a lease ends at which its before_end_lease event fires.

The event time is clamped to the lease start. 0 disables the event unless a
lease sets before_end explicitly.
"""),
    cfg.BoolOpt('default_lease',
                default=False,
                help="""
Give every server booted without lease hints a lease.

The lease starts now and lasts default_lease_duration; at its end the server
is handled like any lease end (see on_end).

Related options:

* default_lease_duration
* default_lease_exempt_projects
"""),
    cfg.StrOpt('default_lease_duration',
               default='30d',
               help='Length of the lease given by default_lease. '
                    + DURATION_HELP),
    cfg.ListOpt('default_lease_exempt_projects',
                default=[],
                help='Project ids that never get a default lease.'),
    cfg.StrOpt('max_lease_duration',
               default='365d',
               help='Longest lease a project may ask for. ' + DURATION_HELP
                    + ' 0 means no limit.'),
    cfg.StrOpt('on_end',
               default='delete',
               choices=[('delete', 'Delete the leased instances.'),
                        ('shelve', 'Shelve-offload the leased instances.')],
               help='What happens to leased instances when their lease ends, '
                    'unless the lease says otherwise (lease_params on_end).'),
    cfg.IntOpt('max_retries',
               default=3,
               min=0,
               help="""
How many times the engine retries a lease event whose action failed, before
it marks the event and the lease ERROR. A lease may ask for its own number
(lease_params retries).
"""),
    cfg.IntOpt('retry_interval',
               default=30,
               min=1,
               help='Seconds before the first retry of a failed event; each '
                    'further retry waits twice as long as the one before.'),
    cfg.IntOpt('engine_claim_timeout',
               default=300,
               min=1,
               help="""
Seconds after which an event claimed by an engine that has not finished it
is considered abandoned (the engine died) and may be claimed again by any
engine.
"""),
    cfg.ListOpt('resource_plugins',
                default=['virtual:instance', 'physical:host'],
                help='Resource plugins the engine loads, by name in the '
                     'nova_lease.resource_plugins entry point namespace.'),
    cfg.FloatOpt('weigher_multiplier',
                 default=1.0,
                 help="""
Multiplier for LeaseWeigher.

A positive value prefers the hosts where a request fits tightest in time;
0 disables the weigher; a negative value inverts it.
"""),
]


def register_opts(conf):
    conf.register_group(lease_group)
    conf.register_opts(LEASE_OPTS, group=lease_group)


def list_opts():
    return [(lease_group, LEASE_OPTS)]
