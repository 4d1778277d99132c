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
"""GET /os-reservation/usage and the billing fields of the lease
notifications, for a host lease and two VM leases run by the engine on
the in-process Nova, against hand-computed figures.
"""

import datetime
import time

from oslo_serialization import jsonutils

from nova_lease import compute
from nova_lease.compute_hook import hook as compute_hook
from nova_lease import notifications
from nova_lease.plugins.instance import plugin as instance_plugin
from tests.functional import base
from tests.functional import test_host_reservation
from tests.functional import test_lease_api

PREFIX = test_lease_api.PREFIX


class _Recorder(object):
    """The engine's notifier: the payloads it would send."""

    def __init__(self):
        self.sent = []

    def notify(self, event_type, lease, reservations=None, usage=None):
        self.sent.append((event_type, notifications.lease_payload(
            lease, reservations, usage)['nova_object.data']))
        return True

    def of(self, event_type, lease_id, timeout=10):
        """The payloads of event_type about the lease; waits for one
        (the engine notifies from a thread of its own).
        """
        deadline = time.monotonic() + timeout
        while True:
            found = [data for etype, data in list(self.sent)
                     if etype == event_type and data['id'] == lease_id]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.05)


def _figures(lease_hours, host_hours, vcpu, memory, disk):
    return {'lease_hours': lease_hours, 'host_hours': host_hours,
            'vcpu_hours': vcpu, 'memory_mb_hours': memory,
            'disk_gb_hours': disk}


