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
"""boot_requests: servers created at their lease's start.

Revision ID: 4e7a2c9b1d36
Revises: 9d2f4b7c1e58
Create Date: 2026-11-23 21:00:00
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

# revision identifiers, used by Alembic.
revision = '4e7a2c9b1d36'
down_revision = '9d2f4b7c1e58'
branch_labels = None
depends_on = None

# A migration never imports the models: they move on, it must not.
DateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql')
# Up to 16 MiB on MySQL (Nova's user_data alone may be 64 KiB).
MediumText = sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mysql')
MYSQL_TABLE_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


def upgrade():
    op.create_table(
        'boot_requests',
        sa.Column('reservation_id', sa.String(36),
                  sa.ForeignKey('reservations.id',
                                name='fk_boot_requests_reservation_id',
                                ondelete='CASCADE'),
                  primary_key=True),
        sa.Column('request', MediumText, nullable=False),
        sa.Column('created_at', DateTime, nullable=False),
        **MYSQL_TABLE_ARGS)
