"""Every Lua script of the service, of each owner that registers some (the queues, the scheduler's election): its
file's text, its specification, and its source as it is loaded."""

from __future__ import annotations

from app.queues import script_specs
from app.queues.scripts import LUA_DIR, queue_sources
from app.scheduler import election

OWNERS = ((LUA_DIR, script_specs.SPECS), (election.LUA_DIR, election.SPECS))
SPECS = tuple(spec for _, specs in OWNERS for spec in specs)
SCRIPTS = {path.stem: path.read_text() for lua_dir, _ in OWNERS for path in sorted(lua_dir.glob("*.lua"))}
LOADED = queue_sources() | election.election_sources()
