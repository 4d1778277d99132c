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
"""Climate's lease types, as a lease records them. Pure: no I/O.

* ``immediate``: starts now, provisioned now or not at all: what cannot
  be provided at creation is a 409 (host leases: the hosts; instance
  leases made with boot hints: admission control over ``[now, end)``,
  whose capacity is then promised as a future lease's is), and a start
  that fails is not retried: the lease goes to ERROR with the reason.
* ``retries``: a start that fails is retried up to ``retries`` times (the
  lease's, else ``[nova_lease] max_retries``; at most ``[nova_lease_api]
  max_lease_retries``) with back-off; each attempt is counted in the
  event (``attempts``, ``last_error``, ``next_attempt_at``).
* ``scheduled``: as every lease was before types: any start; a failed
  start is retried as ``retries`` says, else ``max_retries``.
* ``best_effort`` (host reservations of the lease API, starting now):
  when the free reservable hosts are not enough, ordinary compute hosts
  whose servers belong to no lease are taken and their servers migrated
  away (nova_lease.hunt, nova_lease.api_ext.best_effort); the lease is
  ``IN_PROGRESS`` until they are empty, then ``ACTIVE``, or ``TIMEDOUT``
  after ``[nova_lease_engine] best_effort_timeout`` with every host
  released. A hunt that cannot succeed (the rest of the cloud cannot take the
  servers) is a 409 at creation.

The type is chosen per lease (the lease API's ``lease_type``,
``lease_params``' ``type``), else ``[nova_lease_api] default_lease_type``.
"""

from nova_lease import params as lease_params

IMMEDIATE = 'immediate'
RETRIES = 'retries'
SCHEDULED = 'scheduled'
BEST_EFFORT = 'best_effort'


def effective(params, conf, field='retries'):
    """``(lease_type, retries)`` to record for ``params``.

    :param conf: the ConfigOpts: ``[nova_lease_api] default_lease_type``
        (an ``immediate`` default does not apply to a lease that starts
        later: it is then ``scheduled``), ``[nova_lease] max_retries``
        (the default retries) and ``[nova_lease_api] max_lease_retries``
        (the most a lease may ask for).
    :raises LeaseParamError: (400) a ``retries`` lease asks for more.
    """
    opts = conf.nova_lease_api
    kind = params.lease_type or opts.default_lease_type
    if kind == IMMEDIATE and not params.start_now:
        kind = SCHEDULED
    retries = params.retries
    if kind in (IMMEDIATE, BEST_EFFORT):
        # (A hunt is retried until best_effort_timeout instead.)
        retries = 0
    elif kind == RETRIES:
        if retries is None:
            retries = conf.nova_lease.max_retries
        if retries > opts.max_lease_retries:
            raise lease_params.LeaseParamError(
                field, 'range', "'%s' (%d): a lease is retried at most %d "
                "times ([nova_lease_api] max_lease_retries)" % (
                    field, retries, opts.max_lease_retries))
    return kind, retries
