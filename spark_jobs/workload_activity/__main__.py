"""Entry point: `python -m spark_jobs.workload_activity --date YYYY-MM-DD`, or as a file for spark-submit:
`spark-submit --master spark://host:7077 spark_jobs/workload_activity/__main__.py --date 2026-11-22 --database-url ...`
(the driver's Python needs `spark_jobs`, pyarrow and SQLAlchemy with the database's driver, not the service; the
transform is SQL only, so executors need nothing of it)."""

from __future__ import annotations

import argparse
import sys

from spark_jobs.common.job_log import JobFailed
from spark_jobs.workload_activity.arguments import add_arguments, add_settings_arguments, run_from_arguments, settings_from_arguments


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="workload_activity", description="The RMF-style workload activity report of one day")
    add_arguments(parser)
    add_settings_arguments(parser)
    args = parser.parse_args(argv)
    try:
        run_from_arguments(args, settings_from_arguments(args))
    except JobFailed as failure:
        print(failure, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
