"""server instances

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22 14:12:52.146332
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('connections', schema=None) as batch_op:
        batch_op.add_column(sa.Column('instance', sa.String(length=64), nullable=True))
        batch_op.create_index(batch_op.f('ix_connections_instance'), ['instance'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('connections', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_connections_instance'))
        batch_op.drop_column('instance')

