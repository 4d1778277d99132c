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
"""Changing the dates of VM leases made with boot hints, as a user does
with ``openstack reservation lease set --end-date / --start-date``
(python-blazarclient's ``lease.update``): extended when the calendar has
room (409 otherwise), shortened, the start of a PENDING one moved;
``before_end`` re-armed from the new end.
"""

import datetime

from blazarclient import client as blazar_client
from blazarclient import exception as blazar_exc

from nova_lease.db import api as db_api
from tests.functional import test_instance_lease

HOUR = datetime.timedelta(hours=1)


class InstanceLeaseDatesTest(test_instance_lease.InstanceLeaseTest):

    # One host: 7,680 MB of RAM for servers (512 MB are the host's), no
    # RAM overcommit.
    COMPUTES = {'host1': (2, 8192, 100)}
    LISTEN = False
    #: A flavor that leaves less than m1.tiny's 512 MB on the host.
    BIG_MB = 7424

    def _blazar(self):
        return blazar_client.Client(
            session=self.keystone.session('fake'),
            endpoint_override=self.keystone.reservation_url)

    def _lease_of(self, name):
        [lease] = [x for x in db_api.lease_list(self.db) if x['name'] == name]
        return lease

    def _event_time(self, lease, event_type):
        return sorted(e['time'] for e in lease['events']
                      if e['event_type'] == event_type and
                      e['status'] == 'UNDONE')

    def test_extend_shorten_and_move(self):
        now = self.clock.now
        server = self._lease_boot(name='a', start='now',
                                  end=self._date(now + 2 * HOUR))
        self.engine.process_due()
        a = self._lease_of('a')
        self.assertEqual('ACTIVE', a['status'])
        # A later lease takes (nearly) the whole host's RAM from +3 h.
        self.admin_api.api_post('/flavors', {'flavor': {
            'name': 'big', 'id': 'big', 'ram': self.BIG_MB, 'vcpus': 1,
            'disk': 1}})
        self._boot({'reserved': 'True', 'lease_params': (
            '{"name": "b", "start": "%s", "end": "%s"}' % (
                self._date(now + 3 * HOUR), self._date(now + 5 * HOUR)))},
            name='b', flavor='big', wait=None)
        b = self._lease_of('b')
        self.assertEqual('PENDING', b['status'])
        client = self._blazar()

        # Extended while the host has room: the end and its warning move.
        updated = client.lease.update(a['id'], end_date=self._date(
            now + 2.5 * HOUR))
        self.assertEqual(self._date(now + 2.5 * HOUR),
                         updated['end_date'][:16].replace('T', ' '))
        a = self._lease_of('a')
        self.assertEqual([now + 2.5 * HOUR],
                         self._event_time(a, 'end_lease'))
        self.assertEqual([now + 1.5 * HOUR],
                         self._event_time(a, 'before_end_lease'))
        # Into b's time: the host is promised to b then.
        e = self.assertRaises(blazar_exc.BlazarClientException,
                              client.lease.update, a['id'],
                              end_date=self._date(now + 4 * HOUR))
        self.assertEqual(409, e.kwargs.get('code', getattr(e, 'code', 409)))
        self.assertIn('No host can hold', str(e))
        self.assertEqual(now + 2.5 * HOUR, self._lease_of('a')['end_date'])

        # b's start cannot move into a's time.
        e = self.assertRaises(blazar_exc.BlazarClientException,
                              client.lease.update, b['id'],
                              start_date=self._date(now + 2 * HOUR))
        self.assertIn('No host can hold', str(e))
        # Shortened: a ends at +1 h, its server with it.
        client.lease.update(a['id'], end_date=self._date(now + HOUR))
        # Now b's start can move to just after it.
        b_start = now + HOUR + datetime.timedelta(minutes=10)
        client.lease.update(b['id'], start_date=self._date(b_start))
        b = self._lease_of('b')
        self.assertEqual(b_start, b['start_date'])
        [allocation] = db_api.allocation_list(self.db, lease_id=b['id'])
        self.assertEqual((b_start, now + 5 * HOUR),
                         (allocation['start_date'], allocation['end_date']))
        self.clock.advance_to(now + HOUR)
        self.engine.process_due()
        self._gone(server['id'])
        self.assertEqual('TERMINATED', self._lease_of('a')['status'])
        self.clock.advance_to(b_start)
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease_of('b')['status'])
