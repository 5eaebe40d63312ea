"""The Java the driver's JVM runs on: the one configured (WLM_SPARK_JAVA_HOME), else JAVA_HOME, else the newest Java
that Spark supports among the machine's installed JDKs (/usr/lib/jvm) and the `java` on the PATH. The PATH's `java`
(and `update-alternatives`) is not a choice of its own: it wins only a tie; WLM_SPARK_JAVA_HOME pins the choice.

The newest is chosen because the report runs faster on it: on a 2-core machine, the 10 million record report took
2.4 s less on average (26.6 → 24.2 s) on Java 25 with its ahead-of-time cache (class_archive.py) than on Java 17
with a class-data archive, faster in 11 of 12 interleaved pairs (docs/benchmarks.md, session 18).

    python -m spark_jobs.common.java_home    # prints the choice; exit status 1 if there is none (make java)
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

# Spark 4.3 runs on Java 17, 21 and 25 (its documentation); another major version is never chosen on its own.
SUPPORTED_JAVA_MAJORS = frozenset({17, 21, 25})
JDK_INSTALL_DIR = Path("/usr/lib/jvm")
# The service's setting spark_java_home (app/config.py), which `wlm report run` passes to the job.
CONFIGURED_JAVA_HOME_VARIABLE = "WLM_SPARK_JAVA_HOME"
_RELEASE_VERSION = re.compile(r'^JAVA_VERSION="([^"]*)"', re.MULTILINE)


def java_version(home: Path) -> str | None:
    """The version a Java home declares in its `release` file ("25.0.2"; None if it declares none)."""
    try:
        match = _RELEASE_VERSION.search((home / "release").read_text(errors="replace"))
    except OSError:
        return None
    return match.group(1) if match else None


def version_numbers(version: str) -> tuple[int, ...]:
    """ "25.0.2" → (25, 0, 2); "21" → (21,); the leading numbers only ("26-ea" → (26,))."""
    numbers = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(part) for part in numbers.group(0).split(".")) if numbers else ()


def _version_numbers_of(home: Path) -> tuple[int, ...]:
    version = java_version(home)
    return version_numbers(version) if version else ()


def java_major(home: Path) -> int | None:
    numbers = _version_numbers_of(home)
    return numbers[0] if numbers else None


def describe(home: Path) -> str:
    """ "Java 25.0.2 at /usr/lib/jvm/temurin-25": what the job's progress and `make java` print."""
    return f"Java {java_version(home) or '(version unknown)'} at {home}"


def newest_supported(homes: Iterable[Path]) -> Path | None:
    """The home of the newest supported Java among `homes` that has a `bin/java` (by its whole version, so 25.0.3
    before 25.0.2); of equal versions, the first given."""
    best: tuple[tuple[int, ...], Path] | None = None
    for home in homes:
        numbers = _version_numbers_of(home)
        if numbers and numbers[0] in SUPPORTED_JAVA_MAJORS and _is_file(home / "bin" / "java") and (best is None or numbers > best[0]):
            best = (numbers, home)
    return best[1] if best else None


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a directory this user may not read
        return False


def java_home_on_path() -> Path | None:
    java = shutil.which("java")
    return Path(java).resolve().parent.parent if java else None


def _installed_homes() -> list[Path]:
    """The home of the `java` on the PATH first (it wins a tie), then the machine's installed JDKs, each once; what
    this user may not read is passed over."""
    homes = [home] if (home := java_home_on_path()) else []
    try:
        entries = sorted(JDK_INSTALL_DIR.iterdir())
    except OSError:  # no such directory, or not readable
        entries = []
    for entry in entries:
        try:
            homes.append(entry.resolve(strict=True))
        except (OSError, RuntimeError):  # a dangling link, or a loop (RuntimeError before Python 3.13)
            continue
    return list(dict.fromkeys(homes))


def choose_java_home(configured: Path | None, environment: Mapping[str, str]) -> Path | None:
    """The Java home the driver should run on; None leaves Spark to find `java` on the PATH."""
    if configured is not None:
        return configured
    if home := environment.get("JAVA_HOME"):
        return Path(home)
    return newest_supported(_installed_homes())


@contextmanager
def java_home_for_launch(home: Path | None) -> Iterator[None]:
    """JAVA_HOME set to `home` while PySpark starts the driver's JVM, then as it was: PySpark starts that JVM with
    this process's environment, the one way to choose its Java. Left alone where it already names `home` (a job
    sets it before the thread that starts the JVM: session.job_session)."""
    if home is None or os.environ.get("JAVA_HOME") == str(home):
        yield
        return
    before = os.environ.get("JAVA_HOME")
    os.environ["JAVA_HOME"] = str(home)
    try:
        yield
    finally:
        if before is None:
            del os.environ["JAVA_HOME"]
        else:
            os.environ["JAVA_HOME"] = before


def main() -> int:
    configured = os.environ.get(CONFIGURED_JAVA_HOME_VARIABLE)  # set but empty: not configured, as the service reads it
    home = choose_java_home(Path(configured) if configured else None, os.environ)
    if home is None:
        print(f"no Java {'/'.join(map(str, sorted(SUPPORTED_JAVA_MAJORS)))} found", file=sys.stderr)
        return 1
    print(describe(home))
    return 0


if __name__ == "__main__":
    sys.exit(main())
