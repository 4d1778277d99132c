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
"""The scripted scenario of ``nova-lease-sandbox --demo``.

A demo is a list of :class:`Step` s run in order against the running
sandbox, as the demo user (the admin only registers a host), through
Keystone, the compute HTTP API (the same path as the ``nova`` CLI) and the
lease API found through the catalog's ``reservation`` endpoint (the same
path as ``openstack reservation ...``). Each step prints timestamped lines
to the timeline. Later work extends :func:`default_steps`.
"""

import collections
import datetime
import json
import os
import signal
import subprocess
import sys
import time

from keystoneauth1 import exceptions as ks_exc
from oslo_utils import timeutils

from nova_lease import resource_types as types

#: The compute microversion the demo speaks (per call: nothing it does
#: needs a newer one).
COMPUTE_API_VERSION = '2.96'
#: The lease API microversion the demo speaks: 1.1 has ``lease_type``
#: (its best-effort lease), ``status_reason`` and ``best_effort_hosts``
#: (see doc/source/user/api.rst, "API versions").
LEASE_API_VERSION = '1.1'

Step = collections.namedtuple('Step', ['title', 'run'])


class DemoFailed(Exception):
    pass


class Timeline(object):
    """Prints ``HH:MM:SS.mmm (+elapsed) text`` lines."""

    def __init__(self, out=None):
        self.out = out or sys.stdout
        self.t0 = time.monotonic()

    def say(self, text, *args):
        if args:
            text = text % args
        now = timeutils.utcnow()
        self.out.write('%s (+%5.1fs) %s\n' % (
            now.strftime('%H:%M:%S.%f')[:12], time.monotonic() - self.t0,
            text))
        self.out.flush()


def _session(env):
    from keystoneauth1.identity import v3
    from keystoneauth1 import session

    auth = v3.Password(
        auth_url=env['OS_AUTH_URL'], username=env['OS_USERNAME'],
        password=env['OS_PASSWORD'],
        project_name=env['OS_PROJECT_NAME'],
        user_domain_name=env['OS_USER_DOMAIN_NAME'],
        project_domain_name=env['OS_PROJECT_DOMAIN_NAME'])
    return session.Session(auth=auth)


class Record(object):
    """A compute API object (a server, an aggregate) as attributes."""

    def __init__(self, info):
        self.__dict__.update(info)


class Compute(object):
    """The few compute calls the demo makes (openstacksdk's compute proxy,
    at :data:`COMPUTE_API_VERSION`).
    """

    def __init__(self, env):
        from openstack import connection

        self.session = _session(env)
        self.conn = connection.Connection(
            session=self.session, region_name=env.get('OS_REGION_NAME'),
            app_name='nova_lease-demo')

    def _call(self, method, path, key=None, body=None):
        from openstack import exceptions

        resp = self.conn.compute.request(
            path, method, json=body, microversion=COMPUTE_API_VERSION)
        exceptions.raise_from_response(resp)
        return resp.json()[key] if key else None

    def boot(self, name, image, flavor, hints=None, availability_zone=None):
        server = {'name': name, 'imageRef': image, 'flavorRef': flavor,
                  'networks': 'none'}
        if availability_zone:
            server['availability_zone'] = availability_zone
        body = {'server': server}
        if hints:
            body['os:scheduler_hints'] = hints
        return Record(self._call('POST', '/servers', 'server', body))

    def get(self, server_id):
        return Record(self._call('GET', '/servers/%s' % server_id, 'server'))

    def delete(self, server_id):
        self._call('DELETE', '/servers/%s' % server_id)

    def exists(self, server_id):
        from openstack import exceptions

        try:
            self.get(server_id)
        except exceptions.NotFoundException:
            return False
        return True

    def aggregates(self):
        return [Record(a) for a in self._call('GET', '/os-aggregates',
                                              'aggregates')]

    def create_aggregate(self, name):
        created = self._call('POST', '/os-aggregates', 'aggregate', {
            'aggregate': {'name': name, 'availability_zone': None}})
        # Nova's answer to a creation has no hosts and no metadata yet.
        return Record(dict({'hosts': [], 'metadata': {}}, **created))

    def add_aggregate_host(self, aggregate, host):
        return Record(self._call(
            'POST', '/os-aggregates/%s/action' % aggregate.id, 'aggregate',
            {'add_host': {'host': host}}))


