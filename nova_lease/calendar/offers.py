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
"""Offers: the earliest windows where a reservation fits (pure, no I/O).

"When can I get N hosts (or M instances of this size) for D hours?"
:func:`find_offers` answers it against a :class:`~nova_lease.calendar.
Calendar` of the allocations of the candidate hosts (registered hosts
matching the request), for starts in ``[earliest, latest]``.

Where a start can be
--------------------
As a start ``t`` moves later, what overlaps ``[t, t + length)`` on a
host changes only when ``t`` passes the end of an allocation (it leaves:
the host may become able to take the request) or ``t + length`` passes
the start of one (it enters: the host may stop being able to). So the
set of starts where a host fits is a union of intervals, each beginning
at ``earliest`` or at a boundary of the host's allocations, and the
number of hosts (or slots) free at ``t`` can only grow at such points.
The candidates are therefore ``earliest`` and every boundary of a
candidate host's allocations in ``(earliest, latest]``: the earliest
candidate that fits is the earliest start that fits at all
(tests/unit/test_calendar_offers.py checks it against every minute).

The candidates are checked in chunks, each chunk against every host at
once (the calendar's vectorised range maxima), until ``limit`` offers
are found.

Requests
--------
* :class:`HostsRequest`: ``min`` to ``max`` whole hosts, each free of
  any allocation over ``[t, t + duration + cleaning)`` (a host lease's
  allocations run through its cleaning time);
* :class:`SlotsRequest`: ``amount`` instances of a size on hosts of
  known sizes, where whole-host allocations block a host and the other
  allocations take their size (each resource at its peak over the
  window); ``affinity`` True puts all on one host, False one per host,
  None anywhere (the booking's own rules: nova_lease.plugins.flavor).

Score
-----
An offer's ``score`` (in ``(0, 1]``) says how tightly it fits in time:
``1 / (1 + h)`` where ``h`` is the mean number of hours between the end
of the offer (its cleaning time included) and the next allocation on its
hosts (capped at the search's horizon). 1 is a window that ends exactly
where the next promise begins: no fragment of the calendar is left
behind. Offers are ordered by start, then score (best first); the hosts
of an offer are those that fit tightest.
"""

import collections
import datetime

import numpy as np

from nova_lease.calendar import store as arrays

#: Candidates checked together, at first (doubling up to the maximum).
FIRST_CHUNK = 16
MAX_CHUNK = 512
_HOUR_US = 3600 * 10 ** 6


class HostsRequest(collections.namedtuple('HostsRequest', 'min max')):
    """``min`` to ``max`` whole hosts."""

    __slots__ = ()


class SlotsRequest(collections.namedtuple(
        'SlotsRequest', 'vcpus memory_mb disk_gb amount affinity')):
    """``amount`` instances of a size; ``affinity`` True, False or None."""

    __slots__ = ()


class Offer(collections.namedtuple('Offer', 'start end hosts score')):
    """A window that fits: ``start``, ``end`` (naive UTC), ``hosts`` (one
    name per whole host, or per instance slot) and ``score``.
    """

    __slots__ = ()


def candidate_starts(cal, idx, earliest_us, latest_us):
    """Sorted unique candidate starts (see the module doc) in
    microseconds: ``earliest_us`` and the boundaries of the hosts of
    ``idx`` (calendar positions, -1 for a host without allocations) in
    ``(earliest_us, latest_us]``.
    """
    found = [np.array([earliest_us], np.int64)]
    if cal is not None:
        times = cal._times
        for k in idx.tolist():
            if k < 0:
                continue
            lo = int(cal._off[k]) + 1
            run = times[lo:lo + int(cal._real[k]) - 1]
            a = np.searchsorted(run, earliest_us, 'right')
            b = np.searchsorted(run, latest_us, 'right')
            if b > a:
                found.append(run[a:b])
    return np.unique(np.concatenate(found))


def _peaks(cal, idx, starts, length):
    """Per (candidate, host): peaks (vtrack, memory, disk) over
    ``[start, start + length)``: arrays of shape (candidates, hosts).
    """
    nc, nh = len(starts), len(idx)
    out = [np.zeros((nc, nh), np.int64) for _r in range(3)]
    known = np.flatnonzero(idx >= 0)
    if cal is None or not len(known) or length <= 0:
        return out
    h = np.tile(idx[known], nc)
    s = np.repeat(starts, len(known))
    i = cal._locate(h, s, 'right')
    j = cal._locate(h, s + length, 'left')
    for r, peak in enumerate(cal._range_max(i, j)):
        out[r][:, known] = peak.reshape(nc, len(known))
    return out


def _next_after(cal, idx, after_us, horizon_us):
    """Per host (1-D ``after_us`` per host): the next allocation start at
    or after it, capped at ``horizon_us``.
    """
    out = np.full(len(idx), horizon_us, np.int64)
    ok = idx >= 0
    if cal is None or not ok.any():
        return out
    nxt = cal._next_starts(np.where(ok, idx, 0), after_us)
    return np.where(ok, np.minimum(nxt, horizon_us), horizon_us)


