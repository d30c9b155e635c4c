"""The run config (`RUN.toml`): endpoint, decoding, arms, runner settings."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal
from urllib.parse import urlparse

from pydantic import Field, field_validator, model_validator

from core.records import Strict
from core.tomlfile import ConfigError, load_toml
from replay.errors import ReplayError
from replay.memory.inject import ConditionError, parse_condition


class RunConfigError(ReplayError, ConfigError):
    """A run config that cannot be used; the message names the file, the line and the key."""


class Endpoint(Strict):
    base_url: str
    # Replay talks to loopback only, unless a host is named here on purpose (sandbox rule).
    allow_hosts: list[str] = Field(default_factory=list)
    api_key_env: str | None = None
    timeout_s: float = Field(300.0, gt=0)

    @model_validator(mode="after")
    def _loopback_unless_allowed(self) -> Endpoint:
        url = urlparse(self.base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"base_url {self.base_url!r} is not an http(s) URL")
        if not is_loopback(url.hostname) and url.hostname not in self.allow_hosts:
            raise ValueError(
                f"base_url host {url.hostname!r} is not loopback; replay is sandboxed to loopback "
                "unless the host is listed in endpoint.allow_hosts"
            )
        return self


class Decoding(Strict):
    temperature: float = Field(0.0, ge=0)
    seed: int | None = 0
    max_tokens: int = Field(512, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)


class DecodingOverride(Strict):
    temperature: float | None = Field(None, ge=0)
    seed: int | None = None
    max_tokens: int | None = Field(None, gt=0)
    top_p: float | None = Field(None, gt=0, le=1)


class Arm(Strict):
    """Served model (route, base or adapter version) × memory condition × decoding."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:+-]*$")
    model: str
    memory: str = "withheld"
    decoding: DecodingOverride = Field(default_factory=DecodingOverride)
    # Only decisions of these workspaces (None: all). An ablation `workspace-minus:<id>` arm
    # names the rule's own workspace: the rule exists nowhere else.
    workspaces: list[str] | None = None

    @field_validator("memory")
    @classmethod
    def _known_condition(cls, value: str) -> str:
        try:
            parse_condition(value)
        except ConditionError as exc:
            raise ValueError(str(exc)) from exc
        return value


class Runner(Strict):
    concurrency: int = Field(8, ge=1, le=256)
    retries: int = Field(3, ge=0, le=20)
    backoff_s: float = Field(0.5, ge=0)
    # "prefix": requests sharing a prompt prefix (same model, same system prompt and tools) run
    # together, so the engine's per-adapter prefix cache stays warm. "shuffled" exists to measure that.
    order: Literal["prefix", "shuffled", "suite"] = "prefix"


class MemorySource(Strict):
    root: Path | None = None  # one sub-directory per workspace; relative to the config file


class RunConfig(Strict):
    endpoint: Endpoint
    decoding: Decoding = Field(default_factory=Decoding)
    runner: Runner = Field(default_factory=Runner)
    memory: MemorySource = Field(default_factory=MemorySource)
    arms: list[Arm] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_arm_names(self) -> RunConfig:
        names = [arm.name for arm in self.arms]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"arm names must be unique: {', '.join(duplicates)}")
        return self

    def decoding_for(self, arm: Arm) -> Decoding:
        overrides = arm.decoding.model_dump(exclude_none=True)
        return self.decoding.model_copy(update=overrides)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_run_config(path: Path) -> RunConfig:
    try:
        config = load_toml(path, RunConfig, "run config")
    except ConfigError as exc:
        raise RunConfigError(str(exc)) from exc
    if config.memory.root is not None and not config.memory.root.is_absolute():
        config.memory.root = (path.parent / config.memory.root).resolve()
    return config
