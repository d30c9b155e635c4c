"""The gateway's TOML config. Unknown keys are errors that name the key and its line.

Paths may use `{cache}` (the worker-tier cache directory); relative paths are read from the
config file's directory. The admin token comes from the environment variable named by
`admin.token_env` when it is set, else from `admin.token`; with neither, the admin API
refuses every call.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from core.guard import GuardRules
from core.names import Name
from core.records import Strict
from core.tomlfile import load_toml
from serve.engine.modelbuild import cache_dir
from serve.gateway.fairshare import ShareLimits

AliasPattern = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,126}\*?$")]
"""A model name, or a name's beginning followed by `*`."""


class GatewaySection(Strict):
    """`[gateway]`: where it listens, its state, its routes and its limits."""

    host: str = "127.0.0.1"
    port: int = Field(9000, ge=1, le=65535)
    state_db: Path
    """SQLite file of the routes, adapters, canaries, shadows and the request and shadow logs."""
    routes: list[Name] = Field(default_factory=lambda: ["worker"], min_length=1)
    """Route names a request's `model` may name; each has a production version and a rollback target."""
    default_route: Name = "worker"
    """The route of a request that names no `model`."""
    max_body_bytes: int = Field(16 * 1024 * 1024, gt=0)
    """Larger request bodies get 413."""
    request_timeout_s: float = Field(600.0, gt=0)
    """A non-streamed answer slower than this gets 504."""
    stream_idle_timeout_s: float = Field(120.0, gt=0)
    """A stream silent for this long is ended with an error event."""
    connect_timeout_s: float = Field(5.0, gt=0)
    """Time to open a connection to an engine; one that refuses or times out is marked down and the next
    replica is tried."""
    retry_after_s: int = Field(5, ge=1)
    """`Retry-After` of a 503 while no engine is up."""
    request_log_keep: int = Field(100_000, ge=0)
    """Rows kept in each of the request and shadow logs (0 keeps every row)."""
    forced_tool_routes: list[Name] = Field(default_factory=list)
    """Routes on which a request that offers tools and chooses none must call one (each API's "any tool"
    choice, tools made strict): for a model too small to call tools unprompted, as the demo's agent is.
    Never for production traffic: the model no longer decides whether to call. The response says it in
    `X-Worker-Tool-Choice: forced`, and a captured decision records the choice the model saw."""
    model_aliases: dict[AliasPattern, Name] = Field(default_factory=dict)
    """Model names a runtime sends (e.g. Claude Code's background model) -> the route they mean. A key ending
    in `*` matches every name that starts with the rest (`"claude-*" = "worker"`); an exact key wins, then
    the longest prefix."""

    prefix_cache_scope: Literal["workspace", "shared"] | None = None
    """Whose KV-cache blocks a request may reuse (serve/gateway/prefixcache.py). `workspace`: only its own
    workspace's, so no tenant can time another's prompts by its hits; `shared`: any request's (vLLM's own
    behaviour). Unset: `workspace` with `[auth] keys_file`, else `shared` (without keys every caller names its
    own workspace, so a salt from it would keep out no one)."""

    def alias(self, model: str) -> str:
        """The route an aliased model name means, else the name itself."""
        if model in self.model_aliases:
            return self.model_aliases[model]
        prefixes = [k for k in self.model_aliases if k.endswith("*") and model.startswith(k[:-1])]
        return self.model_aliases[max(prefixes, key=len)] if prefixes else model


class BaseSection(Strict):
    """`[base]`: the base model every engine serves."""

    served_model_name: Name = "worker-base"
    """The engines' `--served-model-name`; a request may name it to bypass every adapter."""
    model: str
    """The base model an adapter must have been trained on: compared with the last path component of
    `base_model_name_or_path` in its adapter_config.json."""


class AdaptersSection(Strict):
    """`[adapters]`: where adapter files may come from and how large they may be."""

    root: Path
    """Adapter paths must lie inside this directory (also through symlinks); relative ones are read here."""
    max_rank: int = Field(16, gt=0)
    """The engines' `--max-lora-rank`: a larger adapter is refused at registration."""


class UpstreamConfig(Strict):
    """One `[[upstreams]]` entry: a replica of the same base model."""

    name: Name
    """The replica's name in metrics, logs and the `X-Worker-Upstream` header."""
    url: Annotated[str, StringConstraints(pattern=r"^https?://[^/\s]+$")]
    """The engine's base URL, scheme and host only (e.g. `http://127.0.0.1:8000`)."""


