from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark_jobs.common.driver import DriverSettings
from spark_jobs.common.session import build_session, stop_session

# A test interrupted by its timeout inside a call to the JVM leaves the shared session's gateway broken, and every
# Spark test after it fails too (seen at load 17, where one job's test ran past the suite's 120 s): the timeout
# here only guards against a hang, so the tests on the shared session get one that load cannot reach.
SPARK_TEST_TIMEOUT_S = 900


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SPARK_TEST_TIMEOUT_S))


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The one local Spark session of the test run (a JVM start costs seconds)."""
    session = build_session("wlm-tests", DriverSettings(master="local[2]"), shuffle_partitions=2)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    stop_session(session)
