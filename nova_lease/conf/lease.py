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
"""The [nova_lease] option group: the options several processes read.

The options that one process only reads are in the groups named after
it: [nova_lease_api] (nova_lease.conf.api), [nova_lease_scheduler]
(nova_lease.conf.scheduler) and [nova_lease_engine]
(nova_lease.conf.engine).
"""

from oslo_config import cfg

from nova_lease.conf import group

GROUP_NAME = 'nova_lease'


GROUP = group.Group(
    GROUP_NAME, title='nova_lease options',
    help='Resource reservation (leases) inside Nova. Each of these '
         'options is read by more than one process (nova-api, '
         'nova-scheduler, nova-lease-engine, nova-lease-manage): give '
         'it the same value in the nova.conf of each. The options that '
         'one process only reads are in [nova_lease_api], '
         '[nova_lease_scheduler] and [nova_lease_engine].')

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
    cfg.BoolOpt('default_lease',
                default=False,
                help="""
Give every server booted without lease hints a lease.

The lease starts now and lasts default_lease_duration; at its end the server
is handled like any lease end (see on_end).

Related options:

* [nova_lease_api] default_lease_duration
* default_lease_exempt_projects
* [nova_lease_engine] on_end
"""),
    cfg.ListOpt('default_lease_exempt_projects',
                default=[],
                help='Project ids that never get a default lease.'),
    cfg.IntOpt('max_retries',
               default=3,
               min=0,
               help="""
How many times the engine retries a lease event whose action failed, before
it marks the event and the lease ERROR. A lease may ask for its own number
(lease_params retries).
"""),
    cfg.BoolOpt('best_effort_cold_migration',
                default=False,
                help="""
Whether a best_effort host lease may cold-migrate (stop, move, start) a
server that Nova refuses to live-migrate, or a stopped one. Off by default:
only live migration, which the server's users do not notice, is used, and a
host with a stopped server is not taken.
"""),
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

* Must be larger than [nova_lease_engine] plugin_call_timeout:
  nova-lease-engine refuses to start otherwise.
* engine_heartbeat_timeout
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
]


# Appended options (issue 12): keep new ones at the end of LEASE_OPTS.
LEASE_OPTS += [
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

* At least three times [nova_lease_engine] engine_heartbeat_interval
  (nova-lease-engine refuses to start otherwise).

Related options:

* [nova_lease_engine] engine_heartbeat_interval
* engine_claim_timeout: catches an engine that beats but is stuck.
"""),
]


# Appended options (issue 16): the idle-host action.
LEASE_OPTS += [
    cfg.IntOpt('idle_host_wake_minutes',
               default=30,
               min=0,
               help="""
Minutes before a host's next promise (the start of its next allocation)
that nova-lease-engine enables the host it disabled as idle.

Leave the host time to power on and its nova-compute service time to
report before the lease starts.

Related options:

* [nova_lease_engine] idle_host_action
"""),
]


def register_opts(conf):
    GROUP.register(conf, LEASE_OPTS)


def list_opts():
    return GROUP.listing(LEASE_OPTS)
