"""swept queues: the slow queue sweeper's blobs and where each swept request is

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23 09:38:37
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0008'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BLOB_ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade() -> None:
    op.create_table(
        'swept_blobs',
        sa.Column('id', BLOB_ID, autoincrement=True, nullable=False),
        sa.Column('node', sa.String(length=32), nullable=False),
        sa.Column('application_environment', sa.String(length=32), nullable=False),
        sa.Column('queue', sa.String(length=64), nullable=False),
        sa.Column('requests', sa.Integer(), nullable=False),
        sa.Column('data', sa.LargeBinary(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_swept_blobs')),
    )
    op.create_index(op.f('ix_swept_blobs_node_application_environment_queue'), 'swept_blobs', ['node', 'application_environment', 'queue'])
    op.create_table(
        'swept_requests',
        sa.Column('node', sa.String(length=32), nullable=False),
        sa.Column('application_environment', sa.String(length=32), nullable=False),
        sa.Column('request_id', sa.String(length=32), nullable=False),
        sa.Column('queue_manager', sa.Integer(), nullable=False),
        sa.Column('blob_id', BLOB_ID, nullable=False),
        sa.ForeignKeyConstraint(['blob_id'], ['swept_blobs.id'], name=op.f('fk_swept_requests_blob_id_swept_blobs'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('node', 'application_environment', 'request_id', name=op.f('pk_swept_requests')),
    )
    op.create_index(op.f('ix_swept_requests_blob_id'), 'swept_requests', ['blob_id'])
    op.create_index(
        op.f('ix_swept_requests_node_application_environment_queue_manager'),
        'swept_requests',
        ['node', 'application_environment', 'queue_manager'],
    )


def downgrade() -> None:
    op.drop_table('swept_requests')
    op.drop_table('swept_blobs')
