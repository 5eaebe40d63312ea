"""One table of return codes: app/queues/codes.py names them, every script returns the names (never a bare number),
and app/errors.py maps each to the error a client is answered."""

from __future__ import annotations

import re

from redis.asyncio import Redis

from app.errors import AppError, lua_error
from app.queues.codes import ReturnCode, lua_prelude
from app.queues.scripts import LUA_DIR, SCRIPT_NAMES

SCRIPTS = {path.stem: path.read_text() for path in LUA_DIR.glob("*.lua")}


def _code_of(source: str) -> str:
    """Lua without its comments and string literals."""
    source = re.sub(r"--[^\n]*", "", source)
    return re.sub(r"'[^'\n]*'|\"[^\"\n]*\"", "''", source)


def test_every_script_file_is_loaded_and_every_loaded_script_has_a_file() -> None:
    assert sorted(SCRIPTS) == sorted([*SCRIPT_NAMES, "common"])


def test_scripts_name_their_return_codes() -> None:
    bare = {name: re.findall(r"[{(]\s*-\d+", _code_of(source)) for name, source in SCRIPTS.items()}
    assert {name: found for name, found in bare.items() if found} == {}


def test_every_upper_case_name_a_script_uses_is_a_code_or_defined_there() -> None:
    defined = set(re.findall(r"local ([A-Z][A-Z_]+) =", lua_prelude())) | {"KEYS", "ARGV"}
    defined |= {name for source in SCRIPTS.values() for name in re.findall(r"local ([A-Z][A-Z_]+)\s*=", source)}
    used = {(script, name) for script, source in SCRIPTS.items() for name in re.findall(r"\b[A-Z][A-Z_]{2,}\b", _code_of(source))}
    assert sorted((script, name) for script, name in used if name not in defined) == []


def test_the_prelude_defines_each_code_once() -> None:
    assert lua_prelude().splitlines()[: len(ReturnCode)] == [f"local {code.name} = {code.value}" for code in ReturnCode]


def test_every_code_but_ok_maps_to_its_own_error() -> None:
    errors = {code: lua_error(code, []) for code in ReturnCode if code is not ReturnCode.OK}
    assert [code for code, error in errors.items() if error.code == "internal" or type(error) is AppError] == []
    assert len({error.code for error in errors.values()}) == len(errors)
    assert lua_error(-99, []).code == "internal"


async def test_every_script_compiles_on_redis(redis_url: str) -> None:
    redis = Redis.from_url(redis_url, decode_responses=True)
    try:
        shared = lua_prelude() + SCRIPTS["common"]
        for name in SCRIPT_NAMES:
            assert await redis.script_load(shared + "\n" + SCRIPTS[name])
    finally:
        await redis.aclose()
