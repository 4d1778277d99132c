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
"""Best-effort host leases: which hosts to empty for one. Pure: no I/O.

A best_effort host lease that cannot get enough free reservable hosts
takes ordinary compute hosts and has their servers migrated away
(nova_lease.plugins.host.plugin). A host is a candidate when nothing
on it belongs to a lease: no allocation of any lease over the lease's
window (no promise would break) and no leased server runs on it (the
caller leaves those out); every server on it is movable now
(:func:`movable`: ACTIVE or PAUSED for live migration; SHUTOFF too when
the operator allows cold migration; nothing in a task; nothing locked).

The strategy (:func:`choose`): candidates are looked at in the order of
:func:`order`, fewest servers to move first, then the least memory to
move (the cheapest migrations), then by name; a candidate is taken when
the servers of every host taken so far, it included, can all be placed
on the rest of the cloud (the caller's ``can_move``, which asks the
capacity calendar: each moved server is unleased, so it must fit its new
host from now on, next to every promise there). It stops when enough
are taken; otherwise :class:`NoCandidates` says why each was not.
"""

import collections

from nova_lease import exception

#: Server statuses that live migration takes.
LIVE_STATUSES = ('ACTIVE', 'PAUSED')
#: Server statuses that only cold migration takes.
COLD_STATUSES = ('SHUTOFF',)
#: Reasons named at most in a refusal.
NAMED = 10


#: Server group policies that keep members on different hosts.
ANTI_AFFINITY = ('anti-affinity',)
#: Server group policies that keep members on one host.
AFFINITY = ('affinity',)


class ServerGroup(collections.namedtuple('ServerGroup', 'id policy hosts')):
    """A server's group: its ``policy`` and the hypervisor hostnames
    where its other members run (``hosts``).
    """

    __slots__ = ()


class Server(collections.namedtuple(
        'Server', 'id project_id status task_state vcpus memory_mb '
                  'disk_gb locked zone group',
        defaults=(False, None, None))):
    """A server to be moved off a candidate host (``locked``: by its
    owner or an admin, never moved; ``zone``: the availability zone its
    boot asked for, which Nova keeps it in, None for any; ``group``: its
    :class:`ServerGroup`, or None).
    """

    __slots__ = ()


class Candidate(collections.namedtuple('Candidate', 'host row servers')):
    """A compute host that could be emptied.

    :ivar host: its hypervisor hostname.
    :ivar row: its facts, as a registered host's row (for booking).
    :ivar servers: the :class:`Server` s on it.
    """

    __slots__ = ()

    @property
    def memory_mb(self):
        return sum(s.memory_mb for s in self.servers)


class NoCandidates(exception.Conflict):
    """Not enough hosts can be emptied. ``reason`` names servers and
    hosts (for the log and admins); :attr:`summary` only counts.
    """

    msg_fmt = '%(reason)s'

    @property
    def summary(self):
        """The member-safe text: no server, host, project nor Nova text.
        """
        needed, found = self.kwargs.get('needed'), self.kwargs.get('found')
        if needed is None:
            return 'not enough compute hosts could be emptied; retry'
        return ('%d more host(s) needed, %d could be emptied'
                % (needed, found or 0))


def movable(server, cold=False):
    """None if the server can be migrated now, else why not."""
    if server.locked:
        # (The engine's admin credentials would bypass the lock.)
        return 'server %s is locked: never moved' % server.id
    if server.task_state:
        return 'server %s is busy (%s)' % (server.id, server.task_state)
    if (server.group is not None and server.group.policy in AFFINITY and
            server.group.hosts):
        # Nova keeps it on its members' host: it moves with them only.
        return 'server %s is in an affinity server group' % server.id
    if server.status in LIVE_STATUSES:
        return None
    if cold and server.status in COLD_STATUSES:
        return None
    return 'server %s is %s, which %s' % (
        server.id, server.status,
        'neither live nor cold migration takes' if cold else
        'live migration does not take ([nova_lease] '
        'best_effort_cold_migration is off)')


def destinations(server, hosts, zone_of):
    """The hosts among ``hosts`` (hypervisor hostnames) where Nova may
    move the server: in the zone its boot asked for (``zone_of``:
    {hostname: availability zone}); none where another member of its
    anti-affinity group runs.
    """
    out = set(hosts)
    if server.zone:
        out = {h for h in out if zone_of.get(h) == server.zone}
    if server.group is not None and server.group.policy in ANTI_AFFINITY:
        out -= set(server.group.hosts)
    return out


def spread(server):
    """The key of the servers that may not share a host with it (its
    anti-affinity group), or None.
    """
    if server.group is not None and server.group.policy in ANTI_AFFINITY:
        return server.group.id
    return None


def order(candidates):
    """Candidates best first: fewest servers, least memory, by name."""
    return sorted(candidates, key=lambda c: (len(c.servers), c.memory_mb,
                                             c.host))


def choose(candidates, needed, can_move, cold=False):
    """Take ``needed`` candidates whose servers the cloud can take.

    :param can_move: ``can_move(servers, hosts)`` -> None when the
        servers can all be placed on hosts other than ``hosts`` (the
        taken ones), else a text saying which cannot.
    :returns: the taken :class:`Candidate` s, best first.
    :raises NoCandidates: fewer than ``needed`` can be taken; its
        message says why each candidate was not.
    """
    taken, refused = [], []
    if needed <= 0:
        return taken
    for candidate in order(candidates):
        stuck = [why for why in (movable(s, cold)
                                 for s in candidate.servers) if why]
        if stuck:
            refused.append('%s: %s' % (candidate.host, stuck[0]))
            continue
        trial = taken + [candidate]
        problem = can_move([s for c in trial for s in c.servers],
                           {c.host for c in trial})
        if problem:
            refused.append('%s: %s' % (candidate.host, problem))
            continue
        taken = trial
        if len(taken) == needed:
            return taken
    reason = ('%d more host(s) needed, %d compute host(s) could be emptied'
              % (needed, len(taken)))
    if not candidates:
        reason += ('; no compute host is a candidate (each is outside '
                   '[nova_lease_api] best_effort_aggregate, holds a '
                   'lease\'s promise or leased servers, is reservable, or '
                   'does not match the request)')
    if refused:
        reason += '; ' + '; '.join(refused[:NAMED])
        if len(refused) > NAMED:
            reason += '; and %d more' % (len(refused) - NAMED)
    raise NoCandidates(reason=reason, needed=needed, found=len(taken))
