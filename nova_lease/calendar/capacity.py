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
"""Capacity over time: what the cloud has, uses, promises and has free.

:func:`capacity_over_time` answers, for a window cut into steps, per
resource (``vcpus``, ``memory_mb``, ``disk_gb`` and whole ``hosts``):

* ``capacity``: the usable capacity of the hosts counted (as placement
  computes it, see :func:`nova_lease.calendar.usable_capacity`);
* ``used``: what unleased work uses: servers under no lease have no end,
  so the usage a host has now counts from now on, in every step that ends
  after ``now`` (none before). A host's unleased usage is its usage less
  its running leased servers. A registered host (os-hosts) takes host
  reservations' and instance reservations' slots' work only: its servers
  are counted in those promises, never as unleased (a stray server there
  is the auditor's ``free_pool_server`` finding);
* ``promised``: what leases hold over the step: per host, the peak of the
  calendar's allocations within the step (a host held whole by a host
  reservation: its whole capacity), plus the running leased servers that
  no allocation of theirs holds yet (until their lease's end), summed over
  the hosts;
* ``free``: per host ``capacity - used - promised``, never below 0, summed
  over the hosts (so an over-committed host does not take from others).

For ``hosts``: ``capacity`` is the number of hosts, ``promised`` those
held whole by a host reservation at some time in the step, ``used`` the
other hosts that run unleased servers (steps that end after ``now``),
``free`` the hosts with nothing at all (no promise, no server) over the
step. A host with instance leases' promises only counts in none of
``used``, ``promised`` and ``free``.

``total`` sums each figure over the steps, times the step's length in
hours: unit-hours (vCPU-hours, MB-hours, GB-hours, host-hours). As the
steps hold peaks, ``promised`` and ``used`` totals are upper bounds at
coarse steps.

A member's view (``project_id`` given) holds the aggregate ``capacity``
and ``free`` and only the promises of that project's leases; no ``used``,
no host, no other project's booking; it may be narrowed to an
availability zone only when that counts enough hosts not to show what
happens on a few (:func:`member_zones`).

Pure: no I/O. The inputs come from the scheduler's snapshot of the
calendar (:class:`nova_lease.scheduler.snapshot.Snapshot`: its
``calendar``, ``host_items`` and ``reservations``) and from Nova (the
hosts, their usage and the running leased servers): see the lease API's
``handlers/capacity.py`` and ``nova-lease-manage capacity``.
"""

import collections
import datetime
import math

import numpy as np

from nova_lease.calendar.core import Calendar
from nova_lease.calendar import store as arrays

#: The resources, in the order of the response.
RESOURCES = ('vcpus', 'memory_mb', 'disk_gb', 'hosts')
#: The per-host resources (HostCapacity's fields).
HOST_RESOURCES = ('vcpus', 'memory_mb', 'disk_gb')
#: The window when no end is given: a day from the start, in steps of
#: an hour by default.
DEFAULT_WINDOW = datetime.timedelta(days=1)
DEFAULT_STEP = '1h'
#: Most steps a window may be cut into (e.g. 83 days at one-hour steps).
MAX_STEPS = 2000
#: Hosts whose (host, step) grids are computed at a time (bounds memory).
HOST_CHUNK = 512

FIGURES = ('capacity', 'used', 'promised', 'free')
MEMBER_FIGURES = ('capacity', 'promised', 'free')


class CapacityError(ValueError):
    """A bad query: ``field`` names it."""

    def __init__(self, field, message):
        super().__init__(message)
        self.field = field
        self.message = message


