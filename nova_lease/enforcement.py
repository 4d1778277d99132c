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
"""Usage enforcement: what one project may lease.

Blazar checks leases against its ``[enforcement]`` filters when they are
created and updated (its MaxLeaseDurationFilter is our ``[nova_lease_api]
max_lease_duration``, checked with the lease's dates). The limits here
are the ``[nova_lease_enforcement]`` options (nova_lease.conf.enforcement):

* ``max_start_ahead``: how far in the future a lease may start;
* ``max_leases_per_project``: how many leases that have not ended a
  project may hold;
* ``max_promised_vcpus`` / ``_memory_mb`` / ``_disk_gb``: the most a
  project's instance leases may hold at any one time;
* ``max_promised_hosts``: the most hosts its host leases may hold at any
  one time;

except for the projects of ``exempt_projects``. A request over a limit
raises :class:`LimitExceeded` (a 403 in Nova's fault format for a boot, in
Blazar's error format for the lease API) naming the limit and its option.

Every change of what a project holds (a lease created by a boot or the
lease API, a reservation update, a date change; whatever the type of its
reservations) goes through the booking pipeline (nova_lease.booking),
which calls :func:`check_holding` in its writer transaction, after the
change is written and before it commits: the check reads what the
project then holds, so no path and no type can skip a limit, and a
refusal rolls the change back. The pipeline first takes the project's
named lock (:func:`lock_project`) when a limit applies to it, so that two
requests of one project are checked one after the other: a limit holds
under parallel requests too.
"""

import collections

from oslo_serialization import jsonutils

from nova_lease.db import api as db_api
from nova_lease.db import locks
from nova_lease import exception
from nova_lease import params as lease_params
from nova_lease import resource_types as types
from nova_lease import status

GROUP = 'nova_lease_enforcement'

DEAD_RESERVATIONS = (str(status.ReservationStatus.DELETED),
                     str(status.ReservationStatus.ERROR))
DEAD_LEASES = (str(status.LeaseStatus.TERMINATED),
               str(status.LeaseStatus.ERROR))

_RESOURCES = (('vcpus', 'max_promised_vcpus', 'vCPUs'),
              ('memory_mb', 'max_promised_memory_mb', 'MB of RAM'),
              ('disk_gb', 'max_promised_disk_gb', 'GB of disk'))


class LimitExceeded(exception.Forbidden):
    """A usage limit refuses the lease (403)."""

    msg_fmt = ('%(detail)s; the limit is %(limit)s ([%(group)s] '
               '%(option)s)')

    def __init__(self, option, limit, detail):
        self.option = option
        super().__init__(option=option, limit=limit, detail=detail,
                         group=GROUP)


class BadOption(exception.NovaLeaseException):
    """A [nova_lease_enforcement] option is invalid (500)."""

    msg_fmt = 'nova_lease is misconfigured: [%(group)s] %(reason)s'


def _opts(conf):
    return conf[GROUP]


def _exempt(opts, project_id):
    return project_id in (opts.exempt_projects or ())


def _short(when):
    return lease_params.format_short(when)


def check_start(opts, start, now, field):
    """``start`` is not further ahead than max_start_ahead."""
    try:
        limit = lease_params.parse_duration(
            opts.max_start_ahead, 'max_start_ahead', allow_zero=True)
    except lease_params.LeaseParamError as e:
        raise BadOption(group=GROUP, reason=str(e)) from None
    if limit and start - now > limit:
        raise LimitExceeded(
            'max_start_ahead', lease_params.format_duration(limit),
            "'%s' (%s) is %s from now: a lease may not start that far "
            "ahead" % (field, _short(start),
                       lease_params.format_duration(start - now)))


def check_lease_count(opts, db, project_id, now):
    """One more lease keeps the project within max_leases_per_project."""
    limit = opts.max_leases_per_project
    if not limit:
        return
    count = db_api.project_live_lease_count(db, project_id, now,
                                            DEAD_LEASES)
    if count + 1 > limit:
        raise LimitExceeded(
            'max_leases_per_project', limit,
            'project %s already holds %d lease(s) that have not ended'
            % (project_id, count))


def offer_bounds(conf, session, project_id, now):
    """What the limits leave an offer search of ``project_id``:
    ``(latest start or None, reason or None)``, the reason saying why no
    lease of the project could be booked at all (its lease count).
    """
    opts = _opts(conf)
    if not _limits_of(opts) or _exempt(opts, project_id):
        return None, None
    try:
        check_lease_count(opts, session, project_id, now)
    except LimitExceeded as e:
        return None, str(e)
    try:
        ahead = lease_params.parse_duration(
            opts.max_start_ahead, 'max_start_ahead', allow_zero=True)
    except lease_params.LeaseParamError as e:
        raise BadOption(group=GROUP, reason=str(e)) from None
    return (now + ahead if ahead else None), None


