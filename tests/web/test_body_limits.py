"""Request bodies are bounded by route before anything reads them (app.web.guards.BodyLimitMiddleware): a body over its
route's limit is a 413 for any caller, with or without a key, from Content-Length at once or as soon as a streamed
body passes the limit, and the process never holds more of it than that."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from app.work.schemas import WIRE_PAYLOAD_FACTOR, WORK_FIELDS_BYTES
from tests.conftest import ADMIN, ADMIN_KEY, EXAMPLE_POLICY, install_policy, make_key
from tests.processes import ServiceProcess
from tests.work.conftest import ONLINE, make_world

pytestmark = pytest.mark.asyncio

JSON = {"content-type": "application/json"}
CHUNK = 64 * 1024


def _work_limit(settings: Settings) -> int:
    return WIRE_PAYLOAD_FACTOR * settings.max_payload_bytes + WORK_FIELDS_BYTES


def _assert_too_large(response: httpx.Response, limit: int) -> None:
    assert response.status_code == 413, response.text[:300]
    error = response.json()["error"]
    assert error["code"] == "payload_too_large" and error["limit_bytes"] == limit, error
    assert response.headers["connection"] == "close"


async def _lazy_body(size: int, pulled: list[int] | None = None) -> AsyncIterator[bytes]:
    """`size` bytes made as they are sent (the sender holds one chunk, never the body); `pulled` counts the chunks
    taken."""
    chunk = b"x" * CHUNK
    for _ in range(size // CHUNK):
        if pulled is not None:
            pulled.append(1)
        yield chunk


async def test_an_oversized_body_is_refused_before_the_caller_is_checked(client, settings):
    limit = _work_limit(settings)
    for headers in ({}, ADMIN, {"Authorization": "Bearer wlm_unknown"}):
        response = await client.post("/v1/work", headers={**headers, **JSON}, content=b"x" * (limit + 1))
        _assert_too_large(response, limit)


async def test_each_route_has_its_limit(client, settings):
    # A service definition may be larger than an ordinary body, up to its own limit.
    await install_policy(client, EXAMPLE_POLICY + b"\n# " + b"x" * settings.max_body_bytes)
    too_big_policy = b"#" * settings.max_policy_bytes + b"\n"
    response = await client.put("/v1/policy", headers={**ADMIN, "content-type": "application/yaml"}, content=too_big_policy)
    _assert_too_large(response, settings.max_policy_bytes)
    # An ordinary route takes the default, whatever the body is.
    classify = {"subsystem_type": "CB", "attributes": {"userid": "x" * settings.max_body_bytes}}
    _assert_too_large(await client.post("/v1/policy:classify", headers=ADMIN, json=classify), settings.max_body_bytes)
    world = await make_world(client)
    # One work request: its payload's limit and room for its other fields; within that, the payload's own check.
    limit = _work_limit(settings)
    request = {"connect_token": world.qm_token, "application_environment": "PAYROLL", "classification": ONLINE}
    _assert_too_large(await client.post("/v1/work", headers=world.qm, json={**request, "payload": "x" * limit}), limit)
    too_big_payload = await client.post("/v1/work", headers=world.qm, json={**request, "payload": "x" * settings.max_payload_bytes})
    assert too_big_payload.status_code == 413 and too_big_payload.json()["error"]["path"] == "payload"
    # A payload within its limit as stored is accepted however its client escapes it: "日" is 3 bytes stored, 6 sent
    # as \u65e5 (json.dumps' default), and "😀" 4 stored, 12 sent as two escapes.
    for character in ("日", "😀"):
        text = character * ((settings.max_payload_bytes - 2) // len(character.encode()))
        body = json.dumps({**request, "payload": text}).encode()
        assert len(body) > 2 * settings.max_payload_bytes
        response = await client.post("/v1/work", headers={**world.qm, **JSON}, content=body)
        assert response.status_code == 201, response.text[:300]
    # A batch: every payload within its limit, but together more than a batch may carry.
    payload = "x" * (settings.max_payload_bytes - 1024)
    items = [{"classification": ONLINE, "payload": payload}] * (settings.max_batch_bytes // len(payload) + 1)
    batch = {"connect_token": world.qm_token, "application_environment": "PAYROLL", "items": items}
    _assert_too_large(await client.post("/v1/work:batch", headers=world.qm, json=batch), settings.max_batch_bytes)
    assert (await client.post("/v1/work:batch", headers=world.qm, json={**batch, "items": items[:2]})).status_code == 201


async def test_a_streamed_body_is_refused_once_it_passes_the_limit(client, settings):
    world = await make_world(client)
    for path, headers, limit in (
        ("/v1/work", world.qm, _work_limit(settings)),
        ("/v1/policy:classify", {}, settings.max_body_bytes),  # FastAPI reads a body before it checks the caller
        ("/v1/policy:classify", ADMIN, settings.max_body_bytes),
    ):
        pulled: list[int] = []
        response = await client.post(path, headers={**headers, **JSON}, content=_lazy_body(100 * limit, pulled))
        _assert_too_large(response, limit)
        assert len(pulled) <= limit // CHUNK + 1, path  # read up to the limit, not on to the body's end
    # The fast path checks the caller first: none of the body is read, and the connection closes rather than read the
    # rest to discard it.
    pulled = []
    response = await client.post("/v1/work", headers=JSON, content=_lazy_body(100 * CHUNK, pulled))
    assert response.status_code == 401 and response.headers["connection"] == "close" and not pulled


# The service's memory under oversized bodies: a real `wlm serve` (uvicorn with one worker runs in that process).
BODY_BYTES = 200 * 1024 * 1024
CONCURRENT = 8
MOST_GROWTH_BYTES = 30 * 1024 * 1024


def _memory_bytes(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _reset_peak(pid: int) -> None:
    """VmHWM, the peak resident size, starts again from the current one (Linux: clear_refs 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


@pytest.fixture
def service(tmp_path: Path) -> Iterator[ServiceProcess]:
    yield from ServiceProcess.running(tmp_path, bootstrap_admin_key=ADMIN_KEY)


async def _send_oversized(http: httpx.AsyncClient, path: str, headers: dict[str, str], declared: bool) -> int | None:
    """The status answered to a BODY_BYTES body, or None when the service closed the connection before the client
    could read an answer (it refuses while the client is still sending)."""
    length = {"content-length": str(BODY_BYTES)} if declared else {}  # else sent chunked
    try:
        response = await http.post(path, headers={**headers, **JSON, **length}, content=_lazy_body(BODY_BYTES))
    except (httpx.NetworkError, httpx.RemoteProtocolError):
        return None
    return response.status_code


async def test_oversized_bodies_do_not_grow_the_process(service: ServiceProcess) -> None:
    pid = service.process.pid  # type: ignore[union-attr]
    async with httpx.AsyncClient(base_url=service.url, timeout=60) as http:
        qm = await make_key(http, "qm", ["queue_manager"])
        kinds = list(itertools.product(("/v1/work", "/v1/policy:classify"), ({}, qm), (True, False)))  # path, headers, declared
        for kind in kinds:  # each kind once first: the allocations a first request makes are not the bodies'
            await _send_oversized(http, *kind)
        _reset_peak(pid)
        before = _memory_bytes(pid, "VmRSS")
        for path, headers, declared in kinds:
            answers = await asyncio.gather(*(_send_oversized(http, path, headers, declared) for _ in range(CONCURRENT)))
            # The fast path checks the caller before it reads a streamed body; FastAPI's routes read bodies first.
            refusal = 401 if (path, headers, declared) == ("/v1/work", {}, False) else 413
            assert set(answers) <= {refusal, None}, (path, headers, declared, answers)
        peak, after = _memory_bytes(pid, "VmHWM"), _memory_bytes(pid, "VmRSS")
        assert peak - before < MOST_GROWTH_BYTES, f"RSS {before >> 20} MiB before, peak {peak >> 20} MiB, {after >> 20} MiB after"
        assert (await http.get("/healthz")).status_code == 200


# The limit on its own, as an ASGI application's first layer, with the headers a parser may pass on as they came.
async def _through_the_limit(headers: list[tuple[bytes, bytes]], body: bytes, http_version: str = "1.1") -> tuple[int, int]:
    """The status answered and how many bytes the application read, for `body` sent in chunks of 10 bytes under
    `headers`, with a limit of 100 bytes."""
    from app.web.guards import BodyLimitMiddleware

    read = 0

    async def application(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        nonlocal read
        while True:
            message = await receive()  # type: ignore[operator]
            read += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b""})  # type: ignore[operator]

    chunks = [body[i : i + 10] for i in range(0, len(body), 10)] or [b""]
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    statuses: list[int] = []

    async def receive() -> dict:  # type: ignore[type-arg]
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict) -> None:  # type: ignore[type-arg]
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    scope = {"type": "http", "method": "POST", "path": "/", "http_version": http_version, "headers": headers}
    await BodyLimitMiddleware(application, {}, 100)(scope, receive, send)  # type: ignore[arg-type]
    return statuses[0], read


@pytest.mark.parametrize("length", [b"2000 ", b"2000\t", b" 2000"])
async def test_a_length_with_blanks_is_read_and_refused(length: bytes) -> None:
    """httptools passes a Content-Length's trailing blanks on: the length is still the length."""
    assert await _through_the_limit([(b"content-length", length)], b"x" * 2000) == (413, 0)


async def test_an_unreadable_length_has_its_body_watched() -> None:
    status, read = await _through_the_limit([(b"content-length", b"20x0")], b"x" * 2000)
    assert status == 413 and read <= 110


async def test_a_body_without_http_1_framing_is_watched() -> None:
    """HTTP/2 may stream a body with neither a Content-Length nor chunked encoding."""
    status, read = await _through_the_limit([], b"x" * 2000, http_version="2")
    assert status == 413 and read <= 110


async def test_a_declared_body_within_its_limit_passes() -> None:
    assert await _through_the_limit([(b"content-length", b"50")], b"x" * 50) == (200, 50)
