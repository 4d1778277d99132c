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
"""The unmodified python-blazarclient against the lease API inside Nova.

The client gets a keystoneauth password session (the harness's Keystone)
and either the catalog's ``reservation`` endpoint or an explicit
``endpoint_override`` at Nova's ``/v2.1/os-reservation``.
"""

import datetime
import io
import json
from urllib import parse as urlparse

from blazarclient import client as blazar_client
from blazarclient import exception as blazar_exc
import fixtures

from tests.functional import base

OTHER_PROJECT = 'a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5'


class BlazarClientTest(base.LeaseFunctionalBase):

    CLOCK_START = datetime.datetime(2030, 3, 1, 9, 0, 0)

    def _client(self, user='fake', override=True, project_id=None):
        kwargs = {}
        if override:
            kwargs['endpoint_override'] = self.keystone.reservation_url
        return blazar_client.Client(
            session=self.keystone.session(user, project_id), **kwargs)

    def _at(self, **delta):
        return (self.clock.now + datetime.timedelta(**delta)).strftime(
            '%Y-%m-%d %H:%M')

    def test_host_lease_lifecycle(self):
        admin = self._client('admin')
        host = admin.host.create('host1', ssd='true')
        self.assertEqual('host1', host['hypervisor_hostname'])
        self.assertEqual('true', host['ssd'])
        self.assertEqual(['host1'], [h['hypervisor_hostname']
                                     for h in admin.host.list()])
        self.assertEqual(host['id'], admin.host.get(host['id'])['id'])
        updated = admin.host.update(host['id'], {'values': {'gpu': 'yes'}})
        self.assertEqual('yes', updated['gpu'])
        # What 'openstack reservation lease create --physical-reservation
        # min=1,max=1,...' sends.
        reservation = {'resource_type': 'physical:host', 'min': 1,
                       'max': 1, 'hypervisor_properties': '',
                       'resource_properties': '["==", "$ssd", "true"]'}
        client = self._client('fake')
        lease = client.lease.create('bc-lease', self._at(hours=1),
                                    self._at(hours=3), [reservation], [])
        self.assertEqual('bc-lease', lease['name'])
        self.assertEqual('PENDING', lease['status'])
        self.assertEqual('2030-03-01T10:00:00.000000', lease['start_date'])
        self.assertEqual([lease['id']], [x['id'] for x in
                                         client.lease.list()])
        self.assertEqual(lease['id'], client.lease.get(lease['id'])['id'])
        allocations = admin.allocation.list('os-hosts')
        self.assertEqual(lease['id'],
                         allocations[0]['reservations'][0]['lease_id'])

        # Overlap: the client raises with our message and the 409.
        e = self.assertRaises(
            blazar_exc.BlazarClientException, client.lease.create,
            'clash', self._at(hours=2), self._at(hours=4), [reservation],
            [])
        self.assertEqual(409, e.kwargs['code'])
        self.assertIn('not enough free hosts', str(e))
        # Bad input: 400 naming the field.
        e = self.assertRaises(
            blazar_exc.BlazarClientException, client.lease.create,
            'bad', self._at(hours=5), self._at(hours=4), [reservation], [])
        self.assertEqual(400, e.kwargs['code'])
        self.assertIn('end_date', str(e))

        # Update: rename, prolong (the client computes the new end from
        # the start_date/end_date format we return), set the end.
        lease = client.lease.update(lease['id'], name='renamed',
                                    prolong_for='1h')
        self.assertEqual('renamed', lease['name'])
        self.assertEqual('2030-03-01T13:00:00.000000', lease['end_date'])
        lease = client.lease.update(lease['id'],
                                    end_date=self._at(hours=2))
        self.assertEqual('2030-03-01T11:00:00.000000', lease['end_date'])
        lease = client.lease.update(lease['id'], defer_by='30m')
        self.assertEqual('2030-03-01T10:30:00.000000', lease['start_date'])

        # Another project sees nothing of it.
        stranger = self._client('fake', project_id=OTHER_PROJECT)
        self.assertEqual([], stranger.lease.list())
        e = self.assertRaises(blazar_exc.BlazarClientException,
                              stranger.lease.delete, lease['id'])
        self.assertEqual(404, e.kwargs['code'])

        client.lease.delete(lease['id'])
        self.assertEqual([], client.lease.list())
        e = self.assertRaises(blazar_exc.BlazarClientException,
                              client.lease.get, lease['id'])
        self.assertEqual(404, e.kwargs['code'])
        admin.host.delete(host['id'])
        self.assertEqual([], admin.host.list())

    def _record_nova_answers(self):
        """[(path, status code)] of every answer of Nova's API (and of
        its authtoken) through the catalog, from now on.
        """
        seen = []
        edge = self.keystone._nova

        def recording(environ, start_response, path):
            def record(status, headers, exc_info=None):
                seen.append((path, int(status[:3])))
                return start_response(status, headers, exc_info)
            return edge(environ, record, path)
        self.useFixture(fixtures.MockPatchObject(self.keystone, '_nova',
                                                 recording))
        return seen

    def test_version_document_needs_no_token(self):
        # keystoneauth's version discovery reads the catalog endpoint
        # without a token first: it is answered at once, no 401 and no
        # second, authenticated request.
        seen = self._record_nova_answers()
        client = self._client('fake', override=False)
        self.assertEqual([], client.lease.list())
        self.assertEqual(
            [('/v2.1/os-reservation', 200), ('/v2.1/os-reservation/leases',
                                             200)], seen)
        sess = self.keystone.session('fake')
        for path in ('', '/v1', '/v1.0/'):
            resp = sess.get(self.keystone.reservation_url + path,
                            authenticated=False)
            self.assertEqual(200, resp.status_code)
            self.assertEqual('v1.0', resp.json()['versions'][0]['id'])
            self.assertEqual(
                '/v2.1/os-reservation', urlparse.urlsplit(resp.json()[
                    'versions'][0]['links'][0]['href']).path)
        # Only the version document: the resources need a token.
        for method, path in (('GET', '/leases'), ('GET', '/os-hosts'),
                             ('POST', '/leases'), ('POST', '')):
            resp = sess.request(self.keystone.reservation_url + path,
                                method, authenticated=False,
                                raise_exc=False, json={})
            self.assertEqual(401, resp.status_code, (method, path))

    def test_catalog_endpoint(self):
        client = self._client('fake', override=False)
        self.assertEqual([], client.lease.list())
        e = self.assertRaises(blazar_exc.BlazarClientException,
                              client.host.list)
        self.assertEqual(403, e.kwargs['code'])


