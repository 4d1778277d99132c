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
"""nova_lease.usage against hand-computed figures."""

import datetime

import testtools

from nova_lease import usage


def _t(day, hour, minute=0, second=0):
    return datetime.datetime(2030, 1, day, hour, minute, second)


def _event(etype, status, at=None, last_error=None):
    return {'event_type': etype, 'status': status, 'updated_at': at,
            'last_error': last_error}


def _host_lease():
    # 10:00 to 14:00 on two hosts (8 + 4 vCPUs, 16 + 8 GB, 100 + 50 GB);
    # started 36 s late, ended on time (recorded 10 s after).
    return {
        'id': 'H', 'name': 'hosts', 'project_id': 'p1', 'user_id': 'u1',
        'status': 'TERMINATED', 'lease_type': 'scheduled',
        'start_date': _t(1, 10), 'end_date': _t(1, 14),
        'events': [_event('start_lease', 'DONE', _t(1, 10, 0, 36)),
                   _event('end_lease', 'DONE', _t(1, 14, 0, 10))],
        'reservations': [{
            'resource_type': 'physical:host', 'status': 'deleted',
            'updated_at': _t(1, 14, 0, 10), 'properties': {},
            'hosts': [{'vcpus': 8, 'memory_mb': 16384, 'local_gb': 100},
                      {'vcpus': 4, 'memory_mb': 8192, 'local_gb': 50}]}]}


def _vm_lease():
    # 22:00 to 02:00 the next day, two servers of 2 vCPUs, 2 GB, 20 GB;
    # the second one deleted at 23:30; still running.
    flavor = {'vcpus': 2, 'memory_mb': 2048, 'disk_gb': 20}
    return {
        'id': 'V', 'name': 'vms', 'project_id': 'p1', 'user_id': 'u1',
        'status': 'ACTIVE', 'lease_type': 'scheduled',
        'start_date': _t(1, 22), 'end_date': _t(2, 2),
        'events': [_event('start_lease', 'DONE', _t(1, 22)),
                   _event('end_lease', 'UNDONE', _t(1, 21))],
        'reservations': [
            {'resource_type': 'virtual:instance', 'status': 'active',
             'updated_at': _t(1, 22), 'properties': flavor},
            {'resource_type': 'virtual:instance', 'status': 'deleted',
             'updated_at': _t(1, 23, 30), 'properties': flavor}]}


def _failed_lease():
    # Another project: 3 slots of 1 vCPU, 512 MB, 10 GB, 20:00 to
    # 21:00; its start failed.
    return {
        'id': 'F', 'name': 'failed', 'project_id': 'p0', 'user_id': 'u0',
        'status': 'ERROR', 'lease_type': 'scheduled',
        'start_date': _t(1, 20), 'end_date': _t(1, 21),
        'events': [_event('start_lease', 'ERROR', _t(1, 20))],
        'reservations': [{
            'resource_type': 'flavor:instance', 'status': 'error',
            'updated_at': _t(1, 20, 0, 5),
            'properties': {'amount': 3, 'vcpus': 1, 'memory_mb': 512,
                           'disk_gb': 10}}]}


def _later_lease():
    return dict(_failed_lease(), id='L', start_date=_t(3, 1),
                end_date=_t(3, 2), events=[])


NOW = _t(2, 1)


