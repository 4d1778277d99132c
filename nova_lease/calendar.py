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

import collections
import datetime
import functools
import itertools
import math
import operator
import threading

import numpy as np

_EPOCH = datetime.datetime(1970, 1, 1)
_ONE_US = datetime.timedelta(microseconds=1)
# Internal time unit: integer microseconds since the epoch. datetime.min and
# datetime.max fit well inside int64; the sentinels are outside them.
_INF = int(np.iinfo(np.int64).max)
_NEG_INF = int(np.iinfo(np.int64).min) + 1
# An item ending at datetime.max ends never.
_FOREVER = datetime.datetime.max
_FOREVER_US = (_FOREVER - _EPOCH) // _ONE_US
# A position past every array (see _layout's nextrel).
_NO_START = 1 << 40
# with_changes() builds the whole calendar again when the changed hosts
# hold more than this share of the items (a splice would cost more).
_REBUILD_SHARE = 0.25
# A store holds 1/_SLACK more positions than its first calendar uses, for
# the runs rebuilt by with_changes().
_SLACK = 4

# Encoding of the vcpu track (see the module docstring).
_COUNT_BITS = 24
_VCPU_BITS = 28
_K = 1 << _COUNT_BITS
_W = 1 << (_COUNT_BITS + _VCPU_BITS)
_MAX_WHOLE = (1 << (63 - _COUNT_BITS - _VCPU_BITS)) - 1
_MAX_VCPUS = 1 << _VCPU_BITS

_BLOCK_BITS = 4
_BLOCK = 1 << _BLOCK_BITS
_WINDOW = np.arange(_BLOCK)[:, None]
_WINDOW.setflags(write=False)


def usable_capacity(total, reserved=0, allocation_ratio=1.0):
    """Usable amount of one resource, the way placement computes it.

    placement: ``capacity = (total - reserved) * allocation_ratio`` and an
    allocation fits when ``used + amount <= capacity``. With integer amounts
    that is ``used + amount <= floor(capacity)``.
    """
    return int(math.floor((total - reserved) * allocation_ratio))


class HostCapacity(collections.namedtuple('HostCapacity',
                                          'vcpus memory_mb disk_gb')):
    """Usable capacity of a host (already allocation-ratio'd and reserved)."""

    __slots__ = ()

    @classmethod
    def from_inventory(cls, vcpus, memory_mb, disk_gb,
                       cpu_allocation_ratio=1.0, ram_allocation_ratio=1.0,
                       disk_allocation_ratio=1.0, reserved_vcpus=0,
                       reserved_memory_mb=0, reserved_disk_gb=0):
        """Capacity from totals, allocation ratios and reserved amounts.

        Same formula as placement's inventory capacity, per resource:
        ``floor((total - reserved) * allocation_ratio)``. Use the values of
        the host's placement inventory (VCPU, MEMORY_MB, DISK_GB); note that
        Nova reports ``reserved_host_disk_mb`` to placement as DISK_GB
        rounded up.
        """
        return cls(
            usable_capacity(vcpus, reserved_vcpus, cpu_allocation_ratio),
            usable_capacity(memory_mb, reserved_memory_mb,
                            ram_allocation_ratio),
            usable_capacity(disk_gb, reserved_disk_gb, disk_allocation_ratio))


class Demand(collections.namedtuple('Demand',
                                    'vcpus memory_mb disk_gb whole_host')):
    """What a request needs: resources, or the whole host."""

    __slots__ = ()

    def __new__(cls, vcpus=0, memory_mb=0, disk_gb=0, whole_host=False):
        return super().__new__(cls, vcpus, memory_mb, disk_gb,
                               bool(whole_host))

    @classmethod
    def whole(cls):
        return cls(whole_host=True)


class Item(collections.namedtuple(
        'Item',
        'host start end vcpus memory_mb disk_gb whole_host ref')):
    """One demand in the calendar: ``host`` is held over ``[start, end)``.

    ``end=None`` means forever (a VM without a lease). ``whole_host=True``
    takes the whole host (its resource fields are ignored). ``ref`` is an
    opaque label (e.g. a reservation or instance id) kept with the item; it
    takes part in equality, which :meth:`Calendar.with_changes` uses.
    """

    __slots__ = ()

    def __new__(cls, host, start, end=None, vcpus=0, memory_mb=0, disk_gb=0,
                whole_host=False, ref=None):
        return super().__new__(cls, host, start, end, vcpus, memory_mb,
                               disk_gb, bool(whole_host), ref)

    @classmethod
    def for_demand(cls, host, demand, start, end=None, ref=None):
        return cls(host, start, end, demand.vcpus, demand.memory_mb,
                   demand.disk_gb, demand.whole_host, ref)


