"""workload reports

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 13:59:42.706304
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('workload_reports',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('report_date', sa.Date(), nullable=False),
    sa.Column('interval_start', sa.DateTime(timezone=True), nullable=False),
    sa.Column('interval_minutes', sa.Integer(), nullable=False),
    sa.Column('application_environment', sa.String(length=32), nullable=False),
    sa.Column('node', sa.String(length=32), nullable=False),
    sa.Column('service_class', sa.String(length=32), nullable=False),
    sa.Column('period', sa.Integer(), nullable=False),
    sa.Column('report_class', sa.String(length=32), nullable=False),
    sa.Column('policy_version', sa.Integer(), nullable=False),
    sa.Column('goal_type', sa.String(length=16), nullable=False),
    sa.Column('goal_ms', sa.Integer(), nullable=True),
    sa.Column('goal_percentile', sa.Integer(), nullable=True),
    sa.Column('goal_velocity', sa.Integer(), nullable=True),
    sa.Column('importance', sa.Integer(), nullable=True),
    sa.Column('ended_count', sa.Integer(), nullable=False),
    sa.Column('failed_count', sa.Integer(), nullable=False),
    sa.Column('ended_per_s', sa.Double(), nullable=False),
    sa.Column('deleted_count', sa.Integer(), nullable=False),
    sa.Column('abandoned_count', sa.Integer(), nullable=False),
    sa.Column('response_avg_ms', sa.Double(), nullable=True),
    sa.Column('response_stddev_ms', sa.Double(), nullable=True),
    sa.Column('queue_avg_ms', sa.Double(), nullable=True),
    sa.Column('queue_stddev_ms', sa.Double(), nullable=True),
    sa.Column('execution_avg_ms', sa.Double(), nullable=True),
    sa.Column('execution_stddev_ms', sa.Double(), nullable=True),
    sa.Column('response_p50_ms', sa.Double(), nullable=True),
    sa.Column('response_p90_ms', sa.Double(), nullable=True),
    sa.Column('response_p99_ms', sa.Double(), nullable=True),
    sa.Column('buckets', sa.JSON(), nullable=False),
    sa.Column('execution_velocity', sa.Double(), nullable=True),
    sa.Column('performance_index', sa.Double(), nullable=True),
    sa.Column('goal_met_share', sa.Double(), nullable=True),
    sa.Column('computed_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("goal_type IN ('average', 'percentile', 'velocity', 'discretionary')", name=op.f('ck_workload_reports_goal_type')),
    sa.CheckConstraint('ended_count >= 0', name=op.f('ck_workload_reports_ended_count')),
    sa.CheckConstraint('interval_minutes > 0 AND interval_minutes <= 1440', name=op.f('ck_workload_reports_interval_minutes')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_workload_reports')),
    sa.UniqueConstraint('report_date', 'interval_minutes', 'interval_start', 'application_environment', 'node', 'service_class', 'period', 'report_class', 'policy_version', name='uq_workload_reports_key')
    )
    with op.batch_alter_table('workload_reports', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_workload_reports_report_date_service_class'), ['report_date', 'service_class'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('workload_reports', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_workload_reports_report_date_service_class'))

    op.drop_table('workload_reports')
