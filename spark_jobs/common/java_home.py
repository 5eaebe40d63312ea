"""The Java the driver's JVM runs on: the one configured (WLM_SPARK_JAVA_HOME), else JAVA_HOME, else the newest
Java that Spark supports among the machine's installed JDKs (/usr/lib/jvm) and the `java` on the PATH.

The newest is chosen because the report runs faster on it: on a 2-core machine, the 10 million record report took
2.4 s less on average (26.6 → 24.2 s) on Java 25 with its ahead-of-time cache (class_archive.py) than on Java 17
with a class-data archive, faster in 11 of 12 interleaved pairs (docs/benchmarks.md, session 18)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

# Spark 4 runs on Java 17, 21 and 25 (its documentation); another major version is never chosen on its own.
SUPPORTED_JAVA_MAJORS = frozenset({17, 21, 25})
JDK_INSTALL_DIR = Path("/usr/lib/jvm")
_RELEASE_VERSION = re.compile(r'^JAVA_VERSION="((\d+)[^"]*)"', re.MULTILINE)


def _release_version(home: Path) -> re.Match[str] | None:
    try:
        return _RELEASE_VERSION.search((home / "release").read_text(errors="replace"))
    except OSError:
        return None


def java_version(home: Path) -> str | None:
    """The version a Java home declares in its `release` file ("25.0.2"; None if it declares none)."""
    match = _release_version(home)
    return match.group(1) if match else None


def java_major(home: Path) -> int | None:
    match = _release_version(home)
    return int(match.group(2)) if match else None


def newest_supported(homes: Iterable[Path]) -> Path | None:
    """The home of the newest supported Java among `homes` that has a `bin/java`; on a tie, the first given."""
    best: tuple[int, Path] | None = None
    for home in homes:
        major = java_major(home)
        if major in SUPPORTED_JAVA_MAJORS and (home / "bin" / "java").is_file() and (best is None or major > best[0]):
            best = (major, home)
    return best[1] if best else None


def java_home_on_path() -> Path | None:
    java = shutil.which("java")
    return Path(java).resolve().parent.parent if java else None


def _installed_homes() -> list[Path]:
    """The home of the `java` on the PATH first (it wins a tie), then the machine's installed JDKs, each once."""
    homes = [home] if (home := java_home_on_path()) else []
    if JDK_INSTALL_DIR.is_dir():
        homes.extend(sorted(path.resolve() for path in JDK_INSTALL_DIR.iterdir() if path.is_dir()))
    return list(dict.fromkeys(homes))


def choose_java_home(configured: Path | None, environment: Mapping[str, str]) -> Path | None:
    """The Java home the driver should run on; None leaves Spark to find `java` on the PATH."""
    if configured is not None:
        return configured
    if home := environment.get("JAVA_HOME"):
        return Path(home)
    return newest_supported(_installed_homes())


def use_java_home(configured: Path | None) -> Path | None:
    """Point JAVA_HOME at the chosen Java for the driver's JVM this process is about to start, and return it.
    PySpark starts that JVM with this process's environment, which leaves JAVA_HOME as the one way to choose.
    Calling it again chooses the same home."""
    home = choose_java_home(configured, os.environ)
    if home is not None:
        os.environ["JAVA_HOME"] = str(home)
    return home
