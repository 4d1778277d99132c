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

Grants are remembered (:func:`authorize`): an oslo.policy check costs about
a millisecond inside nova-api (it re-reads the check's argument spec at
every node of the rule), and the boot of a leased server checks
``nova_lease:leases:create`` each time. A remembered grant is keyed by
everything the decision depends on: the rule as it is now, with every
``rule:`` reference resolved (so an override is seen at once, and a
changed policy file within :data:`RELOAD_SECONDS`), the rule's scope
types, the credentials and the target.
Rules with checks that may depend on anything else (``http:``, checks
registered by other libraries) are never remembered; refusals are not
remembered either.
"""

import threading
import time

from nova import exception as nova_exception
from nova import policy as nova_policy
from oslo_config import cfg
# The check classes: oslo_policy.policy re-exports only some of them.
from oslo_policy import _checks
from oslo_policy import policy as oslo_policy

from nova_lease import policies

_LOCK = threading.Lock()

#: Remembered grants: {key: True}. Dict operations are atomic.
_GRANTS = {}
#: When _GRANTS holds more than this many keys, it is emptied.
GRANTS_MAX = 1024
#: A remembered grant reloads the policy files at most this often (s).
RELOAD_SECONDS = 1.0
#: Check classes whose result depends on the target and credentials only.
_PURE_LEAVES = (_checks.RoleCheck, _checks.GenericCheck, _checks.TrueCheck,
                _checks.FalseCheck)
_MAX_DEPTH = 32


class _NotPure(Exception):
    pass


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


def _shape(rules, check, depth=0):
    """A hashable description of check, rule: references resolved.

    Raises _NotPure for a check that may depend on more than the target
    and the credentials.
    """
    if depth > _MAX_DEPTH:
        raise _NotPure()
    kind = type(check)
    if kind is _checks.RuleCheck:
        try:
            # (Rules falls back on its default rule as RuleCheck does.)
            sub = rules[check.match]
        except KeyError:
            return ('rule', check.match, None)
        return ('rule', check.match, _shape(rules, sub, depth + 1))
    if kind in (_checks.AndCheck, _checks.OrCheck):
        return (kind.__name__,) + tuple(_shape(rules, rule, depth + 1)
                                        for rule in check.rules)
    if kind is _checks.NotCheck:
        return ('not', _shape(rules, check.rule, depth + 1))
    if kind in _PURE_LEAVES:
        return (kind.__name__, str(check))
    raise _NotPure()


def _frozen(mapping):
    items = []
    for key, value in mapping.items():
        if isinstance(value, (list, tuple)):
            value = tuple(value)
        hash(value)     # TypeError: not remembered
        items.append((key, value))
    return tuple(sorted(items))


def _grant_key(enforcer, context, action, target):
    """The key of a remembered grant, or None if it cannot be one."""
    try:
        rules = enforcer.rules
        if not rules or action not in rules:
            return None
        registered = enforcer.registered_rules.get(action)
        scope_types = tuple(registered.scope_types or ()) if (
            registered is not None) else None
        # The credentials as Enforcer.enforce builds them.
        creds = dict(context.to_policy_values())
        if creds.get('system_scope'):
            creds['system'] = creds['system_scope']
        return (action, _shape(rules, rules[action]), scope_types,
                _frozen(creds), _frozen(target))
    except (_NotPure, TypeError, AttributeError, KeyError):
        return None


def authorize(context, action, target, fatal=True):
    """Check action for Nova's RequestContext context.

    Returns True or False when fatal is False; raises
    nova.exception.PolicyNotAuthorized (a 403) otherwise. A grant is
    remembered (see the module's documentation).
    """
    enforcer = _enforcer()
    # Picks up a changed policy file, as every Enforcer.enforce() does,
    # but at most every RELOAD_SECONDS (a check that is not a remembered
    # grant goes through Nova, which reloads anyway): looking for
    # changed files costs a fifth of a millisecond.
    now = time.monotonic()
    if now - getattr(enforcer, '_nova_lease_loaded_at', -1e9) >= (
            RELOAD_SECONDS):
        enforcer.load_rules()
        enforcer._nova_lease_loaded_at = now
    key = _grant_key(enforcer, context, action, target)
    if key is not None and key in _GRANTS:
        return True
    allowed = nova_policy.authorize(context, action, target,
                                    do_raise=fatal) is not False
    if allowed and key is not None:
        if len(_GRANTS) >= GRANTS_MAX:
            _GRANTS.clear()
        _GRANTS[key] = True
    return allowed


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
