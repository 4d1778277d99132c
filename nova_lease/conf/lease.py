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

from nova_lease.plugins import types

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
    cfg.StrOpt('instance_reservation_overflow',
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
    cfg.IntOpt('max_lease_retries',
               default=10,
               min=0,
               help="""
The most retries a lease of type "retries" may ask for (its own retries,
lease_params retries or the lease API's retries); more is a 400.
"""),
    cfg.StrOpt('default_lease_type',
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
    cfg.IntOpt('best_effort_timeout',
               default=60,
               min=1,
               help="""
Minutes a best_effort host lease may stay IN_PROGRESS, hunting for hosts (the
servers of the hosts it took being migrated away), counted from its creation.
Then it is TIMEDOUT: the migrations under way are let finish (none is left
half-done), and every host it held is released (doc/source/user/hints.rst,
"Lease types").
"""),
    cfg.BoolOpt('best_effort_cold_migration',
                default=False,
                help="""
Whether a best_effort host lease may cold-migrate (stop, move, start) a
server that Nova refuses to live-migrate, or a stopped one. Off by default:
only live migration, which the server's users do not notice, is used, and a
host with a stopped server is not taken.
"""),
    cfg.IntOpt('best_effort_retry_interval',
               default=30,
               min=1,
               help="""
Seconds between two attempts of a best_effort lease's hunt when a migration
failed or was refused (it is retried until best_effort_timeout, whatever
max_retries says).
"""),
    cfg.IntOpt('retry_interval',
               default=30,
               min=1,
               help='Seconds before the first retry of a failed event; each '
                    'further retry waits twice as long as the one before.'),
    cfg.IntOpt('engine_claim_timeout',
               default=900,
               min=1,
               help="""
Seconds after which an event claimed by an engine that has not finished it
is considered abandoned and may be claimed again by any engine.

An engine renews the claims of the actions it runs every third of this
time, and a dead engine's claims are released as soon as its heartbeat
stops (engine_heartbeat_timeout): this time-out only catches an engine
that still beats but whose loop is stuck.

Related options:

* Must be larger than plugin_call_timeout: nova-lease-engine refuses to
  start otherwise.
* engine_heartbeat_timeout
"""),
    cfg.ListOpt('resource_plugins',
                default=[types.SERVER, types.HOST, types.SLOTS],
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
Longest time, in seconds, nova-lease-engine sleeps between two full looks
at the database.

The engine sleeps until its next due event, and no longer than this. While
it sleeps, it probes the database every engine_probe_interval seconds for
events that other processes (nova-api) created or moved meanwhile, so that
they start on time; leases created in the engine's own process wake it at
once. This bound is a safety net.

It is also the period of the batched poll of the servers that starts wait
for, while Nova's versioned notifications reach the engine (each server is
then looked at when its own notification arrives; see engine_workers).
With several engines a notification reaches one of them: a start another
engine runs sees its server's change within this many seconds.

Related options:

* engine_probe_interval
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

A worker is not held while Nova builds or unshelves the server of a start:
the plugin returns what it waits for, and the engine watches all such
servers at once (one look at a server as soon as its versioned
notification arrives, and one batched status poll of them all: every
second until a notification has arrived, then every engine_max_sleep
seconds while they keep coming), so a burst of starts issues all its Nova
actions without waiting for the first server to be built (one after the
other: see engine_placing_requests).
"""),
    cfg.IntOpt('engine_placing_requests',
               default=1,
               min=0,
               help="""
Most requests that make Nova's scheduler place a server (an unshelve, or
the creation of a server at its lease's start) one nova-lease-engine has
in flight to nova-api at once; 0 means no limit.

Nova's scheduler weighs requests that arrive together against the same
view of its hosts, so a burst of starts sent all at once lands on the
same host (equal weights are broken alike), whose compute then builds
its servers one after the other: twice as slow as the same unshelves
sent by hand on two hosts (benchmarks/wakeup.py). One at a time, as a
script would send them, gives each request a fresher view. (The
servers of instance leases admitted for a future start go to the host
their promise is on; admission spreads leases over the hosts that take
them equally well.) The engine still does not wait for a server to be
built before it asks for the next one (see engine_workers). A request
stops counting 2 seconds after it was sent, answered or not: behind
requests nova-api is slow to answer, the next go one every 2 seconds,
never all at once. While a burst's requests wait for their turn, the
bookkeeping of the servers already running (their lease_status metadata
and reserved tag) waits behind them.
"""),
    cfg.IntOpt('plugin_call_timeout',
               default=600,
               min=1,
               help="""
Seconds one resource plugin action (e.g. deleting the servers of a lease
and waiting until they are gone), or one wait of a start for its server
(built or unshelved, and ACTIVE), may take before the engine counts it as
failed and retries the event (see max_retries and retry_interval).

The abandoned call is cancelled: its thread cannot be interrupted while it
waits for Nova, but it sends no further request to Nova, and before each
request that changes something the engine checks that it still holds the
event's claim.

Related options:

* engine_claim_timeout must be larger: nova-lease-engine refuses to start
  otherwise.
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
(milliseconds; see doc/source/reference/scheduling.rst). A full read
costs about as much as reading every live allocation and reservation of
the side database (seconds with 100,000 of them, about a minute with a
million); it runs
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
    cfg.FloatOpt('admission_inventory_ttl',
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

* freepool_aggregate
"""),
]


# Appended options (issue 12): keep new ones at the end of LEASE_OPTS.
LEASE_OPTS += [
    cfg.FloatOpt('engine_heartbeat_interval',
                 default=1.0,
                 min=0.1,
                 help="""
Seconds between two heartbeats of nova-lease-engine in the side database.

Each beat also looks at the other engines' heartbeats (see
engine_heartbeat_timeout).

Related options:

* engine_heartbeat_timeout must be at least three times larger.
"""),
    cfg.FloatOpt('engine_heartbeat_timeout',
                 default=10.0,
                 min=1.0,
                 help="""
Seconds after which an engine whose heartbeat has not moved is dead: the
engines that see it release its claims at once (its events run again on
another engine, and the lease does not wait engine_claim_timeout).

Engines judge it by their own clock (how long the other's heartbeat
counter has not moved), so clocks need not agree between hosts. An engine
that was only cut off from the database finds its claims gone when it
comes back and sends nothing more to Nova for them.

Possible values:

* At least three times engine_heartbeat_interval (nova-lease-engine
  refuses to start otherwise).

Related options:

* engine_heartbeat_interval
* engine_claim_timeout: catches an engine that beats but is stuck.
"""),
    cfg.FloatOpt('engine_probe_interval',
                 default=0.1,
                 min=0.0,
                 help="""
Seconds between two probes of the side database while nova-lease-engine
sleeps.

A probe is one indexed query on the events table: when the events due
before the engine's next planned look changed (a lease created by nova-api,
a lease deleted or moved), the engine looks again at once. This is how
leases created by other processes start within a second on every database
backend, without any messaging configured.

Possible values:

* 0: no probes; such events are seen within engine_max_sleep.
* A positive number of seconds.

Related options:

* engine_max_sleep
"""),
    cfg.IntOpt('engine_service_check_interval',
               default=3600,
               min=0,
               help="""
Seconds between two checks, by nova-lease-engine, that every
nova-scheduler service Nova reports up has registered in this side
database.

A nova-scheduler that is up but never registered here does not run
LeaseFilter against this database (another [nova_lease_database]
connection, or the filter is not enabled): the engine logs a warning naming
its host.
(nova-api services are not listed by Nova's compute API and cannot be
checked this way; see nova-lease-manage process list.) The check needs a
resource plugin that calls the compute API (virtual:instance or
physical:host).

Possible values:

* 0: only once, when the engine starts.
* A positive number of seconds.
"""),
]


# Appended options (issue 16): the idle-host action.
LEASE_OPTS += [
    cfg.StrOpt('idle_host_action',
               default='none',
               choices=[('none', 'leave idle hosts alone'),
                        ('disable', 'disable the nova-compute service of '
                                    'idle registered hosts, and enable it '
                                    'again before they are needed')],
               help="""
What nova-lease-engine does with registered hosts of the free pool that
nothing is promised on (see GET /v2.1/os-reservation/os-hosts/idle), to
save energy.

With disable, every idle_host_interval seconds the engine disables the
nova-compute service (Nova's os-services API, with a disabled reason that
starts with "nova_lease idle host") of each registered free-pool host that
has nothing promised on it now, that would stay disabled at least
idle_host_min_hours before its next promise comes within
idle_host_wake_minutes, and that runs no server at all. It enables the
service again idle_host_wake_minutes before the host's next promise, as
soon as something is promised on it now, or when the host leaves the
registry or the free pool; the physical:host plugin also enables it when
a lease starts on it. A service disabled by anyone else is never touched.
Each action is logged and notified (host.idle.disable, host.idle.enable).
An operator's power manager can then power off the disabled hosts.

With none, nothing is disabled, and the engine enables at its start the
hosts it disabled before.

Related options:

* idle_host_wake_minutes, idle_host_min_hours, idle_host_interval
* freepool_aggregate
"""),
    cfg.IntOpt('idle_host_wake_minutes',
               default=30,
               min=0,
               help="""
Minutes before a host's next promise (the start of its next allocation)
that nova-lease-engine enables the host it disabled as idle.

Leave the host time to power on and its nova-compute service time to
report before the lease starts.

Related options:

* idle_host_action
"""),
    cfg.FloatOpt('idle_host_min_hours',
                 default=2.0,
                 min=0.0,
                 help="""
Hours an idle host must stay disabled, at least, for nova-lease-engine to
disable it: a host whose next promise comes sooner than this plus
idle_host_wake_minutes is left enabled (a host with no promise at all is
always worth it).

Related options:

* idle_host_action
"""),
    cfg.IntOpt('idle_host_interval',
               default=300,
               min=1,
               help="""
Seconds between two idle-host passes of nova-lease-engine (see
idle_host_action).

A pass lists Nova's compute services and the free pool (two requests),
reads the registered hosts and their future allocations from the side
database, and asks Nova for the servers of each host it is about to
disable. Keep it well under idle_host_wake_minutes, so that a host is
enabled in time.

Related options:

* idle_host_action, idle_host_wake_minutes
"""),
]


# Appended options (issue 28): who sees what of capacity over time.
LEASE_OPTS += [
    cfg.IntOpt('capacity_member_min_hosts',
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
    conf.register_group(_group())
    conf.register_opts(LEASE_OPTS, group=GROUP_NAME)


def list_opts():
    return [(lease_group, LEASE_OPTS)]
