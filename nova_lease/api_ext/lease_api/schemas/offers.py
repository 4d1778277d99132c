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
"""Schema of ``/offers``' query string.

The request's keys are a reservation's (parsed by its type, naming the
query parameter), plus ``duration``, ``earliest``, ``latest`` and
``limit`` (parsed by the handler). Any other key is refused: a typo
would otherwise answer another question.
"""

_TEXT = {'type': 'string', 'format': 'text', 'description': 'must be text'}

#: The reservation keys a request may give.
RESERVATION_KEYS = ('resource_type', 'min', 'max', 'hypervisor_properties',
                    'resource_properties', 'vcpus', 'memory_mb', 'disk_gb',
                    'amount', 'affinity', 'flavor_id')

#: GET /offers
QUERY = {
    'type': 'object',
    'additionalProperties': False,
    'x-unknown-key': "'%(key)s': unknown query parameter; /offers takes "
                     "%(allowed)s",
    'properties': dict(
        {key: _TEXT for key in RESERVATION_KEYS},
        duration=_TEXT, earliest=_TEXT, latest=_TEXT, limit=_TEXT),
}
