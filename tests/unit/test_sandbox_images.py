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
"""The sandbox's image stand-in through the real python-glanceclient.

Horizon's Images and Instances pages list images with glanceclient, which
first reads the image schema (``GET /v2/schemas/image``) and then builds a
schema-checked object of every image: a stand-in without the schema made
both pages fail.
"""

import datetime
import threading
from wsgiref import simple_server

from glanceclient import client as glance_client
from keystoneauth1 import session as ks_session
import testtools

from nova_lease.sandbox import images

IMAGES = [
    {'id': '155d900f-4e14-4e4c-a73d-069cbf4541e6', 'name': 'cirros',
     'status': 'active', 'is_public': True, 'size': 25165824,
     'container_format': 'bare', 'disk_format': 'qcow2',
     'created_at': datetime.datetime(2011, 1, 1, 1, 2, 3),
     'updated_at': datetime.datetime(2011, 1, 1, 1, 2, 3),
     'properties': {'architecture': 'x86_64', 'kernel_id': 'nokernel'}},
    {'id': 'a2459075-d96c-40d5-893e-577ff92e721c', 'name': 'empty',
     'status': 'active', 'is_public': False, 'size': None,
     'container_format': None, 'disk_format': None,
     'created_at': None, 'updated_at': None},
]


class _Quiet(simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


class ImageStandInTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        app = images.mount(lambda env, start: [], images.ImageApp(
            lambda: IMAGES))
        server = simple_server.make_server('127.0.0.1', 0, app,
                                           handler_class=_Quiet)
        thread = threading.Thread(target=server.serve_forever,
                                  kwargs={'poll_interval': 0.05},
                                  daemon=True)
        thread.start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        self.glance = glance_client.Client(
            '2', endpoint='http://127.0.0.1:%d%s' % (server.server_port,
                                                     images.PREFIX),
            session=ks_session.Session())

    def test_schema(self):
        schema = self.glance.schemas.get('image')
        self.assertEqual('image', schema.name)
        self.assertIn('visibility', [p.name for p in schema.properties])

    def test_list_and_get(self):
        listed = list(self.glance.images.list())
        self.assertEqual(['cirros', 'empty'], [i.name for i in listed])
        self.assertEqual('public', listed[0].visibility)
        self.assertEqual('x86_64', listed[0].architecture)
        self.assertIsNone(listed[1].size)
        image = self.glance.images.get(IMAGES[0]['id'])
        self.assertEqual(25165824, image.size)

    def test_filters(self):
        ids = 'in:%s,%s' % (IMAGES[1]['id'], 'nothing')
        self.assertEqual(['empty'], [
            i.name for i in self.glance.images.list(filters={'id': ids})])
        self.assertEqual(['cirros'], [
            i.name for i in self.glance.images.list(
                filters={'visibility': 'public'})])
