"""The class-data archive's life: written by a first run to a file of its own, put in place only after a clean
JVM exit, mapped by every later run, and named after the JDK and the jars; an ahead-of-time cache on Java 25+."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from spark_jobs.common import class_archive
from spark_jobs.common.class_archive import STALE_PARTIAL_SECONDS, UNUSED_ARCHIVE_SECONDS, ClassArchive, archive_name


def java_home(parent: Path, version: str) -> Path:
    home = parent / f"jdk-{version}"
    home.mkdir()
    (home / "release").write_text(f'IMPLEMENTOR="Test"\nJAVA_VERSION="{version}"\n')
    return home


@pytest.fixture
def jdk17(tmp_path: Path) -> Path:
    return java_home(tmp_path, "17.0.15")


@pytest.fixture
def jdk25(tmp_path: Path) -> Path:
    return java_home(tmp_path, "25.0.2")


def test_a_first_run_writes_to_a_partial_file_of_its_own(tmp_path: Path, jdk17: Path) -> None:
    first, second = ClassArchive.for_directory(tmp_path / "spark", jdk17), ClassArchive.for_directory(tmp_path / "spark", jdk17)
    assert first.path == second.path == tmp_path / "spark" / archive_name(jdk17)
    assert first.partial is not None and second.partial is not None and first.partial != second.partial
    assert first.partial.name.startswith(archive_name(jdk17)) and first.partial.name.endswith(".partial")
    assert first.java_options()[0] == f'"-XX:ArchiveClassesAtExit={first.partial}"'
    assert not first.path.exists()


def test_a_clean_exit_puts_the_archive_in_place_and_later_runs_map_it(tmp_path: Path, jdk17: Path) -> None:
    archive = ClassArchive.for_directory(tmp_path / "spark", jdk17)
    assert archive.partial is not None
    archive.partial.write_bytes(b"classes")
    assert archive.publish(0)
    assert archive.path.read_bytes() == b"classes" and not archive.partial.exists()
    later = ClassArchive.for_directory(tmp_path / "spark", jdk17)
    assert later.partial is None
    assert later.java_options() == [f'"-XX:SharedArchiveFile={archive.path}"']
    assert not later.publish(0)  # nothing new to publish


def test_java_25_writes_and_maps_an_ahead_of_time_cache(tmp_path: Path, jdk25: Path) -> None:
    first = ClassArchive.for_directory(tmp_path / "spark", jdk25)
    assert first.path.name.endswith(".aot") and first.ahead_of_time
    assert first.java_options()[0] == f'"-XX:AOTCacheOutput={first.partial}"'
    assert first.partial is not None
    first.partial.write_bytes(b"cache")
    configuration = first.partial.with_name(f"{first.partial.name}.config")  # the JVM's, while it writes
    configuration.write_bytes(b"classes to archive")
    assert first.publish(0)
    assert sorted((tmp_path / "spark").iterdir()) == [first.path]
    assert ClassArchive.for_directory(tmp_path / "spark", jdk25).java_options() == [f'"-XX:AOTCache={first.path}"']


def test_a_link_to_a_jdk_names_the_same_archive(tmp_path: Path, jdk25: Path) -> None:
    link = tmp_path / "java-25-link"
    link.symlink_to(jdk25)
    assert archive_name(link) == archive_name(jdk25)


@pytest.mark.parametrize("home", ["no release file", "unknown home"])
def test_a_java_of_no_known_version_gets_a_class_data_archive(tmp_path: Path, home: str) -> None:
    archive = ClassArchive.for_directory(tmp_path / "spark", tmp_path if home == "no release file" else None)
    assert archive.path.name.endswith(".jsa") and not archive.ahead_of_time


@pytest.mark.parametrize("exit_code", [1, None])
def test_an_unclean_exit_drops_what_the_jvm_wrote(tmp_path: Path, jdk25: Path, exit_code: int | None) -> None:
    directory = tmp_path / "spark"
    archive = ClassArchive.for_directory(directory, jdk25)
    assert archive.partial is not None
    archive.partial.write_bytes(b"half an archive")
    assert not archive.publish(exit_code)
    assert list(directory.iterdir()) == []


def test_a_jvm_that_wrote_nothing_publishes_nothing(tmp_path: Path, jdk17: Path) -> None:
    assert not ClassArchive.for_directory(tmp_path / "spark", jdk17).publish(0)
    assert list((tmp_path / "spark").iterdir()) == []


def test_old_partial_files_are_removed_and_recent_ones_kept(tmp_path: Path, jdk25: Path) -> None:
    directory = tmp_path / "spark"
    directory.mkdir()
    dead = directory / f"{archive_name(jdk25)}.otherhost-12-abcd.partial"
    dead_configuration = directory / f"{dead.name}.config"
    writing = directory / f"{archive_name(jdk25)}.otherhost-13-ef01.partial"
    for path in (dead, dead_configuration, writing):
        path.write_bytes(b"x")
    long_ago = time.time() - STALE_PARTIAL_SECONDS - 60
    for path in (dead, dead_configuration):
        os.utime(path, (long_ago, long_ago))
    ClassArchive.for_directory(directory, jdk25)
    assert not dead.exists() and not dead_configuration.exists() and writing.exists()


def test_old_partial_files_are_removed_also_beside_an_archive_in_place(tmp_path: Path, jdk25: Path) -> None:
    directory = tmp_path / "spark"
    directory.mkdir()
    (directory / archive_name(jdk25)).write_bytes(b"cache")
    dead = directory / f"{archive_name(jdk25)}.otherhost-12-abcd.partial"
    dead.write_bytes(b"x")
    long_ago = time.time() - STALE_PARTIAL_SECONDS - 60
    os.utime(dead, (long_ago, long_ago))
    assert ClassArchive.for_directory(directory, jdk25).partial is None
    assert not dead.exists()


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_publishing_removes_the_archives_no_run_used_for_a_week(tmp_path: Path, jdk25: Path) -> None:
    directory = tmp_path / "spark"
    directory.mkdir()
    unused = [directory / "spark-classes-0123456789abcdef.jsa", directory / "spark-classes-fedcba9876543210.aot"]
    another_jdks = directory / "spark-classes-00112233445566aa.jsa"
    writing = directory / "spark-classes-0123456789abcdef.jsa.otherhost-13-ef01.partial"
    for path in (*unused, another_jdks, writing):
        path.write_bytes(b"old")
    for path in unused:
        age(path, UNUSED_ARCHIVE_SECONDS + 60)
    age(another_jdks, UNUSED_ARCHIVE_SECONDS - 3600)
    archive = ClassArchive.for_directory(directory, jdk25)
    assert archive.partial is not None
    archive.partial.write_bytes(b"new")
    assert archive.publish(0)
    assert sorted(directory.iterdir()) == sorted([archive.path, another_jdks, writing])


def test_mapping_an_archive_marks_it_used(tmp_path: Path, jdk17: Path, jdk25: Path) -> None:
    """A week after both were written, the Java 17 run maps its archive: a publish then keeps it and removes the
    Java 25 archive that no run has used since."""
    directory = tmp_path / "spark"
    archives = {}
    for home in (jdk17, jdk25):
        archive = ClassArchive.for_directory(directory, home)
        assert archive.partial is not None
        archive.partial.write_bytes(b"classes")
        assert archive.publish(0)
        archives[home] = archive.path
    for path in archives.values():
        age(path, UNUSED_ARCHIVE_SECONDS + 60)
    assert ClassArchive.for_directory(directory, jdk17).partial is None
    assert time.time() - archives[jdk17].stat().st_mtime < 60
    upgraded = ClassArchive.for_directory(directory, java_home(tmp_path, "25.0.3"))
    assert upgraded.partial is not None
    upgraded.partial.write_bytes(b"classes")
    assert upgraded.publish(0)
    assert sorted(directory.iterdir()) == sorted([archives[jdk17], upgraded.path])


def test_the_name_changes_with_the_jdk(tmp_path: Path) -> None:
    names = {version: archive_name(java_home(tmp_path, version)) for version in ("17.0.15", "17.0.16", "25.0.2")}
    assert len(set(names.values())) == 3
    assert all(name.startswith("spark-classes-") for name in names.values())
    assert names["17.0.15"].endswith(".jsa") and names["25.0.2"].endswith(".aot")


def test_the_name_changes_with_the_jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jdk17: Path) -> None:
    before = archive_name(jdk17)
    fake_pyspark = tmp_path / "pyspark"
    (fake_pyspark / "jars").mkdir(parents=True)
    (fake_pyspark / "jars" / "spark-core_2.13-9.9.9.jar").write_bytes(b"")
    monkeypatch.setattr(class_archive.pyspark, "__file__", str(fake_pyspark / "__init__.py"))
    assert archive_name(jdk17) != before
