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
"""A read-only Glance v2 stand-in for the sandbox's clients.

Nova itself talks to nova.tests.fixtures.GlanceFixture in process; the
``nova`` and ``openstack`` clients, however, look an image up in the image
service of the catalog (``nova boot --image ID`` does GET
``<image endpoint>/v2/images/ID``). This WSGI app serves the fixture's
images at ``http://127.0.0.1:<nova port>/image`` (mounted in front of
nova-api by :func:`mount`): the versions document, ``GET /v2/images``
(``?name=`` and ``?id=`` filters, ``id=in:A,B`` too) and ``GET
/v2/images/{id}``, and the schemas that python-glanceclient reads before
it lists images (``GET /v2/schemas/image`` and ``/v2/schemas/images``:
Horizon's Images and Instances pages need them). It has no auth (the
images are the fixture's public test images) and no write calls.
"""

import datetime
import json

import webob
import webob.dec

PREFIX = '/image'


def _iso(value):
    if isinstance(value, datetime.datetime):
        return value.strftime('%Y-%m-%dT%H:%M:%SZ')
    return value


def to_glance_v2(image):
    """Nova's internal image dict (GlanceFixture's format) -> Glance v2."""
    out = {
        'id': image['id'],
        'name': image.get('name'),
        'status': image.get('status', 'active'),
        'visibility': image.get('visibility') or (
            'public' if image.get('is_public') else 'shared'),
        'protected': bool(image.get('protected', False)),
        'container_format': image.get('container_format'),
        'disk_format': image.get('disk_format'),
        'size': image.get('size'),
        'min_ram': image.get('min_ram', 0),
        'min_disk': image.get('min_disk', 0),
        'tags': list(image.get('tags') or []),
        'created_at': _iso(image.get('created_at')),
        'updated_at': _iso(image.get('updated_at')),
        'self': '/v2/images/%s' % image['id'],
        'file': '/v2/images/%s/file' % image['id'],
        'schema': '/v2/schemas/image',
    }
    for key, value in (image.get('properties') or {}).items():
        out.setdefault(key, value if isinstance(value, str) else str(value))
    return out


def _nullable(kind):
    return {'type': [kind, 'null']}


#: The image schema: the properties :func:`to_glance_v2` writes (Glance's
#: names and types, each may be null here), other properties strings, as
#: in Glance's own schema.
IMAGE_SCHEMA = {
    'name': 'image',
    'properties': {
        'id': {'type': 'string'},
        'name': _nullable('string'),
        'status': {'type': 'string'},
        'visibility': {'type': 'string'},
        'protected': {'type': 'boolean'},
        'container_format': _nullable('string'),
        'disk_format': _nullable('string'),
        'size': _nullable('integer'),
        'min_ram': _nullable('integer'),
        'min_disk': _nullable('integer'),
        'tags': {'type': 'array', 'items': {'type': 'string'}},
        'created_at': _nullable('string'),
        'updated_at': _nullable('string'),
        'self': {'type': 'string'},
        'file': {'type': 'string'},
        'schema': {'type': 'string'},
    },
    'additionalProperties': {'type': 'string'},
    'links': [{'rel': 'self', 'href': '{self}'},
              {'rel': 'enclosure', 'href': '{file}'},
              {'rel': 'describedby', 'href': '{schema}'}],
}
IMAGES_SCHEMA = {
    'name': 'images',
    'properties': {
        'images': {'type': 'array', 'items': IMAGE_SCHEMA},
        'schema': {'type': 'string'},
        'first': {'type': 'string'},
        'next': {'type': 'string'},
    },
    'links': [{'rel': 'first', 'href': '{first}'},
              {'rel': 'next', 'href': '{next}'},
              {'rel': 'describedby', 'href': '{schema}'}],
}


def _matches(image, key, wanted):
    if key == 'id' and wanted.startswith('in:'):
        return image.get('id') in wanted[3:].split(',')
    return image.get(key) == wanted


def _json(body, status=200):
    return webob.Response(body=json.dumps(body).encode(), status=status,
                          content_type='application/json', charset=None)


class ImageApp(object):
    """GET-only Glance v2 over ``images()`` (a callable returning dicts)."""

    def __init__(self, images):
        self.images = images

    @webob.dec.wsgify
    def __call__(self, req):
        if req.method not in ('GET', 'HEAD'):
            return _json({'error': 'the sandbox image service is read-only'},
                         405)
        path = req.path_info.rstrip('/')
        if path in ('', '/versions'):
            return _json({'versions': [{
                'id': 'v2.16', 'status': 'CURRENT',
                'links': [{'rel': 'self',
                           'href': req.application_url + '/v2/'}]}]},
                         300 if path == '' else 200)
        if path == '/v2/schemas/image':
            return _json(IMAGE_SCHEMA)
        if path == '/v2/schemas/images':
            return _json(IMAGES_SCHEMA)
        if path == '/v2/images':
            images = [to_glance_v2(i) for i in self.images()]
            for key in ('name', 'id', 'status', 'visibility'):
                if key in req.GET:
                    images = [i for i in images
                              if _matches(i, key, req.GET[key])]
            return _json({'images': images, 'first': '/v2/images',
                          'schema': '/v2/schemas/images'})
        if path.startswith('/v2/images/'):
            image_id = path[len('/v2/images/'):]
            for image in self.images():
                if image['id'] == image_id:
                    return _json(to_glance_v2(image))
            return _json({'error': 'no image %s' % image_id}, 404)
        return _json({'error': 'not found'}, 404)


def mount(app, image_app, prefix=PREFIX):
    """Serve image_app under prefix and everything else with app."""
    def dispatch(environ, start_response):
        path = environ.get('PATH_INFO', '')
        if path == prefix or path.startswith(prefix + '/'):
            environ['SCRIPT_NAME'] = environ.get('SCRIPT_NAME', '') + prefix
            environ['PATH_INFO'] = path[len(prefix):]
            return image_app(environ, start_response)
        return app(environ, start_response)
    return dispatch
