"""Calls of queue-manager exits (IWM4CON's QMGR_EXIT) for requests the service removed: deleted, purged at
disconnect, or abandoned after their last delivery.

Each call is a POST of JSON, signed with the queue manager's exit secret (given to it at connect):
`X-WLM-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. Delivery is at least once, with
exponential backoff, up to WLM_EXIT_MAX_ATTEMPTS; `X-WLM-Event-Id` lets the receiver drop repeats. Redirects
are not followed and the URL is checked against the allowlist again at call time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time

import httpx
from prometheus_client import Counter

from app.queues.keys import TOKEN_SEPARATOR
from app.queues.request_meta import ExitEntry, RequestMeta

log = logging.getLogger(__name__)

EXIT_CALLS = Counter("wlm_exit_calls_total", "Queue-manager exit calls", ["result"])
SIGNATURE_HEADER = "X-WLM-Signature"
EVENT_HEADER = "X-WLM-Event-Id"
MAX_BACKOFF_SECONDS = 300.0


def sign(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify(secret: str, header: str, body: bytes, tolerance_s: int = 300, now: float | None = None) -> bool:
    """For receivers (and tests): the signature matches and is recent."""
    try:
        fields = dict(part.split("=", 1) for part in header.split(","))
        timestamp = int(fields["t"])
    except (ValueError, KeyError):
        return False
    if abs((now or time.time()) - timestamp) > tolerance_s:
        return False
    return hmac.compare_digest(sign(secret, timestamp, body), header)


def backoff_seconds(attempt: int, base: float) -> float:
    return min(base * 2**attempt, MAX_BACKOFF_SECONDS)


def body_of(entry: ExitEntry) -> bytes:
    record = RequestMeta.from_json(entry.record)
    token = TOKEN_SEPARATOR.join((record.node, record.application_environment, record.id))
    event = {
        "event_id": f"{token}:{record.outcome}",
        "event": f"work.{record.outcome}",
        "token": token,
        "application_environment": record.application_environment,
        "service_class": record.service_class,
        "userid": record.userid,
        "enclave": record.enclave,
        "inserted_at_ms": record.inserted,
        "removed_at_ms": record.ended,
        "deliveries": record.deliveries,
        "attempt": entry.attempt + 1,
    }
    return json.dumps(event, separators=(",", ":")).encode()


async def call(client: httpx.AsyncClient, url: str, secret: str, body: bytes) -> bool:
    event_id = json.loads(body)["event_id"]
    headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, int(time.time()), body), EVENT_HEADER: event_id}
    try:
        response = await client.post(url, content=body, headers=headers)
    except httpx.HTTPError as exc:
        log.info("exit call to %s failed: %s", url, exc)
        return False
    return 200 <= response.status_code < 300
