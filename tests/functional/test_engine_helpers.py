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
"""Helpers of the engine tests: nova-lease-engine processes, noop leases.

(No tests here.)
"""

import collections
import datetime
import os
import signal
import subprocess
import sys
import time

import fixtures
from oslo_utils import timeutils
from testtools import content

from nova_lease import conf as lease_conf
from nova_lease.db import api as db_api
from nova_lease import lease_events

ENGINE_BIN = os.path.join(os.path.dirname(sys.executable),
                          'nova-lease-engine')


def write_config(path, nova_lease=None, noop=None, default=None,
                 extra=None):
    """Write an engine config file with these [section] options
    (``connection`` in ``nova_lease`` goes to [nova_lease_database], the
    other options of ``nova_lease`` to their groups: [nova_lease],
    [nova_lease_engine], ...).
    """
    nova_lease = dict(nova_lease or {})
    database = ({'connection': nova_lease.pop('connection')}
                if 'connection' in nova_lease else None)
    groups = {}
    for key, value in nova_lease.items():
        groups.setdefault(lease_conf.group_of(key), {})[key] = value
    sections = ((('DEFAULT', default),) + tuple(sorted(groups.items()))
                + (('nova_lease_database', database),
                   ('nova_lease_noop', noop)))
    with open(path, 'w') as f:
        for name, options in sections + tuple((extra or {}).items()):
            if not options:
                continue
            f.write('[%s]\n' % name)
            for key, value in options.items():
                f.write('%s = %s\n' % (key, value))
    return path


def create_noop_leases(db, starts, duration, before_end=None, prefix='l'):
    """One lease per start (noop reservation), in one transaction."""
    ids = []
    with db.writer() as session:
        for i, start in enumerate(starts):
            end = start + duration
            lease = db_api.lease_create(
                session,
                {'name': '%s%d' % (prefix, i), 'project_id': 'p1',
                 'user_id': 'u1', 'start_date': start, 'end_date': end,
                 'status': 'PENDING'},
                reservations=[{'resource_type': 'noop',
                               'resource_id': 'noop-%d' % i}],
                events=lease_events.lease_events(
                    start, end, None if before_end is None
                    else end - before_end))
            ids.append(lease['id'])
    return ids


def read_records(path):
    """Lines of the noop plugin's record file, as tuples."""
    if not os.path.exists(path):
        return []
    Record = collections.namedtuple('Record',
                                    'action lease_id reservation_id began '
                                    'pid')
    with open(path) as f:
        return [Record(a, l, r, float(t), int(p)) for a, l, r, t, p in
                (line.split() for line in f if line.strip())]


def wait_for(predicate, timeout, interval=0.1, message='condition'):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError('timed out after %s s waiting for %s'
                                 % (timeout, message))
        time.sleep(interval)


def count_events(db, statuses, event_type=None):
    events = db_api.event_list(db, statuses=statuses)
    if event_type:
        events = [e for e in events if e['event_type'] == event_type]
    return len(events)


def utcnow():
    return timeutils.utcnow()


def seconds(n):
    return datetime.timedelta(seconds=n)


class EngineProcess(fixtures.Fixture):
    """A real nova-lease-engine process; its log is attached on failure."""

    def __init__(self, test, config_file, engine_id, log_dir):
        super().__init__()
        self.test = test
        self.config_file = config_file
        self.engine_id = engine_id
        self.log_file = os.path.join(log_dir, '%s.log' % engine_id)

    def _setUp(self):
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1',
                   PYTHONWARNINGS='ignore')
        self._log = open(self.log_file, 'ab')
        self.addCleanup(self._log.close)
        self.proc = subprocess.Popen(
            [ENGINE_BIN, '--config-file', self.config_file,
             '--engine-id', self.engine_id],
            stdout=self._log, stderr=subprocess.STDOUT, env=env)
        self._captured = None
        self.addCleanup(self._capture)
        self.addCleanup(self._kill)
        self.test.addDetail('log-%s' % self.engine_id, content.Content(
            content.UTF8_TEXT, lambda: [self._log_bytes()]))

    def _log_bytes(self):
        if self._captured is None:
            try:
                with open(self.log_file, 'rb') as f:
                    return f.read()
            except OSError:
                return b''
        return self._captured

    def _capture(self):
        # Before the temporary directory goes.
        self._captured = self._log_bytes()

    @property
    def pid(self):
        return self.proc.pid

    def signal(self, signum):
        self.proc.send_signal(signum)

    def stop(self, timeout=60):
        """SIGTERM, wait; return the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self):
        self.proc.kill()
        return self.proc.wait(30)

    def _kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def log(self):
        with open(self.log_file, errors='replace') as f:
            return f.read()
