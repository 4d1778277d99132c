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

Every check goes through an oslo.policy :class:`~oslo_policy.policy.Enforcer`
as Nova's ``context.can()`` does (``Enforcer.authorize`` with the request
context as credentials, a 403 ``PolicyNotAuthorized`` naming the rule).

Nova offers no public way to add rules to its own enforcer in a running
nova-api, so the lease API has an enforcer of its own, built on Nova's
configuration: it reads the same policy file and ``[oslo_policy]`` options
as Nova's (an operator overrides ``nova_lease:*`` rules in Nova's
policy.yaml), and holds Nova's default rules beside ours so that our
defaults can refer to Nova's persona rules (``rule:project_member_or_admin``
...) and follow an operator's override of them. oslo.policy reloads the
policy file when it changes, at the next check.
"""

import threading

from nova import conf as nova_conf
from nova import exception as nova_exception
from nova import policies as nova_policies
from oslo_config import cfg
from oslo_policy import policy as oslo_policy

from nova_lease import policies

PolicyNotAuthorized = nova_exception.PolicyNotAuthorized

_LOCK = threading.Lock()
_ENFORCER = None


def _build(conf):
    enforcer = oslo_policy.Enforcer(conf)
    # As Nova: its defaults changed wholesale with the secure-RBAC work.
    enforcer.suppress_default_change_warnings = True
    # Nova's own enforcer already logs the deprecations of Nova's rules.
    enforcer.suppress_deprecation_warnings = True
    enforcer.register_defaults(nova_policies.list_rules())
    enforcer.register_defaults(policies.list_rules())
    return enforcer


def enforcer():
    """The lease API's enforcer (built at the first check; thread-safe)."""
    global _ENFORCER
    if _ENFORCER is None:
        with _LOCK:
            if _ENFORCER is None:
                built = _build(nova_conf.CONF)
                built.load_rules()
                _ENFORCER = built
    return _ENFORCER


def reset():
    """Forget the enforcer; the next check builds it from the options."""
    global _ENFORCER
    with _LOCK:
        if _ENFORCER is not None:
            _ENFORCER.clear()
        _ENFORCER = None


def authorize(context, action, target, fatal=True):
    """Check rule action for Nova's RequestContext context on target.

    Returns True or False when fatal is False; raises
    PolicyNotAuthorized (a 403 naming the rule) otherwise, as Nova's
    ``context.can()``.
    """
    try:
        result = enforcer().authorize(action, target, context,
                                      do_raise=fatal,
                                      exc=PolicyNotAuthorized, action=action)
    except oslo_policy.InvalidScope:
        # Nova treats a token of the wrong scope as a plain refusal.
        if fatal:
            raise PolicyNotAuthorized(action=action)
        return False
    return result is not False


def get_enforcer():
    """Enforcer for the oslopolicy-* command-line tools.

    It parses the command line's configuration as Nova's does and holds
    Nova's rules and ours, so checks that use Nova's persona rules
    resolve.
    """
    conf = cfg.CONF
    conf([], project='nova')
    return _build(conf)
