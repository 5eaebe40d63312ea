"""routing overrides

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 05:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'routing_overrides',
        sa.Column('node', sa.String(length=32), nullable=False),
        sa.Column('application_environment', sa.String(length=32), nullable=False),
        sa.Column('attributes', sa.JSON(), nullable=False),
        sa.Column('changed_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('changed_by', sa.String(length=64), nullable=False),
        sa.CheckConstraint('node = upper(node)', name=op.f('ck_routing_overrides_node_upper_case')),
        sa.PrimaryKeyConstraint('node', 'application_environment', name=op.f('pk_routing_overrides')),
    )


def downgrade() -> None:
    op.drop_table('routing_overrides')
