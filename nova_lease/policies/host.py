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
"""Rules for /os-reservation/os-hosts (reservable compute hosts)."""

from oslo_policy import policy

from nova_lease.policies import base

LIST = 'nova_lease:os-hosts:list'
SHOW = 'nova_lease:os-hosts:show'
CREATE = 'nova_lease:os-hosts:create'
UPDATE = 'nova_lease:os-hosts:update'
DELETE = 'nova_lease:os-hosts:delete'
ALLOCATIONS = 'nova_lease:os-hosts:allocations'

_COLLECTION = base.PREFIX + '/os-hosts'
_ITEM = _COLLECTION + '/{host_id}'

rules = [
    policy.DocumentedRuleDefault(
        name=LIST, check_str=base.ADMIN,
        description='List reservable hosts.',
        operations=[{'method': 'GET', 'path': _COLLECTION}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=SHOW, check_str=base.ADMIN,
        description='Show a reservable host and its extra capabilities.',
        operations=[{'method': 'GET', 'path': _ITEM}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=CREATE, check_str=base.ADMIN,
        description='Register a compute host as reservable (adds it to the '
                    'free pool aggregate).',
        operations=[{'method': 'POST', 'path': _COLLECTION}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=UPDATE, check_str=base.ADMIN,
        description="Update a reservable host's extra capabilities.",
        operations=[{'method': 'PUT', 'path': _ITEM}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=DELETE, check_str=base.ADMIN,
        description='Unregister a reservable host.',
        operations=[{'method': 'DELETE', 'path': _ITEM}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=ALLOCATIONS, check_str=base.ADMIN,
        description='List which leases hold which hosts.',
        operations=[{'method': 'GET', 'path': _COLLECTION + '/allocations'}],
        scope_types=['project']),
]


def list_rules():
    return rules
