"""docs/glossary.md: every place it says a term lives exists, so the glossary cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "docs" / "glossary.md"
# Paths the glossary gives from the repository's root; every other one is under app/.
FROM_ROOT = ("spark_jobs/", "docs/")


def places() -> list[str]:
    """The backquoted paths of each table row's last column ("where it lives")."""
    found = []
    for line in GLOSSARY.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 3 or set(cells[-1]) <= {"-", " "} or cells[-1] == "where it lives":
            continue
        found += re.findall(r"`([^`]+)`", cells[-1])
    return found


def test_every_place_a_term_lives_exists() -> None:
    listed = places()
    assert len(listed) > 40  # the tables were read, not skipped
    missing = [p for p in listed if not (ROOT / p if p.startswith(FROM_ROOT) else ROOT / "app" / p).exists()]
    assert missing == []
