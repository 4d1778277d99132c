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

"""The arrays behind a :class:`nova_lease.calendar.Calendar` (internal).

Time conversions (naive UTC datetimes to integer microseconds), the
encoding of the tracks, and :class:`Store`: every host's step function in
one set of numpy arrays (see the package docstring, "Data structure").
Only the modules of this package use it.
"""

import datetime
import functools
import itertools
import operator
import threading

import numpy as np

from nova_lease.calendar.model import Usage

EPOCH = datetime.datetime(1970, 1, 1)
ONE_US = datetime.timedelta(microseconds=1)
# Internal time unit: integer microseconds since the epoch. datetime.min and
# datetime.max fit well inside int64; the sentinels are outside them.
INF = int(np.iinfo(np.int64).max)
NEG_INF = int(np.iinfo(np.int64).min) + 1
# An item ending at datetime.max ends never.
FOREVER = datetime.datetime.max
FOREVER_US = (FOREVER - EPOCH) // ONE_US
# A position past every array (see layout's nextrel).
NO_START = 1 << 40
# with_changes() builds the whole calendar again when the changed hosts
# hold more than this share of the items (a splice would cost more).
REBUILD_SHARE = 0.25
# A store holds 1/SLACK more positions than its first calendar uses, for
# the runs rebuilt by with_changes().
SLACK = 4

# Encoding of the vcpu track (see the module docstring).
COUNT_BITS = 24
VCPU_BITS = 28
K = 1 << COUNT_BITS
W = 1 << (COUNT_BITS + VCPU_BITS)
MAX_WHOLE = (1 << (63 - COUNT_BITS - VCPU_BITS)) - 1
MAX_VCPUS = 1 << VCPU_BITS

BLOCK_BITS = 4
BLOCK = 1 << BLOCK_BITS
WINDOW = np.arange(BLOCK)[:, None]
WINDOW.setflags(write=False)


ZERO_USAGE = Usage(0, 0, 0, False)


def to_us(value):
    """Naive UTC datetime -> integer microseconds since the epoch (an
    integer is taken as such already).
    """
    if isinstance(value, int):
        return value
    if value.tzinfo is not None:
        value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return (value - EPOCH) // ONE_US


# Conversions of Python objects to arrays run in chunks of this many: a
# long one does not hold the interpreter (other threads of the process,
# e.g. the scheduler's requests while its snapshot is read in the
# background, run between chunks).
CHUNK = 1 << 16


def fromiter(convert, values, dtype=np.int64):
    """np.fromiter(convert(values)), in chunks of CHUNK values."""
    n = len(values)
    if n <= CHUNK:
        return np.fromiter(convert(values), dtype, n)
    out = np.empty(n, dtype)
    for k in range(0, n, CHUNK):
        part = values[k:k + CHUNK]
        out[k:k + len(part)] = np.fromiter(convert(part), dtype, len(part))
    return out


def us_of(values):
    # No Python frame per value (naive datetimes).
    return map(operator.floordiv,
               map(operator.sub, values, itertools.repeat(EPOCH)),
               itertools.repeat(ONE_US))


def column_us(values):
    """A sequence of datetimes (or of integer microseconds since the
    epoch, or both) -> int64 array of microseconds.
    """
    if values and isinstance(values[0], int):
        try:
            return fromiter(iter, values)
        except TypeError:
            pass
    else:
        try:
            return fromiter(us_of, values)
        except TypeError:
            pass
    return fromiter(functools.partial(map, to_us), values)


def end_us(value):
    return INF if value is None else to_us(value)


def from_us(value):
    return EPOCH + datetime.timedelta(microseconds=int(value))


def end_from_us(value):
    return None if value >= INF else from_us(value)


def check_interval(start_us, end_us):
    if end_us < start_us:
        raise ValueError('interval end is before its start')


def check_demand(demand):
    if demand.vcpus < 0 or demand.memory_mb < 0 or demand.disk_gb < 0:
        raise ValueError('a demand cannot be negative: %r' % (demand,))
    if demand.vcpus >= MAX_VCPUS:
        raise ValueError('a demand is too large: %r' % (demand,))


def decode(vtrack, mem, disk):
    vtrack = int(vtrack)
    return Usage(int((vtrack % W) >> COUNT_BITS), int(mem), int(disk),
                 vtrack >= W)