class CapacityHost(collections.namedtuple(
        'CapacityHost', 'name capacity used registered service_host '
                        'availability_zone aggregates leased')):
    """One compute host as Nova knows it now.

    :ivar name: hypervisor hostname (the calendar's host key).
    :ivar capacity: :class:`nova_lease.calendar.HostCapacity` (usable).
    :ivar used: (vcpus, memory_mb, disk_gb) used now by every server on
        it, leased or not.
    :ivar registered: registered for host reservations (os-hosts).
    :ivar service_host: the compute service's host (aggregates use it).
    :ivar availability_zone: its availability zone (or None).
    :ivar aggregates: names of the aggregates it is in.
    :ivar leased: ``(until, (vcpus, memory_mb, disk_gb), reservation
        id)`` of its running leased servers (their size is part of
        ``used``): each counts as promised from now until ``until`` (a
        naive UTC datetime or integer microseconds since the epoch;
        ``until <= now``: its allocation already holds it), see
        ``nova_lease.scheduler.hosts.leased_entry``. The reservation
        (looked up in ``reservations``) tells its project and booking.
    """

    __slots__ = ()

    def __new__(cls, name, capacity, used=(0, 0, 0), registered=False,
                service_host=None, availability_zone=None, aggregates=(),
                leased=()):
        return super().__new__(cls, name, capacity, tuple(used),
                               bool(registered), service_host or name,
                               availability_zone, tuple(aggregates),
                               tuple(leased))


def iso(dt):
    """A naive UTC datetime as ISO 8601 UTC (``2026-12-01T00:00:00Z``)."""
    if dt is None:
        return None
    text = dt.strftime('%Y-%m-%dT%H:%M:%S')
    if dt.microsecond:
        text += '.%06d' % dt.microsecond
    return text + 'Z'


def step_bounds(start, end, step):
    """The steps' bounds: ``[start, start + step, ..., end]`` (the last
    step ends at ``end``, shorter when the window is not a whole number of
    steps). Raises :class:`CapacityError` for a bad window or step.
    """
    if end <= start:
        raise CapacityError('end', "'end' (%s) must be after 'start' (%s)"
                            % (iso(end), iso(start)))
    if step <= datetime.timedelta(0):
        raise CapacityError('step', "'step' must be more than zero")
    count = math.ceil((end - start) / step)
    if count > MAX_STEPS:
        raise CapacityError(
            'step', "'step' (%s) cuts the window from %s to %s into %d "
                    "steps; at most %d: take a longer step or a shorter "
                    "window" % (step, iso(start), iso(end), count,
                                MAX_STEPS))
    bounds = [start + k * step for k in range(count)] + [end]
    return bounds


def select_hosts(hosts, host=None, aggregate=None, availability_zone=None):
    """The hosts that pass the filters (by name or service host, aggregate
    name, availability zone); :class:`CapacityError` naming the filter
    when no host matches it.
    """
    out = list(hosts)
    if host is not None:
        out = [h for h in out if host in (h.name, h.service_host)]
        if not out:
            raise CapacityError('host', "'host': no compute host is named "
                                "%r" % host)
    if aggregate is not None:
        out = [h for h in out if aggregate in h.aggregates]
        if not out:
            raise CapacityError('aggregate', "'aggregate': no host counted "
                                "is in an aggregate named %r" % aggregate)
    if availability_zone is not None:
        out = [h for h in out if h.availability_zone == availability_zone]
        if not out:
            raise CapacityError(
                'availability_zone', "'availability_zone': no host counted "
                "is in availability zone %r" % availability_zone)
    return out


class NarrowView(CapacityError):
    """A member's filter that would count too few hosts (a 403)."""


def member_zones(hosts, min_hosts):
    """The availability zones a member's view may be narrowed to.

    A zone of fewer than ``min_hosts`` hosts would show what happens on
    a few hosts, so when another project holds one (its free capacity
    drops by a whole host's). So would the zones whose complement is
    that small: the unfiltered view less theirs. A zone passes when it
    counts at least ``min_hosts`` hosts and the hosts of the zones that
    do not pass number none or at least ``min_hosts`` (the smallest
    zones are given up until they do); a zone that holds every host is
    the unfiltered view.
    """
    counts = collections.Counter(h.availability_zone for h in hosts)
    total = sum(counts.values())
    allowed = {z: n for z, n in counts.items()
               if z is not None and n >= min_hosts}
    rest = total - sum(allowed.values())
    while allowed and 0 < rest < min_hosts:
        zone = min(allowed, key=lambda z: (allowed[z], z))
        rest += allowed.pop(zone)
    allowed.update({z: n for z, n in counts.items()
                    if z is not None and n == total})
    return set(allowed)


