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
"""The Glance and Neutron stand-ins of ``nova-lease-sandbox --split``.

``python -m nova_lease.sandbox.standins --port P`` serves, on
127.0.0.1:P, until SIGTERM or until its parent is gone:

* ``/image``: Glance v2 with one public image (:data:`IMAGE`), read-only
  (:class:`nova_lease.sandbox.images.ImageApp`): what nova-api reads at a
  boot, and the clients' image look-ups;
* ``/network``: just enough of Neutron v2.0 for servers booted with
  ``--nic none``: the version document, empty collections for every
  ``GET /v2.0/<collection>`` (Nova lists the ports of a server it
  deletes, and the extensions), 404 for one resource.

Nova's processes and the clients find both through Keystone's catalog
(``image`` and ``network`` services). Every request is logged (stderr, the
stand-ins' log file), to see what a Nova process asked for.
"""

import json
import sys

import webob
import webob.dec

from nova_lease.sandbox import children
from nova_lease.sandbox import images

#: The stand-in's image (Nova's own test image, as the all-in-one
#: sandbox's Glance fixture has it).
IMAGE = {
    'id': '155d900f-4e14-4e4c-a73d-069cbf4541e6',
    'name': 'fakeimage123456',
    'created_at': '2011-01-01T01:02:03Z',
    'updated_at': '2011-01-01T01:02:03Z',
    'status': 'active',
    'is_public': True,
    'visibility': 'public',
    'container_format': 'raw',
    'disk_format': 'raw',
    'size': 25165824,
    'min_ram': 0,
    'min_disk': 0,
    'properties': {'kernel_id': 'nokernel', 'ramdisk_id': 'nokernel',
                   'architecture': 'x86_64'},
}
IMAGE_PREFIX = '/image'
NETWORK_PREFIX = '/network'


def _json(body, status=200):
    return webob.Response(body=json.dumps(body).encode(), status=status,
                          content_type='application/json', charset=None)


class NetworkApp(object):
    """Neutron v2.0 with nothing in it."""

    @webob.dec.wsgify
    def __call__(self, req):
        path = req.path_info.strip('/')
        if path == '':
            return _json({'versions': [{
                'id': 'v2.0', 'status': 'CURRENT',
                'links': [{'rel': 'self',
                           'href': req.application_url + '/v2.0/'}]}]})
        parts = path.split('/')
        if parts[0] != 'v2.0':
            return _json({'NeutronError': {'message': 'not found'}}, 404)
        if len(parts) == 1:
            return _json({'resources': []})
        collection = parts[1]
        if collection.endswith('.json'):
            collection = collection[:-5]
        key = collection.replace('-', '_')
        if req.method == 'GET' and len(parts) == 2:
            return _json({key: []})
        if req.method == 'DELETE':
            return _json({'NeutronError': {'message': 'not found'}}, 404)
        return _json({'NeutronError': {
            'type': 'NotFound',
            'message': 'the sandbox network stand-in has no %s' % path}},
            404)


class StandIns(object):
    def __init__(self):
        self.image = images.ImageApp(lambda: [IMAGE])
        self.network = NetworkApp()

    def __call__(self, environ, start_response):
        path = environ.get('PATH_INFO', '')
        if (environ.get('REQUEST_METHOD') == 'DELETE' and
                path.startswith(IMAGE_PREFIX + '/v2/images/')):
            # Nova deletes the snapshot of a shelved server it deletes;
            # this stand-in never made one.
            start_response('404 Not Found', [('Content-Type',
                                              'text/plain')])
            return [b'no such image\n']
        for prefix, app in ((IMAGE_PREFIX, self.image),
                            (NETWORK_PREFIX, self.network)):
            if path == prefix or path.startswith(prefix + '/'):
                environ['SCRIPT_NAME'] = (environ.get('SCRIPT_NAME', '') +
                                          prefix)
                environ['PATH_INFO'] = path[len(prefix):]
                return app(environ, start_response)
        start_response('404 Not Found', [('Content-Type', 'text/plain')])
        return [b'not found\n']


def main(argv=None):
    args = children.server_parser(
        'nova-lease-sandbox-standins').parse_args(argv)
    return children.serve(
        args.host, args.port, StandIns(),
        'glance and neutron stand-ins on http://%s:%d%s and %s'
        % (args.host, args.port, IMAGE_PREFIX, NETWORK_PREFIX),
        parent_pid=args.parent_pid)


if __name__ == '__main__':
    sys.exit(main())
