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
"""Initial schema: leases, reservations, events, allocations, hosts, locks.

Revision ID: 6f1c1d2b0a9e
Revises:
Create Date: 2026-08-24 00:00:00
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

# revision identifiers, used by Alembic.
revision = '6f1c1d2b0a9e'
down_revision = None
branch_labels = None
depends_on = None

# A migration never imports the models: they move on, it must not.
DateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql')
MYSQL_TABLE_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


def _timestamps():
    return [sa.Column('created_at', DateTime, nullable=False),
            sa.Column('updated_at', DateTime, nullable=True)]


def upgrade():
    op.create_table(
        'leases',
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('name', sa.String(255), nullable=False),
        sa.Column('project_id', sa.String(255), nullable=False),
        sa.Column('user_id', sa.String(255), nullable=True),
        sa.Column('start_date', DateTime, nullable=False),
        sa.Column('end_date', DateTime, nullable=False),
        sa.Column('before_end_date', DateTime, nullable=True),
        sa.Column('status', sa.String(32), nullable=False),
        sa.Column('status_reason', sa.Text, nullable=True),
        sa.Column('on_end', sa.String(32), nullable=True),
        sa.Column('retries', sa.Integer, nullable=True),
        *_timestamps(),
        sa.Index('ix_leases_project_id', 'project_id'),
        sa.Index('ix_leases_status', 'status'),
        **MYSQL_TABLE_ARGS)
    op.create_table(
        'reservations',
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('lease_id', sa.String(36),
                  sa.ForeignKey('leases.id', name='fk_reservations_lease_id',
                                ondelete='CASCADE'),
                  nullable=False),
        sa.Column('resource_type', sa.String(66), nullable=False),
        sa.Column('resource_id', sa.String(255), nullable=True),
        sa.Column('status', sa.String(32), nullable=False),
        sa.Column('properties', sa.Text, nullable=True),
        sa.Column('aggregate_id', sa.Integer, nullable=True),
        *_timestamps(),
        sa.Index('ix_reservations_lease_id', 'lease_id'),
        sa.Index('ix_reservations_resource_id', 'resource_id'),
        **MYSQL_TABLE_ARGS)
    op.create_table(
        'events',
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('lease_id', sa.String(36),
                  sa.ForeignKey('leases.id', name='fk_events_lease_id',
                                ondelete='CASCADE'),
                  nullable=False),
        sa.Column('event_type', sa.String(66), nullable=False),
        sa.Column('time', DateTime, nullable=False),
        sa.Column('status', sa.String(32), nullable=False),
        sa.Column('claimed_by', sa.String(255), nullable=True),
        sa.Column('claimed_at', DateTime, nullable=True),
        sa.Column('attempts', sa.Integer, nullable=False),
        sa.Column('next_attempt_at', DateTime, nullable=True),
        sa.Column('last_error', sa.Text, nullable=True),
        *_timestamps(),
        sa.Index('ix_events_status_time', 'status', 'time'),
        sa.Index('ix_events_lease_id', 'lease_id'),
        **MYSQL_TABLE_ARGS)
    op.create_table(
        'allocations',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('reservation_id', sa.String(36),
                  sa.ForeignKey('reservations.id',
                                name='fk_allocations_reservation_id',
                                ondelete='CASCADE'),
                  nullable=False),
        sa.Column('host', sa.String(255), nullable=False),
        sa.Column('start_date', DateTime, nullable=False),
        sa.Column('end_date', DateTime, nullable=False),
        sa.Column('vcpus', sa.Integer, nullable=False),
        sa.Column('memory_mb', sa.Integer, nullable=False),
        sa.Column('disk_gb', sa.Integer, nullable=False),
        sa.Column('whole_host', sa.Boolean, nullable=False),
        sa.Index('ix_allocations_host_start_date_end_date',
                 'host', 'start_date', 'end_date'),
        sa.Index('ix_allocations_start_date_end_date',
                 'start_date', 'end_date'),
        sa.Index('ix_allocations_reservation_id', 'reservation_id'),
        **MYSQL_TABLE_ARGS)
    op.create_table(
        'hosts',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('hypervisor_hostname', sa.String(255), nullable=False),
        sa.Column('service_host', sa.String(255), nullable=True),
        sa.Column('availability_zone', sa.String(255), nullable=True),
        sa.Column('vcpus', sa.Integer, nullable=False),
        sa.Column('memory_mb', sa.Integer, nullable=False),
        sa.Column('local_gb', sa.Integer, nullable=False),
        sa.Column('cpu_info', sa.Text, nullable=True),
        sa.Column('hypervisor_type', sa.String(255), nullable=True),
        sa.Column('hypervisor_version', sa.Integer, nullable=True),
        sa.Column('reservable', sa.Boolean, nullable=False),
        *_timestamps(),
        sa.UniqueConstraint('hypervisor_hostname',
                            name='uniq_hosts0hypervisor_hostname'),
        **MYSQL_TABLE_ARGS)
    op.create_table(
        'host_capabilities',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('host_id', sa.Integer,
                  sa.ForeignKey('hosts.id',
                                name='fk_host_capabilities_host_id',
                                ondelete='CASCADE'),
                  nullable=False),
        sa.Column('capability_name', sa.String(255), nullable=False),
        sa.Column('capability_value', sa.Text, nullable=True),
        sa.UniqueConstraint('host_id', 'capability_name',
                            name='uniq_host_capabilities0host_id0'
                                 'capability_name'),
        **MYSQL_TABLE_ARGS)
    op.create_table(
        'locks',
        sa.Column('name', sa.String(255), primary_key=True),
        **MYSQL_TABLE_ARGS)