def check_member_zone(hosts, availability_zone, min_hosts):
    """:class:`NarrowView` unless a member may narrow its view to
    ``availability_zone`` (see :func:`member_zones`); a zone that holds
    no host is :func:`select_hosts`'s to refuse.
    """
    if availability_zone is None or not any(
            h.availability_zone == availability_zone for h in hosts):
        return
    if availability_zone not in member_zones(hosts, min_hosts):
        raise NarrowView(
            'availability_zone', "'availability_zone': a project's view "
            "of capacity counts every host, or a zone of at least "
            "[nova_lease_api] capacity_member_min_hosts (%d) hosts that "
            "leaves out none or at least as many; zone %r does not "
            "(an admin's view does)" % (min_hosts, availability_zone))


def check_resources(resources):
    """The resources asked for, in the response's order."""
    if resources is None:
        return RESOURCES
    unknown = [r for r in resources if r not in RESOURCES]
    if unknown or not resources:
        raise CapacityError(
            'resource', "'resource' must be among %s, got %r" % (
                ', '.join(RESOURCES), ','.join(resources)))
    return tuple(r for r in RESOURCES if r in resources)


def _peak_grid(cal, names, bounds_us):
    """Per host and step, the peaks of the calendar's three tracks.

    ``(vtrack, memory, disk)``: (hosts, steps) int64 arrays, 0 where the
    calendar holds nothing for the host. One binary search per host (the
    segment that holds each step's start) and one ``maximum.reduceat``
    over the segments of every host and step.
    """
    nh, n = len(names), len(bounds_us) - 1
    if cal is None or not nh:
        return np.zeros((3, nh, n), np.int64)
    get = cal._index.get
    rows, found = [], []
    times, off, real = cal._times, cal._off, cal._real
    for r, name in enumerate(names):
        k = get(name)
        if k is None:
            continue
        o0 = int(off[k])
        rows.append(r)
        # The segment holding each bound (the run starts with a sentinel
        # before every time).
        found.append(times[o0:o0 + int(real[k])].searchsorted(
            bounds_us, 'right') + (o0 - 1))
    if not rows:
        return np.zeros((3, nh, n), np.int64)
    at = np.stack(found)                      # (hosts, steps + 1)
    # Step s covers the segments [at[s], at[s + 1]), plus segment at[s + 1]
    # when it starts before the step's end; the last step ends at the
    # segment after the one holding ``end`` when that one starts before.
    last = at[:, n] + (times[at[:, n]] < bounds_us[-1])
    index = at.copy()
    index[:, n] = last
    vals = cal._vals
    if int(last.max()) >= vals.shape[1]:
        vals = np.concatenate((vals, np.zeros((3, 1), np.int64)), axis=1)
    flat = index.ravel()
    # (The entry after each host's last step is another host's: dropped.)
    peaks = np.stack([np.maximum.reduceat(vals[q], flat)
                      for q in range(3)]).reshape(3, len(rows), n + 1)
    if n > 1:
        nxt = at[:, 1:n]
        inside = times[nxt] < bounds_us[1:n]
        head = peaks[:, :, :n - 1]
        np.maximum(head, vals[:, nxt], out=head,
                   where=np.broadcast_to(inside, head.shape))
    peaks = peaks[:, :, :n]
    if len(rows) == nh:
        return peaks
    out = np.zeros((3, nh, n), np.int64)
    out[:, rows, :] = peaks
    return out


def _us(value):
    """Microseconds of a naive UTC datetime (or already microseconds)."""
    return value if isinstance(value, (int, np.integer)) else \
        arrays.to_us(value)


def _leased_columns(hosts, reservations, project_id=None):
    """(host rows, until (us), sizes (3, n)) of the hosts' running leased
    servers (of project ``project_id`` only, unless None).
    """
    rows, until, sizes = [], [], []
    for r, host in enumerate(hosts):
        for entry in host.leased:
            if project_id is not None:
                res = reservations.get(entry[2]) if len(entry) > 2 \
                    else None
                if res is None or res.project_id != project_id:
                    continue
            rows.append(r)
            until.append(_us(entry[0]))
            sizes.append(tuple(entry[1][:3]))
    return (np.array(rows, np.int64), np.array(until, np.int64),
            np.array(sizes, np.int64).reshape(-1, 3).T)


