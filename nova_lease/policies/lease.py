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
"""Rules for /os-reservation/leases."""

from oslo_policy import policy

from nova_lease.policies import base

LIST = 'nova_lease:leases:list'
LIST_ALL = 'nova_lease:leases:list_all'
SHOW = 'nova_lease:leases:show'
CREATE = 'nova_lease:leases:create'
CREATE_BEST_EFFORT = 'nova_lease:leases:create:best_effort'
UPDATE = 'nova_lease:leases:update'
DELETE = 'nova_lease:leases:delete'

_COLLECTION = base.PREFIX + '/leases'
_ITEM = _COLLECTION + '/{lease_id}'

rules = [
    policy.DocumentedRuleDefault(
        name=LIST, check_str=base.PROJECT_READER_OR_ADMIN,
        description="List the leases of the caller's project.",
        operations=[{'method': 'GET', 'path': _COLLECTION}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=LIST_ALL, check_str=base.ADMIN,
        description='List the leases of every project: what GET /leases '
                    'lists for a caller this rule allows (as Blazar lists '
                    'every lease for its admins), unless all_projects=0.',
        operations=[{'method': 'GET', 'path': _COLLECTION},
                    {'method': 'GET',
                     'path': _COLLECTION + '?all_projects=1'}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=SHOW, check_str=base.PROJECT_READER_OR_ADMIN,
        description='Show a lease.',
        operations=[{'method': 'GET', 'path': _ITEM}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=CREATE, check_str=base.PROJECT_MEMBER_OR_ADMIN,
        description='Create a lease for the caller\'s project (also used for '
                    'the lease a reserved=True boot creates).',
        operations=[{'method': 'POST', 'path': _COLLECTION},
                    {'method': 'POST', 'path': '/v2.1/servers'}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=CREATE_BEST_EFFORT, check_str=base.ADMIN,
        description="Create a best_effort host lease (lease_type "
                    "best_effort), which live- or cold-migrates other "
                    "projects' unleased servers off the compute hosts of "
                    "[nova_lease_api] best_effort_aggregate (checked after "
                    "nova_lease:leases:create; [nova_lease_api] "
                    "best_effort_enabled must be on). Admin-only, as Nova's "
                    "os_compute_api:os-migrate-server:migrate_live and "
                    "os_compute_api:os-migrate-server:migrate are.",
        operations=[{'method': 'POST', 'path': _COLLECTION}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=UPDATE, check_str=base.PROJECT_MEMBER_OR_ADMIN,
        description='Update a lease (rename, move or resize its window).',
        operations=[{'method': 'PUT', 'path': _ITEM}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=DELETE, check_str=base.PROJECT_MEMBER_OR_ADMIN,
        description='Delete a lease (an active lease ends now).',
        operations=[{'method': 'DELETE', 'path': _ITEM}],
        scope_types=['project']),
]


def list_rules():
    return rules
