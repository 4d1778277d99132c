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
"""LeaseFilter when the scheduler cannot read the side database.

The scheduler fails closed: the free pool and the reservation aggregates
take no work without the reservation's hint whatever the side database
does (they need only Nova's aggregates); with a snapshot read before the
outage, every promise it holds is still enforced (and the snapshot's age
is logged); with no snapshot at all, leased requests get NoValidHost and
unleased ones stay off the registered hosts.

host1 and host2 are big (Nova's RAM and disk weighers prefer them) and
registered: host1 in the free pool, host2 in the aggregate of a started
host lease. host3 is small and never registered.
"""

import datetime
import time

import fixtures
from oslo_db import exception as db_exc
from oslo_serialization import jsonutils
from oslo_utils import timeutils

from nova_lease.db import api as db_api
from nova_lease.plugins.host import aggregates as host_aggregates
from nova_lease.scheduler import request as lease_request
from nova_lease.scheduler import snapshot_cache
from nova_lease.scheduler import snapshot_reads
from nova_lease.scheduler import view
from tests.functional import base
from tests.functional import test_host_reservation

BIG = (8, 16384, 200)
SMALL = (4, 8192, 100)
HOUR = datetime.timedelta(hours=1)
TINY = '1'      # m1.tiny: 1 vCPU, 512 MB, 1 GB
MEDIUM = '3'    # m1.medium: 2 vCPUs, 4096 MB, 40 GB


class _UnreachableDatabase(object):
    """A side Database whose every transaction fails to connect."""

    def __init__(self, db):
        self.url = db.url
        self.backend = db.backend

    def _refuse(self, *args, **kwargs):
        raise db_exc.DBConnectionError(
            'side database unreachable (test outage)')

    reader = writer = connection = _refuse


class _DbApiSeenByTheScheduler(object):
    """nova_lease.db.api as the scheduler sees it during the outage."""

    def __getattr__(self, name):
        return getattr(db_api, name)

    def get_database(self, conf):
        return _UnreachableDatabase(db_api.get_database(conf))


class SchedulerDatabaseOutage(fixtures.Fixture):
    """The scheduler cannot read the side database; nova-api still can.

    Nova's services share one process here, so the outage is made where
    the scheduler's modules get their Database: it has the URL of the
    real one (so the scheduler's cached snapshot, if any, is still its
    own) and every transaction on it fails as on a scheduler cut off
    from the database server.
    """

    def _setUp(self):
        fake = _DbApiSeenByTheScheduler()
        for module in (view, lease_request, snapshot_cache,
                       snapshot_reads):
            self.useFixture(fixtures.MockPatchObject(module, 'db_api',
                                                     fake))


class SchedulerMixin(object):
    """Hosts that hold what their vcpus say, promises, the snapshot."""

    # A host of N vcpus holds N vcpus (Nova's default CPU allocation
    # ratio is 4.0).
    ALLOCATION_RATIO = 1.0

    def _hints(self, end):
        return {'reserved': 'True', 'lease_params': jsonutils.dumps({
            'name': 'l', 'start': 'now',
            'end': end.strftime('%Y-%m-%dT%H:%M:%S')})}

    def _host(self, server):
        return self.admin_api.get_server(server['id'])[
            'OS-EXT-SRV-ATTR:host']

    def _wait_for_snapshot(self, other_than=None):
        """Until the scheduler holds a snapshot of the side database
        (another one than ``other_than``, by its load time).
        """
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            snap = view.get_snapshot(timeutils.utcnow())
            if snap is not None and (other_than is None or
                                     snap.loaded_at != other_than.loaded_at):
                return snap
            time.sleep(0.05)
        self.fail('the scheduler never loaded its snapshot')


class SchedulerOutageTest(SchedulerMixin,
                          test_host_reservation.HostLeaseMixin,
                          base.LeaseFunctionalBase):

    COMPUTES = {'host1': BIG, 'host2': BIG, 'host3': SMALL}

    def setUp(self):
        super().setUp()
        self.T = self.clock.now
        self._register('host1')
        self._register('host2', gpu='true')
        lease = self._create(self._lease_body(
            'now', self._at(hours=5), reservations=[self._host_res(
                extra_specs={'gpu': 'true'})]))
        self.rid = lease['reservations'][0]['id']
        self.assertEqual(1, self.engine.process_due())
        self.assertEqual(['host2'], self._aggregate(
            host_aggregates.aggregate_name(self.rid))['hosts'])
        self.assertEqual(['host1'], self._aggregate('freepool')['hosts'])

    def test_no_snapshot(self):
        snapshot_cache.CACHE.invalidate()
        self.useFixture(SchedulerDatabaseOutage())

        # Unleased work: never the free pool (host1) nor the host lease's
        # host (host2), although Nova's weighers prefer both.
        unleased = [self._boot(name='unleased-%d' % n) for n in range(3)]
        self.assertEqual(['host3'] * 3, [self._host(s) for s in unleased])

        # Leased work: nothing can tell whether it would break a promise.
        self._assert_no_valid_host(self._boot(
            self._hints(self.T + HOUR), name='leased', wait=None))
        # Nor the host lease's owner (its lease cannot be checked).
        self._assert_no_valid_host(self._boot_hinted(self.rid, wait=None))

    def test_snapshot_read_before_the_outage(self):
        # 3 of host3's 4 vcpus are promised from T+1h to T+3h.
        self.promise('host3', self.T + HOUR, self.T + 3 * HOUR, 3)
        self._wait_for_snapshot()
        self.useFixture(SchedulerDatabaseOutage())

        # An unleased 2-vcpu server would still run at T+1h: host3
        # refuses it, and the registered hosts take no unleased work.
        self._assert_no_valid_host(self._boot(
            name='unleased', flavor=MEDIUM, wait=None))
        # So does a leased one that ends after T+1h.
        self._assert_no_valid_host(self._boot(
            self._hints(self.T + 2 * HOUR), name='too-long', flavor=MEDIUM,
            wait=None))
        # A server is leased only through the side database: a boot
        # whose lease was recorded after the snapshot was read (nova-api
        # still writes) cannot be checked, and counts as unleased, which
        # never breaks a promise; here it is refused although it would
        # end before the promise.
        self._assert_no_valid_host(self._boot(
            self._hints(self.T + HOUR / 2), name='short', flavor=MEDIUM,
            wait=None))

        log = self.stdlog.logger.output
        self.assertIn('scheduling with the last snapshot of the lease '
                      'calendar, read', log)
        self.assertRegex(log, r'read \d+ s ago')

    def test_registered_host_outside_the_aggregates(self):
        # An operator takes host1 out of the free pool (Nova's aggregate
        # API): still registered, it takes no unleased work, also while
        # the database cannot be read (the snapshot knows the registry).
        freepool = self._aggregate('freepool')
        self.admin_api.remove_host_from_aggregate(freepool['id'], 'host1')
        self._wait_for_snapshot()
        self.useFixture(SchedulerDatabaseOutage())
        unleased = [self._boot(name='unleased-%d' % n) for n in range(3)]
        self.assertEqual(['host3'] * 3, [self._host(s) for s in unleased])
