"""The client of the OpenAI-compatible endpoint a run talks to: what both runners (`replay.run.decisions`,
`replay.sandbox.runner`) send and how, so a fix to one reaches both.

Only the configured endpoint is ever asked (redirects are never followed, so the
loopback-unless-allowed rule of `[endpoint]` holds for every hop); a chat request is retried
with exponential backoff on a transient status, and what still fails is an `Outcome` with its
error, never an exception.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import ValidationError

from core.attestation import DerivedFrom, ServedIdentity, adapter_fingerprint
from core.jsonfile import parse_problem
from core.lineage import LineageError, model_lineage
from core.names import excerpt
from core.wire import WIRES, DecisionApi
from replay.run.directory import RunError
from replay.run.run_config import Arm, RunConfig

RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}


@dataclass(frozen=True)
class Outcome:
    body: dict[str, Any] | None
    error: str | None
    attempts: int
    latency_s: float
    served_by: str | None = None  # the answering version, as a gateway names it (X-Worker-Adapter)


def auth_headers(config: RunConfig) -> dict[str, str]:
    if config.endpoint.api_key_env and os.environ.get(config.endpoint.api_key_env):
        return {"Authorization": f"Bearer {os.environ[config.endpoint.api_key_env]}"}
    return {}


def chat_url(config: RunConfig, arm: Arm | None = None) -> str:
    return api_url(config, "chat", arm)


def api_url(config: RunConfig, api: DecisionApi, arm: Arm | None = None) -> str:
    """The URL for one API (chat, Anthropic Messages, Responses) under the `/v1` base of the arm's endpoint
    (without an arm: the run's)."""
    base = config.endpoint.base_url if arm is None else config.base_url_of(arm)
    return base.rstrip("/") + WIRES[api].path


def chat_session(config: RunConfig) -> aiohttp.ClientSession:
    """One session for a run's chat requests: the endpoint's timeout, the runner's concurrency, the auth header."""
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=config.endpoint.timeout_s),
                                 connector=aiohttp.TCPConnector(limit=config.runner.concurrency),
                                 headers=auth_headers(config))


async def send_chat(session: aiohttp.ClientSession, url: str, body: dict[str, Any], headers: dict[str, str],
                    config: RunConfig) -> Outcome:
    """POST with retries and exponential backoff; what still fails is returned, never raised."""
    error = "not sent"
    for attempt in range(1, config.runner.retries + 2):
        started = time.monotonic()
        try:
            async with session.post(url, json=body, headers=headers, allow_redirects=False) as resp:
                text = await resp.text()
                if 300 <= resp.status < 400:
                    return Outcome(None, _redirect_error(resp), attempt, time.monotonic() - started)
                if resp.status == 200:
                    payload, problem = parse_problem(text)
                    if problem is None:
                        return Outcome(payload, None, attempt, time.monotonic() - started,
                                       resp.headers.get("X-Worker-Adapter"))
                    error = f"malformed JSON body from endpoint ({problem}): {excerpt(text, 200)}"
                else:
                    error = f"HTTP {resp.status}: {text[:300]}"
                    if resp.status not in RETRYABLE_STATUS:
                        return Outcome(None, error, attempt, time.monotonic() - started)
        except (TimeoutError, aiohttp.ClientError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        if attempt <= config.runner.retries:
            await asyncio.sleep(config.runner.backoff_s * 2 ** (attempt - 1))
    return Outcome(None, error, config.runner.retries + 1, 0.0)


def _redirect_error(resp: aiohttp.ClientResponse) -> str:
    return (f"HTTP {resp.status} redirect to {resp.headers.get('Location', '(no Location)')}: replay does not follow "
            "redirects (sandbox: only the configured endpoint, loopback unless allowed)")


async def fetch_served(config: RunConfig) -> tuple[dict[str, list[str]], str | None, dict[str, ServedIdentity]]:
    """The model ids each endpoint of the run serves (the run's and every arm's own), the run endpoint's engine
    version, and what serves each arm (`served_identity`)."""
    served: dict[str, list[str]] = {}
    arms: dict[str, ServedIdentity] = {}
    version = None
    for base_url in config.endpoints():
        served[base_url], answered, identities = await fetch_models(config, base_url)
        version = answered if base_url == config.endpoint.base_url else version
        arms |= {arm.name: identities.get(arm.model, ServedIdentity(model=arm.model))
                 for arm in config.arms if config.base_url_of(arm) == base_url}
    return served, version, arms


async def fetch_models(config: RunConfig, base_url: str | None = None) -> tuple[list[str], str | None,
                                                                               dict[str, ServedIdentity]]:
    """Served model ids, the engine version where the endpoint exposes /version, and each id's served identity
    (`served_identity`), of one endpoint (default: the run's)."""
    base = (base_url or config.endpoint.base_url).rstrip("/")
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout, headers=auth_headers(config)) as session:
        try:
            async with session.get(f"{base}/models", allow_redirects=False) as resp:
                if 300 <= resp.status < 400:
                    raise RunError(f"{base}/models answered {_redirect_error(resp)}")
                if resp.status != 200:
                    raise RunError(f"{base}/models answered HTTP {resp.status}: {(await resp.text())[:200]}")
                entries = [m for m in (await resp.json()).get("data", []) if isinstance(m, dict)]
        except aiohttp.ClientError as exc:
            raise RunError(f"cannot reach the endpoint {base}: {exc}") from exc
        version = None
        try:
            async with session.get(base.removesuffix("/v1") + "/version", allow_redirects=False) as resp:
                if resp.status == 200:
                    version = (await resp.json()).get("version")
        except (aiohttp.ClientError, json.JSONDecodeError, aiohttp.ContentTypeError):
            version = None
    models = [m["id"] for m in entries]
    bases = {m["id"]: vllm_lineage(m) for m in entries if m.get("kind") is None}
    return models, version, {m["id"]: served_identity(m, bases.get(m.get("parent") or m["id"]))
                             for m in entries if isinstance(m["id"], str)}


