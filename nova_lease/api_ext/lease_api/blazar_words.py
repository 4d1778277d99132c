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
"""The lease API's refusals in Blazar's words.

Blazar's clients and its acceptance tests (blazar-tempest-plugin) match
Blazar 18's messages: a refusal of a lease body says Blazar's message
first, then ours in brackets (naming the field and the values)::

    Missing parameter end_date ('end_date' is required)
    End date must be later than start date. ('end_date' (...) must be ...)
"""

from nova_lease.api_ext.lease_api.schemas import leases as lease_schemas
from nova_lease import params as lease_params


def missing(field, key=None):
    """The refusal of a missing ``field``: Blazar's message first (the
    lease schema's ``x-missing``).
    """
    return lease_params.LeaseParamError(
        field, 'required', lease_schemas.MISSING % {'key': key or field,
                                                    'field': field})


def in_blazar_words(err, body):
    """``err`` with Blazar's own message first, where Blazar has one
    (the lease schema's ``x-blazar-words`` of the field).

    Blazar's clients and acceptance tests match its messages; ours
    follow in brackets (they name the field and the values).
    """
    if err.rule == 'required' and err.field in lease_params.BODY_KEYS:
        return missing(err.field)
    node = lease_schemas.LEASE['properties'].get(err.field, {})
    words = node.get('x-blazar-words', {}).get(err.rule)
    value = body.get(err.field) if isinstance(body, dict) else None
    if words is None or not isinstance(value, str):
        return err
    words %= {'value': value}
    return lease_params.LeaseParamError(
        err.field, err.rule, '%s (%s)' % (words, err.reason), err.where)
