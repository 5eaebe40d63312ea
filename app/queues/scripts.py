"""The queues' Lua scripts (lua/), each loaded as the return codes' prelude (codes.py), then the includes its header
names (lua/includes/), then its own body; called as their specifications build the calls (script_specs.py)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType

from app.queues.codes import lua_prelude
from app.queues.script_specs import SPECS
from app.redis.scripts import lua_source

LUA_DIR = Path(__file__).parent / "lua"
INCLUDES_DIR = LUA_DIR / "includes"


def source(name: str, lua_dir: Path = LUA_DIR) -> str:
    """What script `name` of `lua_dir` is loaded as, behind the queues' prelude and with their includes (the scheduler's
    election, whose scripts live beside it, uses them too)."""
    return lua_source(lua_dir / f"{name}.lua", INCLUDES_DIR, lua_prelude())


@cache
def queue_sources() -> Mapping[str, str]:
    """Every queue script by name, as it is loaded: assembled from ~180 files once per process, not at each start of
    an app (tests start thousands)."""
    return MappingProxyType({spec.name: source(spec.name) for spec in SPECS})
