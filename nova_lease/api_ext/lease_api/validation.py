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
"""Reading the lease API's request bodies."""

from oslo_serialization import jsonutils

from nova_lease.api_ext.lease_api import errors


def json_body(req):
    """The request's body: a JSON object, else 400."""
    if not req.body:
        raise errors.BadRequest(reason='the request needs a JSON object body')
    try:
        body = jsonutils.loads(req.body)
    except ValueError as e:
        raise errors.BadRequest(reason='the body is not valid JSON (%s)' % e)
    if not isinstance(body, dict):
        raise errors.BadRequest(reason='the body must be a JSON object')
    return body