class Reservation(object):
    """The lease API calls of ``openstack reservation ...``.

    Through the catalog's ``reservation`` endpoint, as python-blazarclient
    makes them, at :data:`LEASE_API_VERSION`.
    """

    def __init__(self, env):
        self.session = _session(env)
        self.filter = {'service_type': 'reservation', 'interface': 'public',
                       'region_name': env.get('OS_REGION_NAME')}

    def _call(self, method, path, body=None):
        resp = self.session.request(
            path, method, json=body, endpoint_filter=self.filter,
            headers={'OpenStack-API-Version':
                     'reservation %s' % LEASE_API_VERSION})
        return resp.json() if resp.content else None

    def register_host(self, name):
        return self._call('POST', '/os-hosts', {'name': name})['host']

    def create_lease(self, body):
        return self._call('POST', '/leases', body)['lease']

    def get_lease(self, lease_id):
        return self._call('GET', '/leases/%s' % lease_id)['lease']

    def delete_lease(self, lease_id):
        self._call('DELETE', '/leases/%s' % lease_id)


class Demo(object):
    """State shared by the steps of one demo run."""

    def __init__(self, env, timeline, timeout=60.0, admin_env=None,
                 engine=None, conf_path=None, page_path=None):
        self.env = env
        self.admin_env = admin_env
        self.engine = engine
        self.conf_path = conf_path
        self.page_path = page_path
        #: Servers and leases of the "book ahead" step, for its clean-up.
        self.booked_servers = []
        self.booked_leases = []
        self.timeline = timeline
        self.timeout = timeout
        self.compute = None
        self.server_id = None
        self.future_id = None
        self.host_lease_id = None
        self.reservation_id = None
        self.on_host_id = None
        self.bystanders = []
        self.lease_params = {'name': 'demo-lease', 'start': 'now',
                             'duration': '1h'}

    def say(self, text, *args):
        self.timeline.say('  ' + text, *args)

    def wait_for(self, what, predicate, interval=0.5):
        deadline = time.monotonic() + self.timeout
        while True:
            result = predicate()
            if result:
                return result
            if time.monotonic() > deadline:
                raise DemoFailed('timed out waiting for %s' % what)
            time.sleep(interval)


def _authenticate(demo):
    demo.compute = Compute(demo.env)
    project = demo.compute.session.get_project_id()
    demo.say('keystone %s: user %s, project %s (%s)',
             demo.env['OS_AUTH_URL'], demo.env['OS_USERNAME'],
             demo.env['OS_PROJECT_NAME'], project)
    endpoint = demo.compute.session.get_endpoint(
        service_type='compute', interface='public',
        region_name=demo.env.get('OS_REGION_NAME'))
    demo.say('compute endpoint from the catalog: %s', endpoint)


def _boot(demo):
    hints = {'reserved': 'True',
             'lease_params': json.dumps(demo.lease_params)}
    demo.say("nova boot --flavor %s --image %s --nic none "
             "--hint reserved=True --hint lease_params='%s' demo-vm1",
             demo.env['NOVA_LEASE_FLAVOR'], demo.env['NOVA_LEASE_IMAGE'],
             hints['lease_params'])
    server = demo.compute.boot('demo-vm1', demo.env['NOVA_LEASE_IMAGE'],
                               demo.env['NOVA_LEASE_FLAVOR'], hints)
    demo.server_id = server.id
    demo.say('accepted: server %s', server.id)


def _wait_active(demo):
    def _state():
        server = demo.compute.get(demo.server_id)
        if server.status == 'ERROR':
            raise DemoFailed('server went to ERROR: %s'
                             % getattr(server, 'fault', {}))
        return server if server.status == 'ACTIVE' else None

    server = demo.wait_for('ACTIVE', _state)
    demo.say('server %s is %s', server.id, server.status)


def _show(demo):
    server = demo.compute.get(demo.server_id)
    demo.say('name=%s status=%s flavor=%s', server.name, server.status,
             server.flavor.get('original_name'))
    demo.say('metadata=%s', json.dumps(server.metadata, sort_keys=True))


