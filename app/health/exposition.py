"""A scrape of /metrics that costs little however many queues there are: the elected scheduler reads every queue's
figures and renders their text once in a while (only while scrapes want it), keeps it deflated in Redis, and each
scrape serves that with the process's own counters appended, read and rendered at the scrape.

The stored text is a raw deflate stream flushed to a byte boundary without its final block: a scrape that accepts
gzip gets one gzip member made of a header, that stream, the process's counters deflated on their own (a few KB) and
a trailer whose CRC-32 continues the stored text's, so neither side decompresses the other's part; any other scrape
gets the text inflated in a thread. A stored text older than `metrics_max_age` (the goal interval by default), or
rendered under another policy version, is not served: the scrape reads the queues itself, as it does when no
scheduler renders. Either way `wlm_queue_metrics_rendered_timestamp_seconds` says when the figures were read.

The scheduler renders every half of the age allowed (app/main.py): a text is then replaced before it is too old as
long as a rendering takes less than a quarter of it; scrapes in a gap read the queues themselves.
"""

from __future__ import annotations

import asyncio
import struct
import zlib

from prometheus_client import generate_latest

from app.errors import unavailable
from app.health.metrics import READ_TIMEOUT_S, queue_metrics, queues_unread, read_queues, rendered
from app.health.records import Expositions, StoredExposition
from app.policy.active import ActivePolicy
from app.policy.service import PolicyStore
from app.queues.store import QueueStore

# A scrape marks the rendering wanted this long: the scheduler renders only while someone scrapes.
WANTED_MS = 600_000
# Level 1: on 6 MB of this text, 14 ms and 335 KB against the default level's 51 ms and 289 KB.
LEVEL = 1
# A gzip member's header: deflate, no flags, no modification time, no extra flags, OS unknown (RFC 1952).
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
STORED = "wlm_queue_metrics_stored"
STORED_TEXT = (
    f"# HELP {STORED} 1 when the queues' figures were rendered by the elected scheduler, 0 when read at this scrape\n"
    f"# TYPE {STORED} gauge\n"
)


def deflated(text: bytes, rendered_ms: int, policy_version: int) -> StoredExposition:
    """`text` as a scrape appends to (pure): deflated without a final block, with its CRC-32 and length."""
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = compressor.compress(text) + compressor.flush(zlib.Z_SYNC_FLUSH)
    return StoredExposition(body, zlib.crc32(text), len(text), rendered_ms, policy_version)


def gzipped(stored: StoredExposition, tail: bytes) -> bytes:
    """One gzip member of the stored text followed by `tail` (pure). The tail's deflate stream starts afresh, so
    it refers to nothing before it, and it ends the member with its final block."""
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    end = compressor.compress(tail) + compressor.flush()
    trailer = struct.pack("<II", zlib.crc32(tail, stored.crc32), (stored.length + len(tail)) & 0xFFFFFFFF)
    return b"".join((GZIP_HEADER, stored.deflated, end, trailer))


def inflated(stored: StoredExposition) -> bytes:
    """The stored text (pure)."""
    return zlib.decompressobj(-zlib.MAX_WBITS).decompress(stored.deflated)


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an Accept-Encoding header takes gzip (pure): named, or `*`, without q=0."""
    for coding in accept_encoding.split(","):
        name, *params = (part.strip() for part in coding.split(";"))
        if name.lower() in ("gzip", "x-gzip", "*"):
            weights = [param.split("=", 1)[1] for param in params if param.replace(" ", "").lower().startswith("q=")]
            return not weights or _weight(weights[0]) > 0
    return False


def _weight(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return 0.0


async def keep_rendering(queues: QueueStore, policies: PolicyStore) -> None:
    """The scheduler's duty: while scrapes want it, read every queue's figures, render and deflate their text in a
    thread (megabytes at thousands of queues: the event loop keeps serving meanwhile), and keep it in Redis."""
    kept = Expositions(queues.context)
    if not await kept.wanted_lately():
        return
    policy = await policies.current()
    if policy is None:
        return
    reading = await read_queues(queues, policy)
    await kept.keep(await asyncio.to_thread(lambda: deflated(rendered(reading), reading.read_ms, policy.version)))


async def scrape(queues: QueueStore, policy: ActivePolicy | None, max_age_s: float, gzip: bool) -> tuple[bytes, dict[str, str]]:
    """The body of /metrics and the headers it needs: the scheduler's rendering of the queues while it is fresh
    (gzipped when `gzip`), else the queues read now; this process's counters at the end."""
    own = generate_latest()
    if policy is None:
        return own, {}
    if max_age_s > 0:
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                stored, now_ms = await Expositions(queues.context).read(WANTED_MS)
        except Exception as exc:
            if not (isinstance(exc, TimeoutError) or unavailable(exc)):
                raise
            return queues_unread(exc) + own, {}
        if stored is not None and stored.policy_version == policy.version and now_ms - stored.rendered_ms <= max_age_s * 1000:
            tail = own + f"{STORED_TEXT}{STORED} 1\n".encode()
            if gzip:
                return gzipped(stored, tail), {"Content-Encoding": "gzip"}
            return await asyncio.to_thread(inflated, stored) + tail, {}
    return await queue_metrics(queues, policy) + own + f"{STORED_TEXT}{STORED} 0\n".encode(), {}
