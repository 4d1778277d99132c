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

A compute host is a candidate when it is not reservable (not
registered, not in the free pool), matches the request (as a
registered host would: its compute node's facts), no allocation of any
lease overlaps the lease's window on it, and none of its servers is
linked to a lease.
"""

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease.api_ext import nova_hosts
from nova_lease import calendar
from nova_lease.db import api as db_api
from nova_lease import hunt
from nova_lease.plugins.host import matching
from nova_lease.plugins.host import registry
from nova_lease.plugins import types
from nova_lease.scheduler import admission
from nova_lease.scheduler import inventory as nova_inventory

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
        ctx, allowed=conf.nova_lease.best_effort_aggregate)
    return {h.name for h in compute
            if h.service_host in working and h.service_host not in dedicated}


def _candidates(ctx, conf, session, compute, usable, request, start, stop,
                taken):
    registered = db_api.registered_hostnames(session)
    services = set(registered.values())
    # Only the hosts the operator opted in: never any compute host.
    opted_in = nova_hosts.aggregate_hosts(
        ctx, conf.nova_lease.best_effort_aggregate)
    hosts = [h for h in compute
             if h.service_host in opted_in and h.name in usable
             and h.name not in registered and h.service_host not in services
             and not h.freepool and h.name not in taken]
    busy = {host for host, _rid in db_api.allocation_busy(
        session, [h.name for h in hosts], start, stop)}
    rows = []
    for host in hosts:
        if host.name in busy:
            continue
        try:
            row = nova_hosts.compute_node_facts(ctx, host.name)
        except nova_hosts.ComputeHostNotFound:
            continue
        row['_facts'] = matching.host_facts(row)
        rows.append(row)
    leased = _leased_servers(session)
    out = []
    for row in registry.matching_hosts(rows, request):
        servers = nova_hosts.servers_to_move(ctx, row['service_host'])
        if any(s.id in leased for s in servers):
            LOG.debug('Host %s runs leased servers: not a candidate',
                      row['hypervisor_hostname'])
            continue
        out.append(hunt.Candidate(row['hypervisor_hostname'], row, servers))
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

    :param start: the lease's start; :param stop: the end of its
        allocations (cleaning time included).
    """
    opts = conf.nova_lease
    if inventory is None:
        inventory = nova_inventory.default_inventory(conf)

    def hunt_hosts(session, field, request, needed, taken):
        compute, _cached = inventory.compute_hosts(fresh=True)
        usable = usable_hosts(ctx, conf, compute)
        # The servers moved go to usable hosts only.
        plan = admission.MovePlan(session, conf, inventory=inventory,
                                  compute=compute, only=usable)
        candidates = _candidates(ctx, conf, session, plan.compute, usable,
                                 request, start, stop, taken)

        def can_move(servers, hosts):
            return plan.check(
                [(s.id, calendar.Demand(s.vcpus, s.memory_mb, s.disk_gb))
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