def _lease_started(demo):
    def _active():
        server = demo.compute.get(demo.server_id)
        return server if server.metadata.get('lease_status') == 'active' \
            else None

    server = demo.wait_for('the lease to start', _active)
    demo.say('lease %s started: lease_status=%s',
             server.metadata.get('lease_id'),
             server.metadata.get('lease_status'))


def _crash_engine(demo):
    engine = demo.engine
    if engine is None or not engine.running_pid:
        demo.say('no engine of the sandbox to crash (--no-engine): skipped')
        return
    old = engine.running_pid
    demo.say('kill -9 $(cat %s)   (nova-lease-engine, pid %d)',
             engine.pid_path, old)
    os.kill(old, signal.SIGKILL)
    new = demo.wait_for('a new engine', lambda: (
        engine.running_pid not in (None, old) and engine.running_pid))
    demo.say('the sandbox started a new engine: pid %d', new)
    server = demo.compute.get(demo.server_id)
    lease_id = server.metadata.get('lease_id')
    lease = Reservation(demo.env).get_lease(lease_id)
    if lease['status'] != 'ACTIVE':
        raise DemoFailed('lease %s is %s after the engine restart'
                         % (lease_id, lease['status']))
    demo.say('lease %s is still %s, server %s still %s', lease_id,
             lease['status'], server.id, server.status)


def _boot_future(demo):
    start = timeutils.utcnow() + datetime.timedelta(hours=1)
    params = {'name': 'demo-future', 'start': start.strftime(
        '%Y-%m-%d %H:%M'), 'duration': '1h'}
    hints = {'reserved': 'True', 'lease_params': json.dumps(params)}
    demo.say("nova boot --flavor %s --image %s --nic none "
             "--hint reserved=True --hint lease_params='%s' demo-vm2",
             demo.env['NOVA_LEASE_FLAVOR'], demo.env['NOVA_LEASE_IMAGE'],
             hints['lease_params'])
    server = demo.compute.boot('demo-vm2', demo.env['NOVA_LEASE_IMAGE'],
                               demo.env['NOVA_LEASE_FLAVOR'], hints)
    demo.future_id = server.id
    demo.say('accepted: server %s (lease starts at %s UTC)', server.id,
             params['start'])


def _wait_reserved(demo):
    def _state():
        server = demo.compute.get(demo.future_id)
        if server.status == 'ERROR':
            raise DemoFailed('server went to ERROR: %s'
                             % getattr(server, 'fault', {}))
        return server if server.status == 'SHELVED_OFFLOADED' else None

    server = demo.wait_for('SHELVED_OFFLOADED', _state)
    demo.say('server %s is %s until its lease starts, metadata=%s, '
             'tags=%s', server.id, server.status,
             json.dumps(server.metadata, sort_keys=True),
             getattr(server, 'tags', None))


def _delete_future(demo):
    lease_id = demo.compute.get(demo.future_id).metadata.get('lease_id')
    demo.compute.delete(demo.future_id)
    demo.wait_for('deletion', lambda: not demo.compute.exists(
        demo.future_id))
    demo.say('server %s deleted', demo.future_id)
    # The engine ends a lease whose server its user deleted when Nova's
    # notification reaches it (a second or so), or at its next reconcile
    # pass: the sandbox sends none. Its user deletes the lease too, so
    # that the promise goes now (a PENDING lease is removed at once).
    demo.say('openstack reservation lease delete %s', lease_id)
    try:
        Reservation(demo.env).delete_lease(lease_id)
    except ks_exc.NotFound:
        pass    # already ended and removed
    demo.say('lease %s deleted', lease_id)
    demo.future_id = None


def _delete(demo):
    demo.compute.delete(demo.server_id)
    demo.wait_for('deletion', lambda: not demo.compute.exists(
        demo.server_id))
    demo.say('server %s deleted', demo.server_id)
    demo.server_id = None


#: The fake compute host the demo leases whole (the largest; the VMs of
#: the earlier steps are gone by then).
DEMO_HOST = 'host3'


def _register_host(demo):
    if not demo.admin_env:
        raise DemoFailed('no admin credentials for registering a host')
    demo.say('openstack reservation host create %s   (as the admin)',
             DEMO_HOST)
    host = Reservation(demo.admin_env).register_host(DEMO_HOST)
    demo.say('host %s registered (id %s, %s vCPUs): it is in the free pool',
             host['hypervisor_hostname'], host['id'], host['vcpus'])


