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
"""``[nova_lease_database]``: the side database, with oslo.db's options.

The same options, names and meanings as oslo.db's ``[database]`` (and
placement's ``[placement_database]``), in a group of their own so that
they never mix with Nova's databases in nova.conf.
"""

from oslo_config import cfg

from nova_lease.conf import group

GROUP_NAME = 'nova_lease_database'


GROUP = group.Group(
    GROUP_NAME, title='nova_lease side database options',
    help='The nova_lease side database (leases, reservations, events, '
         'host allocations). nova-api, nova-scheduler and '
         'nova-lease-engine must all use the same one. The options '
         'are oslo.db\'s.')

DATABASE_OPTS = [
    cfg.StrOpt('connection',
               secret=True,
               deprecated_opts=[cfg.DeprecatedOpt('connection',
                                                  group='nova_lease')],
               help="""
SQLAlchemy URL of the nova_lease side database.

nova-api (the paste filter), nova-scheduler (LeaseFilter, LeaseWeigher) and
nova-lease-engine must all use the same database: each of them refuses to
start while this is empty, and logs the identity of the database it uses
(created by nova-lease-manage db sync) when it starts.

Possible values:

* An SQLAlchemy URL, e.g. mysql+pymysql://nova_lease:PASS@db/nova_lease
  or postgresql+psycopg2://nova_lease:PASS@db/nova_lease.
* An explicit SQLite file, e.g. sqlite:////var/lib/nova/nova_lease.sqlite,
  for a single all-in-one host only (every process must run on it).
* Empty (the default): an error.

Related options:

* Run nova-lease-manage db sync after changing it;
  nova-lease-manage process list shows which processes use the database.
* Formerly ``[nova_lease] connection``, which is still read when this is
  not set.
"""),
    cfg.StrOpt('connection_parameters',
               default='',
               help="""
Optional URL parameters to append onto the connection URL at connect time;
specify as param1=value1&param2=value2&... On MySQL/MariaDB, charset=utf8mb4
is added unless the URL or these parameters name a charset.
"""),
    cfg.BoolOpt('sqlite_synchronous',
                default=True,
                help="""
If True, SQLite uses synchronous mode NORMAL (with its write-ahead log);
if False, OFF (faster, and a power loss may lose the last transactions).
"""),
    cfg.StrOpt('mysql_sql_mode',
               default='TRADITIONAL',
               help="""
The SQL mode to be used for MySQL sessions. This option, including the
default, overrides any server-set SQL mode. To use whatever SQL mode is set
by the server configuration, set this to no value. Example: mysql_sql_mode=
"""),
    cfg.IntOpt('connection_recycle_time',
               default=3600,
               help="""
Connections which have been present in the connection pool longer than this
number of seconds will be replaced with a new one the next time they are
checked out from the pool.
"""),
    cfg.IntOpt('max_pool_size',
               default=5,
               help="""
Maximum number of SQL connections to keep open in a pool. Setting a value
of 0 indicates no limit. (An SQLite file database keeps this many idle
connections at most, and opens more when they are all in use.)
"""),
    cfg.IntOpt('max_overflow',
               default=50,
               help="""
If set, use this value for max_overflow with SQLAlchemy: connections opened
beyond max_pool_size while they are all in use. nova-lease-engine opens up
to engine_workers + 2 connections at once.
"""),
    cfg.IntOpt('pool_timeout',
               help="""
If set, use this value for pool_timeout with SQLAlchemy: seconds to wait
for a connection when the pool and its overflow are all in use.
"""),
    cfg.IntOpt('max_retries',
               default=0,
               min=-1,
               help="""
Maximum number of database connection retries when the first connection of
a process is made. 0 (the default): no retry, the first transaction fails
at once (LeaseFilter then fails closed, and nova-lease-engine retries in its
own loop); -1: an infinite retry count.
"""),
    cfg.IntOpt('retry_interval',
               default=10,
               help="""
Interval between retries of opening the first SQL connection (see
max_retries).
"""),
    cfg.IntOpt('connection_debug',
               default=0,
               min=0,
               max=100,
               help="""
Verbosity of SQL debugging information: 0=None, 100=Everything.
"""),
    cfg.BoolOpt('connection_trace',
                default=False,
                help="""
Add Python stack traces to SQL as comment strings.
"""),
]


def register_opts(conf):
    GROUP.register(conf, DATABASE_OPTS)


def list_opts():
    return GROUP.listing(DATABASE_OPTS)
