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
"""``nova-lease-manage capacity``: what it reads and how it prints it.

It reads what the lease API's ``GET /os-reservation/capacity`` reads and
computes the same body (:func:`nova_lease.scheduler.capacity.report`):

* the promises: a snapshot of the calendar read in full from the side
  database (``snapshot_reads.load``, the scheduler's full read);
* Nova's facts as the auditor reads them, through the service user of
  ``[nova_lease_auth]``: the compute nodes and their aggregates and zones
  from the compute API, their usable capacity and every consumer's usage
  from placement (a server's usage is its allocations there).

:data:`FORMATTERS` maps each ``--format`` to a :class:`Formatter`: a
function of the body (the API's JSON body) returning the text to write,
and whether it needs the per-host details (``detail=hosts``): ``table``,
``json``, and the picture, ``svg`` (a standalone SVG document) and
``html`` (a self-contained page around it), drawn by
:mod:`nova_lease.visibility.render`.
"""

import collections

from oslo_config import cfg
from oslo_serialization import jsonutils
from oslo_utils import timeutils

from nova_lease.audit import checks
from nova_lease.audit import reader
from nova_lease import calendar
from nova_lease.calendar import capacity as core
from nova_lease import compute
from nova_lease.db import api as db_api
from nova_lease.scheduler import capacity as lease_capacity
from nova_lease.scheduler import snapshot_reads
from nova_lease.visibility import render


def read(conf, now=None, db=None, compute_client=None, placement=None):
    """``(snapshot, CapacityHosts, db)`` of the cloud now.

    :raises nova_lease.audit.AuditReadError: Nova or placement could not
        be read.
    """
    now = now or timeutils.utcnow()
    db = db or db_api.get_database(conf)
    compute_client = compute_client or compute.ComputeClient.from_conf(conf)
    placement = placement or reader.PlacementClient.from_conf(conf)
    try:
        # Nova and placement first, the side database last (as the
        # auditor): a lease created meanwhile is seen with what it holds.
        hypervisors = compute_client.list_hypervisors()
        aggregates = compute_client.list_aggregates()
        providers = placement.providers()
    except compute.ComputeError as e:
        raise reader.AuditReadError(str(e)) from e
    snap = snapshot_reads.load(db, now)
    service_of = {h['hypervisor_hostname']: h['host'] for h in hypervisors}
    default_zone = _default_zone(conf)
    zones, names = {}, collections.defaultdict(list)
    for agg in aggregates:
        zone = (agg.get('metadata') or {}).get('availability_zone') or \
            agg.get('availability_zone')
        for host in agg.get('hosts') or ():
            names[host].append(agg['name'])
            if zone:
                zones[host] = zone
    computes, running = [], {}
    linked = snap.servers
    for name, provider in sorted(providers.items()):
        cap = provider.capacity
        used = [0, 0, 0]
        for consumer, usage in provider.usages.items():
            size = [int(usage.get(rc, 0)) for rc in checks.RESOURCES]
            used = [a + b for a, b in zip(used, size)]
            if consumer in linked:
                running[consumer] = (name, calendar.Demand(*size))
        service = service_of.get(name, name)
        zones.setdefault(service, default_zone)
        computes.append(lease_capacity.ComputeFacts(
            name, service, calendar.HostCapacity(
                *(int(cap.get(rc, 0)) for rc in checks.RESOURCES)),
            tuple(used)))
    hosts = lease_capacity.capacity_hosts(snap, computes, running, zones,
                                          names, now)
    return snap, hosts, db


def _default_zone(conf):
    """Nova's ``[DEFAULT] default_availability_zone`` in ``conf``."""
    try:
        conf.register_opt(cfg.StrOpt(
            'default_availability_zone', default='nova',
            help="Nova's availability zone of the hosts in none."))
    except cfg.DuplicateOptError:
        pass
    return conf.default_availability_zone


def report(conf, start, end, step, now=None, detail=False, **filters):
    """The capacity body, as the API's (``filters``: host, aggregate,
    availability_zone, resources).
    """
    now = now or timeutils.utcnow()
    snap, hosts, db = read(conf, now)
    return lease_capacity.report(
        snap, hosts, start, end, step, now,
        lease_names=lambda ids: db_api.lease_names(db, ids), detail=detail,
        **filters)


# -- formats -----------------------------------------------------------------

Formatter = collections.namedtuple('Formatter', 'render detail')

_SHORT = {'vcpus': 'VCPUS', 'memory_mb': 'RAM MB', 'disk_gb': 'DISK GB',
          'hosts': 'HOSTS'}


def format_json(body):
    return jsonutils.dumps(body, indent=2, sort_keys=True)


def _short_time(iso_text):
    return iso_text.replace('T', ' ').rstrip('Z')[:16]


def format_table(body):
    """Steps as rows; per resource capacity/used/promised/free."""
    cap = body['capacity']
    figures = core.FIGURES if cap.get('view') != 'project' else \
        core.MEMBER_FIGURES
    head = ['START']
    sub = ['']
    for r in cap['resources']:
        for k, f in enumerate(figures):
            head.append(_SHORT[r] if k == 0 else '')
            sub.append(f)
    rows = [head, sub]
    for step in cap['steps']:
        rows.append([_short_time(step['start'])] + [
            str(step[r][f]) for r in cap['resources'] for f in figures])
    total = ['TOTAL (unit-hours)'] + [
        str(cap['total'][r][f]) for r in cap['resources'] for f in figures]
    rows.append(total)
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ['Capacity from %s to %s in steps of %s s, %d host(s), as of %s'
             % (_short_time(cap['start']), _short_time(cap['end']),
                cap['step_seconds'], cap['hosts'], _short_time(cap['now']))]
    for n, row in enumerate(rows):
        # (The resources' names start their group of columns.)
        cells = [row[0].ljust(widths[0])] + [
            cell.ljust(width) if n == 0 else cell.rjust(width)
            for cell, width in zip(row[1:], widths[1:])]
        lines.append('  '.join(cells).rstrip())
        if n == 1 or n == len(rows) - 2:
            lines.append('-' * len(lines[-1]))
    return '\n'.join(lines)


#: --format name -> Formatter(render(body) -> text, needs detail=hosts).
#: svg and html draw the hosts' rows and the leases' bookings
#: (:mod:`nova_lease.visibility.render`): they need the details.
FORMATTERS = {
    'table': Formatter(format_table, False),
    'json': Formatter(format_json, False),
    'svg': Formatter(render.svg, True),
    'html': Formatter(render.html, True),
}
