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
"""allocations.span_class and the indexes of admission's windowed reads.

``span_class`` is computed by the database from each allocation's dates
(a generated column: the smallest k with length <= 2**k hours); with it,
"the allocations overlapping [start, end)" is a few index range scans
that never reach allocations far from the window. The reservations index
finds the instance reservations linked to a server among the live
statuses.

Revision ID: c4a8e1f2d3b6
Revises: 4e7a2c9b1d36
Create Date: 2026-11-23 21:00:00
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.ext import compiler
from sqlalchemy.sql import expression

# revision identifiers, used by Alembic.
revision = 'c4a8e1f2d3b6'
down_revision = '4e7a2c9b1d36'
branch_labels = None
depends_on = None

# A migration never imports the models: they move on, it must not.
SPAN_CLASSES = 17


class _Seconds(expression.ColumnElement):
    inherit_cache = True
    type = sa.BigInteger()

    def __init__(self, start, end):
        self.start = start
        self.end = end


@compiler.compiles(_Seconds)
def _seconds_sqlite(element, comp, **kw):
    return ('CAST((julianday(%s) - julianday(%s)) * 86400 AS INTEGER)' % (
        comp.process(element.end, **kw), comp.process(element.start, **kw)))


@compiler.compiles(_Seconds, 'mysql')
def _seconds_mysql(element, comp, **kw):
    return 'TIMESTAMPDIFF(SECOND, %s, %s)' % (
        comp.process(element.start, **kw), comp.process(element.end, **kw))


@compiler.compiles(_Seconds, 'postgresql')
def _seconds_postgresql(element, comp, **kw):
    return 'CAST(EXTRACT(EPOCH FROM (%s - %s)) AS BIGINT)' % (
        comp.process(element.end, **kw), comp.process(element.start, **kw))


def _span_class():
    seconds = _Seconds(sa.column('start_date'), sa.column('end_date'))
    return sa.case(*[(seconds <= 3600 * 2 ** k, k)
                     for k in range(SPAN_CLASSES)], else_=SPAN_CLASSES)


def upgrade():
    # (SQLite adds a generated column only as VIRTUAL, which it indexes;
    # MySQL/MariaDB too; PostgreSQL only has STORED ones.)
    op.add_column('allocations', sa.Column(
        'span_class', sa.SmallInteger, sa.Computed(_span_class()),
        nullable=True))
    # Covering: a window's allocations are read from the index alone.
    op.create_index('ix_allocations_span_class_covering', 'allocations',
                    ['span_class', 'start_date', 'end_date', 'host',
                     'reservation_id', 'vcpus', 'memory_mb', 'disk_gb',
                     'whole_host'])
    op.create_index('ix_allocations_host_span_class_start_date',
                    'allocations', ['host', 'span_class', 'start_date'])
    op.create_index('ix_reservations_status_resource_id', 'reservations',
                    ['status', 'resource_id'])
