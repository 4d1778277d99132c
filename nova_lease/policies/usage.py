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
"""Rules for /os-reservation/usage."""

from oslo_policy import policy

from nova_lease.policies import base

GET = 'nova_lease:usage:get'
GET_ALL = 'nova_lease:usage:get_all'

_PATH = base.PREFIX + '/usage'

rules = [
    policy.DocumentedRuleDefault(
        name=GET, check_str=base.PROJECT_READER_OR_ADMIN,
        description="Show the lease usage (reserved and used hours) of one "
                    "project: the caller's own, or the one of "
                    "``project_id`` (checked as the target project).",
        operations=[{'method': 'GET', 'path': _PATH},
                    {'method': 'GET', 'path': _PATH + '?project_id={id}'}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=GET_ALL, check_str=base.ADMIN,
        description='Show the lease usage of every project (without '
                    '``project_id``).',
        operations=[{'method': 'GET', 'path': _PATH}],
        scope_types=['project']),
]


def list_rules():
    return rules