class UsageTest(testtools.TestCase):

    def _figures(self, lease_hours, host_hours, vcpu, memory, disk):
        return dict(zip(usage.FIELDS, (lease_hours, host_hours, vcpu,
                                       memory, disk)))

    def test_host_lease(self):
        got = usage.lease_usage(_host_lease(), _t(1, 0), _t(2, 0), NOW)
        # 4 h on 12 vCPUs, 24 GB, 150 GB.
        self.assertEqual(self._figures(4.0, 8.0, 48.0, 98304.0, 600.0),
                         got['reserved'])
        # Used from 10:00:36 to 14:00 (the lease's end): 3.99 h.
        used = {k: round(v, 6) for k, v in got['used'].items()}
        self.assertEqual(self._figures(3.99, 7.98, 47.88, 98058.24, 598.5),
                         used)

    def test_window_cuts_the_lease(self):
        # 09:00 to 11:00: one hour reserved, 59 min 24 s used.
        got = usage.lease_usage(_host_lease(), _t(1, 9), _t(1, 11), NOW)
        self.assertEqual(self._figures(1.0, 2.0, 12.0, 24576.0, 150.0),
                         got['reserved'])
        self.assertEqual(0.99, round(got['used']['lease_hours'], 6))
        got = usage.lease_usage(_host_lease(), _t(1, 14), _t(1, 15), NOW)
        self.assertEqual(usage.zero(), got['reserved'])
        self.assertEqual(usage.zero(), got['used'])

    def test_vm_lease_deleted_server_and_now(self):
        # Window ends at midnight: 2 h of the lease; the second server
        # 1.5 h. Used as much (it started on time, still runs).
        got = usage.lease_usage(_vm_lease(), _t(1, 0), _t(2, 0), NOW)
        expected = self._figures(2.0, 0.0, 7.0, 7168.0, 70.0)
        self.assertEqual(expected, got['reserved'])
        self.assertEqual(expected, got['used'])
        # To 06:00: 4 h reserved (second server still 1.5 h), used until
        # now (01:00): 3 h.
        got = usage.lease_usage(_vm_lease(), _t(1, 0), _t(2, 6), NOW)
        self.assertEqual(self._figures(4.0, 0.0, 11.0, 11264.0, 110.0),
                         got['reserved'])
        self.assertEqual(self._figures(3.0, 0.0, 9.0, 9216.0, 90.0),
                         got['used'])

    def test_failed_start_is_reserved_not_used(self):
        got = usage.lease_usage(_failed_lease(), _t(1, 0), _t(2, 0), NOW)
        # The slots were promised for 20:00 to 20:00:05 (their
        # reservation went to error then): 3 x 5 s.
        self.assertEqual(1.0, got['reserved']['lease_hours'])
        self.assertEqual(round(3 * 5 / 3600.0, 6),
                         round(got['reserved']['vcpu_hours'], 6))
        self.assertEqual(usage.zero(), got['used'])

    def test_early_end_and_pending(self):
        # Dates 01:00 to 05:00, started at 01:00, its only server deleted
        # at 02:00: the lease ended early (end event cancelled then).
        lease = dict(_vm_lease(), start_date=_t(1, 1), end_date=_t(1, 5),
                     status='TERMINATED')
        lease['events'] = [
            _event('start_lease', 'DONE', _t(1, 1)),
            _event('end_lease', 'DONE', _t(1, 2),
                   'cancelled: every server of the lease was deleted')]
        lease['reservations'] = lease['reservations'][:1]
        lease['reservations'][0].update(status='deleted',
                                        updated_at=_t(1, 2))
        got = usage.lease_usage(lease, _t(1, 0), _t(2, 0), NOW)
        expected = self._figures(1.0, 0.0, 2.0, 2048.0, 20.0)
        self.assertEqual(expected, got['reserved'])
        self.assertEqual(expected, got['used'])
        # Not started yet (a future lease): reserved, not used.
        lease = dict(_vm_lease(), status='PENDING',
                     events=[_event('start_lease', 'UNDONE', _t(1, 22))])
        for r in lease['reservations']:
            r['status'] = 'pending'
        got = usage.lease_usage(lease, _t(1, 0), _t(2, 0), _t(1, 12))
        self.assertEqual(self._figures(2.0, 0.0, 8.0, 8192.0, 80.0),
                         got['reserved'])
        self.assertEqual(usage.zero(), got['used'])
        # A start the engine skipped is no start.
        lease['events'] = [_event('start_lease', 'DONE', _t(1, 22),
                                  'skipped: the lease was deleted')]
        self.assertEqual(usage.zero(), usage.lease_usage(
            lease, _t(1, 0), _t(2, 0), NOW)['used'])

    def test_per_project_and_lease(self):
        leases = [_failed_lease(), _host_lease(), _vm_lease(),
                  _later_lease()]
        got = usage.usage(leases, _t(1, 0), _t(2, 0), NOW)
        self.assertEqual(['p0', 'p1'], [p['project_id'] for p in got])
        p0, p1 = got
        self.assertEqual(['F'], [x['id'] for x in p0['leases']])
        self.assertEqual(['H', 'V'], [x['id'] for x in p1['leases']])
        # p1: the host lease plus the VM lease.
        self.assertEqual(self._figures(6.0, 8.0, 55.0, 105472.0, 670.0),
                         p1['reserved'])
        self.assertEqual(self._figures(5.99, 7.98, 54.88, 105226.24,
                                       668.5), p1['used'])
        host = p1['leases'][0]
        self.assertEqual(('hosts', 'TERMINATED', 'scheduled', 'u1',
                          _t(1, 10), _t(1, 14)),
                         (host['name'], host['status'], host['lease_type'],
                          host['user_id'], host['start_date'],
                          host['end_date']))
        self.assertEqual(47.88, host['used']['vcpu_hours'])
        self.assertEqual(usage.zero(), p0['used'])
        self.assertRaises(ValueError, usage.usage, leases, _t(2, 0),
                          _t(1, 0), NOW)

    def test_whole_lease(self):
        got = usage.whole_lease(_host_lease(), NOW)
        self.assertEqual(self._figures(4.0, 8.0, 48.0, 98304.0, 600.0),
                         got['reserved'])
        self.assertEqual(3.99, got['used']['lease_hours'])
