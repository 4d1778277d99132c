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
"""The hunt of a best-effort host lease, at its creation in nova-api.

:func:`hunter` gives ``create_host_lease`` what it calls when the free
reservable hosts are not enough: the compute hosts that could be
emptied for the lease, chosen with :mod:`nova_lease.hunt` and checked
against the capacity calendar (``admission.MovePlan``), then locked.
The engine migrates their servers away when the lease starts
(nova_lease.plugins.host.plugin).

A compute host is a candidate when it is in the aggregate the operator
opted in (``[nova_lease_api] best_effort_aggregate``), its nova-compute is
enabled and up, no other aggregate dedicates it to some projects, it is
not reservable (not registered, not in the free pool), matches the
request (as a registered host would: its compute node's facts), no
allocation of any lease overlaps the lease's window on it, none of its
servers is linked to a lease, and every one can move
(:func:`nova_lease.hunt.movable`: none locked).

Nova is asked first (:class:`Survey`), before the booking's transaction
locks any host; under the locks the side database is read again, and
Nova only once per cell (the leased servers' sizes, for the capacity
calendar).
"""

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease.api_ext import nova_hosts
from nova_lease import calendar
from nova_lease.capacity import admission
from nova_lease.capacity import inventory as nova_inventory
from nova_lease.db import api as db_api
from nova_lease import hunt
from nova_lease.plugins.host import matching
from nova_lease.plugins.host import registry
from nova_lease import resource_types as types

LOG = logging.getLogger(__name__)


def _leased_servers(session):
    """Uuids of the servers linked to a live instance reservation."""
    return {row[1] for row in db_api.linked_instance_rows(
        session, timeutils.utcnow(), admission.LIVE_RESERVATIONS,
        admission.DEAD_LEASES, types.SERVER_TYPES)}


def usable_hosts(ctx, conf, compute):
    """The hypervisor hostnames of ``compute`` (ComputeHosts) that may
    take or give servers: their nova-compute is enabled and up, and no
    aggregate dedicates them to some projects (filter_tenant_id), the
    operator's best-effort aggregate aside.
    """
    working = nova_hosts.working_compute_hosts(ctx)
    dedicated = nova_hosts.dedicated_hosts(
        ctx, allowed=conf.nova_lease_api.best_effort_aggregate)
    return {h.name for h in compute
            if h.service_host in working and h.service_host not in dedicated}


class Survey(object):
    """What a best-effort request asks Nova, read before the booking's
    transaction takes any host lock (a few queries per opted-in host: its
    facts and its servers), so that a refused request holds no lock while
    it reads Nova. Under the locks, :func:`_candidates` re-checks what the
    side database says (registered hosts, promises, leased servers).

    :ivar compute: Nova's compute nodes (ComputeHosts), fresh.
    :ivar usable: the hypervisor hostnames that may take or give servers
        (:func:`usable_hosts`).
    :ivar rows: the facts rows of the opted-in, usable hosts outside the
        free pool (as registered hosts' rows, ``_facts`` included).
    :ivar servers: ``{hypervisor hostname: [hunt.Server]}`` of those,
        with their zone and server group.
    :ivar zone_of: ``{hypervisor hostname: availability zone}`` of the
        usable hosts.
    """

    def __init__(self, ctx, conf, inventory):
        self.compute, _cached = inventory.compute_hosts(fresh=True)
        self.usable = usable_hosts(ctx, conf, self.compute)
        # Only the hosts the operator opted in: never any compute host.
        opted_in = nova_hosts.aggregate_hosts(
            ctx, conf.nova_lease_api.best_effort_aggregate)
        self.rows, self.servers = [], {}
        for host in self.compute:
            if (host.service_host not in opted_in or host.freepool or
                    host.name not in self.usable):
                continue
            try:
                row = nova_hosts.compute_node_facts(ctx, host.name)
            except nova_hosts.ComputeHostNotFound:
                continue
            row['_facts'] = matching.host_facts(row)
            self.rows.append(row)
            self.servers[host.name] = [
                self._rules(ctx, server) for server in
                nova_hosts.servers_to_move(ctx, host.service_host)]
        self.zone_of = {h.name: nova_hosts.host_zone(ctx, h.service_host)
                        for h in self.compute if h.name in self.usable}

    def _rules(self, ctx, server):
        """The server with what Nova keeps it to (S4): its zone, its
        server group and where the group's other members run.
        """
        zone, group = nova_hosts.placement_rules(ctx, server.id)
        if group is not None:
            uuid, policy, services = group
            names = {h.name for h in self.compute
                     if h.service_host in set(services)}
            group = hunt.ServerGroup(uuid, policy, frozenset(names))
        return server._replace(zone=zone, group=group)