def _lease_host(demo):
    end = timeutils.utcnow() + datetime.timedelta(hours=1)
    end = end.strftime('%Y-%m-%d %H:%M')
    demo.say("openstack reservation lease create --reservation "
             "resource_type=physical:host,min=1,max=1,"
             "hypervisor_properties='[]',resource_properties='[]' "
             "--end-date '%s' demo-host-lease", end)
    lease = Reservation(demo.env).create_lease({
        'name': 'demo-host-lease', 'start_date': 'now', 'end_date': end,
        'reservations': [{'resource_type': types.HOST, 'min': 1,
                          'max': 1, 'hypervisor_properties': '[]',
                          'resource_properties': '[]'}],
        'events': []})
    demo.host_lease_id = lease['id']
    demo.reservation_id = lease['reservations'][0]['id']
    demo.say('lease %s is %s, reservation %s', lease['id'], lease['status'],
             demo.reservation_id)


def _lease_active(demo, lease_id, what, failed=('ERROR',), show=False):
    """Wait until the lease is ACTIVE (DemoFailed if it goes to one of
    ``failed``); with ``show``, say each status it is seen in.
    """
    api = Reservation(demo.env)
    seen = []

    def _active():
        lease = api.get_lease(lease_id)
        if lease['status'] in failed:
            raise DemoFailed('the %s is %s: %s' % (
                what, lease['status'], lease.get('status_reason')))
        if show and lease['status'] not in seen:
            seen.append(lease['status'])
            demo.say('lease %s is %s', lease['id'], lease['status'])
        return lease if lease['status'] == 'ACTIVE' else None

    return demo.wait_for('the %s to start' % what, _active)


def _end_lease(demo, lease_id, name, what):
    """``openstack reservation lease delete``; wait until TERMINATED."""
    api = Reservation(demo.env)
    demo.say('openstack reservation lease delete %s', name)
    api.delete_lease(lease_id)
    demo.wait_for('the %s to end' % what, lambda: api.get_lease(
        lease_id)['status'] == 'TERMINATED')


def _freepool_hosts(demo):
    """The hosts of the free pool (None: no free pool), as the admin."""
    pools = [a for a in Compute(demo.admin_env).aggregates()
             if a.name == 'freepool']
    return pools[0].hosts if pools else None


def _host_lease_started(demo):
    _lease_active(demo, demo.host_lease_id, 'host lease')
    demo.say('lease %s is ACTIVE: its host is in aggregate %s',
             demo.host_lease_id, demo.reservation_id)


def _boot_on_host(demo):
    hints = {'reservation': demo.reservation_id}
    demo.say('nova boot --flavor %s --image %s --nic none '
             '--hint reservation=%s demo-vm3', demo.env['NOVA_LEASE_FLAVOR'],
             demo.env['NOVA_LEASE_IMAGE'], demo.reservation_id)
    server = demo.compute.boot('demo-vm3', demo.env['NOVA_LEASE_IMAGE'],
                               demo.env['NOVA_LEASE_FLAVOR'], hints)
    demo.on_host_id = server.id

    def _state():
        server = demo.compute.get(demo.on_host_id)
        if server.status == 'ERROR':
            raise DemoFailed('server went to ERROR: %s'
                             % getattr(server, 'fault', {}))
        return server if server.status == 'ACTIVE' else None

    demo.wait_for('ACTIVE', _state)
    host = getattr(Compute(demo.admin_env).get(demo.on_host_id),
                   'OS-EXT-SRV-ATTR:host', None)
    if host != DEMO_HOST:
        raise DemoFailed('server %s is on %s, not on the leased %s'
                         % (demo.on_host_id, host, DEMO_HOST))
    demo.say('server %s is ACTIVE on %s (seen by the admin)',
             demo.on_host_id, host)


def _end_host_lease(demo):
    _end_lease(demo, demo.host_lease_id, 'demo-host-lease', 'host lease')
    demo.wait_for('the deletion of its server', lambda: not
                  demo.compute.exists(demo.on_host_id))
    if DEMO_HOST not in (_freepool_hosts(demo) or ()):
        raise DemoFailed('%s is not back in the free pool' % DEMO_HOST)
    demo.say('lease %s TERMINATED: server %s deleted, %s back in the free '
             'pool', demo.host_lease_id, demo.on_host_id, DEMO_HOST)
    demo.host_lease_id = demo.on_host_id = None