def _leased_grid(nh, columns, bounds_us, now_us):
    """Per host and step, the running leased servers that no allocation
    holds (``columns``: :func:`_leased_columns`): (3, hosts, steps)
    summed sizes, from the first step that ends after now to the step
    where each stops counting; None when there are none.
    """
    n = len(bounds_us) - 1
    rows, until, sizes = columns
    first = int(np.searchsorted(bounds_us[1:], now_us, 'right'))
    last = np.searchsorted(bounds_us[:-1], until, 'left')
    keep = (until > now_us) & (last > first)
    if not keep.any():
        return None
    out = np.zeros((3, nh, n + 1), np.int64)
    rows, last, sizes = rows[keep], last[keep], sizes[:, keep]
    for q in range(3):
        np.add.at(out[q], (rows, np.full(len(rows), first)), sizes[q])
        np.add.at(out[q], (rows, last), -sizes[q])
    return np.cumsum(out, axis=2)[:, :, :n]


def _unleased(hosts, columns):
    """(3, hosts) unleased usage now: usage less running leased servers;
    none on registered hosts.
    """
    nh = len(hosts)
    used = np.array([h.used for h in hosts], np.int64).reshape(-1, 3).T
    rows, _until, sizes = columns
    leased = np.stack([np.bincount(rows, weights=sizes[q], minlength=nh)
                       for q in range(3)]).astype(np.int64) \
        if len(rows) else np.zeros((3, nh), np.int64)
    registered = np.array([h.registered for h in hosts], bool)
    return np.where(registered, 0, np.maximum(used - leased, 0))


class _Sums(object):
    """Per step sums of the figures, and per host rows for detail."""

    def __init__(self, n, detail, nh):
        self.res = {r: {f: np.zeros(n, np.int64) for f in FIGURES}
                    for r in RESOURCES}
        self.detail = detail
        self.rows = [None] * nh if detail else None


def _chunk(sums, hosts, offset, cal, own_cal, bounds_us, now_us,
           reservations, project_id=None):
    """Add the figures of ``hosts`` (a chunk) to ``sums``.

    (hosts, steps) grids, a few passes per resource: they are most of the
    cost of a large query.
    """
    names = [h.name for h in hosts]
    nh = len(hosts)
    n = len(bounds_us) - 1
    cap = np.array([tuple(h.capacity) for h in hosts],
                   np.int64).reshape(-1, 3).T
    vtrack, pm, pd = _peak_grid(cal, names, bounds_us)
    whole = vtrack >= arrays.W
    anything = vtrack > 0
    peaks = ((vtrack % arrays.W) >> arrays.COUNT_BITS, pm, pd)
    del vtrack
    columns = _leased_columns(hosts, reservations)
    extra = _leased_grid(nh, columns, bounds_us, now_us)
    active = bounds_us[1:] > now_us
    all_active = bool(active.all())
    unleased = _unleased(hosts, columns)
    own = None
    if own_cal is not False:
        ov, om, od = _peak_grid(own_cal, names, bounds_us)
        own = [((ov % arrays.W) >> arrays.COUNT_BITS), om, od,
               ov >= arrays.W]
        own_extra = _leased_grid(
            nh, _leased_columns(hosts, reservations, project_id),
            bounds_us, now_us)
        if own_extra is not None:
            for q in range(3):
                own[q] += own_extra[q]
    # Hosts running unleased work, per step (none before now).
    running = (unleased > 0).any(axis=0)[:, None] & active[None, :]
    per_host = []
    for q, name in enumerate(HOST_RESOURCES):
        c = cap[q][:, None]
        p = peaks[q] if extra is None else peaks[q] + extra[q]
        promised = np.where(whole, c, p)
        if all_active:
            used_sum = np.full(n, int(unleased[q].sum()), np.int64)
            left = (cap[q] - unleased[q])[:, None] - promised
            used = None
        else:
            used = np.where(active[None, :], unleased[q][:, None], 0)
            used_sum = used.sum(axis=0)
            left = c - used - promised
        free = np.maximum(left, 0, out=left)
        acc = sums.res[name]
        acc['capacity'] += int(cap[q].sum())
        acc['used'] += used_sum
        acc['free'] += free.sum(axis=0)
        if own is not None:
            acc['promised'] += np.where(own[3], c, own[q]).sum(axis=0)
        else:
            acc['promised'] += promised.sum(axis=0)
        if sums.detail:
            if used is None:
                used = np.broadcast_to(unleased[q][:, None], (nh, n))
            per_host.append((used, promised, free))
    acc = sums.res['hosts']
    acc['capacity'] += nh
    acc['promised'] += (own[3] if own is not None else whole).sum(axis=0)
    acc['used'] += (running & ~whole).sum(axis=0)
    nothing = ~anything & ~running
    if extra is not None:
        nothing &= (extra == 0).all(axis=0)
    acc['free'] += nothing.sum(axis=0)
    if sums.detail:
        # Plain lists, host by host: [used, promised, free] x resources.
        lists = [[grid.tolist() for grid in per_host[q]] for q in range(3)]
        for r in range(nh):
            sums.rows[offset + r] = [
                [lists[q][k][r] for q in range(3)] for k in range(3)]


