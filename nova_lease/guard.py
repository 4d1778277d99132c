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
"""The guard of an engine job: no action once the job is abandoned.

The engine cannot interrupt a worker thread stuck in a plugin call that
timed out, nor one whose claim another engine took over. Instead, it
installs a :class:`JobGuard` for the thread while the job runs
(:func:`installed`), and the code that acts on the outside world calls
:func:`check` first: ``nova_lease.compute`` before every request to Nova,
resource plugins that have side effects of their own before them. A
cancelled guard raises :class:`Cancelled`; before a side effect, the guard
also confirms in the database that the job's claim is still held.

Plugin method signatures do not change: a plugin that acts on Nova only
through ``nova_lease.compute`` is guarded without knowing it. Outside an
engine job (the compute hook, the API, tools) no guard is installed and
:func:`check` does nothing.
"""

import contextlib
import threading

from nova_lease import exception


class Cancelled(exception.NovaLeaseException):
    """The job was abandoned: nothing more may be sent for it."""

    msg_fmt = '%(what)s not done: %(reason)s'


class JobGuard(object):
    """Cancellation token of one engine job, and its claim check.

    ``claim_check()`` returns whether the job's claim is still held (it
    may raise, e.g. when the database is unreachable: the side effect is
    then refused too, without cancelling the job). ``describe`` names the
    job in messages.
    """

    def __init__(self, describe, claim_check=None):
        self.describe = describe
        self._claim_check = claim_check
        # (A plain flag: setting and reading it is atomic.)
        self.cancelled = False
        self.reason = None

    def cancel(self, reason):
        """Abandon the job (thread-safe); the first reason is kept."""
        if self.reason is None:
            self.reason = reason
        self.cancelled = True

    def check(self, what, side_effect=True):
        """Raise Cancelled if ``what`` may not be done now.

        With ``side_effect``, the claim is confirmed first.
        """
        if self.cancelled:
            raise Cancelled(what=what, reason='%s was abandoned (%s)'
                            % (self.describe, self.reason))
        if not side_effect or self._claim_check is None:
            return
        try:
            held = self._claim_check()
        except Exception as e:
            raise Cancelled(what=what, reason='the claim of %s could not '
                            'be confirmed: %s' % (self.describe, e)) from e
        if not held:
            self.cancel('its claim was taken over or released')
            raise Cancelled(what=what, reason='%s no longer holds its claim'
                            % self.describe)


_local = threading.local()


def current():
    """The guard installed for this thread, or None."""
    return getattr(_local, 'guard', None)


@contextlib.contextmanager
def installed(guard):
    """Install ``guard`` for this thread while the block runs."""
    previous = current()
    _local.guard = guard
    try:
        yield guard
    finally:
        _local.guard = previous


def check(what, side_effect=True):
    """Check the current thread's guard, if any (see JobGuard.check)."""
    guard = current()
    if guard is not None:
        guard.check(what, side_effect)
