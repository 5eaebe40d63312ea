"""A queue manager's client: classifies and queues work.

async with await QueueManager.connect(url, key, "CB", "BANK1") as qm:
    await qm.insert("PAYROLL", {"n": 1}, classification={"userid": "ATM01"})
"""

from __future__ import annotations

from typing import Any

import httpx

from wlm_client.iwm_connection import ATTEMPTS, IwmConnection, compact, retrying


class QueueManager(IwmConnection):
    """A queue manager: classifies and queues work (IWM4ECRE, IWM4QIN, IWM4QDE) and asks how it is doing."""

    @classmethod
    async def connect(
        cls,
        url: str,
        api_key: str,
        subsystem_type: str,
        subsystem_name: str,
        node: str | None = None,
        exit_url: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> QueueManager:
        body = compact(role="queue_manager", subsystem_type=subsystem_type, subsystem_name=subsystem_name, node=node, exit_url=exit_url)
        return await cls._open(url, api_key, body, transport)

    async def enclave(self, classification: dict[str, str], parent: str | None = None) -> dict[str, Any]:
        """IWM4ECRE: classify once, then insert several requests with the enclave's token."""
        body = compact(connect_token=self.token, classification=classification, parent=parent)
        return await self._call("POST", "/v1/enclaves", json=body)

    async def insert(
        self,
        application_environment: str,
        payload: Any,
        *,
        classification: dict[str, str] | None = None,
        enclave_token: str | None = None,
        userid: str | None = None,
        idempotency_key: str | None = None,
        node: str | None = None,
    ) -> dict[str, Any]:
        """IWM4QIN: queue one request; give a `classification` or an `enclave_token`."""
        item = compact(classification=classification, enclave_token=enclave_token, userid=userid, idempotency_key=idempotency_key)
        body = compact(connect_token=self.token, application_environment=application_environment, node=node) | item | {"payload": payload}
        # Only a request with an idempotency key is retried: the service answers a repeated key with the request
        # it already queued. Without a key, a retry after a lost answer (the insert may have been done) could
        # queue the request twice.
        attempts = ATTEMPTS if idempotency_key else 1
        return await retrying(lambda: self._call("POST", "/v1/work", json=body), attempts)

    async def insert_batch(
        self, application_environment: str, items: list[dict[str, Any]], node: str | None = None
    ) -> list[dict[str, Any]]:
        """IWM4QIN for many requests, all or none; each item as `insert`'s keyword arguments and `payload`.
        Retried as `insert` is, when every item has an idempotency key."""
        body = compact(connect_token=self.token, application_environment=application_environment, node=node, items=items)
        attempts = ATTEMPTS if all(item.get("idempotency_key") for item in items) else 1
        answer = await retrying(lambda: self._call("POST", "/v1/work:batch", json=body), attempts)
        return answer["items"]

    async def delete(self, token: str) -> None:
        """IWM4QDE: remove a request that is still queued (409 not_queued once a server selected it)."""
        await self._call("DELETE", f"/v1/work/{token}", params={"connect_token": self.token})

    async def status(self, token: str) -> dict[str, Any]:
        """A request's own status (GET /v1/work/{token}): `state` (queued, selected, begun, ended, deleted, dead),
        `outcome` once ended, `service_class`, `period`, `deliveries`, and while queued its `position` in its class
        queue, `expected_start_at`, `expected_wait_ms` and `delay_cause`. Any request this key's principal queued;
        an ended one while its tombstone lives (then 404 unknown_work, as for a token never queued)."""
        return await retrying(lambda: self._call("GET", f"/v1/work/{token}"))
