"""`python -m app.cli`: the `wlm` command."""

from __future__ import annotations

import sys

from app.cli import main

sys.exit(main())
