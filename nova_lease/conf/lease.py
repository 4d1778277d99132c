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


def _group():
    # A new OptGroup for every ConfigOpts: oslo.config copies a registered
    # group only shallowly, so one shared OptGroup object would make every
    # ConfigOpts of the process (Nova's CONF, the engine's own) share one
    # dict of the group's options.
    return cfg.OptGroup(
        GROUP_NAME, title='nova_lease options',
        help='Resource reservation (leases) inside Nova. These options are '
             'read by the nova-api paste filter, the scheduler filter and '
             'weigher, and the nova-lease-engine service, all from '
             'nova.conf.')


lease_group = _group()

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
    cfg.FloatOpt('engine_max_sleep',
                 default=10.0,
                 min=0.05,
                 help="""
Longest time, in seconds, nova-lease-engine sleeps between two looks at the
database.

The engine sleeps until its next due event, and no longer than this, so
that events of leases created by other processes (nova-api) since it last
looked are seen within this time. Leases created in the engine's own
process wake it at once.
"""),
    cfg.IntOpt('engine_batch_size',
               default=500,
               min=1,
               help="""
Most events one engine has claimed and not yet recorded.

Due events are claimed in batches and run in parallel on the engine's
worker threads; a smaller batch spreads a burst of events more evenly over
several engine processes. While more than twice ``engine_workers`` actions
are waiting or running, the engine claims again only once a quarter of the
batch is free (a claim costs a transaction whatever its size).
"""),
    cfg.IntOpt('engine_workers',
               default=16,
               min=1,
               help="""
Number of worker threads of one nova-lease-engine that run resource plugin
actions (events of different leases run in parallel; the events of one
lease always run one after the other).
"""),
    cfg.IntOpt('plugin_call_timeout',
               default=600,
               min=1,
               help="""
Seconds one resource plugin action (e.g. unshelving the servers of a lease
and waiting until they are ACTIVE) may take before the engine counts it as
failed and retries the event (see max_retries and retry_interval).

Related options:

* engine_claim_timeout should be larger, so that a live engine's claim is
  never taken over (the engine also refreshes its claims while they run).
"""),
    cfg.IntOpt('engine_shutdown_timeout',
               default=30,
               min=0,
               help="""
Seconds nova-lease-engine waits, after SIGTERM or SIGINT, for the actions
it is running to finish. The claims of actions still running after that are
released, so that another engine runs them again (actions are idempotent).
"""),
    cfg.StrOpt('region_name',
               help="""
Name of the region this Nova serves, as host reservations may name it.

A physical:host reservation whose ``region`` is another region is refused
with a 400 by the lease API. When unset, the region is ``[placement]
region_name`` of nova.conf, else ``RegionOne`` (Keystone's default).
"""),
    cfg.FloatOpt('scheduler_snapshot_ttl',
                 default=3600.0,
                 min=0.0,
                 help="""
Longest time, in seconds, LeaseFilter and LeaseWeigher reuse their
in-memory snapshot of the lease calendar before reading it again in full.

The full read is only a safety net: every change to the promises made
through nova_lease (a lease admitted, deleted, its dates or status
changed, a server linked to its lease, a reservation's status) is written
to a change journal in the side database, in the same transaction, and
every scheduling request checks the journal with a cheap query and
patches its snapshot with the changed reservations before it is answered
(milliseconds; see doc/scheduling.rst). A full read costs about as much
as reading every live allocation and reservation of the side database
(seconds with 100,000 of them, about a minute with a million); it runs
in a background thread of the scheduler while the current snapshot is
used (no request waits for it), and also happens at least every 12 hours
(half the journal's retention), whatever this value.

Possible values:

* 0: start a new full read as soon as the previous one ended (a
  scheduler process busy reading all the time: for tests).
* A positive number of seconds.
"""),
    cfg.ListOpt('notification_topics',
                default=['versioned_notifications'],
                help="""
Topics on which nova-lease-engine's compute hook listens for Nova's
versioned notifications (instance.create.end, instance.delete.end).

It must match Nova's [notifications] versioned_notifications_topics. The
hook reads them with a listener pool of its own (named nova_lease), so
other consumers of the same topics still get every notification. Nova only
sends them with [notifications] notification_format = versioned (or both)
and an [oslo_messaging_notifications] driver; without them the reconcile
pass alone keeps leases right (see reconcile_interval).
"""),
    cfg.IntOpt('reconcile_interval',
               default=60,
               min=0,
               help="""
Seconds between two reconcile passes of nova-lease-engine's compute hook.

A pass repairs what a lost notification missed: servers of leases that
have not started yet are shelved (reserved) if they are running, leased
servers that no longer exist have their reservation deleted (a lease left
without servers ends early), and leases whose servers were never linked
(nova-api died during the boot) are linked or ended. 0 disables the pass.
"""),
]


def register_opts(conf):
    conf.register_group(_group())
    conf.register_opts(LEASE_OPTS, group=GROUP_NAME)


def list_opts():
    return [(lease_group, LEASE_OPTS)]
