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
"""generations: counters of what processes cache (the host registry).

Revision ID: 9d2f4b7c1e58
Revises: 3b7e5c2a9d41
Create Date: 2026-11-23 01:10:00
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

# revision identifiers, used by Alembic.
revision = '9d2f4b7c1e58'
down_revision = '3b7e5c2a9d41'
branch_labels = None
depends_on = None

# A migration never imports the models: they move on, it must not.
DateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql')
BigInteger = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')
MYSQL_TABLE_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


def upgrade():
    # No row yet: the first host_create/update/destroy creates it, and a
    # process that cached the registry before sees it appear.
    op.create_table(
        'generations',
        sa.Column('name', sa.String(64), primary_key=True),
        sa.Column('value', BigInteger, nullable=False),
        sa.Column('updated_at', DateTime, nullable=False),
        **MYSQL_TABLE_ARGS)
