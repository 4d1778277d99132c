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
"""Who holds an instance reservation's slots, and where a server may go.

Pure: the holders are read from Nova by :mod:`.holders`; nova-api
(:mod:`nova_lease.api_ext.slot_boots`) and LeaseFilter
(:mod:`nova_lease.scheduler.request`) decide with them.

A reservation has ``amount`` slots, booked on hosts (``slots``: {host:
how many}). A server **holds** a slot while it has the reservation's
flavor (any project, any state but deleted: being built, running,
stopped, shelved and offloaded, in ERROR in its cell), and while it is
resized away from the flavor until the resize is confirmed (a revert
brings it back). :func:`hosts_for` answers, for one server:

* a server that holds a slot already (a move: unshelve, cold or live
  migration, evacuation) keeps it: it may go to any slot host where the
  reservation's *other* servers leave a slot free;
* a new server (its build request) gets a slot only if the servers
  ahead of it leave one: every other holder counts, except the build
  requests not placed yet that are younger than it (Nova numbers its
  build requests: of two boots racing for the last slot the older gets
  it, the other NoValidHost; the instances of one multi-create are
  scheduled in that order, each after the ones before it are placed).
  Then it goes to a slot host where the others leave a slot free (the
  instances placed before it in the same request count there). Two
  boots placed at the same instant by two scheduler workers may both
  take one host's last slot: neither is placed when the other is
  filtered; the total stays within ``amount`` (the younger counts the
  older whether it is placed or not).
"""

import collections


class Holder(collections.namedtuple('Holder', 'uuid hosts building order')):
    """A server that holds, or asks for, one of a reservation's slots.

    :ivar uuid: the server.
    :ivar hosts: frozenset of the hypervisor hostnames where it holds a
        slot: where it runs, both ends of a move in progress, the source
        of a resize away from the flavor; empty when it is on no host
        (shelved and offloaded, in ERROR, not placed yet).
    :ivar building: Nova has not created it in a cell yet (a build
        request: its boot is being scheduled).
    :ivar order: its build request's id (creation order), when building.
    """

    __slots__ = ()


def slots_left(slots, holders):
    """How many more servers the reservation may get (never below 0)."""
    return max(0, sum(slots.values()) - len(holders))


def hosts_for(slots, holders, uuid):
    """Where server ``uuid`` may take or keep a slot.

    :param slots: {host: number of slots}.
    :param holders: every :class:`Holder` of the reservation (the server
        itself among them or not).
    :returns: ``(allowed, why)``: the set of hosts (empty: none), and the
        count it was decided on, for the scheduler's log.
    """
    amount = sum(slots.values())
    mine = None
    others = []
    for holder in holders:
        if holder.uuid == uuid:
            mine = holder
        else:
            others.append(holder)
    used = collections.Counter(host for holder in others
                               for host in holder.hosts)
    free = {host for host, count in slots.items() if used[host] < count}
    if mine is not None and not mine.building:
        return free, 'a move of one of its servers (%d other(s), %d ' \
            'slot(s))' % (len(others), amount)
    order = mine.order if mine is not None else None
    ahead = [holder for holder in others
             if not holder.building or holder.hosts or order is None or
             holder.order is None or holder.order < order]
    if len(ahead) >= amount:
        return set(), '%d of %d slot(s) taken' % (len(ahead), amount)
    return free, '%d of %d slot(s) taken' % (len(ahead), amount)
