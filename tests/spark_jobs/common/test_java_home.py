"""Which Java the driver runs on: the configured one, else JAVA_HOME, else the newest installed Java Spark supports."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_jobs.common import java_home as java_home_module
from spark_jobs.common.java_home import (
    choose_java_home,
    java_home_for_launch,
    java_major,
    java_version,
    main,
    newest_supported,
    version_numbers,
)


def install_jdk(parent: Path, name: str, version: str | None, *, with_java: bool = True) -> Path:
    home = parent / name
    (home / "bin").mkdir(parents=True)
    if version is not None:
        (home / "release").write_text(f'IMPLEMENTOR="Test"\nJAVA_VERSION="{version}"\nOS_NAME="Linux"\n')
    if with_java:
        java = home / "bin" / "java"
        java.write_text("#!/bin/sh\n")
        java.chmod(0o755)
    return home


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty JDK install directory and a PATH without java; no JAVA_HOME."""
    jvm = tmp_path / "jvm"
    jvm.mkdir()
    (tmp_path / "path").mkdir()
    monkeypatch.setattr(java_home_module, "JDK_INSTALL_DIR", jvm)
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    # Set, then deleted: the test's end restores JAVA_HOME as it was, whatever the test did (a delete of a variable
    # that is not there records nothing to restore).
    monkeypatch.setenv("JAVA_HOME", "")
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.delenv("WLM_SPARK_JAVA_HOME", raising=False)
    return jvm


@pytest.mark.parametrize(
    ("release", "version", "major"),
    [
        ('JAVA_VERSION="25.0.2"\n', "25.0.2", 25),
        ('IMPLEMENTOR="Eclipse Adoptium"\nJAVA_VERSION="17.0.15"\n', "17.0.15", 17),
        ('JAVA_VERSION="21"\n', "21", 21),
        ('JAVA_VERSION="26-ea"\n', "26-ea", 26),
        ('JAVA_VERSION="unknown"\n', "unknown", None),
        ('IMPLEMENTOR="Nobody"\n', None, None),
    ],
)
def test_the_version_is_read_from_the_release_file(tmp_path: Path, release: str, version: str | None, major: int | None) -> None:
    (tmp_path / "release").write_text(release)
    assert java_version(tmp_path) == version
    assert java_major(tmp_path) == major


def test_a_home_without_a_release_file_has_no_version(tmp_path: Path) -> None:
    assert java_version(tmp_path) is None and java_major(tmp_path) is None


@pytest.mark.parametrize(
    ("version", "numbers"), [("25.0.2", (25, 0, 2)), ("21", (21,)), ("17.0.15.1", (17, 0, 15, 1)), ("26-ea", (26,)), ("x", ())]
)
def test_version_numbers(version: str, numbers: tuple[int, ...]) -> None:
    assert version_numbers(version) == numbers


def test_the_newest_supported_java_is_chosen(tmp_path: Path) -> None:
    homes = [install_jdk(tmp_path, name, version) for name, version in (("a", "17.0.15"), ("b", "25.0.2"), ("c", "21.0.8"))]
    assert newest_supported(homes) == homes[1]


def test_unsupported_versions_and_homes_without_java_are_passed_over(tmp_path: Path) -> None:
    supported = install_jdk(tmp_path, "jdk17", "17.0.15")
    others = [
        install_jdk(tmp_path, "jdk11", "11.0.20"),
        install_jdk(tmp_path, "jdk26", "26"),
        install_jdk(tmp_path, "jre25-broken", "25.0.2", with_java=False),
        install_jdk(tmp_path, "unknown", None),
    ]
    assert newest_supported([*others, supported]) == supported
    assert newest_supported(others) is None
    assert newest_supported([]) is None


def test_the_newest_update_of_a_major_version_is_chosen(tmp_path: Path) -> None:
    older, newer = install_jdk(tmp_path, "one", "25.0.1"), install_jdk(tmp_path, "two", "25.0.10")
    assert newest_supported([older, newer]) == newer
    assert newest_supported([newer, older]) == newer


def test_a_tie_goes_to_the_first_given(tmp_path: Path) -> None:
    first, second = install_jdk(tmp_path, "one", "25.0.2"), install_jdk(tmp_path, "two", "25.0.2")
    assert newest_supported([first, second]) == first
    assert newest_supported([second, first]) == second


def test_the_configured_home_comes_first_then_java_home(machine: Path) -> None:
    install_jdk(machine, "temurin-25", "25.0.2")
    assert choose_java_home(Path("/opt/configured"), {"JAVA_HOME": "/opt/env"}) == Path("/opt/configured")
    assert choose_java_home(None, {"JAVA_HOME": "/opt/env"}) == Path("/opt/env")


def test_without_either_the_newest_installed_java_is_chosen(machine: Path) -> None:
    install_jdk(machine, "java-17-openjdk", "17.0.15")
    newest = install_jdk(machine, "temurin-25", "25.0.2")
    install_jdk(machine, "java-26-early-access", "26")
    assert choose_java_home(None, {}) == newest


def test_the_java_on_the_path_wins_a_tie_and_nothing_more(machine: Path, tmp_path: Path) -> None:
    install_jdk(machine, "a-jdk-25", "25.0.2")
    on_path = install_jdk(tmp_path, "jdk-on-path", "25.0.2")
    os.symlink(on_path / "bin" / "java", tmp_path / "path" / "java")
    assert choose_java_home(None, {}) == on_path
    newer = install_jdk(machine, "b-jdk-25", "25.0.3")
    assert choose_java_home(None, {}) == newer


def test_unreadable_and_dangling_entries_are_passed_over(machine: Path, tmp_path: Path) -> None:
    newest = install_jdk(machine, "temurin-25", "25.0.2")
    (machine / "dangling").symlink_to(tmp_path / "gone")
    (machine / "loop").symlink_to(machine / "loop")
    (machine / "not-a-jdk.txt").write_text("")
    assert choose_java_home(None, {}) == newest


def test_an_install_directory_that_is_missing_is_no_error(machine: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(java_home_module, "JDK_INSTALL_DIR", tmp_path / "missing")
    assert choose_java_home(None, {}) is None


def test_no_java_found_leaves_the_choice_to_spark(machine: Path) -> None:
    install_jdk(machine, "java-11-openjdk", "11.0.20")
    assert choose_java_home(None, {}) is None


def test_java_home_is_set_only_while_the_jvm_is_launched(machine: Path) -> None:
    with java_home_for_launch(Path("/opt/jdk-25")):
        assert os.environ["JAVA_HOME"] == "/opt/jdk-25"
    assert "JAVA_HOME" not in os.environ
    os.environ["JAVA_HOME"] = "/opt/users-own"
    with pytest.raises(RuntimeError), java_home_for_launch(Path("/opt/jdk-25")):
        assert os.environ["JAVA_HOME"] == "/opt/jdk-25"
        raise RuntimeError("the launch failed")
    assert os.environ["JAVA_HOME"] == "/opt/users-own"
    with java_home_for_launch(None):
        assert os.environ["JAVA_HOME"] == "/opt/users-own"


def test_the_command_tells_make_whether_a_java_was_found(machine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main() == 1
    assert "no Java 17/21/25 found" in capsys.readouterr().err
    home = install_jdk(machine, "temurin-25", "25.0.2")
    assert main() == 0
    assert capsys.readouterr().out.strip() == f"Java 25.0.2 at {home}"
