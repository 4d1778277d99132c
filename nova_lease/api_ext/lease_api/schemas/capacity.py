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
"""Schema of ``/capacity``'s query string.

Dates and durations are parsed by the handler with the lease API's own
parsers (``nova_lease.params``), which name the field they refuse;
``resource`` is a comma-separated list of resource names and ``detail``
is ``hosts`` or absent.
"""

# (Query parameters are always strings.)
_TEXT = {'type': 'string', 'format': 'text', 'description': 'must be text'}

#: GET /capacity
QUERY = {
    'type': 'object',
    'properties': {
        'start': _TEXT, 'end': _TEXT, 'step': _TEXT, 'host': _TEXT,
        'aggregate': _TEXT, 'availability_zone': _TEXT, 'resource': _TEXT,
        'detail': {'type': 'string', 'enum': ['hosts'],
                   'x-reason': "'detail' must be 'hosts' (or left out), "
                               "got %(value)r"},
    },
}
