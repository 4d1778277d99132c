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
"""A resource plugin that does nothing, for benchmarks and tests.

It handles reservations of resource_type ``noop`` (entry point ``noop``).
Options in ``[nova_lease_noop]`` make it observable and misbehave on
purpose:

Every call is guarded like a request to Nova (nova_lease.guard): it does
nothing once the engine job is abandoned or no longer holds its claim.

* ``record_file``: every call appends one line
  ``<action> <lease_id> <reservation_id> <began, unix time> <pid>`` with a
  single O_APPEND write, so several engine processes can share the file
  and a test can count how often each event fired.
* ``delay``: seconds each call sleeps.
* ``block_file``: while this file exists, calls wait (a test kills the
  engine meanwhile).
* ``fail_first``: the first N calls of each (action, reservation) in this
  process raise.
"""

import collections
import os
import threading
import time

from oslo_config import cfg

from nova_lease import guard
from nova_lease.plugins import base

GROUP = 'nova_lease_noop'
OPTS = [
    cfg.StrOpt('record_file', default='',
               help='Append one line per call to this file.'),
    cfg.FloatOpt('delay', default=0.0, min=0,
                 help='Seconds every call sleeps.'),
    cfg.StrOpt('block_file', default='',
               help='Calls wait while this file exists.'),
    cfg.IntOpt('fail_first', default=0, min=0,
               help='The first N calls of each action and reservation '
                    'fail.'),
]


def register_opts(conf):
    conf.register_opts(OPTS, group=GROUP)


class NoopPlugin(base.ResourcePlugin):
    resource_type = 'noop'

    def __init__(self, conf):
        super().__init__(conf)
        register_opts(conf)
        self._lock = threading.Lock()
        self._calls = collections.Counter()

    def _call(self, action, lease, reservation):
        # Recording is this plugin's side effect: like a request to Nova,
        # only while the engine job still holds its claim.
        guard.check('noop %s of reservation %s' % (action, reservation['id']))
        began = time.time()
        opts = self.conf[GROUP]
        if opts.record_file:
            line = '%s %s %s %.6f %d\n' % (action, lease['id'],
                                           reservation['id'], began,
                                           os.getpid())
            fd = os.open(opts.record_file,
                         os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        while opts.block_file and os.path.exists(opts.block_file):
            time.sleep(0.05)
        if opts.delay:
            time.sleep(opts.delay)
        if opts.fail_first:
            key = (action, reservation['id'])
            with self._lock:
                self._calls[key] += 1
                count = self._calls[key]
            if count <= opts.fail_first:
                raise base.PluginError(
                    reason='noop %s of reservation %s failed on purpose '
                           '(call %d of %d failing ones)'
                           % (action, reservation['id'], count,
                              opts.fail_first))

    def reserve(self, lease, reservation):
        self._call('reserve', lease, reservation)

    def on_start(self, lease, reservation):
        self._call('on_start', lease, reservation)

    def before_end(self, lease, reservation):
        self._call('before_end', lease, reservation)

    def on_end(self, lease, reservation):
        self._call('on_end', lease, reservation)

    def cancel(self, lease, reservation):
        self._call('cancel', lease, reservation)
