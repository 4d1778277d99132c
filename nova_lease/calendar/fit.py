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
"""Batch fit queries: what Nova runs now, plus what the leases promise.

The demand on a host ``h`` at a time ``t >= start`` is::

    unleased(h)                          (constant, forever)
  + sum of the running leased servers on h whose lease ends after t
  + the allocations of the snapshot calendar that hold h at t

where ``unleased(h)`` is the host's current usage minus its running
leased servers. :class:`Loads` carries the first two parts for many hosts
(they change at every request: the scheduler consumes them as it places
instances); the snapshot's calendar carries the third, which only changes
when a lease is recorded.

The leased servers make the demand a decreasing staircase; every step of
every host is checked against the calendar with one vectorised range
maximum, so that a request costs a few numpy operations over (hosts +
running leased servers), whatever the number of allocations (see
benchmarks/scheduler.py).

This module belongs to the calendar package: it reads the calendar's
arrays (the same ones the Calendar's own batch queries use) because the
Calendar's queries take one capacity per host, fixed when it is built,
while here the free capacity of each host changes with every request.
Code outside the package asks these functions, never the arrays.
tests/unit/test_scheduler_fit.py checks every answer against the
calendar's public single-host methods.
"""

import collections
import math

import numpy as np

from nova_lease.calendar import store as arrays

_INF = arrays.INF


class HostLoad(collections.namedtuple(
        'HostLoad', 'host capacity used leased')):
    """What Nova knows about one host at this request.

    :ivar host: the calendar's host key (hypervisor hostname).
    :ivar capacity: :class:`nova_lease.calendar.HostCapacity` (usable, as
        placement computes it) or None when unknown (never fits).
    :ivar used: (vcpus, memory_mb, disk_gb) used now by every server on
        the host, leased or not (reserved amounts excluded).
    :ivar leased: tuple of ``(end, Demand)`` for the running leased servers
        on the host: each stops counting at its ``end`` (naive UTC
        datetime). Their sizes are part of ``used`` too.
    """

    __slots__ = ()


class Loads(object):
    """Many HostLoads as columns (what the batch queries take).

    Build with :meth:`add` per host (then :meth:`done`) or
    :meth:`from_host_loads`.
    """

    def __init__(self):
        self.hosts = []
        self._cap = []
        self._used = []
        self._known = []
        self._lown = []
        self._lend = []
        self._lsize = []

    def add(self, host, capacity, used, leased=()):
        """Add a host; ``leased`` holds ``(end_us, vcpus, mem, disk)``."""
        k = len(self.hosts)
        self.hosts.append(host)
        if capacity is None:
            self._known.append(False)
            self._cap.append((0, 0, 0))
        else:
            self._known.append(True)
            self._cap.append(capacity)
        self._used.append(used)
        for end_us, v, m, d in leased:
            self._lown.append(k)
            self._lend.append(end_us)
            self._lsize.append((v, m, d))

    def done(self):
        n = len(self.hosts)
        self.cap = np.array(self._cap, np.int64).reshape(n, 3).T
        self.used = np.array(self._used, np.int64).reshape(n, 3).T
        self.known = np.array(self._known, bool)
        self.l_own = np.array(self._lown, np.int64)
        self.l_end = np.array(self._lend, np.int64)
        self.l_size = np.array(self._lsize, np.int64).reshape(-1, 3).T
        leased_sum = np.stack([np.bincount(self.l_own, weights=s,
                                           minlength=n).astype(np.int64)
                               for s in self.l_size]) if n else \
            np.zeros((3, 0), np.int64)
        self.unleased = np.maximum(self.used - leased_sum, 0)
        del self._cap, self._used, self._known, self._lown, self._lend
        del self._lsize
        return self

    def __len__(self):
        return len(self.hosts)

    def subset(self, members):
        """Loads of the hosts at positions ``members``."""
        members = list(members)
        out = Loads()
        pos = {k: i for i, k in enumerate(members)}
        out.hosts = [self.hosts[k] for k in members]
        idx = np.array(members, np.int64)
        out.cap = self.cap[:, idx]
        out.used = self.used[:, idx]
        out.known = self.known[idx]
        out.unleased = self.unleased[:, idx]
        keep = np.isin(self.l_own, idx)
        out.l_own = np.array([pos[k] for k in self.l_own[keep].tolist()],
                             np.int64)
        out.l_end = self.l_end[keep]
        out.l_size = self.l_size[:, keep]
        return out

    @classmethod
    def from_arrays(cls, hosts, cap, used, known, l_own, l_end, l_size):
        """Loads from columns.

        cap/used: (3, n) int arrays; known: (n,) bools; one entry per
        running leased server: its host's position, end (microseconds)
        and (vcpus, memory_mb, disk_gb).
        """
        loads = cls()
        n = len(hosts)
        loads.hosts = list(hosts)
        loads.cap = np.asarray(cap, np.int64).reshape(3, n)
        loads.used = np.asarray(used, np.int64).reshape(3, n)
        loads.known = np.asarray(known, bool)
        loads.l_own = np.asarray(l_own, np.int64)
        loads.l_end = np.asarray(l_end, np.int64)
        loads.l_size = np.asarray(l_size, np.int64).reshape(-1, 3).T
        leased_sum = np.stack([np.bincount(loads.l_own, weights=s,
                                           minlength=n).astype(np.int64)
                               for s in loads.l_size])
        loads.unleased = np.maximum(loads.used - leased_sum, 0)
        for name in ('_cap', '_used', '_known', '_lown', '_lend',
                     '_lsize'):
            delattr(loads, name)
        return loads

    @classmethod
    def from_host_loads(cls, host_loads):
        loads = cls()
        for hl in host_loads:
            loads.add(hl.host, hl.capacity, hl.used,
                      [(arrays.to_us(end), s.vcpus, s.memory_mb,
                        s.disk_gb) for end, s in hl.leased])
        return loads.done()


