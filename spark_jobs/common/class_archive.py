"""A class-data archive of the driver JVM (application class-data sharing, JDK 13+): the JVM maps the classes of
Spark, Hadoop and Parquet from one file instead of loading and verifying thousands of classes from the jars. On a
2-core machine it took the session's start from about 8 s to 5 s, and opening the day's records from 2 s to 1 s.

The first run that reads records writes the archive when its JVM exits (`-XX:ArchiveClassesAtExit`; that run took
17 to 40 s longer there), to a file of its own (host, process and a random part in its name, as replicas may share
the data directory) that is renamed into place only once that JVM has exited cleanly, so a run never maps a file
another run is still writing. Every later run maps it (`-XX:SharedArchiveFile`). The archive belongs to one JDK
and one set of jars: its name is a digest of both, so an upgrade of either makes a new one (and the old one goes),
and the JVM itself checks what it maps (a mismatch only costs the speed-up, never the run).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import pyspark

ARCHIVE_GLOB = "spark-classes-*.jsa"
PARTIAL_SUFFIX = ".partial"
# A partial file this old belongs to a run that died before its JVM finished writing (writing takes a minute).
STALE_PARTIAL_SECONDS = 3600


def _java_home() -> Path | None:
    if home := os.environ.get("JAVA_HOME"):
        return Path(home)
    java = shutil.which("java")
    return Path(java).resolve().parent.parent if java else None


def archive_name() -> str:
    """`spark-classes-<digest>.jsa`, the digest of the JDK's release file and the jars PySpark puts on the classpath."""
    digest = hashlib.sha256(pyspark.__version__.encode())
    java_home = _java_home()
    release = java_home / "release" if java_home else None
    digest.update(str(java_home).encode())
    if release and release.is_file():
        digest.update(release.read_bytes())
    for jar in sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar")):
        digest.update(jar.name.encode())
    return f"spark-classes-{digest.hexdigest()[:16]}.jsa"


def _quoted(option: str) -> str:
    # Spark splits extraJavaOptions at spaces, except inside quotes: a data directory may have spaces in its path.
    return f'"{option}"'


@dataclass(frozen=True, slots=True)
class ClassArchive:
    """The archive under `directory` for this JDK and these jars, as this process uses it."""

    path: Path
    # Where this process's JVM writes a new archive at its exit; None when the archive exists and is mapped.
    partial: Path | None

    @classmethod
    def for_directory(cls, directory: Path) -> ClassArchive:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / archive_name()
        if path.is_file():
            return cls(path, None)
        for stale in directory.glob(f"*{PARTIAL_SUFFIX}"):
            try:
                if time.time() - stale.stat().st_mtime > STALE_PARTIAL_SECONDS:
                    stale.unlink()
            except FileNotFoundError:
                pass  # another run's, just published or removed
        writer = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        return cls(path, directory / f"{path.name}.{writer}{PARTIAL_SUFFIX}")

    def java_options(self) -> list[str]:
        if self.partial is None:
            return [_quoted(f"-XX:SharedArchiveFile={self.path}")]
        # Writing the archive warns of every class it cannot hold (generated ones, old class files): noise.
        return [_quoted(f"-XX:ArchiveClassesAtExit={self.partial}"), "-Xlog:cds=error,cds+dynamic=error"]

    def publish(self, jvm_exit_code: int | None) -> bool:
        """After the JVM has exited: put a newly written archive in place if that JVM exited cleanly (else drop
        it), and remove archives of other JDKs or jars. True when this run published one."""
        if self.partial is None or not self.partial.is_file():
            return False
        if jvm_exit_code != 0:
            self.partial.unlink(missing_ok=True)
            return False
        os.replace(self.partial, self.path)
        for outdated in self.path.parent.glob(ARCHIVE_GLOB):
            if outdated != self.path:
                outdated.unlink(missing_ok=True)
        return True
