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
"""What the handlers of every resource read: options, database, clock."""

import nova.conf
from oslo_utils import timeutils

from nova_lease.api_ext import nova_effects
from nova_lease.booking import pipeline
from nova_lease import conf as lease_conf
from nova_lease.db import api as db_api
from nova_lease import params as lease_params

CONF = nova.conf.CONF
lease_conf.register_opts(CONF)

DEFAULT_REGION = 'RegionOne'


def db():
    """The side database."""
    return db_api.get_database(CONF)


def opts():
    """The ``[nova_lease_api]`` options (read by nova-api only)."""
    return CONF.nova_lease_api


def shared_opts():
    """The ``[nova_lease]`` options (read by other processes too)."""
    return CONF.nova_lease


def now():
    return timeutils.utcnow()


def max_duration():
    """``[nova_lease_api] max_lease_duration`` as a timedelta (0: no limit)."""
    return lease_params.parse_duration(opts().max_lease_duration,
                                       '[nova_lease_api] max_lease_duration',
                                       allow_zero=True)


def region_name():
    """This Nova's region (see ``[nova_lease_api] region_name``)."""
    name = opts().region_name
    if name:
        return name
    try:
        name = CONF.placement.region_name
    except Exception:  # noqa: the option group may be absent
        name = None
    return name or DEFAULT_REGION


def caller(ctx):
    """The booking pipeline's caller for a request of ``ctx``."""
    return pipeline.Caller(ctx=ctx, conf=CONF, db=db(), region=region_name(),
                           nova=nova_effects.InProcessNova(ctx))
