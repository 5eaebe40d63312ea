"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22 00:28:14.361898
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('audit_events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('actor', sa.String(length=64), nullable=False),
    sa.Column('action', sa.String(length=64), nullable=False),
    sa.Column('target', sa.String(length=255), nullable=False),
    sa.Column('detail', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_audit_events'))
    )
    with op.batch_alter_table('audit_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_audit_events_at'), ['at'], unique=False)

    op.create_table('policy_versions',
    sa.Column('version', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('name', sa.String(length=32), nullable=False),
    sa.Column('digest', sa.String(length=64), nullable=False),
    sa.Column('definition', sa.JSON(), nullable=False),
    sa.Column('source', sa.Text(), nullable=False),
    sa.Column('installed_by', sa.String(length=64), nullable=False),
    sa.Column('installed_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('version', name=op.f('pk_policy_versions'))
    )
    op.create_table('principals',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('description', sa.String(length=256), nullable=False),
    sa.Column('roles', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_by', sa.String(length=64), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_principals')),
    sa.UniqueConstraint('name', name=op.f('uq_principals_name'))
    )
    op.create_table('api_keys',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('principal_id', sa.Integer(), nullable=False),
    sa.Column('key_hash', sa.String(length=64), nullable=False),
    sa.Column('description', sa.String(length=256), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_by', sa.String(length=64), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['principal_id'], ['principals.id'], name=op.f('fk_api_keys_principal_id_principals'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_keys')),
    sa.UniqueConstraint('key_hash', name=op.f('uq_api_keys_key_hash'))
    )
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_api_keys_principal_id'), ['principal_id'], unique=False)

    op.create_table('connections',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('principal_id', sa.Integer(), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('subsystem_type', sa.String(length=8), nullable=False),
    sa.Column('subsystem_name', sa.String(length=32), nullable=False),
    sa.Column('node', sa.String(length=32), nullable=True),
    sa.Column('application_environment', sa.String(length=32), nullable=True),
    sa.Column('worker_tasks', sa.Integer(), nullable=True),
    sa.Column('worker_weight', sa.Integer(), nullable=True),
    sa.Column('overflow', sa.Boolean(), nullable=False),
    sa.Column('exit_url', sa.String(length=2048), nullable=True),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('connected_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_heartbeat_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('disconnected_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('disconnect_reason', sa.String(length=32), nullable=True),
    sa.CheckConstraint("role = 'server' OR application_environment IS NULL", name=op.f('ck_connections_server_fields')),
    sa.CheckConstraint("role IN ('queue_manager', 'server')", name=op.f('ck_connections_role')),
    sa.CheckConstraint("state IN ('active', 'disconnected')", name=op.f('ck_connections_state')),
    sa.ForeignKeyConstraint(['principal_id'], ['principals.id'], name=op.f('fk_connections_principal_id_principals'), ondelete='RESTRICT'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_connections')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_connections_token_hash'))
    )
    with op.batch_alter_table('connections', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_connections_principal_id'), ['principal_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_connections_role_state'), ['role', 'state'], unique=False)
        batch_op.create_index(batch_op.f('ix_connections_subsystem_type_subsystem_name_state'), ['subsystem_type', 'subsystem_name', 'state'], unique=False)

    op.create_table('server_permits',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('principal_id', sa.Integer(), nullable=False),
    sa.Column('profile', sa.String(length=255), nullable=False),
    sa.ForeignKeyConstraint(['principal_id'], ['principals.id'], name=op.f('fk_server_permits_principal_id_principals'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_server_permits')),
    sa.UniqueConstraint('principal_id', 'profile', name=op.f('uq_server_permits_principal_id_profile'))
    )


def downgrade() -> None:
    op.drop_table('server_permits')
    with op.batch_alter_table('connections', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_connections_subsystem_type_subsystem_name_state'))
        batch_op.drop_index(batch_op.f('ix_connections_role_state'))
        batch_op.drop_index(batch_op.f('ix_connections_principal_id'))

    op.drop_table('connections')
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_keys_principal_id'))

    op.drop_table('api_keys')
    op.drop_table('principals')
    op.drop_table('policy_versions')
    with op.batch_alter_table('audit_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_audit_events_at'))

    op.drop_table('audit_events')
