"""dynamic application environments

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 13:59:17.308146
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('dynamic_application_environments',
    sa.Column('name', sa.String(length=32), nullable=False),
    sa.Column('queue_manager_id', sa.Integer(), nullable=False),
    sa.Column('definition', sa.JSON(), nullable=False),
    sa.Column('defined_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint('name = upper(name)', name=op.f('ck_dynamic_application_environments_name_upper_case')),
    sa.ForeignKeyConstraint(['queue_manager_id'], ['connections.id'], name=op.f('fk_dynamic_application_environments_queue_manager_id_connections'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_dynamic_application_environments'))
    )
    with op.batch_alter_table('dynamic_application_environments', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_dynamic_application_environments_queue_manager_id'), ['queue_manager_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('dynamic_application_environments', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_dynamic_application_environments_queue_manager_id'))

    op.drop_table('dynamic_application_environments')