def peak(intervals, start, end):
    """(value, time) of the highest sum of ``(s, e, value)`` intervals at
    any instant of [start, end) (intervals are half-open); (0, start) if
    none.
    """
    changes = collections.defaultdict(int)
    for s, e, value in intervals:
        s, e = max(s, start), min(e, end)
        if s < e and value:
            changes[s] += value
            changes[e] -= value
    best, at, level = 0, start, 0
    for when in sorted(changes):
        level += changes[when]
        if level > best:
            best, at = level, when
    return best, at


def _size(properties):
    try:
        props = jsonutils.loads(properties) if properties else {}
    except ValueError:
        props = {}
    if not isinstance(props, dict):
        props = {}
    try:
        # Blazar's instance reservations hold ``amount`` instances.
        count = max(1, int(props.get('amount') or 1))
    except (TypeError, ValueError):
        count = 1
    out = {}
    for key, _option, _name in _RESOURCES:
        try:
            out[key] = int(props.get(key) or 0) * count
        except (TypeError, ValueError):
            out[key] = 0
    return out


def _limits_of(opts):
    return [option for option in ('max_start_ahead', 'max_leases_per_project',
                                  'max_promised_vcpus',
                                  'max_promised_memory_mb',
                                  'max_promised_disk_gb', 'max_promised_hosts')
            if getattr(opts, option)]


def applies(conf, project_id):
    """True when a limit of [nova_lease_enforcement] applies to the
    project (some limit is set and the project is not exempt).
    """
    opts = _opts(conf)
    return bool(_limits_of(opts)) and not _exempt(opts, project_id)


def lock_project(session, conf, project_id):
    """Take the project's named lock in the writer ``session`` when a
    limit applies to it (see the module doc); True if taken.
    """
    if not applies(conf, project_id):
        return False
    locks.lock(session, ['project:%s' % project_id])
    return True


def check_request(conf, session, project_id, start, now, created=False,
                  start_moved=False, field='start_date'):
    """The limits a change meets whatever it books (checked first, in the
    writer ``session``): how far ahead its start is (a new lease, or a
    new start) and, for a new lease, how many leases its project holds.

    :raises LimitExceeded: (403).
    """
    opts = _opts(conf)
    if not _limits_of(opts) or _exempt(opts, project_id):
        return
    if created or start_moved:
        check_start(opts, start, now, field)
    if created:
        check_lease_count(opts, session, project_id, now)


def check_holding(conf, session, lease, now):
    """What ``lease``'s project holds, with ``lease`` as written in the
    writer ``session`` (its change done), is within every limit of what
    a project may hold at any one time (hosts, vCPUs, RAM, disk).

    :param lease: the lease (``project_id``, ``start_date``,
        ``end_date``) after the change.
    :raises LimitExceeded: (403): the caller's transaction rolls back.
    """
    opts = _opts(conf)
    project_id = lease['project_id']
    if not _limits_of(opts) or _exempt(opts, project_id):
        return
    # From now on: what was held before now is history.
    start, end = max(lease['start_date'], now), lease['end_date']
    if start >= end:
        return
    _check_hosts_held(opts, session, project_id, start, end, now)
    _check_instances_held(opts, session, project_id, start, end, now)


def _check_hosts_held(opts, session, project_id, start, end, now):
    limit = opts.max_promised_hosts
    if not limit:
        return
    rows = db_api.project_host_rows(session, project_id, now,
                                    DEAD_RESERVATIONS, DEAD_LEASES, start,
                                    end)
    value, at = peak([(s, e, 1) for _lid, _host, s, e in rows], start, end)
    if value > limit:
        raise LimitExceeded(
            'max_promised_hosts', limit,
            'this lease would bring the hosts leased by project %s to %d '
            'at %s' % (project_id, value, _short(at)))


def _check_instances_held(opts, session, project_id, start, end, now):
    limits = [(key, option, name, getattr(opts, option))
              for key, option, name in _RESOURCES if getattr(opts, option)]
    if not limits:
        return
    rows = db_api.project_instance_rows(session, project_id, now,
                                        DEAD_RESERVATIONS, DEAD_LEASES,
                                        start, end, types.INSTANCE_TYPES)
    sizes = [(l_start, l_end, _size(props))
             for _lid, l_start, l_end, props in rows]
    for key, option, name, limit in limits:
        value, at = peak([(s, e, size[key]) for s, e, size in sizes],
                         start, end)
        if value > limit:
            raise LimitExceeded(
                option, limit,
                'this lease would bring the %s leased by project %s to %d '
                'at %s' % (name, project_id, value, _short(at)))