def columns(items, index):
    """(host indices, (vcpus, mem, disk, start, end, whole)) of items."""
    n = len(items)
    if not n:
        empty = np.zeros(0, np.int64)
        return empty, (empty, empty, empty, empty, empty,
                       np.zeros(0, bool))

    # Column by column (zip(*items) is much slower on big inputs).
    def column(field, dtype=np.int64):
        return fromiter(functools.partial(map, operator.itemgetter(field)),
                        items, dtype)

    hosts = operator.itemgetter(0)
    hidx = fromiter(lambda part: map(index.__getitem__, map(hosts, part)),
                    items)
    start = column_us(list(map(operator.itemgetter(1), items)))
    # (Forever as the starts are given: one type makes the fast path.)
    forever = FOREVER_US if isinstance(items[0][1], int) else FOREVER
    end = column_us([forever if it[2] is None else it[2] for it in items])
    end[end >= FOREVER_US] = INF
    vcpus, mem, disk = column(3), column(4), column(5)
    whole = column(6, bool)
    if (end < start).any():
        raise ValueError('an item ends before it starts')
    if (vcpus < 0).any() or (mem < 0).any() or (disk < 0).any():
        raise ValueError('an item has a negative amount')
    keep = end > start
    if not keep.all():
        hidx, start, end = hidx[keep], start[keep], end[keep]
        vcpus, mem, disk = vcpus[keep], mem[keep], disk[keep]
        whole = whole[keep]
    vcpus = np.where(whole, 0, vcpus)
    mem = np.where(whole, 0, mem)
    disk = np.where(whole, 0, disk)
    return hidx, (vcpus, mem, disk, start, end, whole)


def check_limits(hidx, vcpus, whole, nh):
    if not len(hidx):
        return
    count = np.bincount(hidx, minlength=nh)
    vsum = np.bincount(hidx, weights=vcpus, minlength=nh)
    wsum = np.bincount(hidx, weights=whole, minlength=nh)
    if (count.max() >= K or vsum.max() >= (1 << VCPU_BITS) or
            wsum.max() > MAX_WHOLE):
        raise ValueError('too many items on one host for the calendar')


def runs(nh, hidx, vcpus, mem, disk, start, end, whole):
    """Per host, the demand's step function.

    Returns (host, time, values[3], starts) of the boundaries, sorted by
    host then time: the summed tracks from that time on, and whether an
    item starts then.
    """
    n = len(hidx)
    # Events: +demand at start, -demand at a finite end, sorted by time
    # then (stable) by host.
    finite = np.flatnonzero(end < INF)
    ev_item = np.concatenate((np.arange(n), finite))
    ev_sign = np.concatenate((np.ones(n, np.int64),
                              np.full(len(finite), -1, np.int64)))
    ev_t = np.concatenate((start, end[finite]))
    by_time = np.argsort(ev_t)
    hdtype = np.int16 if nh < (1 << 15) else np.int64
    ev_h = hidx[ev_item[by_time]].astype(hdtype)
    by_host = np.argsort(ev_h, kind='stable')
    order = by_time[by_host]
    ev_h = ev_h[by_host].astype(np.int64)
    ev_t = ev_t[order]
    ev_item, ev_sign = ev_item[order], ev_sign[order]
    track_v = np.where(whole, W + 1, vcpus * K + 1)
    cum = np.stack((track_v, mem, disk))[:, ev_item] * ev_sign

    # Running sums per host (a global cumsum minus the host's base).
    np.cumsum(cum, axis=1, out=cum)
    counts = np.bincount(ev_h, minlength=nh)
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    base = np.zeros((3, nh), np.int64)
    inner = (counts > 0) & (first > 0)
    base[:, inner] = cum[:, first[inner] - 1]
    cum -= base[:, ev_h]

    # Coalesce events at the same (host, time): keep the last sum.
    last = np.ones(len(ev_h), bool)
    last[:-1] = (ev_h[1:] != ev_h[:-1]) | (ev_t[1:] != ev_t[:-1])
    group = np.cumsum(last) - last
    starts = np.zeros(int(last.sum()), bool)
    starts[group[ev_sign > 0]] = True
    return ev_h[last], ev_t[last], cum[:, last], starts


