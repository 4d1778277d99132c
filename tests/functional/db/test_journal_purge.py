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
"""nova-lease-manage journal purge, run as a real command on every
backend, and the journal reads of the auditor's cursor.
"""

import datetime
import os
import subprocess
import sys

import fixtures
from oslo_utils import timeutils

from nova_lease.db import api
from tests.functional.db import base

DAY = datetime.timedelta(days=1)


class _JournalPurgeTests(object):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        # The command reads the real clock: the rows are dated from it.
        self.now = timeutils.utcnow().replace(microsecond=0)
        self.old = self.now - 40 * DAY
        self.recent = self.now - DAY

    def _manage(self, *args):
        path = os.path.join(self.tmp, 'nova.conf')
        with open(path, 'w') as f:
            f.write('[DEFAULT]\nstate_path = %s\n\n[nova_lease_database]\n'
                    'connection = %s\n' % (self.tmp, self.url))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        proc = subprocess.run(
            [sys.executable, '-m', 'nova_lease.cmd.manage',
             '--config-file', path, 'journal', 'purge'] + list(args),
            cwd=self.tmp, env=env, capture_output=True, text=True,
            timeout=60)
        return proc.returncode, proc.stdout, proc.stderr

    def _lease(self, name, status):
        return api.lease_create(self.db, {
            'name': name, 'project_id': 'p1', 'status': status,
            'start_date': self.old - DAY, 'end_date': self.old})['id']

    def _row(self, lease_id, when, action='delete', outcome='done'):
        return api.action_record(self.db, {
            'lease_id': lease_id, 'project_id': 'p1',
            'target_kind': 'server', 'target_id': 'server-%s' % action,
            'target_project_id': 'p1', 'action': action,
            'outcome': outcome, 'created_at': when})['id']

    def _journal(self):
        self.purged, self.kept = [], []
        over = self._lease('over', 'TERMINATED')
        self.purged += [self._row(over, self.old, 'migrate'),
                        self._row(over, self.old + DAY, 'confirm')]
        # Its confirmation is recent: the migration stays with it.
        over_recent = self._lease('over-recent', 'TERMINATED')
        self.kept += [self._row(over_recent, self.old, 'migrate'),
                      self._row(over_recent, self.recent, 'confirm')]
        # Not TERMINATED: still live (ERROR and TIMEDOUT may be retried
        # or ended).
        for status in ('ACTIVE', 'PENDING', 'TERMINATING', 'ERROR',
                       'TIMEDOUT', 'IN_PROGRESS'):
            self.kept.append(self._row(self._lease(status, status),
                                       self.old))
        # A pending row keeps itself and its lease's other rows.
        unsure = self._lease('unsure', 'TERMINATED')
        self.kept += [self._row(unsure, self.old),
                      self._row(unsure, self.old, 'migrate', 'pending')]
        # The rows of a lease that is gone go.
        self.purged.append(self._row('0c5e7b52-9a55-4c8e-b0a5-2c1a8f7d9e11',
                                     self.old, 'shelve', 'failed'))
        # The idle-host pass's rows (no lease): by age, but pending.
        self.purged += [self._row(None, self.old, 'disable'),
                        self._row(None, self.old, 'enable', 'refused')]
        self.kept += [self._row(None, self.old, 'disable', 'pending'),
                      self._row(None, self.recent, 'disable')]

    def _ids(self):
        return sorted(row['id'] for row in api.action_list(self.db))

    def test_purge_keeps_live_leases_and_pending_rows(self):
        self._journal()
        code, out, err = self._manage('--before', '30d', '--dry-run')
        self.assertEqual(0, code, err)
        self.assertIn('Would purge %d engine action journal row(s)'
                      % len(self.purged), out)
        self.assertEqual(sorted(self.purged + self.kept), self._ids())
        # Two rows per transaction: the batches loop.
        code, out, err = self._manage('--before', '30d', '--batch-size',
                                      '2')
        self.assertEqual(0, code, err)
        self.assertIn('Purged %d engine action journal row(s) created '
                      'before %s' % (len(self.purged), (
                          self.now - 30 * DAY).strftime('%Y-%m-%d')), out)
        self.assertEqual(sorted(self.kept), self._ids())
        code, out, err = self._manage('--before', '30d')
        self.assertEqual(0, code, err)
        self.assertIn('Purged 0 ', out)
        self.assertEqual(sorted(self.kept), self._ids())

    def test_purge_before_a_date(self):
        self._journal()
        # Before the oldest rows: nothing goes.
        code, out, err = self._manage(
            '--before', (self.old - DAY).strftime('%Y-%m-%d %H:%M'))
        self.assertEqual(0, code, err)
        self.assertIn('Purged 0 ', out)
        self.assertEqual(sorted(self.purged + self.kept), self._ids())
        # After the recent ones: the recent rows of the idle pass and of
        # the TERMINATED lease go too; never the live or pending ones.
        code, out, err = self._manage(
            '--before', (self.now - DAY / 2).strftime('%Y-%m-%dT%H:%M:%SZ'))
        self.assertEqual(0, code, err)
        self.assertEqual(sorted(self.kept[2:-1]), self._ids())

    def test_cursor_reads(self):
        # The auditor's reads: the rows after a cursor; the migrations up
        # to it of given leases.
        self._journal()
        ids = self._ids()
        since = ids[3]
        self.assertEqual(ids[4:], [r['id'] for r in api.action_list(
            self.db, since=since)])
        self.assertEqual([], api.action_list(self.db, since=ids[-1]))
        lease_id = api.action_list(self.db, since=since - 1)[0]['lease_id']
        moves = api.action_list(self.db, through=since,
                                lease_ids=[lease_id, 'none'],
                                actions=('migrate', 'live_migrate'))
        self.assertEqual([ids[2]], [r['id'] for r in moves])


class JournalPurgeSQLiteTest(_JournalPurgeTests, base.SQLiteTestCase):

    def test_bad_before(self):
        for value, text in (
                ('30', "give an age with its unit"),
                ((self.now + DAY).strftime('%Y-%m-%d %H:%M'),
                 'is in the future'),
                ('yesterday', "'--before' must be a date")):
            code, out, err = self._manage('--before', value)
            self.assertEqual(2, code, (value, out, err))
            self.assertIn(text, err)
        code, out, err = self._manage('--before', '1d', '--batch-size', '0')
        self.assertEqual(2, code, err)
        code, out, err = self._manage()
        self.assertEqual(2, code, err)
        self.assertIn('--before', err)


class JournalPurgeMySQLTest(_JournalPurgeTests, base.MySQLTestCase):
    pass


class JournalPurgePostgreSQLTest(_JournalPurgeTests,
                                 base.PostgreSQLTestCase):
    pass
