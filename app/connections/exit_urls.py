"""Which queue-manager exit URLs the service may call (pure).

The service POSTs to exit URLs, so an unchecked URL would let any queue manager make it call internal hosts
(metadata services, Redis, admin ports). An URL is allowed only if it matches a pattern of the admin's
allowlist part by part: same scheme, same port, host equal (or a subdomain for `*.domain`), path equal (or
under a prefix ending in `*`); URLs with credentials are never allowed.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import SplitResult, urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _port(parts: SplitResult) -> int | None:
    try:
        return parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return None


def _host_matches(pattern: str, host: str) -> bool:
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and len(host) > len(pattern) - 1
    return host == pattern


def _path_matches(pattern: str, path: str) -> bool:
    pattern, path = pattern or "/", path or "/"
    if pattern.endswith("*"):
        return path.startswith(pattern[:-1])
    return path == pattern


def matches(pattern: str, url: str) -> bool:
    want, got = urlsplit(pattern), urlsplit(url)
    if got.scheme not in _DEFAULT_PORTS or got.username is not None or got.password is not None:
        return False
    if got.scheme != want.scheme or not got.hostname or not want.hostname:
        return False
    if _port(got) is None or _port(got) != _port(want):
        return False
    return _host_matches(want.hostname, got.hostname) and _path_matches(want.path, got.path)


def allowed(url: str, allowlist: Sequence[str]) -> bool:
    return any(matches(pattern, url) for pattern in allowlist)