#: The compute hosts of the best-effort steps: the admin's bystanders run
#: there (one on the first, two on the second), and the lease takes the
#: free pool's host (DEMO_HOST) plus the cheapest of them to empty.
HUNT_HOSTS = ('host1', 'host2')
#: The sandbox's [nova_lease_api] best_effort_aggregate (nova_aio).
BEST_EFFORT_AGGREGATE = 'best-effort'


def _hunt_bystanders(demo):
    if not demo.admin_env:
        raise DemoFailed('no admin credentials for the bystanders')
    admin = Compute(demo.admin_env)
    demo.say('openstack aggregate create %s; openstack aggregate add host '
             '... %s   (the hosts best-effort leases may empty: '
             '[nova_lease_api] best_effort_aggregate)', BEST_EFFORT_AGGREGATE,
             ' '.join(HUNT_HOSTS))
    found = [a for a in admin.aggregates()
             if a.name == BEST_EFFORT_AGGREGATE]
    aggregate = found[0] if found else admin.create_aggregate(
        BEST_EFFORT_AGGREGATE)
    for host in HUNT_HOSTS:
        if host not in (aggregate.hosts or []):
            aggregate = admin.add_aggregate_host(aggregate, host)
    demo.bystanders = []
    for host, count in zip(HUNT_HOSTS, (1, 2)):
        for i in range(count):
            demo.say('nova boot --availability-zone nova:%s ... '
                     'bystander-%s-%d   (as the admin: no lease)',
                     host, host, i)
            server = admin.boot(
                'bystander-%s-%d' % (host, i),
                demo.env['NOVA_LEASE_IMAGE'], demo.env['NOVA_LEASE_FLAVOR'],
                availability_zone='nova:%s' % host)
            demo.bystanders.append(server.id)
    for server_id in demo.bystanders:
        demo.wait_for('bystander %s to be ACTIVE' % server_id,
                      lambda sid=server_id: admin.get(sid).status ==
                      'ACTIVE')
    demo.say('%d bystanders ACTIVE: %s has 1, %s has 2; only %s is in the '
             'free pool', len(demo.bystanders), HUNT_HOSTS[0],
             HUNT_HOSTS[1], DEMO_HOST)


def _best_effort_lease(demo):
    end = timeutils.utcnow() + datetime.timedelta(hours=1)
    end = end.strftime('%Y-%m-%d %H:%M')
    demo.say('POST /v2.1/os-reservation/leases {"lease_type": '
             '"best_effort", "reservations": [{"resource_type": '
             '"physical:host", "min": 2, "max": 2, ...}], ...}')
    lease = Reservation(demo.env).create_lease({
        'name': 'demo-best-effort', 'start_date': 'now', 'end_date': end,
        'lease_type': 'best_effort',
        'reservations': [{'resource_type': types.HOST, 'min': 2,
                          'max': 2, 'hypervisor_properties': '',
                          'resource_properties': ''}],
        'events': []})
    demo.host_lease_id = lease['id']
    demo.reservation_id = lease['reservations'][0]['id']
    demo.say('lease %s is %s: %d of its 2 hosts taken from the cloud '
             '(its servers to be migrated away)', lease['id'],
             lease['status'], lease['reservations'][0].get(
                 'best_effort_hosts', 0))


def _best_effort_started(demo):
    _lease_active(demo, demo.host_lease_id, 'best-effort lease',
                  failed=('ERROR', 'TIMEDOUT'), show=True)
    admin = Compute(demo.admin_env)
    [aggregate] = [a for a in admin.aggregates()
                   if a.name == demo.reservation_id]
    demo.say('its aggregate %s holds %s (seen by the admin)',
             aggregate.name, ', '.join(sorted(aggregate.hosts)))
    for server_id in demo.bystanders:
        server = admin.get(server_id)
        host = getattr(server, 'OS-EXT-SRV-ATTR:host', None)
        if host in aggregate.hosts or server.status != 'ACTIVE':
            raise DemoFailed('bystander %s is %s on %s' % (
                server.id, server.status, host))
        demo.say('bystander %s is %s on %s', server.id, server.status,
                 host)


