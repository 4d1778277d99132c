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
"""Configuration options of nova_lease.

Code that runs inside Nova (api_ext, scheduler) registers these options on
Nova's own ``cfg.CONF`` with :func:`register_opts` and never parses it.
The engine and the command-line tools build their own ``cfg.ConfigOpts``
and read the same nova.conf.
"""

import importlib.util
import os

from oslo_config import cfg
import oslo_messaging

from nova_lease.conf import api
from nova_lease.conf import auth
from nova_lease.conf import database
from nova_lease.conf import enforcement
from nova_lease.conf import engine
from nova_lease.conf import lease
from nova_lease.conf import scheduler
from nova_lease import exception
from nova_lease import wire

_MODULES = (lease, api, scheduler, engine, database, auth, enforcement)

#: [nova_lease] and the groups its single-process options moved to (each
#: option is still read from [nova_lease] with a deprecation warning).
_LEASE_MODULES = (lease, api, scheduler, engine)


def register_opts(conf):
    """Register every nova_lease option on conf (idempotent)."""
    for module in _MODULES:
        module.register_opts(conf)


def list_opts():
    """Return [(group, [opts])] for oslo-config-generator."""
    result = []
    for module in _MODULES:
        result.extend(module.list_opts())
    return result


def group_of(name):
    """The group of option ``name`` of [nova_lease] or of a group split
    from it ([nova_lease_api], [nova_lease_scheduler],
    [nova_lease_engine]), for tools and tests that write nova.conf.

    :raises KeyError: no such option.
    """
    for module in _LEASE_MODULES:
        for group, opts in module.list_opts():
            if any(opt.dest == name for opt in opts):
                return group.name
    raise KeyError(name)


def connection_url(conf):
    """Return the side database URL for conf.

    :raises nova_lease.exception.DatabaseNotConfigured:
        [nova_lease_database] connection is empty. There is no implicit
        default: nova-api, nova-scheduler and nova-lease-engine would each
        open a database of their own. A single-host SQLite file is an
        explicit sqlite:/// URL.
    """
    url = (conf.nova_lease_database.connection or '').strip()
    if not url:
        raise exception.DatabaseNotConfigured()
    return url


def database_options(conf):
    """The oslo.db options of ``[nova_lease_database]`` but connection,
    as nova_lease.db.transaction.Database takes them.
    """
    group = conf.nova_lease_database
    return {opt.dest: group[opt.dest] for opt in database.DATABASE_OPTS
            if opt.dest != 'connection'}


def _nova_pybasedir():
    # Nova's default for [DEFAULT] pybasedir: the directory holding the
    # nova package (nova/conf/paths.py), found without importing nova.conf,
    # which would double a command's start-up time.
    spec = importlib.util.find_spec('nova')
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.dirname(
        os.path.abspath(list(spec.submodule_search_locations)[0]))


def register_nova_paths(conf):
    """Give ``conf`` the defaults Nova's processes have for nova.conf.

    For our own commands (engine, manage), which read nova.conf with their
    own ConfigOpts, so that it means the same for them as for Nova:
    Nova's [DEFAULT] pybasedir and state_path are registered, and
    oslo.messaging's [DEFAULT] control_exchange defaults to ``nova`` as in
    every Nova process (nova.config.parse_args), not ``openstack``:
    otherwise the engine's listener waits on another exchange than the
    one Nova publishes its instance notifications on, and its lease
    notifications go elsewhere than nova-api's. That default is
    process-wide in oslo.messaging, as in Nova. Never call it on Nova's
    own CONF.
    """
    oslo_messaging.set_transport_defaults(control_exchange=wire.NOVA_EXCHANGE)
    if 'state_path' in conf:
        return
    conf.register_opts([
        cfg.StrOpt('pybasedir', default=_nova_pybasedir(),
                   help="Nova's [DEFAULT] pybasedir."),
        cfg.StrOpt('state_path', default='$pybasedir',
                   help="Nova's [DEFAULT] state_path."),
    ])
