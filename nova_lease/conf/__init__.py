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

from nova_lease.conf import auth
from nova_lease.conf import enforcement
from nova_lease.conf import lease

_MODULES = (lease, auth, enforcement)


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


def connection_url(conf):
    """Return the side database URL for conf.

    An empty [nova_lease] connection means the embedded default: an SQLite
    file named nova_lease.sqlite under Nova's [DEFAULT] state_path.
    """
    if conf.nova_lease.connection:
        return conf.nova_lease.connection
    try:
        state_path = conf.state_path
    except Exception:  # the option is Nova's; a bare ConfigOpts lacks it
        state_path = None
    return 'sqlite:///%s/nova_lease.sqlite' % (state_path or '/var/lib/nova')


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
    """Register Nova's [DEFAULT] pybasedir and state_path on ``conf``.

    For our own commands (engine, manage), which read nova.conf with their
    own ConfigOpts: the embedded default database lives under Nova's
    state_path, so it is read with Nova's option names and defaults to find
    the same file as nova-api does. Never call it on Nova's own CONF.
    """
    if 'state_path' in conf:
        return
    conf.register_opts([
        cfg.StrOpt('pybasedir', default=_nova_pybasedir(),
                   help="Nova's [DEFAULT] pybasedir."),
        cfg.StrOpt('state_path', default='$pybasedir',
                   help="Nova's [DEFAULT] state_path: the embedded default "
                        "database is nova_lease.sqlite in it."),
    ])
