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
"""oslo.policy rules of the lease API, defined in code.

The rules are registered on nova-api's own policy enforcer, so operators
override them in Nova's policy file ([oslo_policy] policy_file) next to
Nova's rules. Their check strings build on Nova's persona rules
(``project_reader_or_admin``, ``project_member_or_admin``,
``context_is_admin``), so secure-RBAC deployments behave the same.
"""

import itertools

from nova_lease.policies import capacity
from nova_lease.policies import host
from nova_lease.policies import lease
from nova_lease.policies import offers
from nova_lease.policies import usage


def list_rules():
    return list(itertools.chain(lease.list_rules(), host.list_rules(),
                                capacity.list_rules(),
                                usage.list_rules(), offers.list_rules()))
