"""The queues' Lua scripts (lua/), each loaded as the return codes' prelude (codes.py), then the includes its header
names (lua/includes/), then its own body; called as their specifications build the calls (script_specs.py)."""

from __future__ import annotations

from pathlib import Path

from app.queues.codes import lua_prelude
from app.queues.script_specs import SPECS
from app.redis.script_spec import includes

LUA_DIR = Path(__file__).parent / "lua"
INCLUDES_DIR = LUA_DIR / "includes"


def source(name: str) -> str:
    """What script `name` is loaded as: the prelude, the includes its header names (each behind the includes it
    names itself, each once), then its body."""
    body = (LUA_DIR / f"{name}.lua").read_text()
    return lua_prelude() + "".join(_included(includes(body), set())) + body


def _included(names: tuple[str, ...], seen: set[str]) -> list[str]:
    parts: list[str] = []
    for name in names:
        if name not in seen:
            seen.add(name)
            text = (INCLUDES_DIR / f"{name}.lua").read_text()
            parts += [*_included(includes(text), seen), text, "\n"]
    return parts


def queue_sources() -> dict[str, str]:
    """Every queue script by name, as it is loaded."""
    return {spec.name: source(spec.name) for spec in SPECS}
