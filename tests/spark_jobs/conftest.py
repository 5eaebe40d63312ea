from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark_jobs.common.driver import DriverSettings
from spark_jobs.common.session import build_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The one local Spark session of the test run (a JVM start costs seconds)."""
    session = build_session("wlm-tests", DriverSettings(master="local[2]"), shuffle_partitions=2)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
