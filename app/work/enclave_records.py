"""Enclaves (IWM4ECRE): a transaction's classes, kept until they expire."""

from __future__ import annotations

import json

from app.queues.request_meta import Enclave
from app.redis.context import RedisContext


def enclave_key(prefix: str, enclave_id: str) -> str:
    return f"{prefix}:enc:{{{enclave_id}}}"


class EnclaveRecords:
    def __init__(self, context: RedisContext) -> None:
        self.redis = context.redis
        self.prefix = context.prefix

    async def save(self, enclave_id: str, enclave: Enclave, ttl_s: int) -> None:
        await self.redis.set(enclave_key(self.prefix, enclave_id), json.dumps(enclave), ex=ttl_s)

    async def get(self, enclave_id: str) -> Enclave | None:
        """The enclave, unless it expired or was deleted."""
        raw = await self.redis.get(enclave_key(self.prefix, enclave_id))
        return Enclave.from_json(raw) if raw else None

    async def delete(self, enclave_id: str) -> None:
        await self.redis.delete(enclave_key(self.prefix, enclave_id))
