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
"""The action journal of the engine's gate (engine_actions), and the
side-database links the gate reads to decide what belongs to a lease
(see nova_lease.gate).
"""

from oslo_utils import timeutils
import sqlalchemy as sa

from nova_lease.db import common
from nova_lease.db import models
from nova_lease.db import transaction

ENGINE_ACTIONS = models.ENGINE_ACTIONS
RESERVATIONS = models.RESERVATIONS
LEASES = models.LEASES

#: Longest reason kept (the rest is cut).
REASON_LEN = 2000


@transaction.retry_on_deadlock
def action_record(db, values):
    """Journal one action of the engine; returns the row (with its id).

    ``values``: ``target_kind``, ``target_id``, ``action``, ``outcome``
    and optionally ``lease_id``, ``reservation_id``, ``project_id``,
    ``target_project_id``, ``target_host``, ``reason``, ``engine``.
    """
    row = common.clean(ENGINE_ACTIONS, 'engine action', values)
    row.setdefault('created_at', common.naive_utc(timeutils.utcnow()))
    if row.get('reason'):
        row['reason'] = row['reason'][:REASON_LEN]
    with transaction.writing(db) as session:
        result = session.execute(sa.insert(ENGINE_ACTIONS).values(**row))
        row['id'] = result.inserted_primary_key[0]
    return row


@transaction.retry_on_deadlock
def action_update(db, action_id, outcome):
    """Set the outcome of a journaled action."""
    with transaction.writing(db) as session:
        session.execute(sa.update(ENGINE_ACTIONS)
                        .where(ENGINE_ACTIONS.c.id == action_id)
                        .values(outcome=outcome))


def action_list(db, lease_id=None, target_id=None, action=None,
                outcome=None):
    """Journal rows (oldest first), filtered by any of the arguments."""
    stmt = sa.select(ENGINE_ACTIONS).order_by(ENGINE_ACTIONS.c.id)
    for column, value in (('lease_id', lease_id),
                          ('target_id', target_id), ('action', action),
                          ('outcome', outcome)):
        if value is not None:
            stmt = stmt.where(ENGINE_ACTIONS.c[column] == value)
    with transaction.reading(db) as session:
        return [dict(row._mapping) for row in session.execute(stmt)]


def server_links(db, server_id):
    """The reservations (not deleted) linked to the server in the side
    database: ``[{'reservation_id', 'lease_id', 'project_id',
    'lease_status', 'end_date'}]`` -- never Nova's server metadata,
    which the server's owner can write.
    """
    stmt = (sa.select(RESERVATIONS.c.id, LEASES.c.id, LEASES.c.project_id,
                      LEASES.c.status, LEASES.c.end_date)
            .select_from(RESERVATIONS.join(LEASES))
            .where(RESERVATIONS.c.resource_id == server_id,
                   RESERVATIONS.c.status != 'deleted'))
    with transaction.reading(db) as session:
        return [{'reservation_id': r[0], 'lease_id': r[1],
                 'project_id': r[2], 'lease_status': r[3],
                 'end_date': r[4]} for r in session.execute(stmt)]
