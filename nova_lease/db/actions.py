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
from nova_lease import status

ENGINE_ACTIONS = models.ENGINE_ACTIONS
RESERVATIONS = models.RESERVATIONS
LEASES = models.LEASES

#: Longest reason kept (the rest is cut).
REASON_LEN = 2000
#: The outcome of an action not yet known (nova_lease.gate.PENDING).
PENDING = 'pending'
#: Lease ids per query.
_CHUNK = 500


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
                outcome=None, since=None, through=None, lease_ids=None,
                actions=None):
    """Journal rows (oldest first), filtered by any of the arguments.

    ``since``: only rows whose id is above it (the auditor's cursor);
    ``through``: only rows whose id is at most it; ``lease_ids``: only
    rows of these leases; ``actions``: only these actions.
    """
    stmt = sa.select(ENGINE_ACTIONS).order_by(ENGINE_ACTIONS.c.id)
    for column, value in (('lease_id', lease_id),
                          ('target_id', target_id), ('action', action),
                          ('outcome', outcome)):
        if value is not None:
            stmt = stmt.where(ENGINE_ACTIONS.c[column] == value)
    if since is not None:
        stmt = stmt.where(ENGINE_ACTIONS.c.id > since)
    if through is not None:
        stmt = stmt.where(ENGINE_ACTIONS.c.id <= through)
    if actions is not None:
        stmt = stmt.where(ENGINE_ACTIONS.c.action.in_(sorted(actions)))
    with transaction.reading(db) as session:
        if lease_ids is None:
            return [dict(row._mapping) for row in session.execute(stmt)]
        ids = sorted(set(lease_ids))
        rows = []
        for k in range(0, len(ids), _CHUNK):
            rows.extend(dict(row._mapping) for row in session.execute(
                stmt.where(ENGINE_ACTIONS.c.lease_id.in_(
                    ids[k:k + _CHUNK]))))
        return sorted(rows, key=lambda row: row['id'])


def _purgeable(before):
    """Conditions of the rows a purge may remove: created before
    ``before``, not ``pending``, and of no lease (the idle-host pass) or
    of a lease that is over (``TERMINATED``) or gone. (Which leases'
    rows go as a whole: :func:`action_purge`.)
    """
    live = sa.select(LEASES.c.id).where(
        LEASES.c.status != status.LeaseStatus.TERMINATED)
    return (ENGINE_ACTIONS.c.created_at < before,
            ENGINE_ACTIONS.c.outcome != PENDING,
            sa.or_(ENGINE_ACTIONS.c.lease_id.is_(None),
                   ENGINE_ACTIONS.c.lease_id.not_in(live)))


def action_purge(db, before, batch_size=1000, dry_run=False):
    """Remove journal rows created before ``before``; returns how many
    (with ``dry_run``, how many would go; nothing is removed).

    Never removed: the rows of a lease that is not ``TERMINATED`` (still
    live: the gate, the hunt's recovery and the auditor read them; a
    lease in ``ERROR`` or ``TIMEDOUT`` may still be retried or ended),
    and ``pending`` rows (an action whose outcome is not known: the
    hunt's recovery looks for them). A lease's rows go together: only
    when every one of them is older than ``before`` and none is
    ``pending`` (so the auditor never sees a confirmation without the
    migration it finished). The idle-host pass's rows (no lease) go one
    by one. Rows are removed ``batch_size`` at a time, each batch its own
    transaction (no long lock on a busy journal).
    """
    before = common.naive_utc(before)
    conditions = _purgeable(before)
    pending = sa.case((ENGINE_ACTIONS.c.outcome == PENDING, 1), else_=0)
    over = (sa.select(ENGINE_ACTIONS.c.lease_id)
            .where(ENGINE_ACTIONS.c.lease_id.is_not(None), *conditions[2:])
            .group_by(ENGINE_ACTIONS.c.lease_id)
            .having(sa.func.max(ENGINE_ACTIONS.c.created_at) < before)
            .having(sa.func.sum(pending) == 0))
    with transaction.reading(db) as session:
        lease_ids = sorted(session.execute(over).scalars())
    if dry_run:
        count = sa.select(sa.func.count()).select_from(ENGINE_ACTIONS)
        with transaction.reading(db) as session:
            total = session.execute(count.where(
                ENGINE_ACTIONS.c.lease_id.is_(None),
                *conditions)).scalar()
            for k in range(0, len(lease_ids), _CHUNK):
                total += session.execute(count.where(
                    ENGINE_ACTIONS.c.lease_id.in_(lease_ids[k:k + _CHUNK]),
                    *conditions)).scalar()
        return total
    removed = 0
    selections = [sa.and_(ENGINE_ACTIONS.c.lease_id.is_(None), *conditions)]
    selections.extend(
        sa.and_(ENGINE_ACTIONS.c.lease_id.in_(lease_ids[k:k + _CHUNK]),
                *conditions)
        for k in range(0, len(lease_ids), _CHUNK))
    for selection in selections:
        while True:
            done = _purge_batch(db, selection, batch_size)
            removed += done
            if done < batch_size:
                break
    return removed


@transaction.retry_on_deadlock
def _purge_batch(db, selection, batch_size):
    # The ids first, then the delete by id: MySQL cannot delete from a
    # table with a subquery on that same table.
    with transaction.writing(db) as session:
        ids = list(session.execute(
            sa.select(ENGINE_ACTIONS.c.id).where(selection)
            .order_by(ENGINE_ACTIONS.c.id).limit(batch_size)).scalars())
        if ids:
            session.execute(sa.delete(ENGINE_ACTIONS)
                            .where(ENGINE_ACTIONS.c.id.in_(ids),
                                   selection))
        return len(ids)


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
