"""One table of return codes: app/queues/codes.py names them, every script returns the names (never a bare number),
and app/errors.py maps each to the error a client is answered."""

from __future__ import annotations

import re

import pytest
from redis.asyncio import Redis

from app.errors import AppError, lua_error
from app.queues.codes import ReturnCode, lua_prelude
from app.queues.scripts import INCLUDES_DIR
from app.redis import scripts
from app.redis.scripts import checked
from tests.lua_scripts import LOADED, SCRIPTS, SPECS

INCLUDES = {path.stem: path.read_text() for path in INCLUDES_DIR.glob("*.lua")}


def _code_of(text: str) -> str:
    """Lua without its comments and string literals."""
    text = re.sub(r"--[^\n]*", "", text)
    return re.sub(r"'[^'\n]*'|\"[^\"\n]*\"", "''", text)


def test_every_script_file_is_loaded_and_every_loaded_script_has_a_file() -> None:
    assert sorted(SCRIPTS) == sorted(spec.name for spec in SPECS)


def test_scripts_name_their_return_codes() -> None:
    bare = {name: re.findall(r"[{(]\s*-\d+", _code_of(text)) for name, text in (SCRIPTS | INCLUDES).items()}
    assert {name: found for name, found in bare.items() if found} == {}


def test_every_upper_case_name_a_script_uses_is_a_code_or_defined_there() -> None:
    defined = set(re.findall(r"local ([A-Z][A-Z_]+) =", lua_prelude())) | {"KEYS", "ARGV"}
    defined |= {name for text in (SCRIPTS | INCLUDES).values() for name in re.findall(r"local ([A-Z][A-Z_]+)\s*=", text)}
    used = {(script, name) for script, text in (SCRIPTS | INCLUDES).items() for name in re.findall(r"\b[A-Z][A-Z_]{2,}\b", _code_of(text))}
    assert sorted((script, name) for script, name in used if name not in defined) == []


def test_the_prelude_defines_each_code_once() -> None:
    assert lua_prelude().splitlines()[: len(ReturnCode)] == [f"local {code.name} = {code.value}" for code in ReturnCode]


def test_ok_is_the_code_the_script_caller_takes_for_success() -> None:
    assert ReturnCode.OK == scripts.OK
    assert checked([ReturnCode.OK, "a"]) == ["a"]
    with pytest.raises(AppError) as raised:
        checked([ReturnCode.UNKNOWN_WORK])
    assert raised.value.code == "unknown_work"


def test_every_code_but_ok_maps_to_its_own_error() -> None:
    errors = {code: lua_error(code, []) for code in ReturnCode if code is not ReturnCode.OK}
    assert [code for code, error in errors.items() if error.code == "internal" or type(error) is AppError] == []
    assert len({error.code for error in errors.values()}) == len(errors)
    assert lua_error(-99, []).code == "internal"


async def test_every_script_compiles_on_redis(redis_url: str) -> None:
    redis = Redis.from_url(redis_url, decode_responses=True)
    try:
        for spec in SPECS:
            assert await redis.script_load(LOADED[spec.name])
    finally:
        await redis.aclose()
