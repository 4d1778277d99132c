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
"""

from nova.scheduler import filters
from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class LeaseFilter(filters.BaseHostFilter):
    """Only pass hosts where the request fits for its whole lease interval.

    The rule this filter enforces (DESIGN, "Beyond Blazar" 1, future-aware
    scheduling): the capacity calendar holds every lease's vcpus, RAM and
    disk over time, per host. A host passes when the request fits on it,
    next to every reservation the calendar holds there, over the request's
    whole interval: [now, lease end) for a leased server (hint
    ``lease_params`` or a server that belongs to a lease), [now, infinity)
    for an unleased one. Reserved capacity is so lent to time-bounded work
    that ends before the reservation starts, and never to anything that
    would still run then. A request with the ``reservation`` hint passes
    only the hosts of that host reservation, for its owner project, while
    the lease is ACTIVE; other requests never pass a host that is in an
    active host reservation.

    For now (placeholder) every host passes; the decision is logged.
    """

    # The interval of a rebuilt server does not change, and neither does
    # its host: nothing to check again.
    RUN_ON_REBUILD = False

    # Every instance of a multi-create request needs its own capacity.
    run_filter_once_per_request = False

    def host_passes(self, host_state, spec_obj):
        """Return True if the request fits the host's lease calendar."""
        passes = True
        LOG.debug('%(host_state)s %(result)s LeaseFilter for instance '
                  '%(instance)s',
                  {'host_state': host_state,
                   'result': 'passes' if passes else 'fails',
                   'instance': spec_obj.instance_uuid})
        return passes