class Usage(collections.namedtuple('Usage',
                                   'vcpus memory_mb disk_gb whole_host')):
    """Summed demand on a host (at an instant, or a per-resource peak)."""

    __slots__ = ()


_ZERO_USAGE = Usage(0, 0, 0, False)


def _to_us(value):
    """Naive UTC datetime -> integer microseconds since the epoch."""
    if value.tzinfo is not None:
        value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return (value - _EPOCH) // _ONE_US


# Conversions of Python objects to arrays run in chunks of this many: a
# long one does not hold the interpreter (other threads of the process,
# e.g. the scheduler's requests while its snapshot is read in the
# background, run between chunks).
_CHUNK = 1 << 16


def _fromiter(convert, values, dtype=np.int64):
    """np.fromiter(convert(values)), in chunks of _CHUNK values."""
    n = len(values)
    if n <= _CHUNK:
        return np.fromiter(convert(values), dtype, n)
    out = np.empty(n, dtype)
    for k in range(0, n, _CHUNK):
        part = values[k:k + _CHUNK]
        out[k:k + len(part)] = np.fromiter(convert(part), dtype, len(part))
    return out


def _us_of(values):
    # No Python frame per value (naive datetimes).
    return map(operator.floordiv,
               map(operator.sub, values, itertools.repeat(_EPOCH)),
               itertools.repeat(_ONE_US))


def _column_us(values):
    """A sequence of datetimes -> int64 array of microseconds."""
    try:
        return _fromiter(_us_of, values)
    except TypeError:
        return _fromiter(functools.partial(map, _to_us), values)


def _end_us(value):
    return _INF if value is None else _to_us(value)


def _from_us(value):
    return _EPOCH + datetime.timedelta(microseconds=int(value))


def _end_from_us(value):
    return None if value >= _INF else _from_us(value)


def _check_interval(start_us, end_us):
    if end_us < start_us:
        raise ValueError('interval end is before its start')


def _check_demand(demand):
    if demand.vcpus < 0 or demand.memory_mb < 0 or demand.disk_gb < 0:
        raise ValueError('a demand cannot be negative: %r' % (demand,))
    if demand.vcpus >= _MAX_VCPUS:
        raise ValueError('a demand is too large: %r' % (demand,))


def _decode(vtrack, mem, disk):
    vtrack = int(vtrack)
    return Usage(int((vtrack % _W) >> _COUNT_BITS), int(mem), int(disk),
                 vtrack >= _W)


def _columns(items, index):
    """(host indices, (vcpus, mem, disk, start, end, whole)) of items."""
    n = len(items)
    if not n:
        empty = np.zeros(0, np.int64)
        return empty, (empty, empty, empty, empty, empty,
                       np.zeros(0, bool))

    # Column by column (zip(*items) is much slower on big inputs).
    def column(field, dtype=np.int64):
        return _fromiter(functools.partial(map, operator.itemgetter(field)),
                         items, dtype)

    hosts = operator.itemgetter(0)
    hidx = _fromiter(lambda part: map(index.__getitem__, map(hosts, part)),
                     items)
    start = _column_us(list(map(operator.itemgetter(1), items)))
    end = _column_us([_FOREVER if it[2] is None else it[2] for it in items])
    end[end >= _FOREVER_US] = _INF
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


def _check_limits(hidx, vcpus, whole, nh):
    if not len(hidx):
        return
    count = np.bincount(hidx, minlength=nh)
    vsum = np.bincount(hidx, weights=vcpus, minlength=nh)
    wsum = np.bincount(hidx, weights=whole, minlength=nh)
    if (count.max() >= _K or vsum.max() >= (1 << _VCPU_BITS) or
            wsum.max() > _MAX_WHOLE):
        raise ValueError('too many items on one host for the calendar')


def _runs(nh, hidx, vcpus, mem, disk, start, end, whole):
    """Per host, the demand's step function.

    Returns (host, time, values[3], starts) of the boundaries, sorted by
    host then time: the summed tracks from that time on, and whether an
    item starts then.
    """
    n = len(hidx)
    # Events: +demand at start, -demand at a finite end, sorted by time
    # then (stable) by host.
    finite = np.flatnonzero(end < _INF)
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
    track_v = np.where(whole, _W + 1, vcpus * _K + 1)
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


