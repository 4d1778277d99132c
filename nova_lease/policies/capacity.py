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
"""Rules for /os-reservation/capacity (capacity over time)."""

from oslo_policy import policy

from nova_lease.policies import base

#: The whole cloud's figures: unleased usage, every lease's promises, the
#: host filters and ``detail=hosts``.
ALL = 'nova_lease:capacity:all'
#: A member's view: the aggregate capacity and free capacity, and the
#: promises of the caller's project's leases only.
PROJECT = 'nova_lease:capacity:project'

_PATH = base.PREFIX + '/capacity'

rules = [
    policy.DocumentedRuleDefault(
        name=ALL, check_str=base.ADMIN,
        description='Show capacity over time for the whole cloud: what '
                    'unleased work uses, what every lease promises and '
                    'what is free, per step; filter by host or aggregate; '
                    'per-host details (detail=hosts).',
        operations=[{'method': 'GET', 'path': _PATH}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=PROJECT, check_str=base.PROJECT_READER_OR_ADMIN,
        description="Show capacity over time as a project member sees it "
                    "(when nova_lease:capacity:all refuses): the capacity "
                    "and free capacity of the cloud and the promises of "
                    "the caller's project's leases, nothing of other "
                    "projects; narrowed to an availability zone only "
                    "when it counts at least [nova_lease_api] "
                    "capacity_member_min_hosts hosts.",
        operations=[{'method': 'GET', 'path': _PATH}],
        scope_types=['project']),
]


def list_rules():
    return rules
