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
"""Concurrency tests: start threads together and collect what they did."""

import threading
import time


class Unfinished(Exception):
    """A raced thread that had not returned when the race timed out."""


def race(count, attempt, timeout=120):
    """Run ``attempt(i)`` for i in range(count), each in its own thread.

    The threads are released together by a barrier, so that they really
    compete. Returns one result per thread, in index order: what
    ``attempt`` returned, or the exception it raised (an
    :class:`Unfinished` for a thread still running after ``timeout``
    seconds), for the test to assert on.
    """
    barrier = threading.Barrier(count)
    results = [Unfinished('thread %d did not finish in %s s' % (i, timeout))
               for i in range(count)]

    def run(i):
        try:
            barrier.wait(timeout)
            results[i] = attempt(i)
        except Exception as e:  # reported through the results
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,), daemon=True)
               for i in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return list(results)


def errors(results):
    """The exceptions among :func:`race`'s results."""
    return [r for r in results if isinstance(r, BaseException)]