def served_identity(entry: dict[str, Any], under: Mapping[str, Any] | None = None) -> ServedIdentity:
    """What a `/v1/models` entry says serves it. The gateway names an adapter's fingerprint, and a route's
    production version with its fingerprint, and on every entry the base model's lineage (`base_sha256`,
    `quantization`, `derived_from`); vLLM names a LoRA adapter's directory (`root`, with a `parent`), whose files
    are fingerprinted here when this machine can read them, and the base model's, read here the same way (`under`:
    the lineage of the vLLM entry's parent model). Each names the adapter's directory (`root`; a route its
    production's, `production_root`), where its training lineage starts."""
    model = str(entry["id"])
    kind = entry.get("kind")
    lineage = _lineage(entry if kind is not None else under or {})
    if kind == "adapter":
        return ServedIdentity(model=model, version=model, fingerprint=_text(entry.get("fingerprint")),
                              root=_text(entry.get("root")), **lineage)
    if kind == "route":
        return ServedIdentity(model=model, version=_text(entry.get("production")),
                              fingerprint=_text(entry.get("production_fingerprint")),
                              root=_text(entry.get("production_root")), **lineage)
    root, parent = _text(entry.get("root")), _text(entry.get("parent"))
    if kind is None and parent is not None and root is not None and (Path(root) / "adapter_config.json").is_file():
        return ServedIdentity(model=model, version=model, fingerprint=adapter_fingerprint(Path(root)), root=root,
                              **lineage)
    return ServedIdentity(model=model, **lineage)


def _lineage(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The base model's lineage as an entry states it; a `derived_from` of the wrong shape claims nothing."""
    derived = entry.get("derived_from")
    try:
        built = DerivedFrom.model_validate(derived) if isinstance(derived, dict) else None
    except ValidationError:
        built = None
    return {"base_sha256": _text(entry.get("base_sha256")), "quantization": _text(entry.get("quantization")),
            "derived_from": built}


def vllm_lineage(entry: dict[str, Any]) -> dict[str, Any]:
    """A vLLM base model entry's lineage, read from its directory (`root`) where this machine can: the same keys
    the gateway states, all None where it cannot."""
    root = _text(entry.get("root"))
    try:
        lineage = model_lineage(Path(root)) if root is not None and entry.get("parent") is None else None
    except (LineageError, OSError):
        lineage = None
    if lineage is None:
        return {}
    return {"base_sha256": lineage.sha256, "quantization": lineage.quantization,
            "derived_from": lineage.derived_from and lineage.derived_from.model_dump(mode="json")}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def served_entries(config: RunConfig, served: Mapping[str, list[str]]) -> dict[str, Any]:
    """A run manifest's endpoint and the models it serves, and each arm's own endpoint with what it serves
    (`arm_endpoints`, present only when an arm has one): what a resume against other engines is refused on."""
    elsewhere = {url: list(served.get(url, [])) for url in config.endpoints() if url != config.endpoint.base_url}
    return {"endpoint": config.endpoint.base_url, "models": list(served.get(config.endpoint.base_url, [])),
            **({"arm_endpoints": elsewhere} if elsewhere else {})}


def check_served(config: RunConfig, served: Mapping[str, list[str]]) -> None:
    """RunError unless every arm's endpoint serves the arm's model."""
    for base_url in config.endpoints():
        models = served.get(base_url, [])
        missing = sorted({arm.model for arm in config.arms if config.base_url_of(arm) == base_url} - set(models))
        if missing:
            raise RunError(f"the endpoint {base_url} does not serve {', '.join(missing)} "
                           f"(served: {', '.join(models) or 'nothing'})")