class HealthSection(Strict):
    """`[health]`: how often each engine's `/health` is probed, and when a failed probe takes it out."""

    interval_s: float = Field(2.0, gt=0)
    timeout_s: float = Field(2.0, gt=0)
    unhealthy_threshold: int = Field(3, ge=1)
    """Failed probes in a row (a timeout, an error answer) before a healthy engine leaves the rotation:
    an engine busy on a long prefill can miss one probe and still serve. A refused connection (nothing
    listening) takes it out at once."""


class ShadowSection(Strict):
    """`[shadow]`: the background workers that copy requests to a shadow candidate."""

    queue_size: int = Field(32, ge=1)
    """When full, shadow requests are dropped and counted."""
    concurrency: int = Field(1, ge=1)
    """Shadow requests in flight at once."""
    timeout_s: float = Field(300.0, gt=0)
    """A shadow answer slower than this is recorded as a transport error."""


class AdminSection(Strict):
    """`[admin]`: the admin API's bearer token."""

    token: str | None = None
    """The token itself; prefer `token_env` so it stays out of the file."""
    token_env: str = "WORKER_GATEWAY_ADMIN_TOKEN"
    """The environment variable holding the token; it wins over `token` when set."""

    def resolved_token(self) -> str | None:
        """The token in force, or None: then the admin API refuses every call."""
        return os.environ.get(self.token_env) or self.token or None


class MetricsSection(Strict):
    """`[metrics]`: what `/metrics` adds to the gateway's own series."""

    engine_scrape_timeout_s: float = Field(2.0, gt=0)
    """Time allowed to read each engine's `/metrics`; an engine that does not answer in time has no series."""
    nvml: bool = True
    """GPU series via NVML; absent (never zero) without a GPU."""


class CaptureSection(Strict):
    """Capture of live decisions (001 S13) and the tool-outcome guard (S11); see serve/gateway/capture.py.

    An unknown mode is refused when the config is read, and so is `full` without a workspace
    allowlist: start-up fails closed rather than capture more than was meant."""

    mode: Literal["off", "descriptor", "full"] = "off"
    """`descriptor` stores no message text; `full` also stores the request (only for `workspaces`)."""
    workspaces: list[Name] = Field(default_factory=list)
    """Allowlist of workspaces captured (empty: every workspace); required for `full`. Names, as the
    `X-Workspace-Id` header must be one (an empty or padded name could never match a request)."""
    sample_rate: float = Field(0.0, ge=0.0, le=1.0)
    """Share of sessions captured, chosen by a hash of `X-Session-Id` (a session is all in or all out)."""
    db: Path = Path("capture.sqlite")
    """The capture store (SQLite WAL; survives restarts)."""
    queue_size: int = Field(1000, ge=1)
    """When full, capture jobs are dropped and counted."""
    retention_days: float = Field(30.0, gt=0, le=3650, allow_inf_nan=False)
    """Decisions captured longer ago than this are deleted (the whole row, `full`-mode request text with it),
    overwritten on disk and their space given back to the file system."""
    max_rows: int = Field(1_000_000, ge=1, le=1_000_000_000)
    """At most this many decisions are kept; beyond it the oldest are deleted, as for retention."""
    retention_interval_s: float = Field(600.0, gt=0, le=86_400, allow_inf_nan=False)
    """How often the capture worker enforces `retention_days` and `max_rows` (also once at start-up)."""
    guard: GuardRules = Field(default_factory=GuardRules)
    """The tool-outcome guard's rules (`[capture.guard]`); it runs in every capture mode."""

    @model_validator(mode="after")
    def _full_needs_an_allowlist(self) -> CaptureSection:
        if self.mode == "full" and not self.workspaces:
            raise ValueError("capture.mode = \"full\" stores whole requests and needs capture.workspaces, the "
                             "allowlist of workspaces that agreed to it; refusing to start without one")
        return self


class AuthSection(Strict):
    """`[auth]`: the client keys of the model APIs (serve/gateway/keys.py has the file's format)."""

    keys_file: Path | None = None
    """Without one, the model APIs take any caller and the `X-Workspace-Id` it sends, so the gateway
    refuses to listen on any but a loopback address."""
    reload_interval_s: float = Field(1.0, gt=0, le=3600, allow_inf_nan=False)
    """How often the keys file's inode, size and modification time are checked; a changed file is read
    again (a bad one keeps the keys in force, logged and counted)."""


