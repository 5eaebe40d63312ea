"""The queues' Lua scripts (lua/), each loaded as the return codes' prelude (codes.py), then the includes its header
names (lua/includes/), then its own body; called as their specifications build the calls (script_specs.py)."""

from __future__ import annotations

from pathlib import Path

from app.queues.codes import lua_prelude
from app.queues.script_specs import SPECS
from app.redis.scripts import lua_source

LUA_DIR = Path(__file__).parent / "lua"
INCLUDES_DIR = LUA_DIR / "includes"


def source(name: str, lua_dir: Path = LUA_DIR) -> str:
    """What script `name` of `lua_dir` is loaded as, behind the queues' prelude and with their includes (the scheduler's
    election, whose scripts live beside it, uses them too)."""
    return lua_source(lua_dir / f"{name}.lua", INCLUDES_DIR, lua_prelude())


def queue_sources() -> dict[str, str]:
    """Every queue script by name, as it is loaded."""
    return {spec.name: source(spec.name) for spec in SPECS}