def _free_slots(peaks, sizes, request):
    """Per (candidate, host): instances of ``request``'s size that fit."""
    vtrack, mem, disk = peaks
    used = ((vtrack % arrays.W) >> arrays.COUNT_BITS, mem, disk)
    counts = None
    for r, need in enumerate((request.vcpus, request.memory_mb,
                              request.disk_gb)):
        if need <= 0:
            continue
        n = (sizes[r][None, :] - used[r]) // need
        counts = n if counts is None else np.minimum(counts, n)
    if counts is None:
        # A size of nothing: as many as asked where the host is usable.
        counts = np.full(vtrack.shape, request.amount, np.int64)
    counts = np.maximum(counts, 0)
    counts[vtrack >= arrays.W] = 0
    return counts


def choose_slots(free, request, order):
    """Hosts (one per instance) from per-host free slots ``free``
    (indexed by host: a 1-D array by position, or a mapping by name),
    looked at in ``order``; None if they do not fit. Fullest hosts
    first, with the request's affinity: the rule of both the booking
    (nova_lease.plugins.flavor.allocation) and the offers.
    """
    hosts = sorted(order, key=lambda k: (int(free[k]), k))
    if request.affinity:
        for k in hosts:
            if free[k] >= request.amount:
                return [k] * request.amount
        return None
    if request.affinity is False:
        ones = [k for k in hosts if free[k] >= 1]
        return ones[:request.amount] if len(ones) >= request.amount \
            else None
    chosen = []
    for k in hosts:
        chosen.extend([k] * int(free[k]))
        if len(chosen) >= request.amount:
            return chosen[:request.amount]
    return None


def _feasible_slots(free, request):
    """Per candidate: can ``request`` be placed (vectorised)?"""
    if request.affinity:
        return (free >= request.amount).any(axis=1)
    if request.affinity is False:
        return (free >= 1).sum(axis=1) >= request.amount
    return free.sum(axis=1) >= request.amount


def _free_intervals(cal, idx, length, e_us, l_us):
    """Per candidate host, the intervals of starts where it is free of
    any allocation for ``length``: ``(host position, first, last, gap
    end)`` arrays, ``first``/``last`` clipped to ``[e_us, l_us]``, ``gap
    end`` the start of the next allocation (INF: none). Vectorised over
    the segments of every host's run in the window (a segment that holds
    nothing is a whole gap: a boundary next to it starts an allocation).
    """
    empty = np.flatnonzero(idx < 0) if cal is not None else \
        np.arange(len(idx))
    own = [empty]
    first = [np.full(len(empty), e_us, np.int64)]
    last = [np.full(len(empty), l_us, np.int64)]
    gap_end = [np.full(len(empty), arrays.INF, np.int64)]
    rows = np.flatnonzero(idx >= 0) if cal is not None else \
        np.zeros(0, np.int64)
    if len(rows):
        c = idx[rows]
        hi = cal._off[c] + cal._real[c]
        # The segments from the one holding e_us to the one holding
        # l_us + length (the sentinel's: before the first boundary).
        a = cal._locate(c, e_us, 'right')
        b = cal._locate(c, l_us + length, 'right')
        counts = b - a + 1
        owner = np.repeat(np.arange(len(c)), counts)
        base = np.repeat(a - np.concatenate(([0], np.cumsum(counts)[:-1])),
                         counts)
        p = base + np.arange(int(counts.sum()))
        free = cal._vals[0][p] == 0
        p, owner = p[free], owner[free]
        times = cal._times
        start = times[p]
        nxt = p + 1
        end = np.where(nxt < hi[owner],
                       times[np.minimum(nxt, len(times) - 1)], arrays.INF)
        f = np.maximum(start, e_us)
        g = np.minimum(np.where(end >= arrays.INF, arrays.INF,
                                end - length), l_us)
        ok = f <= g
        own.append(rows[owner[ok]])
        first.append(f[ok])
        last.append(g[ok])
        gap_end.append(end[ok])
    return tuple(np.concatenate(x).astype(np.int64)
                 for x in (own, first, last, gap_end))


def possible(hosts, request, sizes=None):
    """None when ``request`` fits an empty calendar of ``hosts``, else
    ``(field, reason)``: it can never fit (the offers' 400).
    """
    if isinstance(request, HostsRequest):
        if request.min > len(hosts):
            return 'min', ('%d host(s) asked, %d registered host(s) match '
                           'the request' % (request.min, len(hosts)))
        return None
    table = sizes or {}
    size = np.array([tuple(table.get(h) or (0, 0, 0)) for h in hosts],
                    np.int64).reshape(len(hosts), 3).T
    zero = [np.zeros((1, len(hosts)), np.int64) for _r in range(3)]
    free = _free_slots(zero, size, request) if len(hosts) else \
        np.zeros((1, 0), np.int64)
    if len(hosts) and _feasible_slots(free, request)[0]:
        return None
    return 'amount', ('%d instance(s) of that size do not fit the %d '
                      'matching registered host(s) even when they are '
                      'empty%s' % (request.amount, len(hosts), {
                          True: ' (all on one host: affinity true)',
                          False: ' (each on its own host: affinity '
                                 'false)', None: ''}[request.affinity]))