def _candidates(survey, session, request, start, stop, taken):
    """The survey's hosts that may be emptied for ``request``, checked
    against the side database in the writer ``session`` (no Nova query).
    """
    registered = db_api.registered_hostnames(session)
    services = set(registered.values())
    rows = [r for r in survey.rows
            if r['hypervisor_hostname'] not in registered and
            r['service_host'] not in services and
            r['hypervisor_hostname'] not in taken]
    busy = {host for host, _rid in db_api.allocation_busy(
        session, [r['hypervisor_hostname'] for r in rows], start, stop)}
    rows = [r for r in rows if r['hypervisor_hostname'] not in busy]
    leased = _leased_servers(session)
    out = []
    for row in registry.matching_hosts(rows, request):
        name = row['hypervisor_hostname']
        servers = survey.servers[name]
        if any(s.id in leased for s in servers):
            LOG.debug('Host %s runs leased servers: not a candidate', name)
            continue
        out.append(hunt.Candidate(name, row, servers))
    return out


def _refusal(ctx, field, error):
    """The 409 of a refused hunt, as the caller may see it.

    Why each candidate was not taken names other projects' servers and
    compute hosts: it is logged, and shown to admins only; a member gets
    the counts (:attr:`hunt.NoCandidates.summary`).
    """
    LOG.info('Best-effort lease of project %(project)s refused: '
             '%(field)s: %(reason)s',
             {'project': getattr(ctx, 'project_id', None), 'field': field,
              'reason': error})
    shown = str(error) if getattr(ctx, 'is_admin', False) else error.summary
    return hunt.NoCandidates(reason='%s: best_effort: %s' % (field, shown),
                             **{k: v for k, v in error.kwargs.items()
                                if k != 'reason'})


def hunter(ctx, conf, start, stop, inventory=None):
    """The ``hunt`` callable of ``create_host_lease`` for one lease.

    Surveys the opted-in hosts in Nova first (:class:`Survey`: before the
    booking's transaction, so no host lock is held while Nova answers);
    the callable, run under the locks, asks Nova only for what the
    capacity calendar needs once per cell (MovePlan's leased servers).

    :param start: the lease's start; :param stop: the end of its
        allocations (cleaning time included).
    """
    opts = conf.nova_lease
    if inventory is None:
        inventory = nova_inventory.default_inventory(conf)
    # Before any lock (S1): the per-host questions to Nova.
    survey = Survey(ctx, conf, inventory)

    def hunt_hosts(session, field, request, needed, taken):
        # The servers moved go to usable hosts only.
        plan = admission.MovePlan(session, conf, inventory=inventory,
                                  compute=survey.compute,
                                  only=survey.usable)
        candidates = _candidates(survey, session, request, start, stop,
                                 taken)

        def can_move(servers, hosts):
            # Where Nova would let each go (zone, anti-affinity: S4).
            return plan.check(
                [(s.id, calendar.Demand(s.vcpus, s.memory_mb, s.disk_gb),
                  hunt.destinations(s, survey.usable, survey.zone_of),
                  hunt.spread(s))
                 for s in servers], set(hosts) | set(taken))

        try:
            chosen = hunt.choose(candidates, needed, can_move,
                                 cold=opts.best_effort_cold_migration)
        except hunt.NoCandidates as e:
            raise _refusal(ctx, field, e) from None
        names = sorted(c.host for c in chosen)
        db_api.lock_hosts(session, names)
        # Under the locks: a concurrent writer may have promised one.
        lost = {host for host, _rid in db_api.allocation_busy(
            session, names, start, stop)}
        if lost:
            raise _refusal(ctx, field, hunt.NoCandidates(reason=(
                'host(s) %s were promised to another lease meanwhile; '
                'retry' % ', '.join(sorted(lost)))))
        LOG.info('Best-effort lease takes host(s) %(hosts)s, whose '
                 '%(n)d server(s) will be migrated away',
                 {'hosts': ', '.join(names),
                  'n': sum(len(c.servers) for c in chosen)})
        return [c.row for c in chosen]

    return hunt_hosts
