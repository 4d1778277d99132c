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

"""Capacity calendar: per-host demand over time (pure, no I/O).

A :class:`Calendar` is an immutable snapshot of the demand promised to every
host over time: leased VMs (bounded intervals), VMs without a lease
(open-ended intervals, ``end=None``) and whole-host reservations. It answers
"does this fit host H over [s, e)?" for one host or for all hosts at once.

Conventions
-----------
* Times are naive UTC :class:`datetime.datetime` objects (aware ones are
  converted to UTC). ``None`` as an end means "forever". Intervals are
  half-open: ``[a, b)`` and ``[b, c)`` do not overlap; ``[a, a)`` is empty.
* Usable capacity is what placement computes for an inventory:
  ``floor((total - reserved) * allocation_ratio)`` (see
  :func:`usable_capacity`).
* A demand fits a host over ``[s, e)`` when, for every resource, the peak of
  the summed demand over the interval plus the new demand is at most the
  usable capacity. The peak is taken per resource (see :meth:`Calendar.peak`:
  the peak vcpus and the peak memory may occur at different instants, so a
  peak :class:`Usage` need not have existed at any one instant); since the
  new demand is constant over ``[s, e)`` and the resources are independent,
  this is exactly "it fits at every instant", neither looser nor stricter.
* A whole-host item takes the entire host: nothing else fits where it is,
  and a whole-host demand fits only where the host holds no item at all
  (any resources, even an item of zero size). A host without a known
  capacity never fits anything.

Data structure (chosen by measurement, see benchmarks/calendar_core.py)
-----------------------------------------------------------------------
Per host, the demand is a step function: sorted boundary times and, per
resource, the usage on each segment ``[t[k], t[k+1])``. All hosts live in
one set of numpy arrays, host after host (each host's run starts with a
``-inf`` sentinel and is padded to a multiple of ``_BLOCK`` positions), so
that the batch queries (:meth:`Calendar.hosts_that_fit`,
:meth:`Calendar.slack_seconds`, :meth:`Calendar.next_demand_starts`)
answer every host with a constant number of vectorised operations:

* the segment containing a time is found by a binary search in every
  host's run at once (log2 of the longest run steps);
* a range maximum is taken from the two partial blocks at its ends plus a
  sparse table over block maxima (memory O(n), not O(n log n));
* the first segment where a demand stops fitting is found by binary lifting
  over the same sparse table;
* the next item start is one look-up: every position records how far the
  next boundary where an item starts is.

Nothing in a host's run depends on another host (times are not
rank-compressed across hosts; sparse-table windows that run past a
host's end are never used), and a host's run may lie anywhere in the
arrays (``_off[k]``, ``_end[k]``). So :meth:`Calendar.with_changes`
rebuilds only the hosts whose items change and writes their runs into
free space at the end of the arrays, which the new calendar shares with
the old one (the old one never reads there); the live runs are copied
into new arrays only when that space is full, or when another calendar
was already derived from the same one.

The single-host methods use plain slices of the same arrays.

To keep one range maximum per resource, the vcpu track also counts items and
whole-host items: ``vcpus * 2**24 + items + whole_host_items * 2**52``. A
whole-host item therefore exceeds every vcpu capacity, and "the host is
empty" is "that track is zero".
"""

from nova_lease.calendar.core import Calendar
from nova_lease.calendar.fit import fits
from nova_lease.calendar.fit import headroom
from nova_lease.calendar.fit import HostLoad
from nova_lease.calendar.fit import Loads
from nova_lease.calendar.fit import next_promise_seconds
from nova_lease.calendar.fit import slack_seconds
from nova_lease.calendar.model import Demand
from nova_lease.calendar.model import HostCapacity
from nova_lease.calendar.model import Item
from nova_lease.calendar.model import usable_capacity
from nova_lease.calendar.model import Usage
from nova_lease.calendar.store import to_us

__all__ = ['Calendar', 'Demand', 'HostCapacity', 'HostLoad', 'Item', 'Loads',
           'Usage', 'fits', 'headroom', 'next_promise_seconds',
           'slack_seconds', 'to_us', 'usable_capacity']