def layout(nh, ch, ctime, cv, cstart):
    """Lay the boundaries out: per host [sentinel, boundaries...,
    padding] rounded up to a multiple of BLOCK positions.

    Returns (off, real, times, vals, nextrel): host k's run is
    ``off[k]:off[k] + real[k]`` (``off[k + 1]`` with padding);
    ``nextrel[p]``: how many positions after p the next boundary where
    an item starts is (it may lie beyond the host's run: check).
    """
    ccount = np.bincount(ch, minlength=nh)
    real = ccount + 1
    padded = (real + BLOCK - 1) // BLOCK * BLOCK
    off = np.concatenate(([0], np.cumsum(padded)))
    total = int(off[-1])
    cfirst = np.concatenate(([0], np.cumsum(ccount)[:-1]))
    pos = off[ch] + 1 + (np.arange(len(ch)) - cfirst[ch])

    times = np.full(total, INF, np.int64)
    times[off[:-1]] = NEG_INF
    times[pos] = ctime
    isset = np.zeros(total, bool)
    isset[off[:-1]] = True
    isset[pos] = True
    fill = np.maximum.accumulate(np.where(isset, np.arange(total), 0))
    vals = np.zeros((3, total), np.int64)
    vals[:, pos] = cv
    vals = vals[:, fill]
    where = np.arange(total)
    nxt = np.full(total, NO_START, np.int64)
    nxt[pos[cstart]] = pos[cstart]
    nxt = np.minimum.accumulate(nxt[::-1])[::-1]
    return off, real, times, vals, nxt - where


def levels(max_blocks):
    """Levels of the sparse table for runs of up to max_blocks blocks."""
    return max(int(max_blocks), 1).bit_length()


def derive(vals, levels):
    """The sparse table of block maxima (``levels`` levels; windows may
    run past a host's run: the queries never use those).
    """
    total = vals.shape[1]
    nb = total // BLOCK
    blocks = vals.reshape(3, nb, BLOCK)
    table = np.empty((3, levels, nb), np.int64)
    table[:, 0] = blocks.max(axis=2)
    step = 1
    for lvl in range(1, levels):
        prev = table[:, lvl - 1]
        nxt = table[:, lvl]
        nxt[:] = prev
        np.maximum(prev[:, :-step], prev[:, step:], out=nxt[:, :-step])
        step *= 2
    return table


class Store(object):
    """The arrays of one or more calendars, with free space at the end.

    Positions below ``used`` are written once and never again; a
    calendar derived from the one that wrote last may write its new runs
    above (:meth:`claim`), where no other calendar reads. Calendars get
    read-only views.
    """

    def __init__(self, size, levels):
        capacity = size + max(size // SLACK, 16 * BLOCK)
        capacity = (capacity + BLOCK - 1) // BLOCK * BLOCK
        self.levels = levels
        self.times = np.empty(capacity, np.int64)
        self.vals = np.empty((3, capacity), np.int64)
        self.nextrel = np.empty(capacity, np.int64)
        self.table = np.empty((3, levels, capacity // BLOCK), np.int64)
        self.used = 0
        self._lock = threading.Lock()
        views = []
        for arr in (self.times, self.vals, self.nextrel, self.table):
            view = arr.view()
            view.setflags(write=False)
            views.append(view)
        self._views = tuple(views)

    def views(self):
        return self._views

    def claim(self, used, size):
        """(self, first position) of ``size`` free positions for the
        calendar that used ``used`` positions, or (None, None) when
        another calendar wrote past them or the space is short.
        """
        with self._lock:
            if self.used != used or self.used + size > len(self.times):
                return None, None
            base = self.used
            self.used += size
            return self, base

    def write(self, base, times, vals, nextrel, table):
        """Write runs at ``base`` (claimed); the new used position."""
        stop = base + len(times)
        self.times[base:stop] = times
        self.vals[:, base:stop] = vals
        self.nextrel[base:stop] = nextrel
        self.table[:, :, base // BLOCK:stop // BLOCK] = table
        self.used = max(self.used, stop)
        return stop

    def copy_to(self, other, runs):
        """Copy ``runs`` ([start, stop) block-aligned ranges) one after
        the other to the start of ``other`` (adjacent runs in one copy).
        """
        merged = []
        for start, stop in runs:
            if merged and merged[-1][1] == start:
                merged[-1][1] = stop
            elif stop > start:
                merged.append([start, stop])
        at = 0
        for start, stop in merged:
            n = stop - start
            other.times[at:at + n] = self.times[start:stop]
            other.vals[:, at:at + n] = self.vals[:, start:stop]
            other.nextrel[at:at + n] = self.nextrel[start:stop]
            other.table[:, :, at // BLOCK:(at + n) // BLOCK] = \
                self.table[:, :, start // BLOCK:stop // BLOCK]
            at += n
