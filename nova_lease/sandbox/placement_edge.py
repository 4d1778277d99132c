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
"""The sandbox's placement, reachable from other processes.

Placement runs in the sandbox's process behind wsgi-intercept (Nova's
PlacementFixture, ``noauth2``): only that process reaches it. This WSGI
app serves it at ``http://127.0.0.1:<nova port>/placement`` (mounted in
front of nova-api, the catalog's ``placement`` endpoint) for the commands
that read placement as the ``[nova_lease_auth]`` service user
(``nova-lease-manage audit`` and ``capacity``): Keystone's token is
checked by keystonemiddleware (nova-api's ``[keystone_authtoken]``), then
the request goes to the in-process placement as ``noauth2`` sees a user
(``admin`` for an admin token, ``user:project`` else, with the token's
roles).
"""

import requests

PREFIX = '/placement'

#: Request headers passed on to placement (WSGI environ names).
_PASSED = ('CONTENT_TYPE', 'HTTP_OPENSTACK_API_VERSION', 'HTTP_ACCEPT')
#: Response headers passed back.
_RETURNED = ('content-type', 'openstack-api-version', 'location')


def forward(environ, start_response, url, user_id, project_id, roles,
            timeout=60):
    """Send the WSGI request to placement at ``url`` (its path and query
    string appended) as ``noauth2`` sees a user: ``admin`` for an admin,
    ``user:project`` else, with ``roles``; return placement's answer.
    """
    headers = {
        'X-Auth-Token': 'admin' if 'admin' in roles else '%s:%s' % (
            user_id, project_id),
        'X-Roles': ','.join(roles)}
    for key in _PASSED:
        if environ.get(key):
            name = key[5:] if key.startswith('HTTP_') else key
            headers[name.replace('_', '-').title()] = environ[key]
    length = int(environ.get('CONTENT_LENGTH') or 0)
    body = environ['wsgi.input'].read(length) if length else None
    query = environ.get('QUERY_STRING')
    resp = requests.request(environ['REQUEST_METHOD'],
                            url + ('?' + query if query else ''),
                            headers=headers, data=body, timeout=timeout)
    start_response('%d %s' % (resp.status_code, resp.reason), [
        (k, v) for k, v in resp.headers.items()
        if k.lower() in _RETURNED])
    return [resp.content]


class PlacementEdge(object):
    """Forward an authenticated request to the in-process placement."""

    def __init__(self, placement_url):
        self.placement_url = placement_url.rstrip('/')

    def __call__(self, environ, start_response):
        roles = [r.strip() for r in
                 environ.get('HTTP_X_ROLES', '').split(',') if r.strip()]
        return forward(environ, start_response,
                       self.placement_url + environ.get('PATH_INFO', ''),
                       environ.get('HTTP_X_USER_ID', ''),
                       environ.get('HTTP_X_PROJECT_ID', ''), roles)


def app(placement_url):
    """The edge behind Keystone authentication (nova-api's options)."""
    from keystonemiddleware import auth_token

    return auth_token.filter_factory({})(PlacementEdge(placement_url))
