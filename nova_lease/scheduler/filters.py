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
"""Scheduler filter that keeps hosts within their leased capacity.

Operators enable it in nova.conf (both options are needed)::

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = nova_lease.scheduler.filters.LeaseFilter
    enabled_filters = <Nova's defaults>,LeaseFilter

doc/source/reference/scheduling.rst describes the rules and what rebuild,
resize, migrate and unshelve do with a leased server.
"""

from nova.scheduler import filters
from nova.scheduler import utils
from oslo_log import log as logging

from nova_lease import registration
from nova_lease.scheduler import moves
from nova_lease.scheduler import view as lease_view

LOG = logging.getLogger(__name__)


class LeaseFilter(filters.BaseHostFilter):
    """Only pass hosts where the request fits for its whole lease interval.

    The capacity calendar holds every lease's vcpus, RAM and disk over
    time, per host. A host passes when the request fits on it, next to
    what runs there now and every allocation the calendar holds there, over
    the request's whole interval: [now, lease end) for a leased server
    (its reservation, the ``lease_params`` hint, or the default lease),
    [now, infinity) for an unleased one. Reserved capacity is so lent to
    time-bounded work that ends before the reservation starts, and never to
    anything that would still run then. A server whose lease holds an
    allocation passes only its allocated host; a request with the
    ``reservation`` hint passes only the hosts of that host reservation
    that are in its aggregate, for its owner project, while the lease is
    ACTIVE (at boot, and again at unshelve, resize, migration and
    evacuation: Nova keeps the hint in the RequestSpec); a host in a host
    reservation's aggregate takes no request without that hint; hosts of
    the free pool aggregate take no request without a ``reservation``
    hint.

    One calendar snapshot is read per request (cached, see
    ``[nova_lease] scheduler_snapshot_ttl``) and every host is answered
    from memory in one vectorised pass (``filter_all``). No request waits
    for a full read of the snapshot: until the first one is there, a
    request reads its hosts' promises itself. It fails closed: when the
    side database cannot be read, the last snapshot is used; without
    one, requests that may be leased pass no host and the aggregate rules
    still hold (doc/source/reference/scheduling.rst, "Failure modes").
    """

    # The interval of a rebuilt server does not change, and neither does
    # its host: nothing to check again.
    RUN_ON_REBUILD = False

    def __init__(self):
        super().__init__()
        # Refuses to let nova-scheduler start without the shared side
        # database; registers the process in it.
        registration.register_nova_process(lease_view.CONF,
                                           registration.SCHEDULER)

    # Every instance of a multi-create request needs its own capacity.
    run_filter_once_per_request = False

    def filter_all(self, filter_obj_list, spec_obj):
        """Yield the hosts that pass, deciding for all of them at once."""
        hosts = list(filter_obj_list)
        if not hosts or (not self.RUN_ON_REBUILD and
                         utils.request_is_rebuild(spec_obj)):
            return hosts
        view = lease_view.view_for(spec_obj, fresh=True)
        usage = moves.placement_usage(hosts, lease_view.CONF)
        passed = []
        for host_state, (ok, why) in zip(hosts, view.passes(hosts, usage)):
            if ok:
                passed.append(host_state)
            else:
                LOG.debug('%(host_state)s fails LeaseFilter check for '
                          'instance %(instance)s: %(why)s',
                          {'host_state': host_state, 'why': why,
                           'instance': spec_obj.instance_uuid})
        return passed

    def host_passes(self, host_state, spec_obj):
        """Return True if the request fits the host's lease calendar."""
        return bool(self.filter_all([host_state], spec_obj))
