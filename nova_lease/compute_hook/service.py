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
"""Start and stop the compute hook inside nova-lease-engine.

:func:`start` starts the notification listener (if the transport can be
set up: without it the hook still works through the reconcile pass) and
the periodic reconcile thread, and returns a function that stops both.
"""

from oslo_config import cfg
from oslo_log import log as logging

from nova_lease.compute_hook import hook as compute_hook

LOG = logging.getLogger(__name__)


def notifications_configured(conf):
    """True when nova.conf sets a notification driver (Nova then sends).

    Nova sends notifications only with an ``[oslo_messaging_notifications]
    driver``; without one there is nothing to listen to.
    """
    try:
        drivers = conf.oslo_messaging_notifications.driver
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        return False
    return any(d and d != 'noop' for d in drivers or ())


def start(conf, db=None, compute_client=None, notifier=None,
          transport=None, listen=None, on_server_change=None, chores=None):
    """Start the compute hook; return ``stop()``.

    :param conf: the engine's ConfigOpts ([nova_lease],
        [nova_lease_engine], [nova_lease_auth], and the oslo.messaging
        notification options of nova.conf).
    :param transport: the notification transport (default: from conf).
    :param listen: True/False to start the listener or not; None (the
        default): when :func:`notifications_configured`.
    :param on_server_change: told of every server a notification shows
        changed (see :class:`~nova_lease.compute_hook.hook.ComputeHook`).
    :param chores: a :class:`nova_lease.periodic.chores.Chores` (the
        engine's) to run the reconcile pass on; without it, a thread of
        its own (:class:`~nova_lease.compute_hook.hook.Reconciler`).
    """
    hook = compute_hook.ComputeHook(conf, db=db,
                                    compute_client=compute_client,
                                    notifier=notifier,
                                    on_server_change=on_server_change)
    listener = None
    if listen is None:
        listen = transport is not None or notifications_configured(conf)
        if not listen:
            LOG.warning('No [oslo_messaging_notifications] driver: the '
                        'compute hook does not listen to Nova; leases are '
                        'kept right by its reconcile pass every %s s',
                        conf.nova_lease_engine.reconcile_interval)
    if listen:
        try:
            listener = compute_hook.start_listener(conf, hook,
                                                   transport=transport)
        except Exception:
            LOG.exception('Compute hook: no notification listener (Nova\'s '
                          'versioned notifications will not be seen); '
                          'leases are kept right by the reconcile pass '
                          'every %s s',
                          conf.nova_lease_engine.reconcile_interval)
    reconciler = None
    interval = conf.nova_lease_engine.reconcile_interval
    if chores is None:
        reconciler = compute_hook.Reconciler(hook).start()
    elif interval:
        # (The first pass after one interval, as the Reconciler's.)
        chores.add('reconcile', hook.reconcile,
                   lambda: conf.nova_lease_engine.reconcile_interval,
                   run_immediately=False)

    def stop():
        if reconciler is not None:
            reconciler.stop()
        if listener is not None:
            try:
                listener.stop()
                listener.wait()
            except Exception:
                LOG.exception('Compute hook listener did not stop cleanly')

    stop.hook = hook
    stop.listener = listener
    return stop
