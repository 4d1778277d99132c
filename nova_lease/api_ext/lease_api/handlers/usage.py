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
"""Handler of ``/usage``: reserved and used hours per project and lease,
for billing. The figures are :mod:`nova_lease.usage`'s; this reads the
leases and their hosts.
"""

import datetime

from nova_lease.api_ext.lease_api import common
from nova_lease.api_ext.lease_api import views
from nova_lease.db import api as db_api
from nova_lease import params as lease_params
from nova_lease.plugins.host import allocation as host_allocation
from nova_lease.policies import usage as usage_policies
from nova_lease import policy
from nova_lease import usage

#: The window when the query gives no start.
DEFAULT_DAYS = 30


def _window(req, now):
    end = req.GET.get('end')
    end = now if end in (None, '') else lease_params.parse_datetime(
        end, 'end')
    start = req.GET.get('start')
    start = (end - datetime.timedelta(days=DEFAULT_DAYS)
             if start in (None, '') else
             lease_params.parse_datetime(start, 'start'))
    if end <= start:
        raise lease_params.LeaseParamError(
            'end', 'order', "'end' (%s) must be after 'start' (%s)" % (
                lease_params.format_short(end),
                lease_params.format_short(start)))
    return start, end


def get_usage(req, ctx):
    """GET /usage[?start=&end=&project_id=]: see doc/source/user/api.rst."""
    now = common.now()
    start, end = _window(req, now)
    project = req.GET.get('project_id') or None
    if project is None:
        if policy.authorize(ctx, usage_policies.GET_ALL,
                            {'project_id': '*'}, fatal=False):
            project = None
        else:
            project = ctx.project_id
            policy.authorize(ctx, usage_policies.GET,
                             {'project_id': project})
    else:
        policy.authorize(ctx, usage_policies.GET, {'project_id': project})
    db = common.db()
    leases = db_api.lease_list(db, project_id=project, start=start, end=end)
    host_allocation.attach_hosts(db, leases)
    projects = usage.usage(leases, start, end, now)
    return 200, views.format_usage(projects, start, end, now)