def _layout(nh, ch, ctime, cv, cstart):
    """Lay the boundaries out: per host [sentinel, boundaries...,
    padding] rounded up to a multiple of _BLOCK positions.

    Returns (off, real, times, vals, nextrel): host k's run is
    ``off[k]:off[k] + real[k]`` (``off[k + 1]`` with padding);
    ``nextrel[p]``: how many positions after p the next boundary where
    an item starts is (it may lie beyond the host's run: check).
    """
    ccount = np.bincount(ch, minlength=nh)
    real = ccount + 1
    padded = (real + _BLOCK - 1) // _BLOCK * _BLOCK
    off = np.concatenate(([0], np.cumsum(padded)))
    total = int(off[-1])
    cfirst = np.concatenate(([0], np.cumsum(ccount)[:-1]))
    pos = off[ch] + 1 + (np.arange(len(ch)) - cfirst[ch])

    times = np.full(total, _INF, np.int64)
    times[off[:-1]] = _NEG_INF
    times[pos] = ctime
    isset = np.zeros(total, bool)
    isset[off[:-1]] = True
    isset[pos] = True
    fill = np.maximum.accumulate(np.where(isset, np.arange(total), 0))
    vals = np.zeros((3, total), np.int64)
    vals[:, pos] = cv
    vals = vals[:, fill]
    where = np.arange(total)
    nxt = np.full(total, _NO_START, np.int64)
    nxt[pos[cstart]] = pos[cstart]
    nxt = np.minimum.accumulate(nxt[::-1])[::-1]
    return off, real, times, vals, nxt - where


def _levels(max_blocks):
    """Levels of the sparse table for runs of up to max_blocks blocks."""
    return max(int(max_blocks), 1).bit_length()


def _derive(vals, levels):
    """The sparse table of block maxima (``levels`` levels; windows may
    run past a host's run: the queries never use those).
    """
    total = vals.shape[1]
    nb = total // _BLOCK
    blocks = vals.reshape(3, nb, _BLOCK)
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


