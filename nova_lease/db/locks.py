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
"""Named locks held until the end of a writer's transaction.
"""

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.dialects import postgresql

from nova_lease.db import models
from nova_lease.db import transaction

LOCKS = models.LOCKS


def lock(session, names):
    """Take exclusive named locks until session's transaction ends.

    session must come from Database.writer(). Two writers that lock a
    common name run one after the other; locks are taken in sorted order.
    MySQL/PostgreSQL: rows of the ``locks`` table, locked with SELECT ...
    FOR UPDATE, or created on first use by an upsert that locks the row
    it inserts or finds (DBDeadlock is still possible in corner cases:
    use retry_on_deadlock). SQLite: nothing to do, since the writer
    already holds the database's write lock (BEGIN IMMEDIATE).
    Take locks first in the transaction, before reading what they guard.
    """
    transaction.require_writer(session)
    names = sorted(set(names))
    backend = transaction.connection_of(session).dialect.name
    if not names or backend == 'sqlite':
        return
    found = set(session.execute(
        sa.select(LOCKS.c.name).where(LOCKS.c.name.in_(names))
        .order_by(LOCKS.c.name).with_for_update()).scalars())
    missing = [{'name': name} for name in names if name not in found]
    if not missing:
        return
    # An INSERT IGNORE / ON CONFLICT DO NOTHING would take a shared lock
    # on a row inserted concurrently, and two such writers upgrading to
    # exclusive would deadlock; an upsert takes the exclusive lock at once.
    if backend == 'postgresql':
        stmt = postgresql.insert(LOCKS)
        stmt = stmt.on_conflict_do_update(
            index_elements=[LOCKS.c.name], set_={'name': stmt.excluded.name})
    elif backend == 'mysql':
        stmt = mysql.insert(LOCKS)
        stmt = stmt.on_duplicate_key_update(name=stmt.inserted.name)
    else:
        stmt = sa.insert(LOCKS)
    for row in missing:
        session.execute(stmt, row)


def lock_hosts(session, hostnames):
    """lock() the names 'host:<hypervisor hostname>' (see lock())."""
    lock(session, ['host:%s' % name for name in hostnames])
