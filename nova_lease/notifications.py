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
"""Lease notifications (oslo.messaging), e.g. for billing.

Event types: ``lease.create``, ``lease.start``, ``lease.before_end``,
``lease.end``, ``lease.delete`` (priority INFO) and ``lease.error``
(priority ERROR, the lease went to ERROR). They go to the notification
transport and topics of the configuration (``[oslo_messaging_notifications]
driver / transport_url / topics``, the same section Nova reads), so an
engine reading nova.conf notifies wherever Nova does. No driver configured
means no notifications.

The payload follows Nova's versioned notifications (the fields are
documented in doc/source/reference/notifications.rst)::

    {"nova_object.name": "LeasePayload",
     "nova_object.namespace": "nova_lease",
     "nova_object.version": "1.1",
     "nova_object.data": {<the lease: id, name, project_id, user_id,
                          lease_type, start_date, end_date,
                          before_end_date, status, status_reason, on_end,
                          created_at, updated_at,
                          reservations: [{id, lease_id, resource_type,
                                          resource_id, status,
                                          created_at, updated_at,
                                          amount, hosts, vcpus,
                                          memory_mb, disk_gb}],
                          usage: null, or at lease.end
                                 {reserved: {...}, used: {...}}>}}

with dates as ISO 8601 UTC strings. A notification that cannot be sent is
logged and dropped: it never fails the lease action.

Hosts and idle-host actions (``host.idle.disable``,
``host.idle.enable``, see nova_lease.periodic.idle) carry a
``HostIdlePayload``: ``{host, service_host, reason, idle_until,
wake_at}``.
"""

import datetime
import socket

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging

from nova_lease import usage as lease_usage

LOG = logging.getLogger(__name__)

PAYLOAD_NAME = 'LeasePayload'
PAYLOAD_NAMESPACE = 'nova_lease'
PAYLOAD_VERSION = '1.1'
HOST_PAYLOAD_NAME = 'HostIdlePayload'
HOST_PAYLOAD_VERSION = '1.0'

CREATE = 'lease.create'
START = 'lease.start'
BEFORE_END = 'lease.before_end'
END = 'lease.end'
DELETE = 'lease.delete'
ERROR = 'lease.error'
#: A best-effort lease hunting for hosts (each attempt that left servers
#: on its hosts), and one that gave up.
IN_PROGRESS = 'lease.in_progress'
TIMEDOUT = 'lease.timedout'
EVENT_TYPES = (CREATE, START, BEFORE_END, END, DELETE, ERROR, IN_PROGRESS,
               TIMEDOUT)
HOST_IDLE_DISABLE = 'host.idle.disable'
HOST_IDLE_ENABLE = 'host.idle.enable'
HOST_EVENT_TYPES = (HOST_IDLE_DISABLE, HOST_IDLE_ENABLE)

_LEASE_FIELDS = ('id', 'name', 'project_id', 'user_id', 'lease_type',
                 'start_date', 'end_date', 'before_end_date', 'status',
                 'status_reason', 'on_end', 'created_at', 'updated_at')
_RESERVATION_FIELDS = ('id', 'lease_id', 'resource_type', 'resource_id',
                       'status', 'created_at', 'updated_at')


def _primitive(value):
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(
                tzinfo=None)
        return value.isoformat() + 'Z'
    return value


def _reservation(reservation):
    data = {k: _primitive(reservation.get(k)) for k in _RESERVATION_FIELDS}
    data.update(lease_usage.amounts(reservation))
    return data


def lease_payload(lease, reservations=None, usage=None):
    """The versioned payload of a lease dict (see the module doc).

    A host reservation's hosts are those of its ``hosts`` key
    (nova_lease.plugins.host.allocation.attach_hosts); ``usage``: the
    lease's figures (nova_lease.usage.whole_lease), for lease.end.
    """
    data = {k: _primitive(lease.get(k)) for k in _LEASE_FIELDS}
    if reservations is None:
        reservations = lease.get('reservations') or []
    data['reservations'] = [_reservation(r) for r in reservations]
    data['usage'] = usage
    return {'nova_object.name': PAYLOAD_NAME,
            'nova_object.namespace': PAYLOAD_NAMESPACE,
            'nova_object.version': PAYLOAD_VERSION,
            'nova_object.data': data}


class LeaseNotifier(object):
    """Sends lease notifications; thread-safe; never raises on send."""

    def __init__(self, conf, publisher_id=None, transport=None, retry=3):
        self._own_transport = transport is None
        if transport is None:
            transport = oslo_messaging.get_notification_transport(conf)
        self.transport = transport
        self.publisher_id = publisher_id or (
            'nova-lease-engine:%s' % socket.gethostname())
        self._notifier = oslo_messaging.Notifier(
            transport, publisher_id=self.publisher_id, retry=retry)
        # Notifier.is_enabled() is only false for the 'noop' driver; an
        # empty driver list sends nothing either.
        try:
            drivers = list(transport.conf.oslo_messaging_notifications.driver)
        except (AttributeError, cfg.Error):
            drivers = None
        self._enabled = self._notifier.is_enabled() and drivers != []

    @property
    def enabled(self):
        return self._enabled

    def notify(self, event_type, lease, reservations=None, usage=None):
        """Send ``event_type`` about ``lease``; False if it failed."""
        if event_type not in EVENT_TYPES:
            raise ValueError('unknown lease notification %r' % event_type)
        if not self.enabled:
            return False
        payload = lease_payload(lease, reservations, usage)
        method = (self._notifier.error if event_type == ERROR
                  else self._notifier.info)
        return self._send(method, event_type, payload,
                          'lease %s' % lease.get('id'))

    def notify_host(self, event_type, host, reason, idle_until=None,
                    wake_at=None):
        """Send ``host.idle.disable`` or ``host.idle.enable`` about
        ``host`` (a registered host dict); False if it failed.
        """
        if event_type not in HOST_EVENT_TYPES:
            raise ValueError('unknown host notification %r' % event_type)
        if not self.enabled:
            return False
        payload = {'nova_object.name': HOST_PAYLOAD_NAME,
                   'nova_object.namespace': PAYLOAD_NAMESPACE,
                   'nova_object.version': HOST_PAYLOAD_VERSION,
                   'nova_object.data': {
                       'host': host.get('hypervisor_hostname'),
                       'service_host': host.get('service_host') or
                       host.get('hypervisor_hostname'),
                       'reason': reason,
                       'idle_until': _primitive(idle_until),
                       'wake_at': _primitive(wake_at)}}
        return self._send(self._notifier.info, event_type, payload,
                          'host %s' % host.get('hypervisor_hostname'))

    def _send(self, method, event_type, payload, what):
        try:
            method({}, event_type, payload)
        except Exception:
            LOG.exception('Could not send %(type)s for %(what)s',
                          {'type': event_type, 'what': what})
            return False
        return True

    def close(self):
        """Release the transport (only one this notifier created)."""
        if not self._own_transport:
            return
        try:
            self.transport.cleanup()
        except Exception:  # noqa: S110 - best effort at shutdown
            LOG.debug('Notification transport cleanup failed',
                      exc_info=True)
