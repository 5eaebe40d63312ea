"""Imports every ORM model so the metadata is complete (Alembic, and relationships by name)."""


def import_all_models() -> None:
    from app.audit import models as _audit  # noqa: F401
    from app.auth import models as _auth  # noqa: F401
    from app.connections import models as _connections  # noqa: F401
    from app.operator import models as _operator  # noqa: F401
    from app.policy import models as _policy  # noqa: F401
    from app.reports import models as _reports  # noqa: F401
    from app.routing import models as _routing  # noqa: F401
    from app.shared import generation as _generation  # noqa: F401
    from app.sweeper import models as _sweeper  # noqa: F401
    from app.what_if import models as _what_if  # noqa: F401
