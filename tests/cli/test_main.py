"""`wlm`'s entry point: a command's objects are left to the exit uncollected (the exit's collection of the
imports' objects took 0.24 s of a report's run)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from app.cli import main


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test process's own objects are collected as before


def test_a_command_leaves_its_objects_frozen_for_the_exit(unfrozen: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert gc.get_freeze_count() == 0
    assert main(["report", "schedule", "--at", "01:15"]) == 0
    assert "15 1 * * *" in capsys.readouterr().out
    assert gc.get_freeze_count() > 0


def test_a_failed_command_does_too(unfrozen: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WLM_URL", "http://127.0.0.1:9")  # nobody listens: the client's error, a CliError
    monkeypatch.setenv("WLM_API_KEY", "x")
    assert main(["display"]) != 0
    assert capsys.readouterr().err
    assert gc.get_freeze_count() > 0
