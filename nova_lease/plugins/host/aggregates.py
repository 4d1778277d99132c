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
"""The Nova aggregates of host reservations, and the free pool.

At a host lease's start the host plugin (:mod:`.plugin`) creates the
reservation's aggregate (named after the reservation, as in Blazar, with
the metadata LeaseFilter reads) and moves the hosts into it from the
free pool; at its end it moves them back and deletes the aggregate.
These are the steps, every change through the engine's action gate.
"""

from oslo_log import log as logging

from nova_lease import compute
from nova_lease import wire

LOG = logging.getLogger(__name__)

#: Metadata of a reservation's aggregate: the reservation, its lease and
#: the lease's project (LeaseFilter and the auditor read them).
META_RESERVATION = wire.AGGREGATE_RESERVATION_ID
META_LEASE = wire.AGGREGATE_LEASE_ID
META_PROJECT = wire.AGGREGATE_PROJECT_ID


def aggregate_name(reservation_id):
    """The name of the Nova aggregate of a host reservation.

    Its id, as in Blazar (whose clients and tests look it up by it).
    """
    return reservation_id


def by_name(client):
    """{name: aggregate} of every aggregate Nova has."""
    return {a['name']: a for a in client.list_aggregates()}


def own(aggregates, reservation):
    """The reservation's aggregate: by its name, else by its metadata
    (one created before aggregates were named after the reservation
    id was named ``reservation-<id>``).
    """
    found = aggregates.get(aggregate_name(reservation['id']))
    if found is not None:
        return found
    for aggregate in aggregates.values():
        metadata = aggregate.get('metadata') or {}
        if metadata.get(META_RESERVATION) == reservation['id']:
            return aggregate
    return None


def ensure(gate, client, aggregates, lease, reservation):
    """The reservation's aggregate, created if missing, with its
    metadata (:data:`META_RESERVATION`, :data:`META_LEASE`,
    :data:`META_PROJECT`).
    """
    name = aggregate_name(reservation['id'])
    aggregate = own(aggregates, reservation)
    if aggregate is None:
        LOG.info('Creating aggregate %(name)s for lease %(lease)s',
                 {'name': name, 'lease': lease['id']})
        try:
            aggregate = gate.create_aggregate(
                name, why='the reservation\'s aggregate')
        except compute.ComputeConflict:
            aggregate = by_name(client)[name]
    metadata = {META_RESERVATION: reservation['id'],
                META_LEASE: lease['id'],
                META_PROJECT: lease['project_id']}
    current = aggregate.get('metadata') or {}
    if any(current.get(k) != v for k, v in metadata.items()):
        aggregate = gate.set_aggregate_metadata(
            aggregate['id'], metadata, aggregate=aggregate,
            why='the reservation\'s aggregate')
    return aggregate


def add_host(gate, aggregate, host, name):
    """``aggregate`` with ``host`` in it (added if missing)."""
    if host in (aggregate.get('hosts') or []):
        return aggregate
    LOG.info('Adding host %(host)s to %(name)s',
             {'host': host, 'name': name})
    try:
        return gate.add_aggregate_host(aggregate['id'], host,
                                       aggregate=aggregate,
                                       why='into %s' % name)
    except compute.ComputeConflict:
        LOG.info('Host %s is already in %s', host, name)
        return aggregate


def delete(gate, aggregate, lease, name):
    """Empty the reservation's aggregate and delete it."""
    # A host not ours (added by hand) would keep the aggregate.
    for host in aggregate.get('hosts') or []:
        try:
            gate.remove_aggregate_host(aggregate['id'], host,
                                       aggregate=aggregate,
                                       why='emptying %s' % name)
        except compute.ComputeNotFound:
            pass
    LOG.info('Deleting aggregate %(name)s of lease %(lease)s',
             {'name': name, 'lease': lease['id']})
    gate.delete_aggregate(aggregate['id'], aggregate=aggregate,
                          why='the lease ends')


def freepool(gate, client, name, aggregates, create=False):
    """The free pool aggregate ``name`` (created if missing when
    ``create``), or None.
    """
    pool = aggregates.get(name)
    if pool is None and create:
        try:
            pool = gate.create_aggregate(name, why='the free pool')
        except compute.ComputeConflict:
            pool = by_name(client).get(name)
    return pool
