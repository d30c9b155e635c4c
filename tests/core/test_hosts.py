"""Which hosts are loopback: what lets a keyless gateway start, and what replay sends to without `allow_hosts`."""

from __future__ import annotations

import pytest

from core.hosts import is_loopback


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.8.0.1", True), ("::1", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("10.0.0.5", False), ("gateway.internal", False),
    ("localhost.evil.example", False), ("127.0.0.1.nip.io", False),
    ("[::1]", False),  # a URL's spelling: callers pass a bare host (`urlparse(...).hostname` strips the brackets)
])
def test_which_hosts_are_loopback(host, loopback):
    assert is_loopback(host) is loopback
