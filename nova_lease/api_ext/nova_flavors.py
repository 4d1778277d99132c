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
:func:`resize` makes the flavor again with a new size (a reservation
update before the start), and follows a start that came meanwhile.
"""

import nova.conf
from nova import exception as nova_exception
from nova import objects
from oslo_log import log as logging

from nova_lease import conf as lease_conf
from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease import params as lease_params
from nova_lease.plugins import flavor as flavor_plugin
from nova_lease import status

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
lease_conf.register_opts(CONF)


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

    A Nova flavor cannot change size: it is destroyed and created again
    with the same id, and the projects given access to it lose it. The
    update that asked for the new size was recorded while the lease was
    PENDING, but the engine may have started it since and given the
    project the old flavor: once the new flavor exists, the lease is read
    again (:func:`_follow_the_lease`).
    """
    admin = ctx.elevated()
    try:
        objects.Flavor.get_by_flavor_id(admin, reservation_id).destroy()
    except nova_exception.FlavorNotFound:
        pass
    flavor = _flavor(admin, reservation_id, request)
    flavor.create()
    _follow_the_lease(ctx, reservation_id, flavor)


def _follow_the_lease(ctx, reservation_id, flavor):
    """After the flavor of ``reservation_id`` was made again: if its
    lease has started meanwhile (STARTING or ACTIVE), its project gets
    the new flavor (the engine gave it the old one, or will give it this
    one: either way it has it); if the lease is gone or over (TERMINATING,
    TERMINATED: the engine deletes the flavor, maybe before this one was
    made), the new flavor goes. Otherwise (PENDING) the engine gives it
    at the start.
    """
    db = db_api.get_database(CONF)
    try:
        row = db_api.reservation_get(db, reservation_id)
        lease = db_api.lease_get(db, row['lease_id'])
    except exception.NotFound:
        lease = None
    state = lease['status'] if lease is not None else None
    if state in (status.LeaseStatus.STARTING, status.LeaseStatus.ACTIVE):
        try:
            flavor.add_access(lease['project_id'])
        except nova_exception.FlavorAccessExists:
            pass
        LOG.info('Lease %(lease)s started while the flavor of its '
                 'reservation %(res)s was made again with a new size: '
                 'project %(project)s given the new flavor',
                 {'lease': lease['id'], 'res': reservation_id,
                  'project': lease['project_id']})
    elif lease is None or state in (status.LeaseStatus.TERMINATING,
                                    status.LeaseStatus.TERMINATED):
        LOG.info('The lease of reservation %s is gone or over: its flavor, '
                 'made again with a new size, goes', reservation_id)
        discard(ctx, reservation_id, None)


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