def _end_best_effort(demo):
    _end_lease(demo, demo.host_lease_id, 'demo-best-effort',
               'best-effort lease')
    pool = _freepool_hosts(demo)
    if pool != [DEMO_HOST]:
        raise DemoFailed('the free pool holds %s, not only %s' % (
            pool, DEMO_HOST))
    admin = Compute(demo.admin_env)
    for server_id in demo.bystanders:
        if admin.get(server_id).status != 'ACTIVE':
            raise DemoFailed('bystander %s is not ACTIVE' % server_id)
        admin.delete(server_id)
    demo.say('lease %s TERMINATED: only %s in the free pool, the host '
             'taken from the cloud back in the cloud; every bystander was '
             'ACTIVE (now deleted)', demo.host_lease_id, DEMO_HOST)
    demo.host_lease_id, demo.bystanders = None, []
    demo.reservation_id = None


def _boot_leased(demo, name, params, wait):
    hints = {'reserved': 'True', 'lease_params': json.dumps(params)}
    demo.say("nova boot --flavor %s --image %s --nic none "
             "--hint reserved=True --hint lease_params='%s' %s",
             demo.env['NOVA_LEASE_FLAVOR'], demo.env['NOVA_LEASE_IMAGE'],
             hints['lease_params'], name)
    server = demo.compute.boot(name, demo.env['NOVA_LEASE_IMAGE'],
                               demo.env['NOVA_LEASE_FLAVOR'], hints)
    demo.booked_servers.append(server.id)

    def _state():
        server_now = demo.compute.get(server.id)
        if server_now.status == 'ERROR':
            raise DemoFailed('server went to ERROR: %s'
                             % getattr(server_now, 'fault', {}))
        return server_now if server_now.status == wait else None

    demo.wait_for(wait, _state)
    demo.say('server %s is %s', server.id, wait)


def _book_ahead(demo):
    now = timeutils.utcnow()

    def _at(minutes):
        return (now + datetime.timedelta(minutes=minutes)).strftime(
            '%Y-%m-%d %H:%M')

    _boot_leased(demo, 'demo-vm4', {'name': 'demo-training',
                                    'start': 'now', 'duration': '2h'},
                 'ACTIVE')
    _boot_leased(demo, 'demo-vm5', {'name': 'demo-nightly',
                                    'start': _at(60), 'duration': '3h'},
                 'SHELVED_OFFLOADED')
    demo.say("openstack reservation lease create --reservation "
             "resource_type=physical:host,min=1,max=1,"
             "hypervisor_properties='[]',resource_properties='[]' "
             "--start-date '%s' --end-date '%s' demo-host-later",
             _at(30), _at(240))
    lease = Reservation(demo.env).create_lease({
        'name': 'demo-host-later', 'start_date': _at(30),
        'end_date': _at(240),
        'reservations': [{'resource_type': types.HOST, 'min': 1,
                          'max': 1, 'hypervisor_properties': '[]',
                          'resource_properties': '[]'}],
        'events': []})
    demo.booked_leases.append(lease['id'])
    demo.say('lease %s is %s: %s is booked from %s to %s UTC', lease['id'],
             lease['status'], DEMO_HOST, _at(30), _at(240))


#: The window of the demo's capacity page: from a little before now to
#: a few hours ahead, in 15-minute steps.
PAGE_WINDOW = (datetime.timedelta(minutes=-30), datetime.timedelta(hours=5),
               datetime.timedelta(minutes=15))


def capacity_page_command(conf_path, output, now):
    """The nova-lease-manage command line that writes the demo's page."""
    start = now + PAGE_WINDOW[0]
    start = start.replace(minute=start.minute - start.minute % 15,
                          second=0, microsecond=0)
    end = start + PAGE_WINDOW[1]
    return [sys.executable, '-m', 'nova_lease.cmd.manage',
            '--config-file', conf_path, 'capacity',
            '--start', start.strftime('%Y-%m-%dT%H:%M:%SZ'),
            '--end', end.strftime('%Y-%m-%dT%H:%M:%SZ'),
            '--step', str(int(PAGE_WINDOW[2].total_seconds())),
            '--detail', '--format', 'html', '--output', output]


