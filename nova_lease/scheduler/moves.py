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
"""What placement says a host uses, where its HostState may not know yet.

A HostState's usage comes from its compute node record. Nova updates that
record for a live migration's destination only when the destination
claims the server (NUMA-aware live migration: libvirt; not every driver)
or at the resource tracker's next periodic pass (every
``[DEFAULT] update_resources_interval``, a minute by default). Until then
the record misses the server that arrived, and LeaseFilter would place
work next to a future promise where there is no room.

Placement is right from the moment the scheduler picked the destination
(it holds the server's allocation there). So for the hosts of a request
that a live migration reached lately (:func:`arrival_window`), the
request's usage now is the larger of the record's and placement's:
one indexed query per cell on Nova's ``migrations`` (by ``updated_at``)
and one placement call per such host. doc/source/reference/
scheduling.rst ("Moved servers") explains it.
"""

import datetime
import threading

from nova import context as nova_context
from nova import objects
from nova.scheduler.client import report
from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease.scheduler import hosts as lease_hosts

LOG = logging.getLogger(__name__)

#: Statuses of a live migration that never reached its destination.
_FAILED = frozenset(('error', 'failed', 'cancelled'))

#: Seconds a live migration's destination is read from placement at
#: least, after the migration's last change.
MIN_ARRIVAL_WINDOW = 900

#: Placement's resource classes, in the order of the calendar's demand.
_CLASSES = ('VCPU', 'MEMORY_MB', 'DISK_GB')

_cells = {}
_cells_lock = threading.Lock()


def arrival_window(conf):
    """How long after its last change a live migration is looked at.

    Three periodic passes of the resource tracker (which counts the
    server in the destination's record), never under
    :data:`MIN_ARRIVAL_WINDOW`.
    """
    interval = conf.update_resources_interval
    return datetime.timedelta(seconds=max(MIN_ARRIVAL_WINDOW,
                                          3 * max(interval, 0)))


def _cell_mappings(context, uuids):
    """The CellMappings of ``uuids`` (cached: cells are seldom added)."""
    with _cells_lock:
        missing = [u for u in uuids if u not in _cells]
    if missing:
        found = {cell.uuid: cell
                 for cell in objects.CellMappingList.get_all(context)}
        with _cells_lock:
            _cells.update(found)
    with _cells_lock:
        return [_cells[u] for u in uuids if u in _cells]


def _arrivals_in_cell(context, since):
    migrations = objects.MigrationList.get_by_filters(
        context, {'migration_type': 'live-migration',
                  'changes-since': since})
    return {m.dest_node for m in migrations
            if m.status not in _FAILED and m.dest_node}


def recent_destinations(context, host_states, since):
    """``(nodes, unknown)``: of the nodes of ``host_states``, those a live
    migration changed since ``since`` went to, and those whose cell did
    not answer (their usage cannot be known).
    """
    by_cell = {}
    for hs in host_states:
        by_cell.setdefault(getattr(hs, 'cell_uuid', None), set()).add(
            lease_hosts.host_key(hs))
    cells = _cell_mappings(context, [u for u in by_cell if u])
    known = {cell.uuid for cell in cells}
    unknown = set()
    for uuid, keys in by_cell.items():
        if uuid not in known:
            unknown |= keys
    nodes = set()
    if cells:
        results = nova_context.scatter_gather_cells(
            context, cells, nova_context.CELL_TIMEOUT, _arrivals_in_cell,
            since)
        for uuid, result in results.items():
            if nova_context.is_cell_failure_sentinel(result):
                LOG.warning('nova_lease: cell %(cell)s did not tell its '
                            'live migrations (%(error)s): its hosts pass '
                            'no request', {'cell': uuid, 'error': result})
                unknown |= by_cell.get(uuid, set())
            else:
                nodes |= result & by_cell.get(uuid, set())
    return nodes, unknown


def _placement_usage(client, context, rp_uuid):
    resp = client.get('/resource_providers/%s/usages' % rp_uuid,
                      global_request_id=context.global_id)
    if not resp:
        raise RuntimeError('placement answered %s' % resp.status_code)
    usages = resp.json()['usages']
    return tuple(int(usages.get(rc, 0)) for rc in _CLASSES)


def placement_usage(host_states, conf, now=None, context=None,
                    client=None):
    """``{host key: (vcpus, memory_mb, disk_gb) or None}``: placement's
    usage of the hosts of ``host_states`` that a live migration reached
    within :func:`arrival_window` of ``now``; None where it cannot be
    read (such a host passes no request: failing closed).
    """
    if not host_states:
        return {}
    now = now or timeutils.utcnow()
    context = context or nova_context.get_admin_context()
    since = now - arrival_window(conf)
    try:
        nodes, unknown = recent_destinations(context, host_states, since)
    except Exception:
        LOG.exception('nova_lease: cannot read live migrations: no host '
                      'passes this request')
        return {lease_hosts.host_key(hs): None for hs in host_states}
    usage = dict.fromkeys(unknown)
    if not nodes:
        return usage
    client = client or report.report_client_singleton()
    for hs in host_states:
        key = lease_hosts.host_key(hs)
        if key not in nodes:
            continue
        try:
            usage[key] = _placement_usage(client, context, hs.uuid)
        except Exception as e:
            LOG.warning('nova_lease: cannot read the usage of %(host)s '
                        'from placement (%(error)s): it passes no request',
                        {'host': key, 'error': e})
            usage[key] = None
    return usage
