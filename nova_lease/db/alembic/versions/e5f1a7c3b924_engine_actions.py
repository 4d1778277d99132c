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
"""engine_actions: the journal of the engine's action gate.

Revision ID: e5f1a7c3b924
Revises: d2b9f4a6c813
Create Date: 2026-11-27 20:40:00
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

# revision identifiers, used by Alembic.
revision = 'e5f1a7c3b924'
down_revision = 'd2b9f4a6c813'
branch_labels = None
depends_on = None

# A migration never imports the models: they move on, it must not.
DateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql')
BigInteger = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')
MYSQL_TABLE_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


def upgrade():
    op.create_table(
        'engine_actions',
        sa.Column('id', BigInteger, primary_key=True, autoincrement=True),
        sa.Column('lease_id', sa.String(36), nullable=True),
        sa.Column('reservation_id', sa.String(36), nullable=True),
        sa.Column('project_id', sa.String(255), nullable=True),
        sa.Column('target_kind', sa.String(16), nullable=False),
        sa.Column('target_id', sa.String(255), nullable=False),
        sa.Column('target_project_id', sa.String(255), nullable=True),
        sa.Column('target_host', sa.String(255), nullable=True),
        sa.Column('action', sa.String(64), nullable=False),
        sa.Column('reason', sa.Text, nullable=True),
        sa.Column('outcome', sa.String(16), nullable=False),
        sa.Column('engine', sa.String(255), nullable=True),
        sa.Column('created_at', DateTime, nullable=False),
        **MYSQL_TABLE_ARGS)
    op.create_index('ix_engine_actions_lease_id', 'engine_actions',
                    ['lease_id'])
    op.create_index('ix_engine_actions_target', 'engine_actions',
                    ['target_kind', 'target_id'])
