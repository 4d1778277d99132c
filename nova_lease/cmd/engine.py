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
"""nova-lease-engine: the lease event engine service.

    nova-lease-engine [--config-file /etc/nova/nova.conf] [--engine-id ID]

It reads ``[nova_lease]``, ``[nova_lease_engine]``, ``[nova_lease_auth]``
and ``[oslo_messaging_notifications]`` from nova.conf (without
--config-file: the standard locations of project "nova"), logs with
oslo.log, logs its option values at start (``[DEFAULT] log_options``,
secrets masked), and runs until SIGTERM or SIGINT: then it stops
claiming, lets running actions finish for ``engine_shutdown_timeout``
seconds and releases the claims of those that did not, so that another
engine runs them. It exits at the latest ``[DEFAULT]
graceful_shutdown_timeout`` seconds after the signal (0: no limit), but
never before ``engine_shutdown_timeout`` + :data:`RELEASE_MARGIN`
seconds, so that the claims are released first. SIGHUP reloads the
configuration files: the options marked mutable (``engine_max_sleep``,
``engine_batch_size``, ``engine_probe_interval``,
``engine_shutdown_timeout``, ``retry_interval``, ``idle_host_interval``,
``idle_host_min_hours``, and oslo.log's ``debug``) apply at once, the
others at the next start. Several processes may run at once against
MySQL/MariaDB or PostgreSQL.

(It is not run under oslo.service's launcher: its threading backend runs
the service in a child process forked by cotyledon, whose SIGHUP restarts
that child instead of mutating its options; see
doc/source/contributor/architecture.rst.)

It refuses to start (exit code 1, the reason on standard error and in the
log) when ``[nova_lease_database] connection`` is empty, when the database
cannot be reached or has no schema (``nova-lease-manage db sync``), or when
options contradict each other (``engine_claim_timeout`` not above
``plugin_call_timeout``, ...). Once started, it logs the database and its
identity and registers in it (``nova-lease-manage process list``).

Exit codes: 0 stopped by a signal, 1 start-up failure, 2 the stop took
longer than ``graceful_shutdown_timeout``.
"""

import logging as std_logging
import os
import signal
import sys
import threading

from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_log import log as logging
from oslo_service import opts as service_opts
from sqlalchemy import exc as sa_exc

from nova_lease.compute_hook import service as hook_service
from nova_lease import conf as lease_conf
from nova_lease import exception
from nova_lease import notifications
from nova_lease.periodic import engine as lease_engine
from nova_lease import registration
from nova_lease import resource_types as types

LOG = logging.getLogger(__name__)

PROG = 'nova-lease-engine'

#: Seconds beyond engine_shutdown_timeout the engine always has at stop to
#: record results and release the claims of the actions still running.
RELEASE_MARGIN = 15

CLI_OPTS = [
    cfg.StrOpt('engine-id',
               help='Name this engine records on the events it claims '
                    '(default: <hostname>:<pid>:<random>).'),
]


def parse_args(argv):
    """The engine's own ConfigOpts, parsed from argv."""
    conf = cfg.ConfigOpts()
    lease_conf.register_opts(conf)
    lease_conf.register_nova_paths(conf)
    logging.register_options(conf)
    # [DEFAULT] graceful_shutdown_timeout and log_options, as Nova's
    # services have them (nova.conf may set them already).
    service_opts.register_service_opts(conf)
    conf.register_cli_opts(CLI_OPTS)
    conf(argv, project='nova', prog=PROG)
    return conf


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        conf = parse_args(argv)
    except cfg.Error as e:
        print('%s: %s' % (PROG, e), file=sys.stderr)
        return 1
    logging.setup(conf, PROG)
    if conf.log_options:
        conf.log_opt_values(LOG, std_logging.INFO)
    refusal = check(conf)
    if refusal:
        LOG.error('%s refuses to start: %s', PROG, refusal)
        print('%s: %s' % (PROG, refusal), file=sys.stderr)
        return 1
    try:
        notifier = notifications.LeaseNotifier(conf)
        engine = lease_engine.Engine(conf, notifier=notifier,
                                     engine_id=conf.engine_id)
    except Exception:
        LOG.exception('%s could not start', PROG)
        return 1

    def _stop(signum, frame):
        LOG.info('Signal %s received: stopping (finishing or releasing '
                 'claims)', signum)
        engine.stop()
        exit_deadline(conf)

    def _reload(signum, frame):
        # Not in the handler: mutating takes locks and logs.
        threading.Thread(target=reload_options, args=(conf,),
                         name='lease-reload', daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGHUP, _reload)
    stop_hook = start_compute_hook(conf, engine, notifier)
    try:
        engine.run()
    finally:
        stop_hook()
        for plugin in engine.plugins.values():
            plugin.close()
        notifier.close()
    return 0


def stop_timeout(conf):
    """Seconds the process may take to stop after SIGTERM, or None."""
    graceful = conf.graceful_shutdown_timeout
    if not graceful:
        return None
    return max(graceful, conf.nova_lease_engine.engine_shutdown_timeout
               + RELEASE_MARGIN)


_deadline = []


def exit_deadline(conf):
    """Exit (code 2) if the stop has not finished within
    :func:`stop_timeout` (armed once, at the first stop signal).
    """
    timeout = stop_timeout(conf)
    if timeout is None or _deadline:
        return

    def _exit():
        LOG.error('%s did not stop within %s s of the signal '
                  '([DEFAULT] graceful_shutdown_timeout): exiting now',
                  PROG, timeout)
        os._exit(2)

    timer = threading.Timer(timeout, _exit)
    timer.daemon = True
    _deadline.append(timer)
    timer.start()


def reload_options(conf):
    """SIGHUP: read the configuration files again; the mutable options
    apply at once (oslo.config logs each one that changed, and warns of
    the others).
    """
    LOG.info('SIGHUP received: reloading the configuration files')
    try:
        conf.mutate_config_files()
        lease_engine.check_options(conf)
    except Exception:
        LOG.exception('The reloaded configuration is not valid; fix it '
                      '(the options that changed are in use)')


def check(conf):
    """Why the engine must not start with ``conf``, or None.

    The side database must be configured, reachable and synced (see
    nova_lease.registration), and the engine's options consistent.
    """
    try:
        lease_engine.check_options(conf)
        registration.check_database(conf)
    except exception.NovaLeaseException as e:
        return str(e)
    except (db_exc.DBError, sa_exc.SQLAlchemyError) as e:
        return ('cannot use the nova_lease database %s: %s'
                % (registration.safe_url(lease_conf.connection_url(conf)),
                   getattr(e, 'inner_exception', None) or e))
    return None


def start_compute_hook(conf, engine, notifier=None, transport=None):
    """Start the compute hook next to ``engine``; return its stop function.

    The hook (nova_lease.compute_hook) listens to Nova's versioned
    instance notifications and runs its reconcile pass every
    ``[nova_lease_engine] reconcile_interval`` seconds; it shares the engine's
    database and the virtual:instance plugin's compute client, and tells
    the engine of each server a notification shows changed. A failure
    to start it is logged: the engine runs anyway.
    """
    plugin = engine.plugins.get(types.SERVER)
    try:
        return hook_service.start(
            conf, db=engine.db, notifier=notifier, transport=transport,
            compute_client=(plugin.hook_client() if plugin is not None
                            else None),
            on_server_change=engine.observe_now,
            chores=getattr(engine, 'chores', None))
    except Exception:
        LOG.exception('The compute hook could not start; leased servers '
                      'are not shelved before their lease starts')
        return lambda: None


if __name__ == '__main__':
    sys.exit(main())