def _as_loads(loads):
    return loads if isinstance(loads, Loads) else \
        Loads.from_host_loads(loads)


def _host_index(cal, loads):
    if cal is None:
        return np.full(len(loads), -1, np.int64)
    get = cal._index.get
    return np.fromiter((get(h, -1) for h in loads.hosts), np.int64,
                       len(loads))


def _peaks(cal, hidx, ts, te):
    """Per-resource peaks of the calendar (vcpus, memory, disk, whole).

    Over [ts[k], te[k]) on host hidx[k] (-1: no item, zero).
    """
    n = len(hidx)
    vcpus = np.zeros(n, np.int64)
    mem = np.zeros(n, np.int64)
    disk = np.zeros(n, np.int64)
    whole = np.zeros(n, bool)
    ok = np.flatnonzero(hidx >= 0)
    if cal is None or not len(ok):
        return vcpus, mem, disk, whole
    h = hidx[ok]
    i = cal._locate(h, ts[ok], 'right')
    j = cal._locate(h, te[ok], 'left')
    pv, pm, pd = cal._range_max(i, j)
    vcpus[ok] = (pv % arrays.W) >> arrays.COUNT_BITS
    whole[ok] = pv >= arrays.W
    mem[ok] = pm
    disk[ok] = pd
    return vcpus, mem, disk, whole


def _running_after(loads, t_us):
    """Per host, the summed size of leased servers running after t_us."""
    n = len(loads)
    mask = loads.l_end > t_us
    own = loads.l_own[mask]
    return np.stack([np.bincount(own, weights=s[mask],
                                 minlength=n).astype(np.int64)
                     for s in loads.l_size]) if n else \
        np.zeros((3, 0), np.int64)


def _steps(loads, s_us, e_us):
    """Flat per-(host, step) arrays over [s_us, e_us) (e_us > s_us).

    Returns (owner, seg_start, seg_end, running[3, steps]): on each step,
    the leased servers of its host still running.
    """
    n = len(loads)
    # One final step per host: from the last leased end before e_us (or
    # s_us) to e_us, with the servers that run past e_us.
    inner = (loads.l_end > s_us) & (loads.l_end < e_us)
    own = loads.l_own[inner]
    end = loads.l_end[inner]
    size = loads.l_size[:, inner]
    order = np.lexsort((end, own))
    own, end, size = own[order], end[order], size[:, order]
    last_end = np.full(n, s_us, np.int64)
    if len(own):
        np.maximum.at(last_end, own, end)
    final_running = _running_after(loads, e_us - 1)
    # Inner steps end at each leased end: [previous end or s_us, end),
    # with every server of the host that ends at or after that end.
    prev = np.full(len(own), s_us, np.int64)
    same = np.zeros(len(own), bool)
    if len(own):
        same[1:] = own[1:] == own[:-1]
        prev[1:] = np.where(same[1:], end[:-1], s_us)
    # Suffix sums within each host of the inner servers, plus the servers
    # that outlive e_us.
    csum = np.cumsum(size[:, ::-1], axis=1)[:, ::-1] if len(own) else \
        np.zeros((3, 0), np.int64)
    # Subtract what belongs to later hosts: suffix sum at the first entry
    # of the next host.
    if len(own):
        first_of_next = np.searchsorted(own, own, 'right')
        tail = np.concatenate((csum, np.zeros((3, 1), np.int64)), axis=1)
        running_inner = csum - tail[:, first_of_next] + \
            final_running[:, own]
    else:
        running_inner = np.zeros((3, 0), np.int64)
    keep = end > prev
    owner = np.concatenate((own[keep], np.arange(n)))
    starts = np.concatenate((prev[keep], last_end))
    ends = np.concatenate((end[keep], np.full(n, e_us, np.int64)))
    running = np.concatenate((running_inner[:, keep], final_running),
                             axis=1)
    return owner, starts, ends, running


