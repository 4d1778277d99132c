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
"""database_identity and processes: which processes share this database.

Revision ID: c7a3e5d91b20
Revises: c4a8e1f2d3b6
Create Date: 2026-11-23 21:00:00
"""

import datetime
import uuid

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

# revision identifiers, used by Alembic.
revision = 'c7a3e5d91b20'
down_revision = 'c4a8e1f2d3b6'
branch_labels = None
depends_on = None

# A migration never imports the models: they move on, it must not.
DateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql')
BigInteger = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')
MYSQL_TABLE_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


def upgrade():
    identity = op.create_table(
        'database_identity',
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('created_at', DateTime, nullable=False),
        **MYSQL_TABLE_ARGS)
    # The identity is made here, once per database: every process that
    # uses the database logs it at start.
    op.bulk_insert(identity, [{
        'id': str(uuid.uuid4()),
        'created_at': datetime.datetime.now(
            datetime.timezone.utc).replace(tzinfo=None)}])
    op.create_table(
        'processes',
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('binary', sa.String(64), nullable=False),
        sa.Column('name', sa.String(255), nullable=True),
        sa.Column('host', sa.String(255), nullable=False),
        sa.Column('pid', sa.Integer, nullable=False),
        sa.Column('started_at', DateTime, nullable=False),
        sa.Column('heartbeat_at', DateTime, nullable=False),
        sa.Column('heartbeats', BigInteger, nullable=False),
        sa.Column('stopped_at', DateTime, nullable=True),
        sa.Column('stop_reason', sa.Text, nullable=True),
        **MYSQL_TABLE_ARGS)
    op.create_index('ix_processes_binary_stopped_at', 'processes',
                    ['binary', 'stopped_at'])
