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
"""The lease API's shared errors and its JSON responses (Blazar's shape).

An error reaches the user as ``{"error_code": 409, "error_name":
"NotEnoughHosts", "error_message": "..."}``: the name is the exception's
class name, the message its text (see :func:`error_response`). Errors
of one resource live with its handlers (``LeaseBusy``, ``HostInUse``...).
"""

from oslo_log import log as logging
from oslo_serialization import jsonutils
import webob

from nova_lease import exception

LOG = logging.getLogger(__name__)


class BadRequest(exception.Invalid):
    msg_fmt = '%(reason)s'


class MethodNotAllowed(exception.NovaLeaseException):
    msg_fmt = 'Method %(method)s is not allowed on %(path)s'
    code = 405


class ResourceNotFound(exception.NotFound):
    msg_fmt = 'Unknown lease API resource: %(path)s'


def json_response(code, body=None, headers=None):
    """A response with a JSON body (none when ``body`` is None)."""
    resp = webob.Response(status=code, headerlist=list(headers or []))
    if body is None:
        resp.content_type = None
        resp.body = b''
    else:
        resp.body = jsonutils.dump_as_bytes(body)
        resp.content_type = 'application/json'
        resp.charset = 'UTF-8'
    return resp


def error_response(code, message, name=None, extra=None):
    """A JSON error in Blazar's shape (python-blazarclient reads it);
    ``extra``: more keys of the body (a 409 of a flexible lease: its
    next ``offers``).
    """
    body = {'error_code': code, 'error_name': name or str(code),
            'error_message': message}
    body.update(extra or {})
    return json_response(code, body)


def internal_error_message(req, what):
    """What a user is told about a 500: no detail, the request id.

    The details (database errors included) are in the nova-api log,
    found by the request id.
    """
    request_id = req.environ.get('openstack.request_id') or 'unknown'
    return ('%s failed on an internal error (request %s); the nova-api '
            'log has the details' % (what, request_id))


def internal_error(req, rest):
    """Log the exception being handled; a 500 that tells nothing of it."""
    LOG.exception('Lease API %s %s failed', req.method, rest)
    return error_response(500, internal_error_message(
        req, 'the lease API request'), 'InternalError')
