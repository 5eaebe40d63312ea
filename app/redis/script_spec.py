"""The Python↔Lua boundary, by specification: a script's KEYS and ARGV as named positions (a fixed part, then groups
repeated per item, per end, per class ...), which build a call's lists and check their lengths. A script's header
comment states the same layout in the same words (`-- KEYS:`, `-- ARGV:`), with the includes it is loaded behind
(`-- INCLUDES:`); tests/queues/test_script_specs.py fails when a header and its specification disagree.

The layout's words: names separated by commas; a group is `per <what>: names`, after the fixed part and a semicolon;
`optionally per <what>` may be absent even when the other groups per the same thing repeat; `none` for nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

_GROUP = re.compile(r"(optionally )?per (\w+): (.+)")
_HEADER_LINE = re.compile(r"-- ([A-Z, ]+): (.*)")
# A header entry goes on in lines indented beyond its `-- `.
_CONTINUED = re.compile(r"--\s{3,}(.*)")
HEADER_ENTRIES = ("KEYS", "ARGV", "INCLUDES", "KEYS, ARGV")


class ScriptArityError(ValueError):
    """A call's lists do not fit its script's specification: a bug in the caller, never a client's error."""


@dataclass(frozen=True, slots=True)
class Group:
    per: str  # what it repeats for: item, end, class ...
    names: tuple[str, ...]
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Layout:
    fixed: tuple[str, ...]
    groups: tuple[Group, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Layout:
        text = " ".join(text.split())
        fixed: tuple[str, ...] = ()
        groups = []
        for i, part in enumerate(p.strip() for p in text.split(";")):
            if match := _GROUP.fullmatch(part):
                groups.append(Group(match[2], _names(match[3]), match[1] is not None))
            elif i == 0:
                fixed = () if part == "none" else _names(part)
            else:
                raise ValueError(f"after the fixed part, only groups (per ...): {part!r}")
        return cls(fixed, tuple(groups))

    def flat(self, fixed: Sequence[Any], groups: Sequence[Sequence[Any]], repeats: dict[str, int], script: str) -> list[Any]:
        """`fixed` then each group's values, checked: the fixed part whole, each group whole times, and the groups
        per the same thing (of KEYS and ARGV, counted in `repeats`) repeated alike unless an optional one is absent."""
        if len(fixed) != len(self.fixed) or len(groups) != len(self.groups):
            raise ScriptArityError(f"{script}: {len(fixed)} fixed values and {len(groups)} groups; takes {self}")
        values = [*fixed]
        for group, given in zip(self.groups, groups, strict=True):
            width = len(group.names)
            times = len(given) // width
            if times * width != len(given):
                raise ScriptArityError(f"{script}: {len(given)} values per {group.per} of {width}")
            if (times or not group.optional) and repeats.setdefault(group.per, times) != times:
                raise ScriptArityError(f"{script}: per {group.per}, {times} times and {repeats[group.per]} times")
            values += given
        return values


class ScriptCall(NamedTuple):
    """One call of a script, built by its specification (ScriptSpec.__call__). A tuple: a frozen dataclass cost each
    call a microsecond to build."""

    script: str
    keys: list[str]
    args: list[Any]


@dataclass(frozen=True, slots=True)
class ScriptSpec:
    name: str
    keys: Layout
    argv: Layout

    @classmethod
    def of(cls, name: str, keys: str, argv: str) -> ScriptSpec:
        return cls(name, Layout.parse(keys), Layout.parse(argv))

    def named(self, name: str) -> ScriptSpec:
        """Another script of the same layout."""
        return ScriptSpec(name, self.keys, self.argv)

    def __call__(
        self,
        keys: Sequence[str],
        args: Sequence[Any] = (),
        *,
        key_groups: Sequence[Sequence[str]] = (),
        arg_groups: Sequence[Sequence[Any]] = (),
    ) -> ScriptCall:
        repeats: dict[str, int] = {}
        name = self.name
        return ScriptCall(name, self.keys.flat(keys, key_groups, repeats, name), self.argv.flat(args, arg_groups, repeats, name))


def _names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(","))
    if not all(name.isidentifier() for name in names):
        raise ValueError(f"not a list of names: {text!r}")
    return names


def header(source: str) -> dict[str, str]:
    """A script's header entries (KEYS, ARGV, INCLUDES; `KEYS, ARGV` for `as <script>.lua`), each its text joined
    over its lines, read from the comment lines the script opens with."""
    entries: dict[str, str] = {}
    current = None
    for line in source.splitlines():
        if not line.startswith("--"):
            break
        if (match := _HEADER_LINE.fullmatch(line)) and match[1] in HEADER_ENTRIES:
            if match[1] in entries:
                raise ValueError(f"a header states {match[1]} twice")
            current = match[1]
            entries[current] = match[2]
        elif current is not None and (continued := _CONTINUED.fullmatch(line)):
            entries[current] += " " + continued[1]
        else:
            current = None
    return entries


def includes(source: str) -> tuple[str, ...]:
    """The includes a script (or an include) names in its header, in order."""
    text = header(source).get("INCLUDES")
    return _names(text) if text else ()
