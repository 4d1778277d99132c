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
"""The Nova side of a Blazar instance reservation, made by nova-api.

When the lease API records an instance reservation
(nova_lease.plugins.flavor) it makes, in process and with Nova's own
objects (as Nova's os-flavor-manage and os-server-groups controllers
do):

* the reservation's flavor: id and name the reservation id (Blazar names
  it ``reservation:<id>``; its id is the reservation id, which is what
  Blazar's users boot with), private (no project has access until the
  lease starts: the engine grants it to the lease's project then), with
  the slot's size and the extra spec ``nova_lease:reservation`` = the
  reservation id, which LeaseFilter reads;
* with ``affinity`` true or false, a server group of the lease's project
  with the ``affinity`` or ``anti-affinity`` policy (Blazar's users pass
  it as the ``group`` hint).

:func:`discard` removes both (a lease that was refused leaves nothing);
the engine removes them at the lease's end (through the compute API).
"""

from nova import exception as nova_exception
from nova import objects
from oslo_log import log as logging

from nova_lease import exception
from nova_lease import params as lease_params
from nova_lease.plugins import flavor as flavor_plugin

LOG = logging.getLogger(__name__)


class FlavorError(exception.Conflict):
    msg_fmt = '%(reason)s'


def find_flavor(ctx, flavor_id, field):
    """The flavor ``flavor_id`` as the caller sees it (400 if none)."""
    try:
        return objects.Flavor.get_by_flavor_id(ctx, flavor_id)
    except nova_exception.FlavorNotFound:
        raise lease_params.LeaseParamError(
            field, 'not_found', "'%s': flavor %s not found" % (
                field, flavor_id)) from None


def make(ctx, reservation_id, request):
    """Create the reservation's flavor (its id: ``reservation_id``) and
    server group.

    :returns: the server group's uuid, or None (no affinity).
    :raises FlavorError: (409) Nova refused; nothing is left behind.
    """
    admin = ctx.elevated()
    flavor = _flavor(admin, reservation_id, request)
    try:
        flavor.create()
    except (nova_exception.FlavorExists,
            nova_exception.FlavorIdExists) as e:
        raise FlavorError(reason='cannot create the flavor of reservation '
                          '%s: %s' % (reservation_id, e)) from e
    if request.affinity is None:
        return None
    group = objects.InstanceGroup(
        context=ctx, project_id=ctx.project_id, user_id=ctx.user_id,
        name='reservation:%s' % reservation_id,
        policy='affinity' if request.affinity else 'anti-affinity')
    try:
        group.create()
    except Exception as e:
        discard(ctx, reservation_id, None)
        raise FlavorError(reason='cannot create the server group of '
                          'reservation %s: %s' % (reservation_id, e)) from e
    return group.uuid


def resize(ctx, reservation_id, request, server_group_id):
    """Make the reservation's flavor again with the request's size (a
    reservation that has not started: no server uses it yet).
    """
    admin = ctx.elevated()
    try:
        objects.Flavor.get_by_flavor_id(admin, reservation_id).destroy()
    except nova_exception.FlavorNotFound:
        pass
    _flavor(admin, reservation_id, request).create()


def _flavor(admin, reservation_id, request):
    return objects.Flavor(
        context=admin, name='reservation:%s' % reservation_id,
        flavorid=reservation_id, vcpus=request.vcpus,
        memory_mb=request.memory_mb, root_gb=request.disk_gb,
        ephemeral_gb=0, swap=0, rxtx_factor=1.0, is_public=False,
        disabled=False,
        extra_specs={flavor_plugin.FLAVOR_SPEC: reservation_id})


def discard(ctx, flavor_id, server_group_id):
    """Remove what :func:`make` made (missing ones are fine)."""
    admin = ctx.elevated()
    if server_group_id:
        try:
            objects.InstanceGroup.get_by_uuid(admin,
                                              server_group_id).destroy()
        except nova_exception.InstanceGroupNotFound:
            pass
    if flavor_id:
        try:
            objects.Flavor.get_by_flavor_id(admin, flavor_id).destroy()
        except nova_exception.FlavorNotFound:
            pass
