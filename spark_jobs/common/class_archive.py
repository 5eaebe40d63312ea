"""A class-data archive of the driver JVM: the JVM maps the classes of Spark, Hadoop and Parquet from one file
instead of loading and verifying thousands of classes from the jars. On a 2-core machine it took the session's start
from about 8 s to 5 s, and opening the day's records from 2 s to 1 s. On Java 25 and later the archive is an
ahead-of-time cache (JEP 483/514/515), which also holds the classes linked and the methods' profiles of the run that
wrote it, so the JIT compiles sooner: the report took 2.4 s less on average than on Java 17 (java_home.py), where
Java 25 with a class-data archive gained nothing that could be seen (three pairs against Java 17).

The first run that reads records writes the archive when its JVM exits (`-XX:ArchiveClassesAtExit`, or
`-XX:AOTCacheOutput`; that run took 17 to 40 s longer there), to a file of its own (host, process and a random part
in its name, as replicas may share the data directory) that is renamed into place only once that JVM has exited
cleanly, so a run never maps a file another run is still writing. Every later run maps it (`-XX:SharedArchiveFile`,
or `-XX:AOTCache`) and marks it used (its modification time). The archive belongs to one JDK and one set of jars:
its name is a digest of both, so an upgrade of either makes a new one, and the JVM itself checks what it maps (a
mismatch only costs the speed-up, never the run). Publishing removes the archives no run has used for a week: an
upgrade's old one goes, while two JDKs taking turns on one data directory (a nightly run on the newest Java, a rerun
from a shell whose JAVA_HOME names another) each keep theirs instead of rewriting it at every turn.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyspark

from spark_jobs.common.java_home import java_major

ARCHIVE_PREFIX = "spark-classes-"
PARTIAL_SUFFIX = ".partial"
# The first Java whose JVM writes an ahead-of-time cache in one run (JEP 514).
AHEAD_OF_TIME_CACHE_SINCE = 25
# A partial file this old belongs to a run that died before its JVM finished writing (writing takes a minute).
STALE_PARTIAL_SECONDS = 3600
# An archive no run has mapped for this long belongs to a JDK or jars no longer used (an archive is ~100–200 MB).
UNUSED_ARCHIVE_SECONDS = 7 * 86_400


def _uses_aot_cache(java_home: Path | None) -> bool:
    """Whether the JVM of `java_home` writes an ahead-of-time cache (None, a Java not found: no)."""
    major = java_major(java_home) if java_home else None
    return major is not None and major >= AHEAD_OF_TIME_CACHE_SINCE


def archive_name(java_home: Path | None) -> str:
    """`spark-classes-<digest>.jsa` (`.aot` for an ahead-of-time cache), the digest of the JDK's path and release
    file and of the jars PySpark puts on the classpath."""
    digest = hashlib.sha256(pyspark.__version__.encode())
    # One JDK under two names (a link to it, or its real path) is one archive.
    java_home = java_home.resolve() if java_home else None
    digest.update(str(java_home).encode())
    if java_home is not None:
        try:
            digest.update((java_home / "release").read_bytes())
        except OSError:
            pass  # a Java without a release file (or not readable): its path alone names it
    for jar in sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar")):
        digest.update(jar.name.encode())
    return f"{ARCHIVE_PREFIX}{digest.hexdigest()[:16]}.{'aot' if _uses_aot_cache(java_home) else 'jsa'}"


def _jvm_configuration(partial: Path) -> Path:
    """What the JVM writing an ahead-of-time cache keeps beside it while it runs."""
    return partial.with_name(f"{partial.name}.config")


def _remove_unchanged_for(paths: Iterable[Path], seconds: float) -> None:
    for path in paths:
        try:
            if time.time() - path.stat().st_mtime > seconds:
                path.unlink()
        except FileNotFoundError:
            pass  # another run's, just published or removed


def _remove_stale_partials(directory: Path) -> None:
    """Remove what runs that died before their JVM finished writing left behind (and the JVM's configuration)."""
    _remove_unchanged_for(directory.glob(f"*{PARTIAL_SUFFIX}*"), STALE_PARTIAL_SECONDS)


def _quoted(option: str) -> str:
    # Spark splits extraJavaOptions at spaces, except inside quotes: a data directory may have spaces in its path.
    return f'"{option}"'


@dataclass(frozen=True, slots=True)
class ClassArchive:
    """The archive under `directory` for this JDK and these jars, as this process uses it."""

    path: Path
    # Where this process's JVM writes a new archive at its exit; None when the archive exists and is mapped.
    partial: Path | None

    @property
    def ahead_of_time(self) -> bool:
        """An ahead-of-time cache (Java 25+: `archive_name` tells it by its suffix), else a class-data archive."""
        return self.path.suffix == ".aot"

    @classmethod
    def for_directory(cls, directory: Path, java_home: Path | None) -> ClassArchive:
        """The archive of the JVM of `java_home` (None: a Java whose home is not known)."""
        directory.mkdir(parents=True, exist_ok=True)
        _remove_stale_partials(directory)
        path = directory / archive_name(java_home)
        try:
            os.utime(path)  # used now: see publish
            return cls(path, None)
        except FileNotFoundError:
            pass
        writer = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        return cls(path, directory / f"{path.name}.{writer}{PARTIAL_SUFFIX}")

    def java_options(self) -> list[str]:
        if self.ahead_of_time:
            if self.partial is None:
                return [_quoted(f"-XX:AOTCache={self.path}")]
            # Warnings of classes the cache cannot hold are noise, as for the archive below.
            return [_quoted(f"-XX:AOTCacheOutput={self.partial}"), "-Xlog:aot=error,cds=error"]
        if self.partial is None:
            return [_quoted(f"-XX:SharedArchiveFile={self.path}")]
        # Writing the archive warns of every class it cannot hold (generated ones, old class files): noise.
        return [_quoted(f"-XX:ArchiveClassesAtExit={self.partial}"), "-Xlog:cds=error,cds+dynamic=error"]

    def publish(self, jvm_exit_code: int | None) -> bool:
        """After the JVM has exited: put a newly written archive in place if that JVM exited cleanly (else drop
        it), and remove the archives of other JDKs or jars that no run has used for UNUSED_ARCHIVE_SECONDS. True
        when this run published one."""
        if self.partial is None:
            return False
        _jvm_configuration(self.partial).unlink(missing_ok=True)
        if not self.partial.is_file():
            return False
        if jvm_exit_code != 0:
            self.partial.unlink(missing_ok=True)
            return False
        os.replace(self.partial, self.path)
        others = (path for path in self.path.parent.glob(f"{ARCHIVE_PREFIX}*") if path != self.path and PARTIAL_SUFFIX not in path.name)
        _remove_unchanged_for(others, UNUSED_ARCHIVE_SECONDS)
        return True
