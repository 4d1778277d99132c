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

"""The all-hosts (vectorised) queries of the capacity calendar.

:class:`BatchQueries` holds the :class:`~nova_lease.calendar.Calendar`
methods that answer every host at once with a constant number of numpy
operations over the calendar's arrays (see the package docstring):
:meth:`~BatchQueries.hosts_that_fit`, :meth:`~BatchQueries.slack_seconds`,
:meth:`~BatchQueries.next_demand_starts`, and the search, range-maximum
and binary-lifting steps they share with the batch fit queries of
``fit.py``. Calendar (``core.py``) builds the arrays and holds the
single-host queries.
"""

import itertools
import math

import numpy as np

from nova_lease.calendar import store as arrays


class BatchQueries(object):
    """The vectorised queries of a Calendar (a base class of it: they read
    the arrays that ``Calendar._set`` lays out, and use its
    ``_thresholds``).
    """

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
        bi = i >> arrays.BLOCK_BITS
        bl = last >> arrays.BLOCK_BITS
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
        head = np.minimum(i + arrays.WINDOW, np.minimum(
            ((bi + 1) << arrays.BLOCK_BITS) - 1, last))
        tail = np.minimum(
            np.maximum((bl << arrays.BLOCK_BITS) + arrays.WINDOW, i), last)
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
        s, e = arrays.to_us(start), arrays.end_us(end)
        arrays.check_interval(s, e)
        arrays.check_demand(demand)
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
        end_block = self._end[safe] >> arrays.BLOCK_BITS

        def first_bad_in(cols):
            """cols: (BLOCK, n) positions; first bad one per host or -1."""
            hit = ((vtrack[cols] >= tv) | (mem[cols] > tm) |
                   (disk[cols] > td))
            first = cols[hit.argmax(axis=0), columns]
            return np.where(hit.any(axis=0), first, -1)

        # The rest of the block holding i.
        block_last = (((i >> arrays.BLOCK_BITS) << arrays.BLOCK_BITS) +
                      arrays.BLOCK - 1)
        found = first_bad_in(np.minimum(i + arrays.WINDOW, block_last))
        # Binary lifting over the block sparse table: skip the longest run
        # of good blocks after that one.
        pos = (i >> arrays.BLOCK_BITS) + 1
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
        later = first_bad_in(
            (np.minimum(pos, last_block) << arrays.BLOCK_BITS) +
            arrays.WINDOW)
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
        s, e = arrays.to_us(start), arrays.end_us(end)
        arrays.check_interval(s, e)
        arrays.check_demand(demand)
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
                           arrays.INF)
        out = {}
        for name, good, hz in zip(names, ok.tolist(), horizon.tolist()):
            if not good:
                out[name] = -math.inf
            elif hz >= arrays.INF:
                out[name] = math.inf
            elif e >= arrays.INF:
                out[name] = -math.inf
            else:
                out[name] = (hz - e) / 1e6
        return out

    def _next_starts(self, idx, after_us):
        if not len(self._times):
            return np.full(len(idx), arrays.INF, np.int64)
        # The first boundary at or after after_us, then the next one
        # where an item starts, if still in the host's run.
        p = self._locate(idx, after_us, 'left')
        end = self._off[idx] + self._real[idx]
        inside = p < end
        q = np.where(inside, p, 0)
        q = q + self._nextrel[q]
        valid = inside & (q < end)
        return np.where(valid, self._times[np.where(valid, q, 0)], arrays.INF)

    def next_demand_starts(self, after, hosts=None):
        """``{host: next_demand_start(host, after)}`` for many hosts."""
        idx, names = self._host_indices(hosts)
        ok = idx >= 0
        if not ok.any():
            return dict.fromkeys(names)
        res = self._next_starts(np.where(ok, idx, 0), arrays.to_us(after))
        res = np.where(ok, res, arrays.INF)
        return {name: arrays.end_from_us(t)
                for name, t in zip(names, res.tolist())}
