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
"""The [nova_lease_scheduler] option group: read by nova-scheduler only.

Each of these options was in ``[nova_lease]`` before, where it is still
read (``deprecated_group``) with a deprecation warning.
"""

from oslo_config import cfg

from nova_lease.conf import group
from nova_lease.conf import lease

GROUP_NAME = 'nova_lease_scheduler'


GROUP = group.Group(
    GROUP_NAME, title='nova_lease options of nova-scheduler',
    help='Read by nova-scheduler only: LeaseFilter and LeaseWeigher. '
         'The options shared by several processes are in [nova_lease].')

SCHEDULER_OPTS = [
    cfg.FloatOpt('weigher_multiplier',
                 deprecated_group=lease.GROUP_NAME,
                 default=1.0,
                 help="""
Multiplier for LeaseWeigher.

A positive value prefers the hosts where a request fits tightest in time;
0 disables the weigher; a negative value inverts it.
"""),
]


def register_opts(conf):
    GROUP.register(conf, SCHEDULER_OPTS)


def list_opts():
    return GROUP.listing(SCHEDULER_OPTS)
