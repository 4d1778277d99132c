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
"""Schema of ``/usage``'s query string (the dates are parsed by the
handler, as the lease API parses them)."""

_TEXT = {'type': 'string', 'format': 'text', 'description': 'must be text'}

#: GET /usage: a window and, optionally, one project. Any other key is
#: refused (a typo would otherwise bill the wrong period).
QUERY = {
    'type': 'object',
    'properties': {'start': _TEXT, 'end': _TEXT, 'project_id': _TEXT},
    'additionalProperties': False,
}
