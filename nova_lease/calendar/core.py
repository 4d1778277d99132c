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

"""The capacity calendar (see the package docstring)."""

import collections
import itertools

import numpy as np

from nova_lease.calendar import batch
from nova_lease.calendar.model import HostCapacity
from nova_lease.calendar.model import Usage
from nova_lease.calendar import store as arrays


class Calendar(batch.BatchQueries):
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
    # Every host's run is a arrays.BLOCK-aligned range [_off[k], _end[k]) of
    # the arrays, and nothing in a host's run depends on another host:
    # with_changes() rebuilds the runs of the hosts whose items changed
    # and writes them into the free space at the end of the arrays (a
    # arrays.Store shared with this calendar, which never reads there), or
    # copies the live runs into a new arrays.Store when that is not possible.

    def _build(self):
        items = self._items
        index = {h: k for k, h in enumerate(self._capacities)}
        for it in items:
            if it[0] not in index:
                index[it[0]] = len(index)
        self._index = index
        nh = len(index)
        hidx, cols = arrays.columns(items, index)
        arrays.check_limits(hidx, cols[0], cols[5], nh)
        runs = arrays.runs(nh, hidx, *cols)
        off, real, times, vals, nextrel = arrays.layout(nh, *runs)
        max_blocks = int(((off[1:] - off[:-1]) // arrays.BLOCK).max()) \
            if nh else 1
        table = arrays.derive(vals, arrays.levels(max_blocks))
        store = arrays.Store(len(times), table.shape[1])
        used = store.write(0, times, vals, nextrel, table)
        self._set(off[:-1], off[1:], real, store, used)

    def _set(self, off, end, real, store, used):
        index = self._index
        nh = len(index)
        max_blocks = int(((end - off) // arrays.BLOCK).max()) if nh else 1
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
        if capacities or n_changed > arrays.REBUILD_SHARE * (
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
        hidx, cols = arrays.columns(items, local)
        arrays.check_limits(hidx, cols[0], cols[5], len(hosts))
        off_c, real_c, times_c, vals_c, nextrel_c = arrays.layout(
            len(hosts), *arrays.runs(len(hosts), hidx, *cols))
        levels = old._store.levels
        blocks_c = (off_c[1:] - off_c[:-1]) // arrays.BLOCK
        if len(blocks_c) and arrays.levels(int(blocks_c.max())) > levels:
            return False
        table_c = arrays.derive(vals_c, levels)

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
            store = arrays.Store(live + len(times_c), levels)
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
        s, e = arrays.to_us(start), arrays.end_us(end)
        arrays.check_interval(s, e)
        where = self._host_slice(host)
        if where is None or s == e:
            return arrays.ZERO_USAGE
        k, o0, o1 = where
        i, j = self._segments(o0, o1, s, e)
        seg = self._vals[:, i:j]
        vtrack = seg[0]
        return Usage(int(((vtrack % arrays.W) >> arrays.COUNT_BITS).max()),
                     int(seg[1].max()), int(seg[2].max()),
                     bool(vtrack.max() >= arrays.W))

    def fits(self, host, demand, start, end):
        """True if ``demand`` fits ``host`` over ``[start, end)``.

        For many hosts, :meth:`hosts_that_fit` is much cheaper than a loop.
        """
        s, e = arrays.to_us(start), arrays.end_us(end)
        arrays.check_interval(s, e)
        arrays.check_demand(demand)
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
        limit = min((cap.vcpus - demand.vcpus + 1) * arrays.K, arrays.W)
        return (pv < limit and
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
            return (np.ones(nh, np.int64), np.full(nh, arrays.INF, np.int64),
                    np.full(nh, arrays.INF, np.int64))
        # Capped so that a whole-host item (>= arrays.W) never fits.
        tv = np.minimum(
            (np.minimum(cap[0], arrays.MAX_VCPUS) - demand.vcpus + 1) *
            arrays.K, arrays.W)
        tv = np.where(self._known, tv, 0)
        return tv, cap[1] - demand.memory_mb, cap[2] - demand.disk_gb

    def free_periods(self, host, demand, min_length, window_start,
                     window_end):
        """Periods ``[a, b)`` inside the window where ``demand`` fits.

        Maximal periods, at least ``min_length`` (a timedelta) long, as a
        list of ``(a, b)`` tuples; ``b`` is None for a period that never
        ends (only when ``window_end`` is None).
        """
        ws, we = arrays.to_us(window_start), arrays.end_us(window_end)
        arrays.check_interval(ws, we)
        arrays.check_demand(demand)
        min_us = min_length // arrays.ONE_US
        where = self._host_slice(host)
        if where is None or not self._known[where[0]] or ws == we:
            return []
        k, o0, o1 = where
        tv, tm, td = (t[k] for t in self._thresholds(demand))
        vals = self._vals[:, o0:o1]
        good = (vals[0] < tv) & (vals[1] <= tm) & (vals[2] <= td)
        seg_start = self._times[o0:o1]
        seg_end = np.append(seg_start[1:], arrays.INF)
        a = np.maximum(seg_start, ws)
        b = np.minimum(seg_end, we)
        good &= a < b
        result = []
        # Runs of consecutive good segments are maximal free periods.
        edges = np.flatnonzero(np.diff(np.concatenate(([0], good, [0]))))
        for r0, r1 in zip(edges[::2], edges[1::2]):
            pa, pb = int(a[r0]), int(b[r1 - 1])
            if pb >= arrays.INF or pb - pa >= min_us:
                result.append((arrays.from_us(pa), arrays.end_from_us(pb)))
        return result

    def fit_horizon(self, host, demand, start):
        """Latest end ``t`` such that ``demand`` fits ``host`` over
        ``[start, t)``.

        None means forever (nothing later ever makes it not fit); ``start``
        itself means it does not fit at ``start``. For a request
        ``[start, end)`` the slack is ``fit_horizon(...) - end``: how long
        the request could overrun before running into promised demand.
        """
        s = arrays.to_us(start)
        arrays.check_demand(demand)
        where = self._host_slice(host)
        if where is None or not self._known[where[0]]:
            return arrays.from_us(s)
        k, o0, o1 = where
        tv, tm, td = (t[k] for t in self._thresholds(demand))
        i = o0 + int(self._times[o0:o1].searchsorted(s, 'right')) - 1
        vals = self._vals[:, i:o1]
        bad = (vals[0] >= tv) | (vals[1] > tm) | (vals[2] > td)
        hit = np.flatnonzero(bad)
        if not len(hit):
            return None
        return arrays.from_us(max(int(self._times[i + hit[0]]), s))

    def next_demand_start(self, host, after):
        """Earliest start, at or after ``after``, of an item on ``host``.

        None if no item starts then. Inclusive, so that a request ending at
        ``e`` sees a promise starting exactly at ``e``.
        """
        k = self._index.get(host)
        if k is None:
            return None
        res = self._next_starts(np.array([k], np.int64), arrays.to_us(after))
        return None if res[0] >= arrays.INF else arrays.from_us(res[0])

    def usage_steps(self, host, window_start, window_end):
        """The demand on ``host`` as a step function over the window.

        List of ``(t, Usage)``: the usage from ``t`` until the next entry's
        ``t`` (or the window end). The first entry is at ``window_start``.
        """
        ws, we = arrays.to_us(window_start), arrays.end_us(window_end)
        arrays.check_interval(ws, we)
        where = self._host_slice(host)
        if ws == we:
            return []
        if where is None:
            return [(arrays.from_us(ws), arrays.ZERO_USAGE)]
        k, o0, o1 = where
        i, j = self._segments(o0, o1, ws, we)
        out = []
        for p in range(i, j):
            u = arrays.decode(*self._vals[:, p])
            if out and out[-1][1] == u:
                continue
            out.append((arrays.from_us(max(int(self._times[p]), ws)), u))
        return out