class FairShareSection(Strict):
    """`[fair_share]`: each share's default limits (a key entry may set its own) and the engines' slots;
    see serve/gateway/fairshare.py. Unset limits are no limits."""

    engine_slots: int | None = Field(None, ge=1)
    """Requests the engines run at once (the sum of their `max_num_seqs`); beyond it requests wait, and
    are let in by weight, fairly between shares. None: no queue in the gateway."""
    slot_wait_s: float = Field(60.0, gt=0, allow_inf_nan=False)
    """A request that waited this long for an engine slot gets 429 `engine_busy`."""
    weight: float = Field(1.0, gt=0, allow_inf_nan=False)
    max_in_flight: int | None = Field(None, ge=1)
    requests_per_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    request_burst: int | None = Field(None, ge=1)
    """Capacity of the requests bucket (default: `requests_per_s` rounded up, at least 1)."""
    tokens_per_min: int | None = Field(None, ge=1)
    default_max_tokens: int = Field(1024, ge=1)
    """The output a request that sets no `max_tokens` is estimated at, until its usage is known."""
    retry_after_s: int = Field(1, ge=1)
    """`Retry-After` of a 429 for requests in flight or engine slots (a bucket's says when it has refilled)."""

    def limits(self) -> ShareLimits:
        return ShareLimits(self.weight, self.max_in_flight, self.requests_per_s, self.request_burst,
                           self.tokens_per_min)


class GatewayConfig(Strict):
    """The whole gateway config file (configs/gateway.toml is the annotated example)."""

    gateway: GatewaySection
    base: BaseSection
    adapters: AdaptersSection
    upstreams: list[UpstreamConfig] = Field(min_length=1)
    health: HealthSection = Field(default_factory=HealthSection)
    shadow: ShadowSection = Field(default_factory=ShadowSection)
    admin: AdminSection = Field(default_factory=AdminSection)
    metrics: MetricsSection = Field(default_factory=MetricsSection)
    capture: CaptureSection = Field(default_factory=CaptureSection)
    auth: AuthSection = Field(default_factory=AuthSection)
    fair_share: FairShareSection = Field(default_factory=FairShareSection)

    @property
    def prefix_cache_scope(self) -> Literal["workspace", "shared"]:
        """`gateway.prefix_cache_scope`, or its default: `workspace` when client keys say who the tenants are."""
        scope = self.gateway.prefix_cache_scope
        if scope is not None:
            return scope
        return "workspace" if self.auth.keys_file is not None else "shared"

    @model_validator(mode="after")
    def _names_are_consistent(self) -> GatewayConfig:
        routes = self.gateway.routes
        if len(set(routes)) != len(routes):
            raise ValueError("gateway.routes: a route is listed twice")
        if self.gateway.default_route not in routes:
            raise ValueError(f"gateway.default_route: {self.gateway.default_route!r} is not in gateway.routes")
        if self.base.served_model_name in routes:
            raise ValueError("gateway.routes: a route cannot have the base model's served name")
        for route in self.gateway.forced_tool_routes:
            if route not in routes:
                raise ValueError(f"gateway.forced_tool_routes: {route!r} is not in gateway.routes")
        for alias, route in self.gateway.model_aliases.items():
            if route not in routes:
                raise ValueError(f"gateway.model_aliases: {alias!r} names {route!r}, which is not in gateway.routes")
        names = [u.name for u in self.upstreams]
        if len(set(names)) != len(names):
            raise ValueError("upstreams: two upstreams have the same name")
        return self


def load_gateway_config(path: Path, port: int | None = None, *, engine_urls: Sequence[str] = (),
                        state_db: Path | None = None, capture_db: Path | None = None) -> GatewayConfig:
    """Parse and validate; expand `{cache}` and resolve relative paths beside the file. The overrides are what a
    second checkout on the same machine changes without copying the file: `engine_urls` replace the
    `[[upstreams]]` (named engine-0, engine-1, …), `state_db` and `capture_db` the stores (as given, from the
    working directory)."""
    config = load_toml(path, GatewayConfig, "gateway config")
    gateway = config.gateway.model_copy(update={"state_db": state_db or _resolve(path, config.gateway.state_db),
                                                **({"port": port} if port is not None else {})})
    adapters = config.adapters.model_copy(update={"root": _resolve(path, config.adapters.root)})
    capture = config.capture.model_copy(update={"db": capture_db or _resolve(path, config.capture.db)})
    keys_file = config.auth.keys_file
    auth = config.auth.model_copy(update={"keys_file": None if keys_file is None else _resolve(path, keys_file)})
    update: dict[str, object] = {"gateway": gateway, "adapters": adapters, "capture": capture, "auth": auth}
    if engine_urls:
        update["upstreams"] = [UpstreamConfig(name=f"engine-{i}", url=url) for i, url in enumerate(engine_urls)]
    return config.model_copy(update=update)


def _resolve(config_path: Path, value: Path) -> Path:
    expanded = Path(str(value).replace("{cache}", str(cache_dir())))
    return expanded if expanded.is_absolute() else (config_path.parent / expanded).resolve()
