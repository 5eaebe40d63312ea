"""A job's log: the user sees the stages, the log keeps them and the details; a failure reaches the user as its
reason in a line and the log's path, its traceback kept in the log; a rerun appends."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs.common.job_log import JobFailed, JobLog


def test_the_user_sees_the_stages_and_the_log_keeps_the_details_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "logs" / "report-2026-11-01.log"
    with JobLog("a-job", path) as log:
        log.stage("reading")
        log.detail("24 files")
    shown = capsys.readouterr()
    assert shown.out == ""
    assert [line.split("] ", 1)[1] for line in shown.err.splitlines()] == ["reading"]
    assert ["reading", "24 files"] == [line.split("] ", 1)[1] for line in path.read_text().splitlines()[1:]]
    assert log.file.closed


def test_a_failure_says_why_in_a_line_and_keeps_its_traceback_in_the_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "report.log"
    with pytest.raises(JobFailed) as failure, JobLog("a-job", path):
        raise OSError("No space left on device\nmore of the message")
    assert str(failure.value) == f"a-job failed: No space left on device\ndetails: {path}"
    assert "Traceback (most recent call last)" in path.read_text() and "more of the message" in path.read_text()
    assert capsys.readouterr().err == ""


def test_a_rerun_appends_to_the_log(tmp_path: Path) -> None:
    path = tmp_path / "report.log"
    for run in ("first", "second"):
        with JobLog("a-job", path) as log:
            log.detail(run)
    assert [line.split("] ", 1)[1] for line in path.read_text().splitlines() if "started at" not in line] == ["first", "second"]


def test_the_lines_a_job_log_wrote_are_told_from_the_jvm_s(tmp_path: Path) -> None:
    path = tmp_path / "report.log"
    with JobLog("workload-activity", path) as log:
        log.detail("1 policy versions")
        log.file.write("Error: Could not create the Java Virtual Machine.\n")
        log.file.write("[0.012s][warning][cds] an archive that does not match\n")  # the JVM's own log, not the job's
    job, error, jvm_log = path.read_text().splitlines()[1:]
    assert JobLog.wrote(job)
    assert not JobLog.wrote(error) and not JobLog.wrote(jvm_log)
