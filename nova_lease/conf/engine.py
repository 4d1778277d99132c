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
"""The [nova_lease_engine] option group: read by nova-lease-engine only.

Each of these options was in ``[nova_lease]`` before, where it is still
read (``deprecated_group``) with a deprecation warning.
"""

from oslo_config import cfg

from nova_lease.conf import group
from nova_lease.conf import lease
from nova_lease import resource_types as types

GROUP_NAME = 'nova_lease_engine'


GROUP = group.Group(
    GROUP_NAME, title='nova_lease options of nova-lease-engine',
    help='Read by nova-lease-engine only: its event loop, the resource '
         "plugins that start and end leases, its compute hook (Nova's "
         'notifications and the reconcile pass) and the idle-host '
         'action. The options shared by several processes are in '
         '[nova_lease].')

ENGINE_OPTS = [
    cfg.StrOpt('on_end',
               deprecated_group=lease.GROUP_NAME,
               default='delete',
               choices=[('delete', 'Delete the leased instances.'),
                        ('shelve', 'Shelve-offload the leased instances.')],
               help='What happens to leased instances when their lease ends, '
                    'unless the lease says otherwise (lease_params on_end).'),
    cfg.IntOpt('best_effort_timeout',
               deprecated_group=lease.GROUP_NAME,
               default=60,
               min=1,
               help="""
Minutes a best_effort host lease may stay IN_PROGRESS, hunting for hosts (the
servers of the hosts it took being migrated away), counted from its creation.
Then it is TIMEDOUT: the migrations under way are let finish (none is left
half-done), and every host it held is released (doc/source/user/hints.rst,
"Lease types").
"""),
    cfg.IntOpt('best_effort_retry_interval',
               deprecated_group=lease.GROUP_NAME,
               default=30,
               min=1,
               help="""
Seconds between two attempts of a best_effort lease's hunt when a migration
failed or was refused (it is retried until best_effort_timeout, whatever
max_retries says).
"""),
    cfg.IntOpt('retry_interval',
               mutable=True,
               deprecated_group=lease.GROUP_NAME,
               default=30,
               min=1,
               help='Seconds before the first retry of a failed event; each '
                    'further retry waits twice as long as the one before.'),
    cfg.ListOpt('resource_plugins',
                deprecated_group=lease.GROUP_NAME,
                default=[types.SERVER, types.HOST, types.SLOTS],
                help='Resource plugins the engine loads, by name in the '
                     'nova_lease.resource_plugins entry point namespace.'),
    cfg.FloatOpt('engine_max_sleep',
                 mutable=True,
                 deprecated_group=lease.GROUP_NAME,
                 default=10.0,
                 min=0.05,
                 help="""
Longest time, in seconds, nova-lease-engine sleeps between two full looks
at the database.

The engine sleeps until its next due event, and no longer than this. While
it sleeps, it probes the database every engine_probe_interval seconds for
events that other processes (nova-api) created or moved meanwhile, so that
they start on time. This bound is a safety net.

It is also the period of the batched poll of the servers that starts wait
for, while Nova's versioned notifications reach the engine (each server is
then looked at when its own notification arrives; see engine_workers).
With several engines a notification reaches one of them: a start another
engine runs sees its server's change within this many seconds.

Related options:

* engine_probe_interval
"""),
    cfg.IntOpt('engine_batch_size',
               mutable=True,
               deprecated_group=lease.GROUP_NAME,
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
               deprecated_group=lease.GROUP_NAME,
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
               deprecated_group=lease.GROUP_NAME,
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
               deprecated_group=lease.GROUP_NAME,
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

* [nova_lease] engine_claim_timeout must be larger: nova-lease-engine
  refuses to start otherwise.
"""),
    cfg.IntOpt('lost_delete_timeout',
               default=900,
               min=60,
               help="""
Seconds after which the engine takes a server that Nova shows in task state
``deleting`` as a delete Nova lost, when it deletes that server at the end
of its lease.

Nova sets the task state before it casts the delete to the server's
compute: if nova-api dies in between, or the cast is lost, the server stays
``deleting`` for good and Nova ignores every later delete of it. A lease
ending then would never end. When the server's last update is older than
this, the engine resets its state (Nova's os-resetState, to ``error``,
journaled like every action of the engine) and deletes it again. A delete
that is only slow is left alone until then: give the slowest delete of
your computes (volumes detached, disks removed) with a margin.
"""),
    cfg.IntOpt('engine_shutdown_timeout',
               mutable=True,
               deprecated_group=lease.GROUP_NAME,
               default=30,
               min=0,
               help="""
Seconds nova-lease-engine waits, after SIGTERM or SIGINT, for the actions
it is running to finish. The claims of actions still running after that are
released, so that another engine runs them again (actions are idempotent).
"""),
    cfg.ListOpt('notification_topics',
                deprecated_group=lease.GROUP_NAME,
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
               deprecated_group=lease.GROUP_NAME,
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
    cfg.FloatOpt('engine_heartbeat_interval',
                 deprecated_group=lease.GROUP_NAME,
                 default=1.0,
                 min=0.1,
                 help="""
Seconds between two heartbeats of nova-lease-engine in the side database.

Each beat also looks at the other engines' heartbeats (see
engine_heartbeat_timeout).

Related options:

* [nova_lease] engine_heartbeat_timeout must be at least three times
  larger.
"""),
    cfg.FloatOpt('engine_probe_interval',
                 mutable=True,
                 deprecated_group=lease.GROUP_NAME,
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
               deprecated_group=lease.GROUP_NAME,
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
    cfg.StrOpt('idle_host_action',
               deprecated_group=lease.GROUP_NAME,
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

* idle_host_min_hours, idle_host_interval
* [nova_lease] idle_host_wake_minutes, [nova_lease] freepool_aggregate
"""),
    cfg.FloatOpt('idle_host_min_hours',
                 mutable=True,
                 deprecated_group=lease.GROUP_NAME,
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
               mutable=True,
               deprecated_group=lease.GROUP_NAME,
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

* idle_host_action, [nova_lease] idle_host_wake_minutes
"""),
]


def register_opts(conf):
    GROUP.register(conf, ENGINE_OPTS)


def list_opts():
    return GROUP.listing(ENGINE_OPTS)
