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
"""GET /os-reservation/offers and flexible-window leases, on the
in-process Nova.
"""

import copy
import datetime
import random

from nova_lease.db import api as db_api
from tests.functional import base
from tests.functional import test_lease_api
from tests import threads

PREFIX = test_lease_api.PREFIX


def _dt(text):
    return datetime.datetime.strptime(text, '%Y-%m-%dT%H:%M:%S.%f')


class OffersTest(test_lease_api.LeaseAPIMixin, base.LeaseFunctionalBase):

    CLOCK_START = datetime.datetime(2030, 1, 1, 12, 0, 0)
    COMPUTES = {'host%d' % i: (4, 8192, 100) for i in range(4)}

    def _offers(self, api=None, status=200, **query):
        api = api or self.api
        text = '&'.join('%s=%s' % (k, str(v).replace(' ', '%20'))
                        for k, v in query.items())
        resp = api.api_get(PREFIX + '/offers?' + text,
                           check_response_status=[status])
        return resp.body

    def _host_query(self, count, duration, **extra):
        return dict(resource_type='physical:host', min=count, max=count,
                    duration=duration, **extra)

    def _flexible(self, duration, status=201, api=None, name='flex',
                  **extra):
        body = {'name': name, 'start_date': 'earliest',
                'duration': duration,
                'reservations': [self._host_res()]}
        body.update(extra)
        return self._create(body, status=status, api=api)

    def _busy(self):
        """{host: [(start, end)]} of every allocation."""
        out = {}
        for a in db_api.allocation_list(self.lease_db):
            out.setdefault(a['host'], []).append((a['start_date'],
                                                  a['end_date']))
        return out

    def _reference(self, count, duration, latest):
        """The first start (on a 15-minute grid, as the leases here are)
        where ``count`` hosts are free for ``duration``: a brute force
        over the allocations in the database.
        """
        hosts = ['host%d' % i for i in range(4)]
        busy = self._busy()
        t = self.clock.now
        step = datetime.timedelta(minutes=15)
        while t <= latest:
            free = sum(1 for h in hosts if not any(
                s < t + duration and t < e for s, e in busy.get(h, ())))
            if free >= count:
                return t
            t += step
        return None

    def test_offers_match_a_brute_force_over_random_calendars(self):
        for i in range(4):
            self._register('host%d' % i)
        rng = random.Random(7)
        for n in range(12):
            start = rng.randrange(0, 40) * 15
            length = rng.randrange(1, 16) * 15
            self.api.api_post(PREFIX + '/leases', self._lease_body(
                self._at(minutes=start + 15),
                self._at(minutes=start + 15 + length), name='l%d' % n,
                reservations=[self._host_res(rng.randrange(1, 3))]),
                check_response_status=[201, 409])
        latest = self.clock.now + datetime.timedelta(hours=14)
        for count in (1, 2, 3, 4):
            for minutes in (30, 120, 300):
                duration = datetime.timedelta(minutes=minutes)
                body = self._offers(
                    api=self.admin_api, latest=test_lease_api.fmt(latest),
                    **self._host_query(count, '%dm' % minutes))
                expected = self._reference(count, duration, latest)
                if expected is None:
                    self.assertEqual([], body['offers'])
                    self.assertIn('fits on none', body['reason'])
                    continue
                first = body['offers'][0]
                self.assertEqual(expected, _dt(first['start_date']))
                self.assertEqual(expected + duration,
                                 _dt(first['end_date']))
                self.assertEqual(count, len(first['hosts']))
                starts = [_dt(o['start_date']) for o in body['offers']]
                self.assertEqual(sorted(starts), starts)
                busy = self._busy()
                for offer in body['offers']:
                    s, e = _dt(offer['start_date']), _dt(offer['end_date'])
                    for host in offer['hosts']:
                        self.assertFalse(any(
                            a < e and s < b for a, b in busy.get(host, ())))

    def test_members_see_counts_not_hosts(self):
        for i in range(3):
            self._register('host%d' % i)
        # Another project's lease on two hosts.
        other = self._other_api()
        self._create(self._lease_body(
            self._at(hours=1), self._at(hours=3),
            reservations=[self._host_res(2)]), api=other)
        member = self._offers(**self._host_query(2, '1h'))
        admin = self._offers(api=self.admin_api,
                             **self._host_query(2, '1h'))
        self.assertEqual(len(member['offers']), len(admin['offers']))
        for m, a in zip(member['offers'], admin['offers']):
            self.assertEqual(a['start_date'], m['start_date'])
            self.assertEqual(2, m['hosts'])
            self.assertEqual(2, len(a['hosts']))
            self.assertTrue(all(h.startswith('host') for h in a['hosts']))
        text = repr(member)
        for word in ('host0', 'host1', 'host2', other.project_id):
            self.assertNotIn(word, text)

    def test_flexible_lease_is_booked_at_the_first_offer(self):
        self._register('host0')
        self._create(self._lease_body(self._at(minutes=30),
                                      self._at(hours=2), name='busy'))
        offer = self._offers(**self._host_query(1, '1h'))['offers'][0]
        # Free until 30 minutes from now: the first fit is the end of
        # "busy".
        self.assertEqual(self.clock.now + datetime.timedelta(hours=2),
                         _dt(offer['start_date']))
        lease = self._flexible('1h')
        self.assertEqual(offer['start_date'], lease['start_date'])
        self.assertEqual(offer['end_date'], lease['end_date'])
        rows = db_api.allocation_list(self.lease_db)
        self.assertEqual(2, len(rows))
        events = db_api.event_list(self.lease_db, lease_id=lease['id'])
        start = [e for e in events if e['event_type'] == 'start_lease'][0]
        self.assertEqual(_dt(offer['start_date']), start['time'])
        # earliest_start / latest_start bound the search.
        later = self._flexible(
            '30m', name='later',
            earliest_start=self._at(hours=5),
            latest_start=self._at(hours=6))
        self.assertEqual(self.clock.now + datetime.timedelta(hours=5),
                         _dt(later['start_date']))

    def test_parallel_flexible_leases_never_share_a_slot(self):
        self._register('host0')

        def create(n):
            return self.api.api_post(
                PREFIX + '/leases',
                {'name': 'f%d' % n, 'start_date': 'earliest',
                 'duration': '1h', 'reservations': [self._host_res()]},
                check_response_status=[201]).body['lease']

        results = threads.race(5, create, timeout=120)
        self.assertEqual([], threads.errors(results))
        windows = sorted((_dt(r['start_date']), _dt(r['end_date']))
                         for r in results)
        self.assertEqual(5, len(windows))
        for (s1, e1), (s2, e2) in zip(windows, windows[1:]):
            self.assertLessEqual(e1, s2)
        self.assertEqual(self.clock.now, windows[0][0])

    def test_no_offer_is_409_with_the_next_offers(self):
        self._register('host0')
        self._create(self._lease_body(self._at(minutes=1),
                                      self._at(hours=10), name='busy'))
        counts = self._counts()
        body = self._flexible('1h', status=409,
                              latest_start=self._at(hours=5))
        self.assertEqual('NoOffer', body['error_name'])
        self.assertIn('reservations[0]', body['error_message'])
        self.assertTrue(body['offers'])
        self.assertEqual(self.clock.now + datetime.timedelta(hours=10),
                         _dt(body['offers'][0]['start_date']))
        # (A member: a count of hosts.)
        self.assertEqual(1, body['offers'][0]['hosts'])
        self.assertEqual(counts, self._counts())
        # The offers say the same, with a reason when there is none.
        empty = self._offers(latest=self._at(hours=5),
                             **self._host_query(1, '1h'))
        self.assertEqual([], empty['offers'])
        self.assertIn('fits on none', empty['reason'])

    def test_bad_requests_name_the_field(self):
        self._register('host0')
        cases = [
            (dict(resource_type='physical:host', min=1, max=1), 'duration'),
            (self._host_query(1, 'soon'), 'duration'),
            (dict(resource_type='physical:host', min='x', max=1,
                  duration='1h'), 'min'),
            (dict(resource_type='nothing', duration='1h'), 'resource_type'),
            (self._host_query(1, '1h', limit=0), 'limit'),
            (self._host_query(1, '1h', earliest=self._at(hours=3),
                              latest=self._at(hours=1)), 'latest'),
            (self._host_query(1, '1h', colour='red'), 'colour'),
            # Impossible: more hosts than match, ever.
            (self._host_query(9, '1h'), 'min'),
            (dict(resource_type='virtual:instance', amount=2, vcpus=1,
                  memory_mb=8000, disk_gb=1, affinity='true',
                  duration='1h'), 'amount'),
            (dict(resource_type='virtual:instance', amount=1, vcpus=1,
                  memory_mb=512, disk_gb=1, affinity='maybe',
                  duration='1h'), 'affinity'),
        ]
        for query, field in cases:
            body = self._offers(status=400, **query)
            self.assertIn("'%s'" % field, body['error_message'], query)
        body = self._flexible('1h', status=400, latest_start='soon')
        self.assertIn('latest_start', body['error_message'])
        body = self._create({'name': 'x', 'start_date': 'earliest',
                             'reservations': [self._host_res()]},
                            status=400)
        self.assertIn('duration', body['error_message'])
        two = self._flexible('1h', status=400, reservations=[
            self._host_res(), self._host_res()])
        self.assertIn('reservations', two['error_message'])

    def test_instance_slot_offers(self):
        self._register('host0')
        body = self._offers(
            api=self.admin_api, resource_type='virtual:instance', amount=2,
            vcpus=1, memory_mb=256, disk_gb=1, affinity='true',
            duration='2h')
        self.assertEqual(['host0', 'host0'], body['offers'][0]['hosts'])
        self.assertEqual(self.clock.now,
                         _dt(body['offers'][0]['start_date']))

    def test_an_older_version_has_no_flexible_lease(self):
        self._register('host0')
        old = copy.copy(self.api)
        old.reservation_version = '1.5'
        body = self._flexible('1h', status=400, api=old)
        self.assertIn('1.6', body['error_message'])
