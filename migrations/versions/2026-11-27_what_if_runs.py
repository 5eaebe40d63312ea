"""what-if runs: a recorded day replayed under a candidate policy, queued and run one at a time, with its result

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27 20:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0009'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'what_if_runs',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('run_date', sa.Date(), nullable=False),
        sa.Column('application_environment', sa.String(length=32), nullable=True),
        sa.Column('seed', sa.Integer(), nullable=False),
        sa.Column('candidate', sa.JSON(), nullable=False),
        sa.Column('requested_by', sa.String(length=64), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('progress', sa.String(length=500), nullable=True),
        sa.Column('host', sa.String(length=255), nullable=True),
        sa.Column('claimed_by', sa.Integer(), nullable=True),
        sa.Column('pid', sa.Integer(), nullable=True),
        sa.Column('result', sa.JSON(), nullable=True),
        sa.Column('error', sa.String(length=2000), nullable=True),
        sa.CheckConstraint(
            "state IN ('queued', 'running', 'done', 'failed', 'cancelled')", name=op.f('ck_what_if_runs_state')
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_what_if_runs')),
    )
    op.create_index(op.f('ix_what_if_runs_state_id'), 'what_if_runs', ['state', 'id'], unique=False)
    op.create_index(
        'uq_what_if_runs_one_running',
        'what_if_runs',
        ['state'],
        unique=True,
        sqlite_where=sa.text("state = 'running'"),
        postgresql_where=sa.text("state = 'running'"),
    )


def downgrade() -> None:
    op.drop_index('uq_what_if_runs_one_running', table_name='what_if_runs')
    op.drop_index(op.f('ix_what_if_runs_state_id'), table_name='what_if_runs')
    op.drop_table('what_if_runs')
