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
"""Rules for /os-reservation/offers (when a reservation would fit)."""

from oslo_policy import policy

from nova_lease.policies import base

#: Ask the offers of a reservation request (host names shown only to
#: those nova_lease:capacity:all allows).
GET = 'nova_lease:offers:get'

rules = [
    policy.DocumentedRuleDefault(
        name=GET, check_str=base.PROJECT_MEMBER_OR_ADMIN,
        description='List the earliest windows where a reservation '
                    'request would fit (offers). The host names of an '
                    'offer are shown to those nova_lease:capacity:all '
                    'allows; others get their number.',
        operations=[{'method': 'GET', 'path': base.PREFIX + '/offers'}],
        scope_types=['project']),
]


def list_rules():
    return rules