def _capacity_page(demo):
    if not demo.conf_path or not demo.page_path:
        demo.say('no nova.conf of the sandbox given: skipped')
        return
    command = capacity_page_command(demo.conf_path, demo.page_path,
                                    timeutils.utcnow())
    demo.say('nova-lease-manage --config-file %s %s', demo.conf_path,
             ' '.join(command[5:]))
    proc = subprocess.run(command, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True,
                          timeout=demo.timeout * 2)
    if proc.returncode != 0:
        raise DemoFailed('nova-lease-manage capacity exited with %d: %s'
                         % (proc.returncode, proc.stderr.strip()[-2000:]))
    demo.say('capacity page: %s (open it in a browser)', demo.page_path)


def _end_bookings(demo):
    api = Reservation(demo.env)
    for lease_id in demo.booked_leases:
        api.delete_lease(lease_id)
        demo.say('lease %s deleted', lease_id)
    demo.booked_leases = []
    for server_id in demo.booked_servers:
        demo.compute.delete(server_id)
    for server_id in demo.booked_servers:
        demo.wait_for('deletion', lambda: not demo.compute.exists(
            server_id))
        demo.say('server %s deleted (and its lease)', server_id)
    demo.booked_servers = []


def default_steps():
    """The demo's steps, in order. Extend here."""
    return [
        Step('authenticate as the demo user', _authenticate),
        Step('boot a VM with lease hints', _boot),
        Step('wait for it to become ACTIVE', _wait_active),
        Step('wait for the engine to start its lease', _lease_started),
        Step('show it', _show),
        Step('crash the engine; the sandbox starts a new one',
             _crash_engine),
        Step('boot a VM for a lease that starts in an hour', _boot_future),
        Step('show it reserved (it is created at its lease\'s start)',
             _wait_reserved),
        Step('delete the reserved VM and its lease', _delete_future),
        Step('delete the first VM', _delete),
        Step('register a compute host for host leases', _register_host),
        Step('lease that whole host from now for an hour', _lease_host),
        Step('wait for the engine to start the host lease',
             _host_lease_started),
        Step('boot a VM onto the leased host', _boot_on_host),
        Step('end the host lease early', _end_host_lease),
        Step('boot bystanders of another project on two hosts',
             _hunt_bystanders),
        Step('lease two hosts, best effort, when one is free',
             _best_effort_lease),
        Step('wait while it empties a host (IN_PROGRESS, then ACTIVE)',
             _best_effort_started),
        Step('end the best-effort lease', _end_best_effort),
        Step('book the coming hours: a VM now, a VM and the host later',
             _book_ahead),
        Step('draw the cloud\'s capacity over time as a page',
             _capacity_page),
        Step('end those bookings', _end_bookings),
    ]


def run(env, out=None, steps=None, timeout=60.0, admin_env=None,
        engine=None, conf_path=None, page_path=None):
    """Run the demo; return True if every step passed.

    ``env`` is the demo user's openrc, ``admin_env`` the admin's (for the
    host registration step); ``engine`` the sandbox's
    :class:`nova_lease.sandbox.engine.EngineProcess` (for the crash step);
    ``conf_path`` the sandbox's nova.conf and ``page_path`` where the
    capacity page goes (for the page step).
    """
    timeline = Timeline(out)
    demo = Demo(env, timeline, timeout=timeout, admin_env=admin_env,
                engine=engine, conf_path=conf_path, page_path=page_path)
    steps = default_steps() if steps is None else steps
    timeline.say('demo: %d steps', len(steps))
    for number, step in enumerate(steps, 1):
        timeline.say('step %d/%d: %s', number, len(steps), step.title)
        try:
            step.run(demo)
        except Exception as e:
            timeline.say('step %d FAILED: %s: %s', number,
                         type(e).__name__, e)
            for server_id in [demo.server_id, demo.future_id,
                              demo.on_host_id] + demo.booked_servers:
                if server_id and demo.compute:
                    try:
                        demo.compute.delete(server_id)
                    except Exception:  # best effort clean-up
                        pass
            for lease_id in [demo.host_lease_id] + demo.booked_leases:
                if not lease_id:
                    continue
                try:
                    Reservation(env).delete_lease(lease_id)
                except Exception:  # best effort clean-up
                    pass
            for server_id in demo.bystanders:
                try:
                    Compute(admin_env).delete(server_id)
                except Exception:  # best effort clean-up
                    pass
            return False
    timeline.say('demo: done')
    return True