def _own_calendar(host_items, reservations, project_id, names):
    """A Calendar of project ``project_id``'s allocations on ``names``."""
    items = []
    for name in names:
        for item in host_items.get(name, ()):
            res = reservations.get(item.ref)
            if res is not None and res.project_id == project_id:
                items.append(item)
    return Calendar({}, items) if items else None


def _number(value):
    value = round(float(value), 3)
    return int(value) if value == int(value) else value


def _bookings(host, host_items, reservations, start, end, now):
    out = []
    for entry in host.leased:
        until, size = entry[:2]
        if not isinstance(until, datetime.datetime):
            until = arrays.from_us(until)
        res = reservations.get(entry[2]) if len(entry) > 2 else None
        if until <= max(now, start) or now >= end:
            continue
        # A running leased server that no allocation holds: its lease
        # holds it until ``until``.
        out.append({
            'lease_id': res.lease_id if res else None,
            'lease_name': None,
            'project_id': res.project_id if res else None,
            'reservation_id': entry[2] if len(entry) > 2 else None,
            'resource_type': res.resource_type if res else None,
            'start': iso(getattr(res, 'start', None) or now),
            'end': iso(until),
            'whole_host': False, 'vcpus': int(size[0]),
            'memory_mb': int(size[1]), 'disk_gb': int(size[2])})
    for item in sorted(host_items.get(host.name, ()),
                       key=lambda i: (i.start, i.ref)):
        if item.start >= end or (item.end is not None and item.end <= start):
            continue
        res = reservations.get(item.ref)
        size = tuple(host.capacity) if item.whole_host else (
            item.vcpus, item.memory_mb, item.disk_gb)
        out.append({
            'lease_id': res.lease_id if res else None,
            'lease_name': None,
            'project_id': res.project_id if res else None,
            'reservation_id': item.ref,
            'resource_type': res.resource_type if res else None,
            'start': iso(item.start), 'end': iso(item.end),
            'whole_host': bool(item.whole_host),
            'vcpus': int(size[0]), 'memory_mb': int(size[1]),
            'disk_gb': int(size[2])})
    return out


def _idle_until(host, cal, start, end):
    """Until when a registered host with no demand (no promise, no
    server) at ``start`` stays so (at most ``end``); None for any other
    host.
    """
    if not host.registered or any(host.used) or host.leased:
        return None
    if cal is not None and cal.peak(host.name, start, start +
                                    datetime.timedelta(microseconds=1)) \
            != arrays.ZERO_USAGE:
        return None
    nxt = cal.next_demand_start(host.name, start) if cal is not None \
        else None
    return iso(end if nxt is None else min(nxt, end))


