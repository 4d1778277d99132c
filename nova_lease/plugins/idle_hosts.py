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
"""Hosts the engine's idle action disabled, and waking them.

The idle pass (nova_lease.periodic.idle) disables the nova-compute
service of a host that has nothing to run for a while, with a reason
that starts with ``wire.IDLE_HOST_REASON``; a lease that starts on such
a host (the host and slot plugins) wakes it first. Only services the
idle action disabled are ever enabled.
"""

from oslo_log import log as logging

from nova_lease import compute
from nova_lease import notifications
from nova_lease import wire

LOG = logging.getLogger(__name__)


def ours(service):
    """True if ``service`` was disabled by the engine's idle action."""
    reason = service.get('disabled_reason') or ''
    return (service.get('status') == 'disabled' and
            reason.startswith(wire.IDLE_HOST_REASON))


def enable_ours(gate, service_host):
    """Enable the nova-compute service of ``service_host`` if the idle
    action disabled it (never one disabled by anyone else); True if it
    did.
    """
    try:
        service = gate.get_compute_service(service_host)
    except compute.ComputeNotFound:
        return False
    if service is None or not ours(service):
        return False
    gate.enable_service(service['id'], service=service,
                        why='the idle action disabled it')
    return True


def wake_host(gate, host, notifier=None):
    """Enable ``host`` (a service host) if the idle action disabled it
    (the host plugin, before it starts a lease on it); True if it did.
    """
    if not enable_ours(gate, host):
        return False
    LOG.info('Enabled host %s that was idle: a lease starts on it', host)
    send = getattr(notifier, 'notify_host', None)
    if send is not None:
        send(notifications.HOST_IDLE_ENABLE,
             {'hypervisor_hostname': host, 'service_host': host},
             'a lease starts on it')
    return True
