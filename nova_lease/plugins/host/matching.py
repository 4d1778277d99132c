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
"""Matching hosts (physical:host): whether a host satisfies a request.

:func:`host_matches` tells whether a registered host (a ``hosts`` row
with its extra ``capabilities``) satisfies a
:class:`~nova_lease.plugins.host.request.HostRequest`: availability zone,
minimum ``vcpus`` / ``memory_mb`` / ``disk_gb``, capability extra specs
with Nova's operators (``nova.scheduler.filters.extra_specs_ops``) and
Blazar's ``hypervisor_properties`` / ``resource_properties`` queries
(:func:`evaluate_query`), looking at the host's facts
(:func:`host_facts`).

Extra specs (``extra_specs``, a JSON object of key to spec):

* ``capabilities:<path>`` (scoped): a fact of the host that Nova reports:
  ``vcpus``, ``memory_mb``, ``local_gb``, ``hypervisor_type``,
  ``hypervisor_version``, ``hypervisor_hostname``, ``service_host``,
  ``availability_zone``, and ``cpu_info:<key>[:<key>...]`` inside the
  hypervisor's cpu_info JSON (``capabilities:cpu_info:arch``).
* ``aggregate_instance_extra_specs:<key>`` (scoped): an extra capability
  registered with the host (``os-hosts``).
* ``<key>`` (unscoped): an extra capability, else a host fact.
* Keys with any other scope (``hw:``, ``trait:``, ``resources...``) are
  about flavors and are ignored, as Nova's filters ignore them.

Each spec is matched with ``extra_specs_ops.match`` (``s==``, ``>=``,
``<in>``, ``<or>``...); a bare value means string equality.

Queries (``hypervisor_properties`` on host facts, ``resource_properties``
on extra capabilities): Blazar's JSON syntax, given as a JSON string (as
Blazar takes it; ``""`` means none) or as the JSON array itself:
``["==", "$memory_mb", "4096"]``, ``["and", [">=", "$vcpus", "4"],
["==", "$gpu", "true"]]``. Blazar's ``and`` of comparisons is extended with
``or``, ``not`` and ``in`` (Nova's JsonFilter operators); comparisons are
numeric when both sides are numbers, else on strings.
"""

import json
import numbers

from nova.scheduler.filters import extra_specs_ops
from oslo_serialization import jsonutils

from nova_lease.plugins.host import request as host_request

#: Host facts (columns of the hosts table, as the API names them).
FACTS = ('hypervisor_hostname', 'service_host', 'availability_zone',
         'vcpus', 'memory_mb', 'local_gb', 'cpu_info', 'hypervisor_type',
         'hypervisor_version')


def host_facts(host):
    """The facts of a host row that requests can look at."""
    facts = {key: host.get(key) for key in FACTS}
    cpu_info = host.get('cpu_info')
    if isinstance(cpu_info, str) and cpu_info:
        try:
            facts['cpu_info'] = json.loads(cpu_info)
        except ValueError:
            pass
    facts['service_name'] = host.get('service_host')
    return facts


def _walk(facts, path):
    value = facts
    for part in path.split(':'):
        if isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return None
    return value


def _as_spec_value(value):
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return jsonutils.dumps(value)
    return str(value)


def _spec_value(host, facts, key):
    """(relevant, value) of extra spec ``key`` for a host."""
    scope, sep, rest = key.partition(':')
    capabilities = host.get('capabilities') or {}
    if sep:
        if scope == 'capabilities':
            return True, _walk(facts, rest)
        if scope == 'aggregate_instance_extra_specs':
            return True, capabilities.get(rest)
        return False, None
    if key in capabilities:
        return True, capabilities[key]
    return True, facts.get(key)


def _match_spec(value, spec):
    value = _as_spec_value(value)
    if value is None:
        return False
    try:
        return bool(extra_specs_ops.match(value, spec))
    except (ValueError, TypeError, IndexError):
        return False


def _number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Number):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _compare(op, left, right):
    a, b = _number(left), _number(right)
    if a is None or b is None:
        a, b = _as_spec_value(left), _as_spec_value(right)
        if a is None or b is None:
            return False
    return host_request.QUERY_COMPARISONS[op](a, b)


def _resolve(term, values):
    if isinstance(term, str) and term.startswith('$'):
        return _walk(values, term[1:])
    return term


def evaluate_query(query, values):
    """Evaluate a checked Blazar query against a dict of values."""
    op, args = query[0], query[1:]
    if op == 'and':
        return all(evaluate_query(a, values) for a in args)
    if op == 'or':
        return any(evaluate_query(a, values) for a in args)
    if op == 'not':
        return not evaluate_query(args[0], values)
    left = _resolve(args[0], values)
    if left is None:
        return False
    if op == 'in':
        return any(_compare('==', left, _resolve(a, values))
                   for a in args[1:])
    return _compare(op, left, _resolve(args[1], values))


def host_matches(host, request):
    """True when the host row (with 'capabilities') satisfies request."""
    if request.availability_zone and (
            host.get('availability_zone') != request.availability_zone):
        return False
    if ((host.get('vcpus') or 0) < request.vcpus or
            (host.get('memory_mb') or 0) < request.memory_mb or
            (host.get('local_gb') or 0) < request.disk_gb):
        return False
    facts = host.get('_facts')
    if facts is None:
        facts = host_facts(host)
    for key, spec in request.extra_specs.items():
        relevant, value = _spec_value(host, facts, key)
        if relevant and not _match_spec(value, spec):
            return False
    if request.hypervisor_properties and not evaluate_query(
            request.hypervisor_properties, facts):
        return False
    if request.resource_properties and not evaluate_query(
            request.resource_properties, host.get('capabilities') or {}):
        return False
    return True
