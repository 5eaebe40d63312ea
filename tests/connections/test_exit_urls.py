"""The exit URL allowlist (pure): only URLs matching an admin's pattern part by part."""

from __future__ import annotations

import pytest

from app.connections.exit_urls import allowed, matches

ALLOWLIST = ["https://qm.example.com/wlm/*", "https://*.bank.example/exit", "http://10.1.2.3:8080/hook"]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://qm.example.com/wlm/exit", True),
        ("https://qm.example.com/wlm/", True),
        ("https://QM.example.com/wlm/x", True),
        ("https://qm.example.com:443/wlm/x", True),
        ("https://qm.example.com/other", False),
        ("http://qm.example.com/wlm/x", False),
        ("https://qm.example.com:8443/wlm/x", False),
        ("https://qm.example.com.evil.net/wlm/x", False),
        ("https://evil.internal/x.qm.example.com/wlm/x", False),
        ("http://169.254.169.254/?.example.com/wlm/", False),
        ("https://user:pw@qm.example.com/wlm/x", False),
        ("https://qm.example.com@evil.net/wlm/x", False),
        ("https://a.bank.example/exit", True),
        ("https://a.b.bank.example/exit", True),
        ("https://bank.example/exit", False),
        ("https://xbank.example/exit", False),
        ("https://a.bank.example/exit/more", False),
        ("http://10.1.2.3:8080/hook", True),
        ("http://10.1.2.3/hook", False),
        ("http://10.1.2.3:99999/hook", False),
        ("ftp://qm.example.com/wlm/x", False),
        ("not a url", False),
    ],
)
def test_allowlist(url, expected):
    assert allowed(url, ALLOWLIST) is expected


def test_empty_allowlist_allows_nothing():
    assert not allowed("https://qm.example.com/wlm/x", [])


def test_exact_path_without_star():
    assert matches("https://h.example/exit", "https://h.example/exit")
    assert not matches("https://h.example/exit", "https://h.example/exit2")
