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
"""What every option group of nova_lease shares: how it registers and
lists its options.
"""

from oslo_config import cfg


class Group(object):
    """An option group: its name, title and help.

    Each registration gets an OptGroup of its own: oslo.config copies a
    registered group only shallowly, so one shared OptGroup object would
    make every ConfigOpts of the process (Nova's CONF, the engine's own)
    share one dict of the group's options.
    """

    def __init__(self, name, title, help):
        self.name = name
        self.title = title
        self.help = help

    def opt_group(self):
        return cfg.OptGroup(self.name, title=self.title, help=self.help)

    def register(self, conf, opts):
        conf.register_group(self.opt_group())
        conf.register_opts(opts, group=self.name)

    def listing(self, opts):
        """[(group, opts)], for oslo-config-generator."""
        return [(self.opt_group(), opts)]
