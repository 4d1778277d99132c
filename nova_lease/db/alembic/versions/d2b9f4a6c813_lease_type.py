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
"""leases.lease_type: immediate, retries or scheduled (Climate's types).

Revision ID: d2b9f4a6c813
Revises: c7a3e5d91b20
Create Date: 2026-11-26 16:30:00
"""

from alembic import op
import sqlalchemy as sa

# revision identifiers, used by Alembic.
revision = 'd2b9f4a6c813'
down_revision = 'c7a3e5d91b20'
branch_labels = None
depends_on = None


def upgrade():
    # NULL: a lease recorded before the column, which behaves as
    # "scheduled" (what every lease was).
    op.add_column('leases', sa.Column('lease_type', sa.String(16),
                                      nullable=True))