class OSCMixin(object):
    """``openstack ...`` in process, as the harness's users."""

    CLOCK_START = datetime.datetime(2030, 3, 1, 9, 0, 0)

    def _osc(self, *args, user='fake'):
        from openstackclient.common import clientmanager as osc_manager
        from openstackclient import shell as osc_shell
        from osc_lib import clientmanager as osc_lib_manager

        # OSC puts a ClientCache descriptor per plugin (reservation, ...)
        # on osc_lib's ClientManager class, which keeps the first client it
        # made for the life of the process: a client of an earlier test
        # (its endpoint gone) would serve this one.
        for cls in osc_manager.ClientManager.__mro__:
            for value in vars(cls).values():
                if isinstance(value, osc_lib_manager.ClientCache):
                    value._handle = None
        argv = ['--os-auth-type', 'password',
                '--os-auth-url', self.keystone.auth_url,
                '--os-username', user,
                '--os-password', self.keystone.PASSWORD,
                '--os-user-domain-id', self.keystone.DOMAIN_ID,
                '--os-project-id', self.api.project_id,
                '--os-project-domain-id', self.keystone.DOMAIN_ID,
                '--os-region-name', self.keystone.REGION,
                '--os-interface', 'public'] + list(args)
        out, err = io.StringIO(), io.StringIO()
        with fixtures.MonkeyPatch('sys.stdout', out), \
                fixtures.MonkeyPatch('sys.stderr', err):
            code = osc_shell.main(argv)
        # sys.exit(None) is a success too.
        self.assertIn(code, (0, None),
                      '%s\n%s' % (out.getvalue(), err.getvalue()))
        return out.getvalue()

    def _osc_json(self, *args, **kwargs):
        text = self._osc(*(args + ('-f', 'json')), **kwargs)
        # 'create' commands print "Created a new lease:" first.
        starts = [i for i in (text.find('{'), text.find('[')) if i >= 0]
        try:
            return json.loads(text[min(starts):] if starts else text)
        except ValueError:
            self.fail('not JSON: %r' % text)

    def _osc_lease(self, name, reservation, hours=2):
        """``openstack reservation lease create`` from now, for ``hours``,
        with one ``--reservation``; the lease shown.
        """
        end = (self.clock.now + datetime.timedelta(hours=hours)).strftime(
            '%Y-%m-%d %H:%M')
        return self._osc_json(
            'reservation', 'lease', 'create', '--start-date', 'now',
            '--end-date', end, '--reservation', reservation, name)


