"""Which hosts are this machine's alone: the one rule the gateway applies to the address it binds
(without a keys file it serves loopback only) and replay to the endpoints it sends to (the sandbox
rule: loopback unless a host is allowed on purpose)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether `host`, a bare name or address (as a bind address or a URL's `hostname` is), is reachable
    from this machine only: `localhost` or a loopback address. A bracketed `[::1]` is a URL's spelling,
    not a host, and is not loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
