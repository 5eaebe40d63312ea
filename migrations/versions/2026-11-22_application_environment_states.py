"""application environment states

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 03:56:49.700326
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('application_environment_states',
    sa.Column('name', sa.String(length=32), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('changed_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('changed_by', sa.String(length=64), nullable=False),
    sa.Column('reason', sa.String(length=256), nullable=False),
    sa.Column('refreshed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.CheckConstraint("state IN ('AVAILABLE', 'QUIESCING', 'QUIESCED', 'RESUMING', 'REFRESHING', 'STOPPED', 'DELETING')", name=op.f('ck_application_environment_states_state')),
    sa.CheckConstraint('name = upper(name)', name=op.f('ck_application_environment_states_name_upper_case')),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_application_environment_states'))
    )


def downgrade() -> None:
    op.drop_table('application_environment_states')
