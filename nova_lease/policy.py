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
"""Policy enforcement for the lease API inside nova-api.

The rules (nova_lease.policies) are registered on Nova's own enforcer the
first time they are needed, so they are read from Nova's policy file and
can use Nova's persona rules. Nova recreates its enforcer when it is reset
(tests, policy reloads), so registration is checked per enforcer object.
"""

import threading

from nova import exception as nova_exception
from nova import policy as nova_policy
from oslo_config import cfg
from oslo_policy import policy as oslo_policy

from nova_lease import policies

_LOCK = threading.Lock()


def _enforcer():
    nova_policy.init()
    enforcer = nova_policy._ENFORCER
    if not getattr(enforcer, '_nova_lease_rules', False):
        with _LOCK:
            if not getattr(enforcer, '_nova_lease_rules', False):
                for rule in policies.list_rules():
                    if rule.name not in enforcer.registered_rules:
                        enforcer.register_default(rule)
                enforcer._nova_lease_rules = True
    return enforcer


def authorize(context, action, target, fatal=True):
    """Check action for Nova's RequestContext context.

    Returns True or False when fatal is False; raises
    nova.exception.PolicyNotAuthorized (a 403) otherwise.
    """
    _enforcer()
    return nova_policy.authorize(context, action, target,
                                 do_raise=fatal) is not False


def get_enforcer():
    """Enforcer for the oslopolicy-* command-line tools.

    It holds Nova's rules and ours, so checks that use Nova's persona rules
    resolve.
    """
    from nova import policies as nova_policies

    conf = cfg.CONF
    conf([], project='nova')
    enforcer = oslo_policy.Enforcer(conf)
    enforcer.register_defaults(nova_policies.list_rules())
    enforcer.register_defaults(policies.list_rules())
    return enforcer


PolicyNotAuthorized = nova_exception.PolicyNotAuthorized
