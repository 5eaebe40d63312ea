"""The report ships without the service: every module of the job, and the manager's rules it shares with the
service, imports with `app` (and the service's web, Redis and settings libraries) made unimportable, so a cluster
needs only pyspark and pyarrow on its executors."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.test_layers import ROOT

# What only the service needs; the job's driver may use SQLAlchemy and the database's driver.
SERVICE_ONLY = ("app", "fastapi", "starlette", "uvicorn", "redis", "pydantic", "pydantic_settings", "httpx")

IMPORT_THE_JOB = textwrap.dedent(
    f"""
    import importlib.abc
    import sys

    class ServiceOnly(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {SERVICE_ONLY!r}:
                raise ImportError(f"the job imported {{name}}")
            return None

    sys.meta_path.insert(0, ServiceOnly())
    import spark_jobs.workload_activity.__main__
    import spark_jobs.workload_activity.extract
    import spark_jobs.workload_activity.figures
    import spark_jobs.workload_activity.job
    import spark_jobs.workload_activity.load
    import spark_jobs.workload_activity.policy_goals
    import spark_jobs.workload_activity.transform
    import spark_jobs.common.java_home
    import spark_jobs.manager.goals
    import spark_jobs.manager.select_order
    import spark_jobs.manager.servers
    import spark_jobs.what_if.simulation
    import spark_jobs.manager.classification
    import spark_jobs.what_if.__main__
    import spark_jobs.what_if.job
    loaded = sorted(name for name in sys.modules if name.split(".")[0] in {SERVICE_ONLY!r})
    assert not loaded, loaded
    """
)


def test_the_job_imports_without_the_service() -> None:
    result = subprocess.run([sys.executable, "-c", IMPORT_THE_JOB], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
