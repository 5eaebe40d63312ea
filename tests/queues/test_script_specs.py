"""Each script's header states its KEYS and ARGV as its specification (app/queues/script_specs.py) builds them, and
names the includes it needs; a call that does not fit its specification is refused before Redis sees it."""

from __future__ import annotations

import re

import pytest

from app.queues.scripts import INCLUDES_DIR
from app.redis.script_spec import Group, Layout, ScriptArityError, ScriptSpec, header, includes
from tests.lua_scripts import LOADED, SCRIPTS, SPECS

SPEC_OF = {spec.name: spec for spec in SPECS}
INCLUDES = {path.stem: path.read_text() for path in INCLUDES_DIR.glob("*.lua")}
_AS = re.compile(r"as (\w+)\.lua")


def _stated(name: str) -> tuple[Layout, Layout]:
    """The KEYS and ARGV script `name`'s header states (following `KEYS, ARGV: as <script>.lua`)."""
    entries = header(SCRIPTS[name])
    if "KEYS, ARGV" in entries:
        match = _AS.fullmatch(entries["KEYS, ARGV"])
        assert match, f"{name}: `KEYS, ARGV: as <script>.lua`, not {entries['KEYS, ARGV']!r}"
        return _stated(match[1])
    assert "KEYS" in entries and "ARGV" in entries, f"{name}.lua's header has no KEYS or ARGV line"
    return Layout.parse(entries["KEYS"]), Layout.parse(entries["ARGV"])


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_scripts_header_states_its_specification(name: str) -> None:
    keys, argv = _stated(name)
    assert (keys, argv) == (SPEC_OF[name].keys, SPEC_OF[name].argv)


def test_the_headers_are_read_as_written() -> None:
    """A header that names nothing (a typo in the entry's name) would pass for a script without KEYS or ARGV."""
    text = "-- Does a thing.\n-- KEYS: a, b; per item:\n--       c, d\n-- ARGV: none\n-- INCLUDES: base\nlocal x"
    assert header(text) == {"KEYS": "a, b; per item: c, d", "ARGV": "none", "INCLUDES": "base"}
    assert Layout.parse("a, b; per item: c, d; optionally per class: e") == Layout(
        ("a", "b"), (Group("item", ("c", "d")), Group("class", ("e",), optional=True))
    )
    assert Layout.parse("none") == Layout(()) and Layout.parse("per x: y") == Layout((), (Group("x", ("y",)),))
    with pytest.raises(ValueError):
        Layout.parse("a; b")
    with pytest.raises(ValueError):
        header("-- KEYS: a\n-- KEYS: b\n")


def test_every_include_named_exists_and_every_include_is_named() -> None:
    named = {name for text in (SCRIPTS | INCLUDES).values() for name in includes(text)}
    assert sorted(named - set(INCLUDES)) == []
    assert sorted(set(INCLUDES) - named) == []


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_script_is_loaded_with_every_function_it_calls(name: str) -> None:
    """A function of an include, called by the script or by its includes, is defined before the script runs: a
    missing include would otherwise fail only when that line runs."""
    defined_anywhere = {f for text in INCLUDES.values() for f in re.findall(r"local function (\w+)", text)}
    loaded = LOADED[name]
    defined = set(re.findall(r"local function (\w+)", loaded))
    called = {f for f in re.findall(r"\b(\w+)\(", re.sub(r"--[^\n]*", "", loaded)) if f in defined_anywhere}
    assert sorted(called - defined) == []


SPEC = ScriptSpec.of("example", "a, b; per item: front, rear", "x; per end: id, outcome; per item: item; optionally per item: group")


def test_a_call_is_built_as_its_specification_says() -> None:
    call = SPEC(["A", "B"], [1], key_groups=[["f1", "r1", "f2", "r2"]], arg_groups=[["i", "o"], ["one", "two"], []])
    assert (call.script, call.keys, call.args) == ("example", ["A", "B", "f1", "r1", "f2", "r2"], [1, "i", "o", "one", "two"])
    with_groups = SPEC(["A", "B"], [1], key_groups=[["f", "r"]], arg_groups=[[], ["one"], [3]])
    assert with_groups.args == [1, "one", 3]


@pytest.mark.parametrize(
    ("keys", "args", "key_groups", "arg_groups"),
    [
        (["A"], [1], [[]], [[], [], []]),  # a fixed key missing
        (["A", "B"], [1, 2], [[]], [[], [], []]),  # a fixed value too many
        (["A", "B"], [1], [["f"]], [[], ["one"], []]),  # half an item's keys
        (["A", "B"], [1], [["f", "r"]], [[], ["one", "two"], []]),  # one item's keys, two items' values
        (["A", "B"], [1], [["f", "r"]], [[], ["one"], [1, 2]]),  # an optional group present, but not per item
        (["A", "B"], [1], [["f", "r"]], [[], ["one"]]),  # a group left out
    ],
)
def test_a_call_that_does_not_fit_is_refused(
    keys: list[str], args: list[int], key_groups: list[list[str]], arg_groups: list[list[int]]
) -> None:
    with pytest.raises(ScriptArityError):
        SPEC(keys, args, key_groups=key_groups, arg_groups=arg_groups)
