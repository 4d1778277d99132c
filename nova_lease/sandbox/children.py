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
"""Stopping the sandbox's child processes (Keystone, the engine, Horizon)."""

import subprocess

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


def terminate(proc, timeout, what):
    """SIGTERM ``proc`` if it runs; SIGKILL it after ``timeout`` seconds."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        LOG.warning('%(what)s (pid %(pid)d) did not stop in %(timeout)d s; '
                    'killing it',
                    {'what': what, 'pid': proc.pid, 'timeout': timeout})
        proc.kill()
        proc.wait()
