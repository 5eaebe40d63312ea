"""docs/glossary.md: every place it says a term lives exists, so the glossary cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "docs" / "glossary.md"
# Paths the glossary gives from the repository's root; every other one is under app/.
FROM_ROOT = ("spark_jobs/", "docs/", "sdk/")


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


# A citation of a source document by file ("seed 002", "the seed's rule"): the repository has none of them; they are
# named by the system they describe (docs/sources.md).
CODE = {".py", ".lua", ".js", ".html", ".md"}
SOURCE_CITATION = re.compile(r"\bseeds? \d{3}\b|\bseeds \d{3}/\d{3}\b|\bthe seeds?\b|\bseeds?'s?\b(?= rule| step| algorithm)", re.I)


def test_no_comment_or_doc_cites_a_document_the_repository_does_not_have() -> None:
    texts = [path for part in ("app", "spark_jobs", "tests", "bench", "sdk") for path in (ROOT / part).rglob("*") if path.suffix in CODE]
    texts = [path for path in texts if path != Path(__file__).resolve()]  # the examples above
    texts += [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    cited = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in texts
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if SOURCE_CITATION.search(line)
    ]
    assert cited == []
    assert (ROOT / "docs" / "sources.md").exists()
