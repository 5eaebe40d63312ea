"""How a job's Spark driver runs, as plain values (no PySpark: `wlm` builds them before any job starts)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_MASTER = "local[*]"
DEFAULT_DRIVER_MEMORY = "4g"


@dataclass(frozen=True, slots=True)
class DriverSettings:
    """`wlm report run` fills these from the service's settings (WLM_SPARK_*), a job's own command line from its
    arguments."""

    master: str = DEFAULT_MASTER
    # Where the driver runs the work itself (local mode): the memory a day of records needs to aggregate.
    memory: str = DEFAULT_DRIVER_MEMORY
    # The Java configured for the driver; None: JAVA_HOME, else the newest installed Java Spark supports (java_home.py).
    java_home: Path | None = None
    # Where the driver JVM's class-data archive is kept (class_archive.py); None: the JVM maps none.
    class_archive_dir: Path | None = None