class UsageTest(test_host_reservation.HostLeaseMixin,
                base.LeaseFunctionalBase):

    CLOCK_START = datetime.datetime(2030, 1, 1, 12, 0, 0)
    MORE_PLUGINS = {instance_plugin.RESOURCE_TYPE:
                    instance_plugin.InstancePlugin}

    def setUp(self):
        super().setUp()
        self.notified = _Recorder()
        self.engine.notifier = self.notified
        self.engine.plugins[
            instance_plugin.RESOURCE_TYPE].compute.poll_interval = 0.1
        self.hook = compute_hook.ComputeHook(
            self.engine.conf, db=self.lease_db,
            compute_client=compute.ComputeClient(
                self.keystone.session('admin'),
                region_name=self.keystone.REGION))

    def _usage(self, api=None, status=200, **query):
        url = PREFIX + '/usage'
        if query:
            url += '?' + '&'.join('%s=%s' % kv for kv in sorted(
                query.items()))
        return (api or self.api).api_get(
            url, check_response_status=[status]).body

    def _vm_lease(self, name, end):
        params = {'name': name, 'start': 'now', 'end': end}
        return self._boot(hints={'reserved': 'True',
                                 'lease_params': jsonutils.dumps(params)},
                          name=name)

    def _lease_named(self, name):
        return [x for x in self.api.api_get(PREFIX + '/leases').body[
            'leases'] if x['name'] == name][0]

    def test_usage_of_host_and_vm_leases(self):
        host = self._register('host2')
        # The registered host's sizes, which a host lease holds whole.
        self.assertEqual((8, 16384, 200), (host['vcpus'], host['memory_mb'],
                                           host['local_gb']))
        hosts = self._create(self._lease_body('now', '2030-01-01 14:00',
                                              name='hosts'))
        # Flavor 1: 1 vCPU, 512 MB, 1 GB.
        self._vm_lease('vm-a', '2030-01-01 13:00')
        doomed = self._vm_lease('vm-b', '2030-01-01 14:00')
        self.assertEqual(3, self.engine.process_due())
        for name in ('hosts', 'vm-a', 'vm-b'):
            self.assertEqual('ACTIVE', self._lease_named(name)['status'])

        # 12:30: vm-b's server is deleted; the compute hook's reconcile
        # pass ends its lease early.
        self.clock.advance(minutes=30)
        self.api.delete_server(doomed['id'])
        self._wait_until_deleted(doomed)
        self.hook.reconcile()
        self.assertEqual('TERMINATED', self._lease_named('vm-b')['status'])
        # 13:00: vm-a ends on time (and its before_end, an hour before,
        # ran at the start).
        self.clock.advance(minutes=30)
        self.engine.process_due()
        self.assertEqual('TERMINATED', self._lease_named('vm-a')['status'])

        # 13:30, the host lease still running. Reserved: hosts 2 h of
        # host2 (8 vCPUs, 16 GB, 200 GB); vm-a 1 h, vm-b 0.5 h (ended at
        # 12:30) of flavor 1. Used: the same, but hosts until now, 1.5 h.
        self.clock.advance(minutes=30)
        body = self._usage(start='2030-01-01%2011:00',
                           end='2030-01-01%2015:00')
        self.assertEqual(('2030-01-01T11:00:00.000000',
                          '2030-01-01T15:00:00.000000',
                          '2030-01-01T13:30:00.000000'),
                         (body['start'], body['end'], body['now']))
        [project] = body['projects']
        self.assertEqual(self.api.project_id, project['project_id'])
        self.assertEqual(_figures(3.5, 2.0, 17.5, 33536.0, 401.5),
                         project['reserved'])
        self.assertEqual(_figures(3.0, 1.5, 13.5, 25344.0, 301.5),
                         project['used'])
        by_name = {x['name']: x for x in project['leases']}
        self.assertEqual(
            (hosts['id'], 'ACTIVE', 'scheduled', '2030-01-01T12:00:00.000000',
             '2030-01-01T14:00:00.000000'),
            tuple(by_name['hosts'][k] for k in (
                'id', 'status', 'lease_type', 'start_date', 'end_date')))
        self.assertEqual(_figures(2.0, 2.0, 16.0, 32768.0, 400.0),
                         by_name['hosts']['reserved'])
        self.assertEqual(_figures(1.5, 1.5, 12.0, 24576.0, 300.0),
                         by_name['hosts']['used'])
        self.assertEqual(_figures(1.0, 0.0, 1.0, 512.0, 1.0),
                         by_name['vm-a']['used'])
        self.assertEqual(_figures(0.5, 0.0, 0.5, 256.0, 0.5),
                         by_name['vm-b']['reserved'])
        self.assertEqual(by_name['vm-b']['reserved'],
                         by_name['vm-b']['used'])
        # A window that ends before now cuts every lease: 12:15 to 12:45.
        [project] = self._usage(start='2030-01-01%2012:15',
                                end='2030-01-01%2012:45')['projects']
        self.assertEqual(_figures(1.25, 0.5, 4.75, 8576.0, 100.75),
                         project['used'])

        # 14:00: the host lease ends; its lease.end carries what billing
        # needs (its host, the hours).
        self.clock.advance(minutes=30)
        self.engine.process_due()
        [project] = self._usage(start='2030-01-01%2011:00',
                                end='2030-01-01%2015:00')['projects']
        self.assertEqual(project['reserved'], project['used'])
        [end] = self.notified.of('lease.end', hosts['id'])
        self.assertEqual(('hosts', self.api.project_id, 'TERMINATED'),
                         (end['name'], end['project_id'], end['status']))
        [reservation] = end['reservations']
        self.assertEqual(
            {'resource_type': 'physical:host', 'amount': 1,
             'hosts': ['host2'], 'vcpus': 8, 'memory_mb': 16384,
             'disk_gb': 200},
            {k: reservation[k] for k in ('resource_type', 'amount', 'hosts',
                                         'vcpus', 'memory_mb', 'disk_gb')})
        self.assertEqual(
            {'reserved': _figures(2.0, 2.0, 16.0, 32768.0, 400.0),
             'used': _figures(2.0, 2.0, 16.0, 32768.0, 400.0)},
            end['usage'])
        [start] = self.notified.of('lease.start', hosts['id'])
        self.assertIsNone(start['usage'])
        self.assertEqual(['host2'], start['reservations'][0]['hosts'])
        vm_a = self._lease_named('vm-a')['id']
        [end] = self.notified.of('lease.end', vm_a)
        self.assertEqual(
            ({'resource_type': 'virtual:instance', 'amount': 1,
              'hosts': [], 'vcpus': 1, 'memory_mb': 512, 'disk_gb': 1},
             1.0, 1.0),
            ({k: end['reservations'][0][k] for k in (
                'resource_type', 'amount', 'hosts', 'vcpus', 'memory_mb',
                'disk_gb')},
             end['usage']['reserved']['vcpu_hours'],
             end['usage']['used']['lease_hours']))

    def test_who_sees_what_and_bad_input(self):
        self._register('host2')
        self._create(self._lease_body('now', '2030-01-01 13:00'))
        other = self._other_api()
        self._create(self._lease_body('2030-01-01 13:00',
                                      '2030-01-01 14:00', name='theirs'),
                     api=other)
        window = {'start': '2030-01-01%2012:00', 'end': '2030-01-01%2014:00'}
        mine, theirs = self.api.project_id, test_lease_api.OTHER_PROJECT
        # A member sees their own project, and nothing else.
        body = self._usage(**window)
        self.assertEqual([mine], [p['project_id'] for p in body['projects']])
        self.assertEqual([mine], [p['project_id'] for p in self._usage(
            project_id=mine, **window)['projects']])
        self._usage(status=403, project_id=theirs, **window)
        self.assertEqual([theirs], [p['project_id'] for p in self._usage(
            api=other, **window)['projects']])
        self._usage(api=other, status=403, project_id=mine, **window)
        # An admin sees every project, or the one asked for.
        self.assertEqual(sorted([mine, theirs]), sorted(
            p['project_id'] for p in self._usage(
                api=self.admin_api, **window)['projects']))
        [project] = self._usage(api=self.admin_api, project_id=theirs,
                                **window)['projects']
        self.assertEqual(_figures(1.0, 1.0, 8.0, 16384.0, 200.0),
                         project['reserved'])
        self.assertEqual(_figures(0.0, 0.0, 0.0, 0.0, 0.0),
                         project['used'])
        # Defaults: the 30 days to now.
        body = self._usage()
        self.assertEqual(('2029-12-02T12:00:00.000000',
                          '2030-01-01T12:00:00.000000'),
                         (body['start'], body['end']))
        # Bad input names the field.
        for query, field in (({'start': 'soon'}, 'start'),
                             ({'end': '2029-13-01%2010:00'}, 'end'),
                             ({'start': '2030-01-02%2000:00',
                               'end': '2030-01-01%2000:00'}, 'end'),
                             ({'projet_id': 'x'}, 'projet_id')):
            body = self._usage(status=400, **query)
            self.assertIn("'%s'" % field, body['error_message'])
