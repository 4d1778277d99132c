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
"""The version document (``/os-reservation``, ``/v1``, ``/v1.0``).

One version, ``v1.0`` (Blazar's), with its range of microversions:
``min_version`` and ``max_version`` as Blazar and placement name them,
and ``version`` (the maximum) as Nova does; keystoneauth's discovery
reads either.
"""

from nova_lease.api_ext.lease_api import microversion

VERSION_ID = 'v1.0'


def version_document(req, ctx, base_href):
    return 200, {'versions': [{
        'id': VERSION_ID, 'status': 'CURRENT',
        'min_version': microversion.MIN_VERSION,
        'max_version': microversion.MAX_VERSION,
        'version': microversion.MAX_VERSION,
        'links': [{'rel': 'self', 'href': base_href}]}]}