class OpenStackCLITest(OSCMixin, base.LeaseFunctionalBase):
    """``openstack reservation ...`` (OSC + the blazarclient plugin)."""

    def test_lease_commands(self):
        created = self._osc_json('reservation', 'host', 'create', 'host1',
                                 '--extra', 'ssd=true', user='admin')
        self.assertEqual('host1', created['hypervisor_hostname'])
        hosts = self._osc_json('reservation', 'host', 'list', user='admin')
        self.assertEqual(['host1'], [h['hypervisor_hostname']
                                     for h in hosts])
        lease = self._osc_lease(
            'cli-lease', 'resource_type=physical:host,min=1,max=1,'
            'resource_properties=["==", "$ssd", "true"]')
        self.assertEqual('cli-lease', lease['name'])
        leases = self._osc_json('reservation', 'lease', 'list')
        self.assertEqual([lease['id']], [x['id'] for x in leases])
        self._osc('reservation', 'lease', 'set', '--name', 'renamed',
                  lease['id'])
        shown = self._osc_json('reservation', 'lease', 'show', lease['id'])
        self.assertEqual('renamed', shown['name'])
        self._osc('reservation', 'lease', 'delete', lease['id'])
        self.assertEqual([], self._osc_json('reservation', 'lease', 'list'))


class OpenStackCLIInstanceTest(OSCMixin, base.LeaseFunctionalBase):
    """Blazar's instance reservations from ``openstack reservation``."""

    def _engine(self):
        from nova_lease.periodic import engine as lease_engine
        from nova_lease.plugins.flavor import plugin as flavor_plugin

        conf = self.engine_conf(resource_plugins='flavor:instance',
                                plugin_call_timeout=60)
        engine = lease_engine.Engine(conf, plugins={
            flavor_plugin.RESOURCE_TYPE: flavor_plugin.FlavorPlugin(conf)})
        self.addCleanup(engine.close)
        return engine

    @staticmethod
    def _reservations(lease):
        # OSC prints each reservation as a JSON object, one per line
        # group.
        value = lease['reservations']
        if isinstance(value, str):
            value = json.loads('[%s]' % value.replace('}\n{', '},{'))
        return value if isinstance(value, list) else [value]

    def test_instance_reservation_commands(self):
        for host in ('host1', 'host2'):
            self._osc('reservation', 'host', 'create', host, user='admin')
        lease = self._osc_lease(
            'vm-lease', 'resource_type=virtual:instance,vcpus=1,'
            'memory_mb=512,disk_gb=1,amount=1,affinity=False,'
            'resource_properties=')
        [res] = self._reservations(lease)
        self.assertEqual('virtual:instance', res['resource_type'])
        self.assertEqual(1, res['amount'])
        self.assertFalse(res['affinity'])
        self._engine().process_due()
        shown = self._osc_json('reservation', 'lease', 'show', lease['id'])
        self.assertEqual('ACTIVE', shown['status'])
        # The reservation's flavor, as Blazar's users boot with it.
        flavor = self._osc_json('flavor', 'show', res['id'])
        self.assertEqual(res['id'], flavor['id'])
        self.assertEqual(1, flavor['vcpus'])
        # More instances, as a Blazar user asks for them: the second on
        # the other host (anti-affinity).
        self._osc('reservation', 'lease', 'set', '--reservation',
                  'id=%s,amount=2' % res['id'], lease['id'])
        shown = self._osc_json('reservation', 'lease', 'show', lease['id'])
        self.assertEqual(2, self._reservations(shown)[0]['amount'])
