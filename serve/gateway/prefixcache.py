"""Whose KV-cache blocks a request may reuse: the `cache_salt` the gateway sets on what it forwards.

vLLM reuses the KV-cache blocks of any earlier request whose tokens began the same way, and a hit
shortens the time to the first token: a tenant timing its own requests could learn how another
tenant's prompts begin (prompt extraction by timing). vLLM hashes a request's blocks together with
its `cache_salt`, so requests with different salts never share a block.

In `workspace` scope (`[gateway] prefix_cache_scope`; the default with client keys) every request that
fills the cache reaches the engine with its workspace's salt, the client's own never:

* the salt is HMAC-SHA256 of the workspace (the key's; `X-Workspace-Id` without a keys file; none for a
  service key that names none) under a secret the gateway's state store makes once and keeps
  (`Registry.prefix_cache_secret`): stable across restarts, so a workspace keeps its cache, and not
  computable from a workspace's name, so whoever can reach an engine directly (a process on its host,
  another gateway in `shared` scope) cannot send a tenant's salt;
* a client's `cache_salt` (vLLM's use: to split one tenant's cache further, e.g. per end user) is folded
  into its workspace's salt: it narrows its own share of the cache and cannot select another's;
* vLLM 0.32 reads `cache_salt` on chat completions, completions, Messages and Responses; its
  count_tokens has no such field and fills no cache, so it gets no salt (and a client's is dropped).

A request's shadow copy gets its request's salt (a canary is the request itself). `shared` forwards the
body as sent, a client's `cache_salt` included (vLLM's own behaviour).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any, Literal

from serve.gateway.errors import GatewayError

Scope = Literal["workspace", "shared"]


class PrefixCache:
    """One gateway's prefix-cache scope and the key of its salts."""

    def __init__(self, scope: Scope, secret: bytes) -> None:
        self.scope = scope
        self._secret = secret

    def salt(self, workspace: str | None, body: Mapping[str, Any]) -> str | None:
        """The salt of a request of `workspace` with this body (None in `shared` scope). A client's
        `cache_salt` that is not a non-empty string is a 400, as vLLM would answer it."""
        if self.scope == "shared":
            return None
        client = body.get("cache_salt")
        if client is not None and (not isinstance(client, str) or not client):
            raise GatewayError(400, "'cache_salt' must be a non-empty string", "invalid_cache_salt")
        # A JSON pair cannot be read two ways: no workspace and client salt can spell another's.
        return hmac.new(self._secret, json.dumps([workspace, client]).encode(), hashlib.sha256).hexdigest()

    def forwarded(self, body: dict[str, Any], salt: str | None) -> dict[str, Any]:
        """The body as the engine gets it: in `workspace` scope with `salt` (None: no salt) in place of the client's."""
        if self.scope == "shared":
            return body
        rest = {k: v for k, v in body.items() if k != "cache_salt"}
        return rest if salt is None else {**rest, "cache_salt": salt}
