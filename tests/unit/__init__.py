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
"""Fast tests: no Nova services, no database servers."""

from oslo_config import cfg

from nova_lease import conf as lease_conf


def lease_conf_opts():
    """A ConfigOpts of its own with nova_lease's options, parsed.

    The group object is its own: overrides must not leak into the
    module-level group other ConfigOpts share.
    """
    conf = cfg.ConfigOpts()
    conf.register_group(cfg.OptGroup('nova_lease'))
    lease_conf.register_opts(conf)
    conf([])
    return conf
