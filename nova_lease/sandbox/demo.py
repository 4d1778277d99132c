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
sandbox, as the demo user, through Keystone and the compute HTTP API (the
same path as the ``nova`` CLI). Each step prints timestamped lines to the
timeline. Later work extends :func:`default_steps` (lease listing, shelving
of a future lease, start/end on an accelerated clock).
"""

import collections
import datetime
import json
import sys
import time

from oslo_utils import timeutils

#: The compute microversion the demo speaks (python-novaclient's maximum).
COMPUTE_API_VERSION = '2.96'

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


class Compute(object):
    """The few compute calls the demo makes (python-novaclient 2.96)."""

    def __init__(self, env):
        from keystoneauth1.identity import v3
        from keystoneauth1 import session
        from novaclient import client

        auth = v3.Password(
            auth_url=env['OS_AUTH_URL'], username=env['OS_USERNAME'],
            password=env['OS_PASSWORD'],
            project_name=env['OS_PROJECT_NAME'],
            user_domain_name=env['OS_USER_DOMAIN_NAME'],
            project_domain_name=env['OS_PROJECT_DOMAIN_NAME'])
        self.session = session.Session(auth=auth)
        self.nova = client.Client(COMPUTE_API_VERSION, session=self.session,
                                  region_name=env.get('OS_REGION_NAME'))

    def boot(self, name, image, flavor, hints):
        return self.nova.servers.create(name, image, flavor, nics='none',
                                        scheduler_hints=hints)

    def get(self, server_id):
        return self.nova.servers.get(server_id)

    def delete(self, server_id):
        self.nova.servers.delete(server_id)

    def exists(self, server_id):
        from novaclient import exceptions
        try:
            self.nova.servers.get(server_id)
        except exceptions.NotFound:
            return False
        return True


class Demo(object):
    """State shared by the steps of one demo run."""

    def __init__(self, env, timeline, timeout=60.0):
        self.env = env
        self.timeline = timeline
        self.timeout = timeout
        self.compute = None
        self.server_id = None
        self.future_id = None
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
    demo.compute.delete(demo.future_id)
    demo.wait_for('deletion', lambda: not demo.compute.exists(
        demo.future_id))
    demo.say('server %s deleted (its lease ends early)', demo.future_id)
    demo.future_id = None


def _delete(demo):
    demo.compute.delete(demo.server_id)
    demo.wait_for('deletion', lambda: not demo.compute.exists(
        demo.server_id))
    demo.say('server %s deleted', demo.server_id)
    demo.server_id = None


def default_steps():
    """The demo's steps, in order. Extend here."""
    return [
        Step('authenticate as the demo user', _authenticate),
        Step('boot a VM with lease hints', _boot),
        Step('wait for it to become ACTIVE', _wait_active),
        Step('wait for the engine to start its lease', _lease_started),
        Step('show it', _show),
        Step('boot a VM for a lease that starts in an hour', _boot_future),
        Step('wait until it is reserved (shelved) by the compute hook',
             _wait_reserved),
        Step('delete the reserved VM', _delete_future),
        Step('delete the first VM', _delete),
    ]


def run(env, out=None, steps=None, timeout=60.0):
    """Run the demo; return True if every step passed."""
    timeline = Timeline(out)
    demo = Demo(env, timeline, timeout=timeout)
    steps = default_steps() if steps is None else steps
    timeline.say('demo: %d steps', len(steps))
    for number, step in enumerate(steps, 1):
        timeline.say('step %d/%d: %s', number, len(steps), step.title)
        try:
            step.run(demo)
        except Exception as e:
            timeline.say('step %d FAILED: %s: %s', number,
                         type(e).__name__, e)
            for server_id in (demo.server_id, demo.future_id):
                if server_id and demo.compute:
                    try:
                        demo.compute.delete(server_id)
                    except Exception:  # best effort clean-up
                        pass
            return False
    timeline.say('demo: done')
    return True
