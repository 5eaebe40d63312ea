"""Entry point: `python -m spark_jobs.what_if --date YYYY-MM-DD --policy candidate.json`, or as a file for
spark-submit (with `--py-files` carrying `spark_jobs`: the executors run the replay, which is Python). The candidate
is a definition the service checked (`wlm whatif` and the API check it first), as JSON. Exit status 0 with the
result's path on stdout, NO_RECORDS_EXIT for a day without records, 1 for a failure."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from spark_jobs.common.job_log import JobFailed
from spark_jobs.what_if.arguments import (
    NO_RECORDS_EXIT,
    NoRecords,
    add_arguments,
    add_manager_arguments,
    manager_from_arguments,
    run_from_arguments,
)
from spark_jobs.workload_activity.arguments import add_settings_arguments, settings_from_arguments


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="what_if", description="A recorded day replayed under a candidate policy")
    parser.add_argument("--policy", type=Path, required=True, help="the candidate service definition, checked, as JSON")
    add_arguments(parser)
    add_manager_arguments(parser)
    add_settings_arguments(parser)
    args = parser.parse_args(argv)
    candidate = json.loads(args.policy.read_text())
    try:
        result = run_from_arguments(args, settings_from_arguments(args), candidate, manager_from_arguments(args))
    except NoRecords as missing:
        print(missing, file=sys.stderr)
        return NO_RECORDS_EXIT
    except JobFailed as failure:
        print(failure, file=sys.stderr)
        return 1
    print(result.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
