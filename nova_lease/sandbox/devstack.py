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
"""DevStack's URL layout in front of the sandbox's nova-api.

blazar-tempest-plugin's gabbi API tests hard-code DevStack's layout:
``http://127.0.0.1/compute/v2.1/...`` for Nova and
``http://127.0.0.1/reservation/v1/...`` for Blazar's API, and no
tempest.conf option changes those URLs. With ``nova-lease-sandbox
--devstack-layout`` the sandbox also listens on 127.0.0.1:80 (or
``--devstack-port``) with this WSGI app in front of the same nova-api
application:

=================================  =====================================
DevStack path                      served as
=================================  =====================================
``/compute/<path>``                ``/<path>`` (Nova's API, with
                                   ``SCRIPT_NAME`` ``/compute``, so the
                                   links Nova writes keep the prefix)
``/reservation/v1/<path>``         ``/v2.1/os-reservation/<path>`` (the
                                   lease API, Blazar v1 compatible)
anything else                      404
=================================  =====================================

Authentication is unchanged: the requests carry a Keystone token as on
nova-api's own port.
"""

import json

COMPUTE = '/compute'
RESERVATION_V1 = '/reservation/v1'
LEASE_API = '/v2.1/os-reservation'


def rewrite(path):
    """``(script_name, path_info)`` for a DevStack ``path``, or None."""
    if path == COMPUTE or path.startswith(COMPUTE + '/'):
        return COMPUTE, path[len(COMPUTE):] or '/'
    if path == RESERVATION_V1 or path.startswith(RESERVATION_V1 + '/'):
        return '', LEASE_API + path[len(RESERVATION_V1):]
    return None


class DevStackLayout(object):
    """WSGI app: DevStack paths -> the wrapped nova-api application."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        target = rewrite(environ.get('PATH_INFO') or '/')
        if target is None:
            body = json.dumps({'error': {
                'code': 404, 'title': 'Not Found',
                'message': 'This front serves only %s/ and %s/ '
                           '(DevStack layout)' % (COMPUTE, RESERVATION_V1)}
            }).encode()
            start_response('404 Not Found', [
                ('Content-Type', 'application/json'),
                ('Content-Length', str(len(body)))])
            return [body]
        script, path_info = target
        environ = dict(environ)
        environ['SCRIPT_NAME'] = environ.get('SCRIPT_NAME', '') + script
        environ['PATH_INFO'] = path_info
        return self.app(environ, start_response)