def _host_offers(cal, hosts, idx, request, duration, length, e_us, l_us,
                 limit, horizon):
    """Whole-host offers by a sweep over every host's free intervals:
    each offer starts where a host becomes free and ``min`` are.
    """
    own, first, last, gap_end = _free_intervals(cal, idx, length, e_us,
                                                l_us)
    if not len(own) or np.count_nonzero(
            np.bincount(own, minlength=len(hosts))) < request.min:
        return []
    a = np.sort(first)
    b = np.sort(last)
    starts = a[np.concatenate(([True], a[1:] != a[:-1]))]
    count = np.searchsorted(a, starts, 'right') - \
        np.searchsorted(b, starts, 'left')
    out = []
    for t in starts[count >= request.min][:limit].tolist():
        inside = np.flatnonzero((first <= t) & (last >= t))
        slack = np.minimum(gap_end[inside], horizon) - (t + length)
        order = np.lexsort((own[inside], slack))[:request.max]
        chosen = own[inside][order]
        hours = float(np.mean(slack[order])) / _HOUR_US
        out.append(Offer(arrays.from_us(t), arrays.from_us(t) + duration,
                         [hosts[k] for k in chosen.tolist()],
                         round(1.0 / (1.0 + hours), 6)))
    return out


def find_offers(cal, hosts, request, duration, earliest, latest, limit,
                cleaning=datetime.timedelta(0), sizes=None):
    """The first ``limit`` offers for ``request`` (see the module doc).

    :param cal: a Calendar holding (at least) the allocations of
        ``hosts`` over the search's span, or None (nothing booked).
    :param hosts: the candidate host names, in a stable order.
    :param request: :class:`HostsRequest` or :class:`SlotsRequest`.
    :param duration: timedelta (> 0).
    :param earliest: the earliest start; :param latest: the latest start
        (naive UTC datetimes, ``latest >= earliest``).
    :param cleaning: kept free after a host offer's end.
    :param sizes: for a :class:`SlotsRequest`, ``{host: (vcpus,
        memory_mb, disk_gb)}`` each host offers (a host without one
        takes nothing).
    :returns: [:class:`Offer`], by start.
    """
    if limit <= 0 or not hosts or possible(hosts, request, sizes):
        return []
    whole = isinstance(request, HostsRequest)
    length = arrays.to_us(earliest + duration) - arrays.to_us(earliest)
    if whole:
        length += arrays.to_us(earliest + cleaning) - arrays.to_us(earliest)
    e_us, l_us = arrays.to_us(earliest), arrays.to_us(latest)
    hosts = list(hosts)
    if cal is None:
        idx = np.full(len(hosts), -1, np.int64)
    else:
        get = cal._index.get
        idx = np.fromiter((get(h, -1) for h in hosts), np.int64, len(hosts))
    if not whole:
        table = sizes or {}
        size = np.array([tuple(table.get(h) or (0, 0, 0)) for h in hosts],
                        np.int64).reshape(len(hosts), 3).T
    horizon = l_us + length + 30 * 24 * _HOUR_US
    if whole:
        return _host_offers(cal, hosts, idx, request, duration, length,
                            e_us, l_us, limit, horizon)
    starts = candidate_starts(cal, idx, e_us, l_us)
    offers = []
    chunk = FIRST_CHUNK
    pos = 0
    while pos < len(starts) and len(offers) < limit:
        part = starts[pos:pos + chunk]
        pos += len(part)
        chunk = min(chunk * 2, MAX_CHUNK)
        peaks = _peaks(cal, idx, part, length)
        if whole:
            free = peaks[0] == 0
            good = free.sum(axis=1) >= request.min
        else:
            free = _free_slots(peaks, size, request)
            good = _feasible_slots(free, request)
        for c in np.flatnonzero(good).tolist():
            t = int(part[c])
            nxt = _next_after(cal, idx, np.full(len(idx), t + length),
                              horizon)
            slack = nxt - (t + length)
            if whole:
                members = np.flatnonzero(free[c])
                members = members[np.lexsort((members, slack[members]))]
                chosen = members[:request.max].tolist()
            else:
                order = np.flatnonzero(free[c] > 0).tolist()
                chosen = choose_slots(free[c], request, order)
            hours = float(np.mean(slack[np.array(chosen, np.int64)])) / \
                _HOUR_US
            offers.append(Offer(
                arrays.from_us(t), arrays.from_us(t) + duration,
                [hosts[k] for k in chosen], round(1.0 / (1.0 + hours), 6)))
            if len(offers) >= limit:
                break
    return offers
