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
"""When the before_end_lease warning fires, through the lease API.

* The default (``[nova_lease_api] minutes_before_end_lease`` = 60) must not
  put the warning of a lease of an hour or less at its start: a short
  lease is warned at most half of its length before its end.
* ``before_end_date`` and the before_end_lease events agree: after an
  update the field is the time of the warning still to come (never a
  past instant without an event).
"""

import datetime

from oslo_serialization import jsonutils

from nova_lease.db import api as db_api
from tests.functional import base
from tests.functional import test_host_reservation
from tests.functional import test_lease_api

PREFIX = test_lease_api.PREFIX


def _parse(text):
    return datetime.datetime.strptime(text, '%Y-%m-%dT%H:%M:%S.%f')


class BeforeEndTest(test_host_reservation.HostLeaseMixin,
                    base.LeaseFunctionalBase):

    CLOCK_START = datetime.datetime(2030, 1, 1, 12, 0, 0)

    def _when(self, **delta):
        return self.clock.now + datetime.timedelta(**delta)

    def _befores(self, lease):
        return sorted((e['status'], _parse(e['time']))
                      for e in lease['events']
                      if e['event_type'] == 'before_end_lease')

    def assertConsistent(self, lease):
        """before_end_date is the time of the one warning to come."""
        field = _parse(lease['before_end_date'])
        undone = [t for s, t in self._befores(lease) if s == 'UNDONE']
        self.assertEqual([field], undone, lease['events'])
        self.assertGreaterEqual(field, self.clock.now)

    def test_short_leases_are_warned_before_their_end(self):
        self._register('host1')
        start = self.clock.now
        for minutes, warned in ((60, 30), (10, 5), (120, 60), (180, 60)):
            lease = self._create(self._lease_body(
                'now', self._at(minutes=minutes), name='m%d' % minutes))
            end = start + datetime.timedelta(minutes=minutes)
            expected = end - datetime.timedelta(minutes=warned)
            self.assertEqual(expected, _parse(lease['before_end_date']),
                             minutes)
            self.assertEqual([('UNDONE', expected)], self._befores(lease))
            self.api.api_delete(PREFIX + '/leases/%s' % lease['id'],
                                check_response_status=[204])
        # An instance lease booted with lease hints, the same.
        hints = {'reserved': 'True', 'lease_params': jsonutils.dumps(
            {'name': 'vm', 'duration': '40m'})}
        self._boot(hints, name='vm')
        [lease] = db_api.lease_list(self.lease_db)
        self.assertEqual(lease['end_date'] - datetime.timedelta(minutes=20),
                         lease['before_end_date'])
        # An explicit before_end_date is kept, at the start too.
        lease = self._create(self._lease_body(
            self._at(hours=1), self._at(hours=2), name='explicit',
            before_end_date=self._at(hours=1)))
        self.assertEqual(self._when(hours=1),
                         _parse(lease['before_end_date']))

    def test_extension_rearms_the_warning_consistently(self):
        self.flags(minutes_before_end_lease=10, group='nova_lease_api')
        self._register('host1')
        lease = self._create(self._lease_body('now', self._at(minutes=30)))
        url = PREFIX + '/leases/%s' % lease['id']
        self.engine.process_due()
        self.assertEqual('ACTIVE', self._lease(lease['id'])['status'])
        # The warning (10 minutes before the end) fires.
        self.clock.advance(minutes=25)
        self.engine.process_due()
        self.assertEqual([('DONE', self._when(minutes=-5))],
                         self._befores(self._lease(lease['id'])))
        # Extended to minute 40: warned again 10 minutes before it.
        updated = self.api.api_put(
            url, {'end_date': self._at(minutes=15)}).body['lease']
        self.assertEqual(self._when(minutes=5),
                         _parse(updated['before_end_date']))
        self.assertConsistent(updated)
        self.clock.advance(minutes=10)
        self.engine.process_due()
        # Extended to minute 42 at minute 35: the default warning time
        # (minute 32) has passed: the warning is due now, and says so.
        updated = self.api.api_put(
            url, {'end_date': self._at(minutes=7)}).body['lease']
        self.assertEqual(self.clock.now, _parse(updated['before_end_date']))
        self.assertConsistent(updated)
        self.engine.process_due()
        befores = self._befores(self._lease(lease['id']))
        self.assertEqual(['DONE'] * 3, [s for s, _t in befores])
        # An explicit before_end_date in the past is refused.
        body = self.api.api_put(
            url, {'end_date': self._at(minutes=20),
                  'before_end_date': self._at(minutes=-10)},
            check_response_status=[400]).body
        self.assertIn('before_end_date', body['error_message'])
        shown = self._lease(lease['id'])
        self.assertEqual(updated['end_date'], shown['end_date'])
        self.assertEqual(updated['before_end_date'],
                         shown['before_end_date'])
