"""workload report delays: the samples and the using and delay percentages of each report row's class queue

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27 21:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0010'
down_revision: str | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The states' percentages, in the samples' order (served, each delay cause, waiting with none).
PERCENTAGES = (
    'using_pct',
    'delay_environment_state_pct',
    'delay_redelivery_pct',
    'delay_group_cap_pct',
    'delay_no_server_pct',
    'delay_servers_starting_pct',
    'delay_busy_higher_pct',
    'delay_busy_lower_pct',
    'unknown_pct',
)


def upgrade() -> None:
    with op.batch_alter_table('workload_reports', schema=None) as batch_op:
        batch_op.add_column(sa.Column('delay_samples', sa.Integer(), nullable=True))
        for name in PERCENTAGES:
            batch_op.add_column(sa.Column(name, sa.Double(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('workload_reports', schema=None) as batch_op:
        for name in reversed(PERCENTAGES):
            batch_op.drop_column(name)
        batch_op.drop_column('delay_samples')