def _left_over(cal, loads, demand, s_us, e_us):
    """Per (host, step) over [s_us, e_us) (e_us > s_us): what each
    resource has left once ``demand`` is placed (negative: it does not
    fit), and whether a whole-host allocation holds the step.

    Returns (owner, left[3, steps], whole[steps]).
    """
    owner, ts, te, running = _steps(loads, s_us, e_us)
    hidx = _host_index(cal, loads)
    pv, pm, pd, whole = _peaks(cal, hidx[owner], ts, te)
    left = loads.cap[:, owner] - loads.unleased[:, owner] - running - \
        np.stack((pv + demand.vcpus, pm + demand.memory_mb,
                  pd + demand.disk_gb))
    return owner, left, whole


def fits(cal, loads, demand, start, end):
    """Per host (a bool list): does ``demand`` fit over [start, end)?

    ``loads`` is a :class:`Loads` (or a list of :class:`HostLoad`);
    ``end`` None means forever. ``cal`` is a Calendar of the allocations
    (or None). An empty interval fits wherever the capacity is known.
    """
    loads = _as_loads(loads)
    s_us, e_us = arrays.to_us(start), arrays.end_us(end)
    if e_us <= s_us or not len(loads):
        return loads.known.tolist()
    owner, left, whole = _left_over(cal, loads, demand, s_us, e_us)
    good = (left >= 0).all(axis=0) & ~whole
    result = loads.known.copy()
    result[owner[~good]] = False
    return result.tolist()


def headroom(cal, loads, demand, start, end):
    """Per host: the smallest share of its capacity still free over
    ``[start, end)`` once ``demand`` is placed there (the least over
    vcpus, RAM and disk, and over the interval); ``-math.inf`` for a host
    without a known capacity. Negative where it does not fit; at most -1
    where a whole-host allocation overlaps the interval.

    Admission spreads instances over hosts that fit equally tightly in
    time with it, as Nova's RAM and CPU weighers spread by default.
    """
    loads = _as_loads(loads)
    out = np.where(loads.known, math.inf, -math.inf)
    s_us, e_us = arrays.to_us(start), arrays.end_us(end)
    if e_us <= s_us or not len(loads):
        return out.tolist()
    owner, left, whole = _left_over(cal, loads, demand, s_us, e_us)
    cap = loads.cap[:, owner]
    share = np.where(cap > 0, left / np.maximum(cap, 1), math.inf)
    share = share.min(axis=0)
    share = np.where(whole, np.minimum(share, -1.0), share)
    per_host = np.full(len(loads), math.inf)
    np.minimum.at(per_host, owner, share)
    return np.where(loads.known, per_host, -math.inf).tolist()


def slack_seconds(cal, loads, demand, start, end):
    """Per host: seconds from ``end`` until ``demand`` (from ``start``)
    would stop fitting; ``math.inf`` if never (or ``end`` is None),
    ``-math.inf`` for a host without a known capacity.

    Only meaningful where :func:`fits` is true. Leased servers still
    running at ``end`` are counted as if they ran on forever (a slightly
    pessimistic horizon, fine for weighing).
    """
    loads = _as_loads(loads)
    out = np.where(loads.known, math.inf, -math.inf)
    if end is None or cal is None or not len(loads):
        return out.tolist()
    e_us = arrays.to_us(end)
    hidx = _host_index(cal, loads)
    rows = np.flatnonzero(loads.known & (hidx >= 0))
    if not len(rows):
        return out.tolist()
    running = _running_after(loads, e_us)[:, rows]
    left = loads.cap[:, rows] - loads.unleased[:, rows] - running
    tv = np.minimum((np.minimum(left[0], arrays.MAX_VCPUS) -
                     demand.vcpus + 1) * arrays.K, arrays.W)
    tm = left[1] - demand.memory_mb
    td = left[2] - demand.disk_gb
    h = hidx[rows]
    i = cal._locate(h, e_us, 'right')
    first = cal._first_bad(h, i, tv, tm, td)
    times = cal._times[np.maximum(first, 0)]
    slack = np.maximum(times - e_us, 0) / 1e6
    out[rows] = np.where(first >= 0, slack, math.inf)
    return out.tolist()


def next_promise_seconds(cal, hosts, now):
    """Per host: seconds from ``now`` to the next allocation start.

    The next allocation starting at or after ``now``; ``math.inf`` if none.
    """
    if cal is None:
        return [math.inf] * len(hosts)
    get = cal._index.get
    idx = np.fromiter((get(h, -1) for h in hosts), np.int64, len(hosts))
    ok = idx >= 0
    if not ok.any():
        return [math.inf] * len(hosts)
    now_us = arrays.to_us(now)
    starts = cal._next_starts(np.where(ok, idx, 0), now_us)
    starts = np.where(ok, starts, _INF)
    return np.where(starts >= _INF, math.inf,
                    np.maximum(starts - now_us, 0) / 1e6).tolist()
