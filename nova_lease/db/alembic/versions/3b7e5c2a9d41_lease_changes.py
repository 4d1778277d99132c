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
"""lease_changes: the change journal the scheduler's snapshot follows.

Revision ID: 3b7e5c2a9d41
Revises: 6f1c1d2b0a9e
Create Date: 2026-11-22 21:30:00
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

# revision identifiers, used by Alembic.
revision = '3b7e5c2a9d41'
down_revision = '6f1c1d2b0a9e'
branch_labels = None
depends_on = None

# A migration never imports the models: they move on, it must not.
DateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql')
BigInteger = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')
MYSQL_TABLE_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


def upgrade():
    op.create_table(
        'lease_changes',
        sa.Column('id', BigInteger, primary_key=True, autoincrement=True),
        sa.Column('lease_id', sa.String(36), nullable=True),
        sa.Column('reservation_id', sa.String(36), nullable=True),
        sa.Column('created_at', DateTime, nullable=False),
        sa.Index('ix_lease_changes_created_at', 'created_at'),
        **MYSQL_TABLE_ARGS)
