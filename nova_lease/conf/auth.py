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
"""The [nova_lease_auth] group: how nova-lease-engine reaches Nova's API.

These are the standard keystoneauth session, auth and adapter options of a
service user (like Nova's own [neutron] or [placement] groups).
"""

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from nova_lease.conf import group

GROUP_NAME = 'nova_lease_auth'


GROUP = group.Group(
    GROUP_NAME, title='nova_lease service credentials',
    help='Keystone credentials and endpoint settings that '
         'nova-lease-engine uses to call the compute API as a service '
         'user.')


def register_opts(conf):
    try:
        conf[GROUP_NAME].auth_type
        return  # already registered on this ConfigOpts
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        pass
    conf.register_group(GROUP.opt_group())
    ks_loading.register_session_conf_options(conf, GROUP_NAME)
    ks_loading.register_auth_conf_options(conf, GROUP_NAME)
    ks_loading.register_adapter_conf_options(conf, GROUP_NAME,
                                             include_deprecated=False)
    conf.set_default('service_type', 'compute', group=GROUP_NAME)


def list_opts():
    opts = (ks_loading.get_session_conf_options()
            + ks_loading.get_auth_common_conf_options()
            + ks_loading.get_auth_plugin_conf_options('password')
            + ks_loading.get_adapter_conf_options(include_deprecated=False))
    return GROUP.listing(_dedup(opts))


def _dedup(opts):
    seen, out = set(), []
    for opt in opts:
        if opt.dest not in seen:
            seen.add(opt.dest)
            out.append(opt)
    return out
