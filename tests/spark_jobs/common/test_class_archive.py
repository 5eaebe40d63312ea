"""The class-data archive's life: written by a first run to a file of its own, put in place only after a clean
JVM exit, mapped by every later run, and named after the JDK and the jars."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from spark_jobs.common import class_archive
from spark_jobs.common.class_archive import STALE_PARTIAL_SECONDS, ClassArchive, archive_name


def test_a_first_run_writes_to_a_partial_file_of_its_own(tmp_path: Path) -> None:
    first, second = ClassArchive.for_directory(tmp_path / "spark"), ClassArchive.for_directory(tmp_path / "spark")
    assert first.path == second.path == tmp_path / "spark" / archive_name()
    assert first.partial is not None and second.partial is not None and first.partial != second.partial
    assert first.partial.name.startswith(archive_name()) and first.partial.name.endswith(".partial")
    assert first.java_options()[0] == f'"-XX:ArchiveClassesAtExit={first.partial}"'
    assert not first.path.exists()


def test_a_clean_exit_puts_the_archive_in_place_and_later_runs_map_it(tmp_path: Path) -> None:
    archive = ClassArchive.for_directory(tmp_path)
    assert archive.partial is not None
    archive.partial.write_bytes(b"classes")
    assert archive.publish(0)
    assert archive.path.read_bytes() == b"classes" and not archive.partial.exists()
    later = ClassArchive.for_directory(tmp_path)
    assert later.partial is None
    assert later.java_options() == [f'"-XX:SharedArchiveFile={archive.path}"']
    assert not later.publish(0)  # nothing new to publish


@pytest.mark.parametrize("exit_code", [1, None])
def test_an_unclean_exit_drops_what_the_jvm_wrote(tmp_path: Path, exit_code: int | None) -> None:
    archive = ClassArchive.for_directory(tmp_path)
    assert archive.partial is not None
    archive.partial.write_bytes(b"half an archive")
    assert not archive.publish(exit_code)
    assert list(tmp_path.iterdir()) == []


def test_a_jvm_that_wrote_nothing_publishes_nothing(tmp_path: Path) -> None:
    assert not ClassArchive.for_directory(tmp_path).publish(0)
    assert list(tmp_path.iterdir()) == []


def test_old_partial_files_are_removed_and_recent_ones_kept(tmp_path: Path) -> None:
    dead = tmp_path / f"{archive_name()}.otherhost-12-abcd.partial"
    writing = tmp_path / f"{archive_name()}.otherhost-13-ef01.partial"
    dead.write_bytes(b"x")
    writing.write_bytes(b"x")
    long_ago = time.time() - STALE_PARTIAL_SECONDS - 60
    os.utime(dead, (long_ago, long_ago))
    ClassArchive.for_directory(tmp_path)
    assert not dead.exists() and writing.exists()


def test_publishing_removes_the_archives_of_other_jdks_and_jars(tmp_path: Path) -> None:
    outdated = tmp_path / "spark-classes-0123456789abcdef.jsa"
    outdated.write_bytes(b"old")
    archive = ClassArchive.for_directory(tmp_path)
    assert archive.partial is not None
    archive.partial.write_bytes(b"new")
    assert archive.publish(0)
    assert sorted(tmp_path.iterdir()) == [archive.path]


def test_the_name_changes_with_the_jdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jdks = {}
    for version in ("17.0.15", "17.0.16"):
        home = tmp_path / version
        home.mkdir()
        (home / "release").write_text(f'JAVA_VERSION="{version}"\n')
        monkeypatch.setenv("JAVA_HOME", str(home))
        jdks[version] = archive_name()
    assert jdks["17.0.15"] != jdks["17.0.16"]
    assert all(name.startswith("spark-classes-") and name.endswith(".jsa") for name in jdks.values())


def test_the_name_changes_with_the_jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = archive_name()
    fake_pyspark = tmp_path / "pyspark"
    (fake_pyspark / "jars").mkdir(parents=True)
    (fake_pyspark / "jars" / "spark-core_2.13-9.9.9.jar").write_bytes(b"")
    monkeypatch.setattr(class_archive.pyspark, "__file__", str(fake_pyspark / "__init__.py"))
    assert archive_name() != before
