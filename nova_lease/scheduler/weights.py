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
"""Lease Weigher. Weigh hosts by how tightly a request fits them in time.

The default prefers, for a time-bounded (leased) request, the host where
it ends closest before the next promised demand that would no longer let
it fit (least fragmentation of future capacity); and, for unleased work,
the hosts with no future promise, then those whose next promise is the
furthest away. Set ``[nova_lease_scheduler] weigher_multiplier`` (or the
aggregate metadata key ``lease_weigher_multiplier``) to a negative number
to invert that, or to 0 to disable the weigher.

Operators enable it in nova.conf by adding
``nova_lease.scheduler.weights.LeaseWeigher`` to ``[filter_scheduler]
weight_classes`` (a comma-separated list, on one line), after
``nova.scheduler.weights.all_weighers`` to keep Nova's own weighers.
"""

import nova.conf
from nova.scheduler import utils
from nova.scheduler import weights

from nova_lease import conf as lease_conf
from nova_lease import registration
from nova_lease.scheduler import view as lease_view

CONF = nova.conf.CONF
lease_conf.register_opts(CONF)


class LeaseWeigher(weights.BaseHostWeigher):
    """Prefer the hosts where a request fits tightest in time."""

    minval = -1.0
    maxval = 1.0

    def __init__(self):
        super().__init__()
        # As LeaseFilter: no nova-scheduler without the side database.
        registration.register_nova_process(CONF, registration.SCHEDULER)

    def weight_multiplier(self, host_state):
        """Override the weight multiplier (aggregate metadata wins)."""
        return utils.get_weight_multiplier(
            host_state, 'lease_weigher_multiplier',
            CONF.nova_lease_scheduler.weigher_multiplier)

    def weigh_objects(self, weighed_obj_list, weight_properties):
        """Weigh every host at once, with the LeaseFilter's view."""
        hosts = [weighed.obj for weighed in weighed_obj_list]
        view = lease_view.view_for(weight_properties, fresh=False)
        return view.weights(hosts)

    def _weigh_object(self, host_state, weight_properties):
        """Higher weights win: the tighter the fit in time, the higher."""
        return self.weigh_objects([_Weighed(host_state)],
                                  weight_properties)[0]


class _Weighed(object):
    def __init__(self, obj):
        self.obj = obj