class _Store(object):
    """The arrays of one or more calendars, with free space at the end.

    Positions below ``used`` are written once and never again; a
    calendar derived from the one that wrote last may write its new runs
    above (:meth:`claim`), where no other calendar reads. Calendars get
    read-only views.
    """

    def __init__(self, size, levels):
        capacity = size + max(size // _SLACK, 16 * _BLOCK)
        capacity = (capacity + _BLOCK - 1) // _BLOCK * _BLOCK
        self.levels = levels
        self.times = np.empty(capacity, np.int64)
        self.vals = np.empty((3, capacity), np.int64)
        self.nextrel = np.empty(capacity, np.int64)
        self.table = np.empty((3, levels, capacity // _BLOCK), np.int64)
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
        self.table[:, :, base // _BLOCK:stop // _BLOCK] = table
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
            other.table[:, :, at // _BLOCK:(at + n) // _BLOCK] = \
                self.table[:, :, start // _BLOCK:stop // _BLOCK]
            at += n


class Calendar(object):
    """Immutable snapshot of per-host demand over time.

    :param capacities: mapping host -> :class:`HostCapacity` (or any
        3-sequence vcpus, memory_mb, disk_gb). Hosts are any hashable keys.
        Their order is the order of :attr:`hosts`.
    :param items: iterable of :class:`Item` (or plain tuples of its
        fields, in its order: a caller holding millions of them keeps
        them out of the cyclic garbage collector's way). Items on hosts
        without a capacity are kept (they show in :meth:`peak`), but such
        hosts never fit anything. Zero-length items are ignored.

    Thread-safe: nothing changes after construction.
    """

    def __init__(self, capacities, items=()):
        self._capacities = {h: HostCapacity(*c)
                            for h, c in capacities.items()}
        self._items = tuple(items)
        # {host: tuple of items}, built on the first with_changes().
        self._by_host = None
        self._build()

    @classmethod
    def from_host_items(cls, capacities, host_items):
        """A Calendar of ``host_items`` ({host: sequence of Items}, each
        on its key's host): what the first :meth:`with_changes` would
        otherwise group.
        """
        cal = cls(capacities, itertools.chain.from_iterable(
            host_items.values()))
        cal._by_host = {h: tuple(v) for h, v in host_items.items() if v}
        # (Made again from _by_host when asked for: one reference fewer to
        # each item, one big tuple fewer to hold and to free.)
        cal._items = None
        return cal

    # ------------------------------------------------------------------
    # construction
    #
    # Every host's run is a _BLOCK-aligned range [_off[k], _end[k]) of
    # the arrays, and nothing in a host's run depends on another host:
    # with_changes() rebuilds the runs of the hosts whose items changed
    # and writes them into the free space at the end of the arrays (a
    # _Store shared with this calendar, which never reads there), or
    # copies the live runs into a new _Store when that is not possible.

    def _build(self):
        items = self._items
        index = {h: k for k, h in enumerate(self._capacities)}
        for it in items:
            if it[0] not in index:
                index[it[0]] = len(index)
        self._index = index
        nh = len(index)
        hidx, cols = _columns(items, index)
        _check_limits(hidx, cols[0], cols[5], nh)
        runs = _runs(nh, hidx, *cols)
        off, real, times, vals, nextrel = _layout(nh, *runs)
        max_blocks = int(((off[1:] - off[:-1]) // _BLOCK).max()) \
            if nh else 1
        table = _derive(vals, _levels(max_blocks))
        store = _Store(len(times), table.shape[1])
        used = store.write(0, times, vals, nextrel, table)
        self._set(off[:-1], off[1:], real, store, used)

    def _set(self, off, end, real, store, used):
        index = self._index
        nh = len(index)
        max_blocks = int(((end - off) // _BLOCK).max()) if nh else 1
        log2 = np.zeros(max_blocks + 2, np.int64)
        log2[2:] = np.floor(np.log2(np.arange(2, max_blocks + 2)))
        # Capacities aligned with host indices; unknown capacity -> -1.
        cap = np.full((3, nh), -1, np.int64)
        for h, c in self._capacities.items():
            cap[:, index[h]] = c
        known = np.zeros(nh, bool)
        known[:len(self._capacities)] = True

        self._off = off
        self._end = end
        self._real = real
        self._store = store
        # Positions [0, _used) of the store may belong to this calendar.
        self._used = used
        self._times, self._vals, self._nextrel, self._table = \
            store.views()
        self._log2 = log2
        # Binary search steps of _locate: the longest run.
        self._top_step = 1 << (int(real.max()).bit_length() - 1) \
            if nh else 0
        self._cap = cap
        self._known = known
        self._cap_idx = np.arange(len(self._capacities), dtype=np.int64)
        self._cap_hosts = list(self._capacities)
        for arr in (off, end, real, log2, cap, known, self._cap_idx):
            arr.setflags(write=False)

    # ------------------------------------------------------------------
    # snapshot information and updates

    @property
    def hosts(self):
        """Hosts with a known capacity, in construction order."""
        return tuple(self._cap_hosts)

    @property
    def items(self):
        if self._items is None:
            self._items = tuple(itertools.chain.from_iterable(
                self._by_host.get(h, ()) for h in self._index))
        return self._items

    def capacity(self, host):
        """:class:`HostCapacity` of ``host`` or None if unknown."""
        return self._capacities.get(host)

    def _host_items(self):
        if self._by_host is None:
            by_host = collections.defaultdict(list)
            for it in self._items:
                by_host[it[0]].append(it)
            self._by_host = {h: tuple(v) for h, v in by_host.items()}
        return self._by_host

    def with_changes(self, add=(), remove=(), capacities=None):
        """A new Calendar with items added/removed and capacities updated.

        ``remove`` items are matched by equality (all fields, ``ref``
        included), one occurrence each; a missing one raises KeyError.
        ``capacities`` (a mapping) replaces or adds host capacities; a value
        of None drops the host's capacity.

        Only the hosts whose items change are rebuilt, and their runs
        written into free space shared with this calendar (see the module
        doc), so a change costs about the changed hosts' items; now and
        then (space full, or a second calendar derived from this one) the
        live runs are copied (see benchmarks/calendar_core.py). A change
        of capacities, or of many hosts at once, rebuilds the whole
        calendar.
        """
        add = list(add)
        remove = list(remove)
        by_host = self._host_items()
        changed = {}
        if remove:
            pending = collections.Counter(remove)
            for host in {it[0] for it in pending}:
                kept = []
                for it in by_host.get(host, ()):
                    if pending.get(it):
                        pending[it] -= 1
                    else:
                        kept.append(it)
                changed[host] = kept
            missing = [it for it, c in pending.items() if c > 0]
            if missing:
                raise KeyError('not in the calendar: %r' % (missing[0],))
        for it in add:
            if it[0] not in changed:
                changed[it[0]] = list(by_host.get(it[0], ()))
            changed[it[0]].append(it)
        new_by_host = dict(by_host)
        for host, host_items in changed.items():
            if host_items:
                new_by_host[host] = tuple(host_items)
            else:
                new_by_host.pop(host, None)
        caps = dict(self._capacities)
        if capacities:
            for h, c in capacities.items():
                if c is None:
                    caps.pop(h, None)
                else:
                    caps[h] = c
        if not changed and not capacities:
            return self
        n_changed = sum(len(v) for v in changed.values())
        if capacities or n_changed > _REBUILD_SHARE * (
                len(self._index) + sum(map(len, by_host.values()))):
            return Calendar(caps, itertools.chain.from_iterable(
                new_by_host.values()))
        new = Calendar.__new__(Calendar)
        new._capacities = self._capacities
        new._items = None
        new._by_host = new_by_host
        if not new._splice(self, changed):
            # Too long a run for the current sparse table.
            return Calendar(caps, new.items)
        return new

    def _splice(self, old, changed):
        """Build self from ``old`` with ``changed`` {host: items}.

        False when a new run is too long for the sparse table.
        """
        index = dict(old._index)
        for host in changed:
            if host not in index:
                index[host] = len(index)
        self._index = index
        nh_old, nh = len(old._index), len(index)
        hosts = sorted(changed, key=index.__getitem__)
        ks = np.array([index[h] for h in hosts], np.int64)
        items = [it for h in hosts for it in changed[h]]
        local = {h: k for k, h in enumerate(hosts)}
        hidx, cols = _columns(items, local)
        _check_limits(hidx, cols[0], cols[5], len(hosts))
        off_c, real_c, times_c, vals_c, nextrel_c = _layout(
            len(hosts), *_runs(len(hosts), hidx, *cols))
        levels = old._store.levels
        blocks_c = (off_c[1:] - off_c[:-1]) // _BLOCK
        if len(blocks_c) and _levels(int(blocks_c.max())) > levels:
            return False
        table_c = _derive(vals_c, levels)

        off = np.zeros(nh, np.int64)
        end = np.zeros(nh, np.int64)
        real = np.zeros(nh, np.int64)
        off[:nh_old], end[:nh_old], real[:nh_old] = (old._off, old._end,
                                                     old._real)
        real[ks] = real_c
        # The new runs go after everything the store holds, if no other
        # calendar wrote there since ``old``; else into a new store.
        store, base = old._store.claim(old._used, len(times_c))
        if store is None:
            # Copy the live runs (the changed hosts' are dropped) first.
            keep = np.ones(nh, bool)
            keep[ks] = False
            keep[nh_old:] = False
            lengths = np.where(keep, end - off, 0)
            live = int(lengths.sum())
            store = _Store(live + len(times_c), levels)
            new_off = np.concatenate(([0], np.cumsum(lengths)[:-1]))
            old._store.copy_to(store, [
                (int(off[k]), int(end[k])) for k in np.flatnonzero(keep)])
            end = np.where(keep, new_off + lengths, end)
            off = np.where(keep, new_off, off)
            # Not shared yet: the new runs go after the live ones.
            store.used = base = live
        used = store.write(base, times_c, vals_c, nextrel_c, table_c)
        off[ks] = base + off_c[:-1]
        end[ks] = base + off_c[1:]
        self._set(off, end, real, store, used)
        return True

    # ------------------------------------------------------------------
    # single-host queries

    def _host_slice(self, host):
        k = self._index.get(host)
        if k is None:
            return None
        o0 = int(self._off[k])
        return k, o0, o0 + int(self._real[k])

    def _segments(self, o0, o1, start_us, end_us):
        times = self._times[o0:o1]
        i = o0 + int(times.searchsorted(start_us, 'right')) - 1
        j = o0 + int(times.searchsorted(end_us, 'left'))
        return i, j

    def peak(self, host, start, end):
        """Per-resource peak of the summed demand on ``host`` over
        ``[start, end)`` (``end=None``: forever), as a :class:`Usage`.

        Each field is its own maximum over the interval; the maxima may
        occur at different instants. ``whole_host`` is True when a
        whole-host item overlaps the interval; ``vcpus`` then still reports
        the other items' peak.
        """
        s, e = _to_us(start), _end_us(end)
        _check_interval(s, e)
        where = self._host_slice(host)
        if where is None or s == e:
            return _ZERO_USAGE
        k, o0, o1 = where
        i, j = self._segments(o0, o1, s, e)
        seg = self._vals[:, i:j]
        vtrack = seg[0]
        return Usage(int(((vtrack % _W) >> _COUNT_BITS).max()),
                     int(seg[1].max()), int(seg[2].max()),
                     bool(vtrack.max() >= _W))

    def fits(self, host, demand, start, end):
        """True if ``demand`` fits ``host`` over ``[start, end)``.

        For many hosts, :meth:`hosts_that_fit` is much cheaper than a loop.
        """
        s, e = _to_us(start), _end_us(end)
        _check_interval(s, e)
        _check_demand(demand)
        where = self._host_slice(host)
        if where is None or not self._known[where[0]]:
            return False
        k, o0, o1 = where
        cap = self._capacities[host]
        if s == e:
            pv = pm = pd = 0
        else:
            i, j = self._segments(o0, o1, s, e)
            pv, pm, pd = self._vals[:, i:j].max(axis=1).tolist()
        if demand.whole_host:
            return pv == 0
        return (pv < min((cap.vcpus - demand.vcpus + 1) * _K, _W) and
                pm + demand.memory_mb <= cap.memory_mb and
                pd + demand.disk_gb <= cap.disk_gb)

    def _thresholds(self, demand):
        """Per-host limits of the three tracks for ``demand``.

        A segment is bad for the demand when vtrack >= tv, or
        mem > tm, or disk > td.
        """
        cap = self._cap
        if demand.whole_host:
            nh = cap.shape[1]
            return (np.ones(nh, np.int64), np.full(nh, _INF, np.int64),
                    np.full(nh, _INF, np.int64))
        # Capped so that a whole-host item (>= _W) never fits.
        tv = np.minimum(
            (np.minimum(cap[0], _MAX_VCPUS) - demand.vcpus + 1) * _K, _W)
        tv = np.where(self._known, tv, 0)
        return tv, cap[1] - demand.memory_mb, cap[2] - demand.disk_gb

    def free_periods(self, host, demand, min_length, window_start,
                     window_end):
        """Periods ``[a, b)`` inside the window where ``demand`` fits.

        Maximal periods, at least ``min_length`` (a timedelta) long, as a
        list of ``(a, b)`` tuples; ``b`` is None for a period that never
        ends (only when ``window_end`` is None).
        """
        ws, we = _to_us(window_start), _end_us(window_end)
        _check_interval(ws, we)
        _check_demand(demand)
        min_us = min_length // _ONE_US
        where = self._host_slice(host)
        if where is None or not self._known[where[0]] or ws == we:
            return []
        k, o0, o1 = where
        tv, tm, td = (t[k] for t in self._thresholds(demand))
        vals = self._vals[:, o0:o1]
        good = (vals[0] < tv) & (vals[1] <= tm) & (vals[2] <= td)
        seg_start = self._times[o0:o1]
        seg_end = np.append(seg_start[1:], _INF)
        a = np.maximum(seg_start, ws)
        b = np.minimum(seg_end, we)
        good &= a < b
        result = []
        # Runs of consecutive good segments are maximal free periods.
        edges = np.flatnonzero(np.diff(np.concatenate(([0], good, [0]))))
        for r0, r1 in zip(edges[::2], edges[1::2]):
            pa, pb = int(a[r0]), int(b[r1 - 1])
            if pb >= _INF or pb - pa >= min_us:
                result.append((_from_us(pa), _end_from_us(pb)))
        return result

    def fit_horizon(self, host, demand, start):
        """Latest end ``t`` such that ``demand`` fits ``host`` over
        ``[start, t)``.

        None means forever (nothing later ever makes it not fit); ``start``
        itself means it does not fit at ``start``. For a request
        ``[start, end)`` the slack is ``fit_horizon(...) - end``: how long
        the request could overrun before running into promised demand.
        """
        s = _to_us(start)
        _check_demand(demand)
        where = self._host_slice(host)
        if where is None or not self._known[where[0]]:
            return _from_us(s)
        k, o0, o1 = where
        tv, tm, td = (t[k] for t in self._thresholds(demand))
        i = o0 + int(self._times[o0:o1].searchsorted(s, 'right')) - 1
        vals = self._vals[:, i:o1]
        bad = (vals[0] >= tv) | (vals[1] > tm) | (vals[2] > td)
        hit = np.flatnonzero(bad)
        if not len(hit):
            return None
        return _from_us(max(int(self._times[i + hit[0]]), s))

    def next_demand_start(self, host, after):
        """Earliest start, at or after ``after``, of an item on ``host``.

        None if no item starts then. Inclusive, so that a request ending at
        ``e`` sees a promise starting exactly at ``e``.
        """
        k = self._index.get(host)
        if k is None:
            return None
        res = self._next_starts(np.array([k], np.int64), _to_us(after))
        return None if res[0] >= _INF else _from_us(res[0])

    def usage_steps(self, host, window_start, window_end):
        """The demand on ``host`` as a step function over the window.

        List of ``(t, Usage)``: the usage from ``t`` until the next entry's
        ``t`` (or the window end). The first entry is at ``window_start``.
        """
        ws, we = _to_us(window_start), _end_us(window_end)
        _check_interval(ws, we)
        where = self._host_slice(host)
        if ws == we:
            return []
        if where is None:
            return [(_from_us(ws), _ZERO_USAGE)]
        k, o0, o1 = where
        i, j = self._segments(o0, o1, ws, we)
        out = []
        for p in range(i, j):
            u = _decode(*self._vals[:, p])
            if out and out[-1][1] == u:
                continue
            out.append((_from_us(max(int(self._times[p]), ws)), u))
        return out

    # ------------------------------------------------------------------
    # all-hosts (vectorised) queries

    def _host_indices(self, hosts):
        """(indices with -1 for unknown, names) for ``hosts`` or all."""
        if hosts is None:
            return self._cap_idx, self._cap_hosts
        hosts = list(hosts)
        if not self._index:
            return np.full(len(hosts), -1, np.int64), hosts
        idx = np.fromiter(
            map(self._index.get, hosts, itertools.repeat(-1)), np.int64,
            len(hosts))
        return idx, hosts

    def _locate(self, idx, t_us, side):
        """Per host: index of the segment containing ``t_us`` ('right'),
        or the number of the host's segments starting before ``t_us``
        ('left'), as global positions.

        ``t_us``: one time, or one per host. A binary search in every
        host's run at once (the runs are sorted; each starts with a
        sentinel before every time).
        """
        lo = self._off[idx]
        hi = lo + self._real[idx]
        times = self._times
        last = len(times) - 1
        pos = lo
        step = self._top_step
        while step:
            cand = pos + step
            probe = times[np.minimum(cand, last)]
            ok = (probe <= t_us) if side == 'right' else (probe < t_us)
            ok &= cand < hi
            pos = pos + ok * step
            step >>= 1
        return pos if side == 'right' else pos + 1

    def _range_max(self, i, j):
        """Per resource maxima of the tracks over [i, j) (j > i): 3 arrays.
        """
        last = j - 1
        bi = i >> _BLOCK_BITS
        bl = last >> _BLOCK_BITS
        # Different blocks: suffix of the first, prefix of the last, and
        # the full blocks between from the sparse table.
        b0 = bi + 1
        n_full = bl - b0
        has_mid = n_full > 0
        lvl = self._log2[np.maximum(n_full, 1)]
        b0 = np.minimum(b0, self._table.shape[2] - 1)
        b1 = np.maximum(bl - (1 << lvl), 0)
        # In-block parts: i to the end of its block, the start of last's
        # block to last (windows clamped, so positions repeat; in one
        # block both are i..last).
        head = np.minimum(i + _WINDOW, np.minimum(
            ((bi + 1) << _BLOCK_BITS) - 1, last))
        tail = np.minimum(np.maximum((bl << _BLOCK_BITS) + _WINDOW, i), last)
        cols = np.concatenate((head, tail))
        out = []
        for r in range(3):
            peak = self._vals[r][cols].max(axis=0)
            table = self._table[r]
            mid = np.maximum(table[lvl, b0], table[lvl, b1])
            np.maximum(peak, np.where(has_mid, mid, 0), out=peak)
            out.append(peak)
        return out

    def hosts_that_fit(self, demand, start, end, hosts=None):
        """Hosts (from ``hosts``, default all with a capacity, in order)
        that ``demand`` fits over ``[start, end)``. Unknown hosts never fit.
        """
        s, e = _to_us(start), _end_us(end)
        _check_interval(s, e)
        _check_demand(demand)
        idx, names = self._host_indices(hosts)
        if not len(idx):
            return []
        ok = idx >= 0
        if not ok.any():
            return []
        safe = np.where(ok, idx, 0)
        ok &= self._known[safe]
        if s == e:
            peak = np.zeros((3, len(idx)), np.int64)
        else:
            i = self._locate(safe, s, 'right')
            j = self._locate(safe, e, 'left')
            peak = self._range_max(i, j)
        tv, tm, td = self._thresholds(demand)
        ok &= ((peak[0] < tv[safe]) & (peak[1] <= tm[safe]) &
               (peak[2] <= td[safe]))
        return [names[k] for k in np.flatnonzero(ok)]

    def _first_bad(self, safe, i, tv, tm, td):
        """Per host, the first global position >= i whose segment does not
        fit (thresholds per host), or -1.
        """
        vtrack, mem, disk = self._vals
        n = len(i)
        columns = np.arange(n)
        end_block = self._end[safe] >> _BLOCK_BITS

        def first_bad_in(cols):
            """cols: (_BLOCK, n) positions; first bad one per host or -1."""
            hit = ((vtrack[cols] >= tv) | (mem[cols] > tm) |
                   (disk[cols] > td))
            first = cols[hit.argmax(axis=0), columns]
            return np.where(hit.any(axis=0), first, -1)

        # The rest of the block holding i.
        block_last = ((i >> _BLOCK_BITS) << _BLOCK_BITS) + _BLOCK - 1
        found = first_bad_in(np.minimum(i + _WINDOW, block_last))
        # Binary lifting over the block sparse table: skip the longest run
        # of good blocks after that one.
        pos = (i >> _BLOCK_BITS) + 1
        tables = self._table
        last_block = tables.shape[2] - 1
        for lvl in range(tables.shape[1] - 1, -1, -1):
            width = 1 << lvl
            probe = np.minimum(pos, last_block)
            good = ((tables[0, lvl, probe] < tv) &
                    (tables[1, lvl, probe] <= tm) &
                    (tables[2, lvl, probe] <= td))
            pos = np.where(good & (pos + width <= end_block), pos + width,
                           pos)
        later = first_bad_in((np.minimum(pos, last_block) << _BLOCK_BITS) +
                             _WINDOW)
        later = np.where(pos < end_block, later, -1)
        return np.where(found >= 0, found, later)

    def slack_seconds(self, demand, start, end, hosts=None):
        """For the weigher: ``{host: seconds}`` between ``end`` and the
        host's fit horizon (see :meth:`fit_horizon`).

        ``math.inf`` when nothing ever stops the demand fitting (also for
        ``end=None``); negative (``-math.inf`` for ``end=None``) when the
        demand does not fit over ``[start, end)``; unknown hosts get
        ``-math.inf``. Small non-negative slack = fits tightest in time.
        """
        s, e = _to_us(start), _end_us(end)
        _check_interval(s, e)
        _check_demand(demand)
        idx, names = self._host_indices(hosts)
        if not len(idx):
            return {}
        ok = idx >= 0
        if not ok.any():
            return dict.fromkeys(names, -math.inf)
        safe = np.where(ok, idx, 0)
        ok &= self._known[safe]
        tv, tm, td = (t[safe] for t in self._thresholds(demand))
        i = self._locate(safe, s, 'right')
        first = self._first_bad(safe, i, tv, tm, td)
        horizon = np.where(first >= 0,
                           np.maximum(self._times[np.maximum(first, 0)], s),
                           _INF)
        out = {}
        for name, good, hz in zip(names, ok.tolist(), horizon.tolist()):
            if not good:
                out[name] = -math.inf
            elif hz >= _INF:
                out[name] = math.inf
            elif e >= _INF:
                out[name] = -math.inf
            else:
                out[name] = (hz - e) / 1e6
        return out

    def _next_starts(self, idx, after_us):
        if not len(self._times):
            return np.full(len(idx), _INF, np.int64)
        # The first boundary at or after after_us, then the next one
        # where an item starts, if still in the host's run.
        p = self._locate(idx, after_us, 'left')
        end = self._off[idx] + self._real[idx]
        inside = p < end
        q = np.where(inside, p, 0)
        q = q + self._nextrel[q]
        valid = inside & (q < end)
        return np.where(valid, self._times[np.where(valid, q, 0)], _INF)

    def next_demand_starts(self, after, hosts=None):
        """``{host: next_demand_start(host, after)}`` for many hosts."""
        idx, names = self._host_indices(hosts)
        ok = idx >= 0
        if not ok.any():
            return dict.fromkeys(names)
        res = self._next_starts(np.where(ok, idx, 0), _to_us(after))
        res = np.where(ok, res, _INF)
        return {name: _end_from_us(t) for name, t in zip(names,
                                                         res.tolist())}
