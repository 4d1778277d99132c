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
"""What the booking pipeline asks of Nova from nova-api.

The reservation types (nova_lease.resource_types) do not talk to Nova:
the pipeline hands them a caller whose ``nova`` is :class:`InProcessNova`
(nova-api's in-process Nova, with the request's context: the code paths
of Nova's own REST controllers, nova_lease.api_ext.nova_flavors and
nova_lease.api_ext.nova_hosts).
"""

from nova_lease.api_ext import nova_flavors
from nova_lease.api_ext import nova_hosts


class InProcessNova(object):
    """Nova, for the reservation types, as the request's context."""

    def __init__(self, ctx):
        self.ctx = ctx

    def find_flavor(self, flavor_id, field):
        """The flavor as the caller sees it (400 naming ``field``)."""
        return nova_flavors.find_flavor(self.ctx, flavor_id, field)

    def make_flavor(self, reservation_id, request):
        """An instance reservation's flavor and server group (the
        group's uuid, or None).
        """
        return nova_flavors.make(self.ctx, reservation_id, request)

    def discard_flavor(self, reservation_id, server_group_id):
        nova_flavors.discard(self.ctx, reservation_id, server_group_id)

    def resize_flavor(self, reservation_id, request, server_group_id):
        nova_flavors.resize(self.ctx, reservation_id, request,
                            server_group_id)

    def move_to_aggregate(self, name, service_host, freepool=None):
        nova_hosts.move_to_aggregate(self.ctx, name, service_host, freepool)

    def wake_host(self, service_host):
        return nova_hosts.wake(self.ctx, service_host)
