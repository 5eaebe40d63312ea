"""Enclaves (IWM4ECRE): a transaction's classes, kept until they expire."""

from __future__ import annotations

import json

from app.queues.base import StoreBase
from app.queues.keys import enclave_key
from app.queues.request_meta import Enclave


class EnclaveRecords(StoreBase):
    async def save_enclave(self, enclave_id: str, enclave: Enclave, ttl_s: int) -> None:
        await self.redis.set(enclave_key(self.prefix, enclave_id), json.dumps(enclave), ex=ttl_s)

    async def enclave(self, enclave_id: str) -> Enclave | None:
        """The enclave, unless it expired or was deleted."""
        raw = await self.redis.get(enclave_key(self.prefix, enclave_id))
        return Enclave.from_json(raw) if raw else None

    async def delete_enclave(self, enclave_id: str) -> None:
        await self.redis.delete(enclave_key(self.prefix, enclave_id))
