"""settings generation

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28 10:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0011'
down_revision: str | None = '0010'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'settings_generation',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('value', sa.BigInteger(), nullable=False),
        sa.CheckConstraint('id = 1', name=op.f('ck_settings_generation_one_row')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_settings_generation')),
    )


def downgrade() -> None:
    op.drop_table('settings_generation')
