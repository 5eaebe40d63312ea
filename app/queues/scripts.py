"""The Lua scripts, loaded once per Redis client; each is the return codes' prelude (app/queues/codes.py), then
`common.lua`, then its own body."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from app.errors import lua_error
from app.queues.codes import ReturnCode, lua_prelude

LUA_DIR = Path(__file__).parent / "lua"
# One script per state transition.
SCRIPT_NAMES = (
    "register",
    "insert",
    "select",
    "select_and_begin",
    "begin",
    "end",
    "delete_queued",
    "purge_queued",
    "reassign_expired",
    "reassign_server",
    "claim_exits",
    "pending_records",
    "ack_records",
    "extend",
    "elect",
    "resign",
    "sweep_begin",
    "sweep_commit",
    "sweep_abort",
    "unsweep",
    "take_served",
    "delete_swept",
)


class Scripts:
    def __init__(self, redis: Redis) -> None:
        shared = lua_prelude() + (LUA_DIR / "common.lua").read_text()
        self._scripts: dict[str, AsyncScript] = {
            name: redis.register_script(shared + "\n" + (LUA_DIR / f"{name}.lua").read_text()) for name in SCRIPT_NAMES
        }

    async def call(self, name: str, keys: list[str], args: list[Any], client: Redis | None = None) -> list[Any]:
        """Run a script and return what it returned, status code first; on `client` (one connection) if given."""
        return list(await self._scripts[name](keys=keys, args=args, client=client))

    async def run(self, name: str, keys: list[str], args: list[Any], client: Redis | None = None) -> list[Any]:
        """Run a script; a return code other than OK is raised as the AppError mapped to it in app.errors."""
        result = await self.call(name, keys, args, client)
        code = int(result[0])
        if code != ReturnCode.OK:
            raise lua_error(code, result[1:])
        return list(result[1:])