def capacity_over_time(hosts, calendar, host_items, reservations, start,
                       end, step, now, project_id=None, detail=False,
                       resources=None, host=None, aggregate=None,
                       availability_zone=None, project_items=None,
                       member_min_hosts=1):
    """The capacity body (see the module doc and doc/source/user/api.rst).

    :param hosts: :class:`CapacityHost` of every compute host.
    :param calendar: the snapshot's Calendar of allocations (or None).
    :param host_items: {host: calendar Items} (the snapshot's).
    :param reservations: {reservation id: Reservation} (the snapshot's:
        ``lease_id``, ``project_id``, ``resource_type``).
    :param start, end: the window (naive UTC); ``step`` a timedelta.
    :param now: naive UTC: unleased work counts from then on.
    :param project_id: a member's view of this project (None: all).
    :param detail: add ``host_details`` (never with ``project_id``).
    :param resources: the resources to report (default all).
    :param host, aggregate, availability_zone: filters.
    :param project_items: the calendar Items of project ``project_id``
        (default: found through ``host_items`` and ``reservations``).
    :param member_min_hosts: the fewest hosts a member's view (with
        ``project_id``) may be narrowed to (see :func:`member_zones`).
    :returns: ``{"capacity": {...}}``.
    :raises CapacityError: a bad query (its ``field``);
        :class:`NarrowView`: a member's filter that counts too few hosts.
    """
    resources = check_resources(resources)
    bounds = step_bounds(start, end, step)
    if project_id is not None:
        check_member_zone(hosts, availability_zone, member_min_hosts)
    hosts = select_hosts(hosts, host, aggregate, availability_zone)
    hosts.sort(key=lambda h: h.name)
    detail = bool(detail) and project_id is None
    bounds_us = np.array([arrays.to_us(b) for b in bounds], np.int64)
    now_us = arrays.to_us(now)
    n = len(bounds) - 1
    own_cal = False
    if project_id is not None:
        if project_items is not None:
            own_cal = Calendar({}, project_items) if project_items \
                else None
        else:
            own_cal = _own_calendar(host_items, reservations, project_id,
                                    [h.name for h in hosts])
    sums = _Sums(n, detail, len(hosts))
    for k in range(0, len(hosts), HOST_CHUNK):
        _chunk(sums, hosts[k:k + HOST_CHUNK], k, calendar, own_cal,
               bounds_us, now_us, reservations, project_id)
    figures = MEMBER_FIGURES if project_id is not None else FIGURES
    lists = {r: {f: sums.res[r][f].tolist() for f in figures}
             for r in resources}
    hours = [(b - a).total_seconds() / 3600.0
             for a, b in zip(bounds[:-1], bounds[1:])]
    steps = []
    for s in range(n):
        entry = {'start': iso(bounds[s]), 'end': iso(bounds[s + 1])}
        for r in resources:
            entry[r] = {f: lists[r][f][s] for f in figures}
        steps.append(entry)
    total = {r: {f: _number(sum(v * h for v, h in zip(lists[r][f], hours)))
                 for f in figures} for r in resources}
    body = {
        'start': iso(start), 'end': iso(end),
        'step_seconds': _number(step.total_seconds()),
        'now': iso(now), 'hosts': len(hosts),
        'resources': list(resources), 'steps': steps, 'total': total,
        'view': 'all' if project_id is None else 'project',
    }
    if project_id is not None:
        body['project_id'] = project_id
    if detail:
        body['host_details'] = _details(sums, hosts, calendar, host_items,
                                        reservations, start, end, n, now)
    return {'capacity': body}


def _details(sums, hosts, cal, host_items, reservations, start, end, n,
             now):
    out = []
    for r, host in enumerate(hosts):
        (uv, um, ud), (pv, pm, pd), (fv, fm, fd) = sums.rows[r]
        steps = [{'used': {'vcpus': a, 'memory_mb': b, 'disk_gb': c},
                  'promised': {'vcpus': d, 'memory_mb': e, 'disk_gb': f},
                  'free': {'vcpus': g, 'memory_mb': h, 'disk_gb': i}}
                 for a, b, c, d, e, f, g, h, i in zip(
                     uv, um, ud, pv, pm, pd, fv, fm, fd)]
        out.append({
            'host': host.name, 'registered': host.registered,
            'availability_zone': host.availability_zone,
            'capacity': dict(zip(HOST_RESOURCES,
                                 map(int, host.capacity))),
            'steps': steps,
            'idle_until': _idle_until(host, cal, start, end),
            'bookings': _bookings(host, host_items, reservations, start,
                                  end, now),
        })
    return out
