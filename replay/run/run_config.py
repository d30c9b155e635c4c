"""The run config (`RUN.toml`): endpoint, decoding, arms, runner settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from core.hosts import is_loopback
from core.names import Name
from core.records import Strict
from core.tomlfile import ConfigError, load_toml
from core.wire import DecisionApi
from replay.errors import ReplayError
from replay.memory.inject import ConditionError, MemoryCondition, parse_condition


class RunConfigError(ReplayError, ConfigError):
    """A run config that cannot be used; the message names the file, the line and the key."""


class Endpoint(Strict):
    """`[endpoint]`: the OpenAI-compatible server replayed against (the gateway, or vLLM itself)."""

    base_url: str
    """Up to `/v1`, e.g. `http://127.0.0.1:9000/v1`; loopback only unless its host is in `allow_hosts`."""
    allow_hosts: list[str] = Field(default_factory=list)
    """Non-loopback hosts allowed on purpose: replay talks to loopback only otherwise (the sandbox rule)."""
    api_key_env: str | None = None
    """Environment variable holding a bearer token, sent when it is set."""
    timeout_s: float = Field(300.0, gt=0)
    """Per request; a slower answer is a transport error (retried, then recorded)."""
    api: DecisionApi = "chat"
    """The API a decision that names none is sent through (`chat`: /chat/completions, `messages`: Anthropic
    /messages, `responses`: /responses); a decision with its own `api` (captured on it) is sent through that."""

    @model_validator(mode="after")
    def _loopback_unless_allowed(self) -> Endpoint:
        check_host(self.base_url, self.allow_hosts)
        return self


def check_host(base_url: str, allow_hosts: list[str]) -> None:
    """ValueError unless `base_url` is http(s) on loopback or on a host `allow_hosts` lists (the sandbox rule)."""
    url = urlparse(base_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"base_url {base_url!r} is not an http(s) URL")
    if not is_loopback(url.hostname) and url.hostname not in allow_hosts:
        raise ValueError(
            f"base_url host {url.hostname!r} is not loopback; replay is sandboxed to loopback "
            "unless the host is listed in endpoint.allow_hosts"
        )


class Decoding(Strict):
    """`[decoding]`: sampling settings of every arm (greedy and seeded by default, so reruns agree)."""

    temperature: float = Field(0.0, ge=0)
    seed: int | None = 0
    """Sent with every request; also seeds the `shuffled` order."""
    max_tokens: int = Field(512, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)


class DecodingOverride(Strict):
    """An arm's `decoding` table: the fields it sets replace the run's `[decoding]` for that arm."""

    temperature: float | None = Field(None, ge=0)
    seed: int | None = None
    max_tokens: int | None = Field(None, gt=0)
    top_p: float | None = Field(None, gt=0, le=1)


class Arm(Strict):
    """Served model (route, base or adapter version) × memory condition × decoding."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:+-]*$")
    """The arm's name in results, comparisons and gates (unique in the run)."""
    model: str
    """The request's `model`: a gateway route, the base model's served name or an adapter version."""
    memory: str = "withheld"
    """The memory condition (withheld, workspace, workspace-minus:<id>, rules:<id,id>, rule:<text>)."""
    decoding: DecodingOverride = Field(default_factory=DecodingOverride)
    workspaces: list[Name] | None = None
    """Only decisions of these workspaces (None: all). An ablation `workspace-minus:<id>` arm names the
    rule's own workspace: the rule exists nowhere else."""
    replicate_of: str | None = None
    """An A/A arm: the named arm's model, memory, decoding and workspaces again, its own results. What
    it changes against that arm with nothing changed is the engine's noise floor (`compare`)."""
    base_url: str | None = None
    """The arm's own endpoint, up to `/v1`, when its model is served by another engine than `[endpoint]`'s: a
    quantised build is a model of its own (one engine per checkpoint), and the gain that must survive
    quantisation is read from arms on two such engines (None: `[endpoint]`). Same sandbox rule, same key."""

    @field_validator("memory")
    @classmethod
    def _known_condition(cls, value: str) -> str:
        try:
            parse_condition(value)
        except ConditionError as exc:
            raise ValueError(str(exc)) from exc
        return value

    @property
    def condition(self) -> MemoryCondition:
        """The parsed memory condition: what everything below the config reads (`memory` stays the text as written,
        which results record; `_known_condition` refused any text that does not parse)."""
        return parse_condition(self.memory)


class Runner(Strict):
    """`[runner]`: how the requests are sent."""

    concurrency: int = Field(8, ge=1, le=256)
    """Requests in flight at once (keeps the engine's batch full)."""
    retries: int = Field(3, ge=0, le=20)
    """Transport errors are retried this often, then recorded as `transport_error`."""
    backoff_s: float = Field(0.5, ge=0)
    """First retry delay; it doubles with each retry."""
    order: Literal["prefix", "shuffled", "suite"] = "prefix"
    """`prefix`: requests sharing a prompt prefix (same model, system prompt and tools) run together, so the
    engine's per-adapter prefix cache stays warm. `shuffled` exists to measure that; `suite`: arm by arm, in the
    suite's order."""


class MemorySource(Strict):
    """`[memory]`: where the workspace memory the arms inject is read from."""

    root: Path | None = None
    """One sub-directory per workspace; relative to the config file."""


REPLICATED_FIELDS = ("model", "memory", "decoding", "workspaces", "base_url")
"""What a replicate takes from the arm it replicates (and may not set itself)."""


class RunConfig(Strict):
    """The whole run config (configs/runs/example.toml is the annotated example)."""

    endpoint: Endpoint
    decoding: Decoding = Field(default_factory=Decoding)
    runner: Runner = Field(default_factory=Runner)
    memory: MemorySource = Field(default_factory=MemorySource)
    arms: list[Arm] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _fill_replicates(cls, data: Any) -> Any:
        """A replicate's model, memory, decoding and workspaces are its original's, so the two cannot drift."""
        if not isinstance(data, dict) or not isinstance(data.get("arms"), list):
            return data
        arms = data["arms"]
        by_name = {a.get("name"): a for a in arms if isinstance(a, dict)}
        filled = []
        for index, arm in enumerate(arms):
            if not isinstance(arm, dict) or arm.get("replicate_of") is None:
                filled.append(arm)
                continue
            of = arm["replicate_of"]
            original = by_name.get(of) if isinstance(of, str) else None
            problem = None
            if original is None:
                known = ", ".join(str(a.get("name")) for a in arms if isinstance(a, dict) and a is not arm)
                problem = f"{of!r} is no arm of this run (arms: {known or 'none'})"
            elif original is arm:
                problem = "an arm cannot replicate itself"
            elif original.get("replicate_of") is not None:
                problem = (f"{of!r} is itself a replicate (of {original['replicate_of']!r}): "
                           "replicate the original arm")
            elif own := sorted(set(arm) & set(REPLICATED_FIELDS)):
                problem = (f"a replicate takes {', '.join(REPLICATED_FIELDS)} from the arm it replicates; "
                           f"this one sets {', '.join(own)}")
            if problem is not None or original is None:
                raise ValidationError.from_exception_data(cls.__name__, [{
                    "type": PydanticCustomError("replicate", problem or ""), "loc": ("arms", index, "replicate_of"),
                    "input": of}])
            filled.append({**{k: original[k] for k in REPLICATED_FIELDS if k in original}, **arm})
        return {**data, "arms": filled}

    @model_validator(mode="after")
    def _unique_arm_names(self) -> RunConfig:
        names = [arm.name for arm in self.arms]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"arm names must be unique: {', '.join(duplicates)}")
        return self

    @model_validator(mode="after")
    def _arm_endpoints_loopback_unless_allowed(self) -> RunConfig:
        for index, arm in enumerate(self.arms):
            if arm.base_url is not None:
                try:
                    check_host(arm.base_url, self.endpoint.allow_hosts)
                except ValueError as exc:
                    raise ValueError(f"arms.{index}.base_url (arm {arm.name!r}): {exc}") from None
        return self

    def base_url_of(self, arm: Arm) -> str:
        """Where the arm's requests go: its own endpoint, else the run's."""
        return arm.base_url or self.endpoint.base_url

    def endpoints(self) -> list[str]:
        """Every endpoint the run asks: the run's first, then each arm's own, once."""
        return list(dict.fromkeys([self.endpoint.base_url, *(self.base_url_of(arm) for arm in self.arms)]))

    def decoding_for(self, arm: Arm) -> Decoding:
        """The run's decoding with the arm's overrides applied."""
        overrides = arm.decoding.model_dump(exclude_none=True)
        return self.decoding.model_copy(update=overrides)


def load_run_config(path: Path) -> RunConfig:
    """Parse and validate a run config; `memory.root` is resolved beside the file."""
    try:
        config = load_toml(path, RunConfig, "run config")
    except ConfigError as exc:
        raise RunConfigError(str(exc)) from exc
    if config.memory.root is not None and not config.memory.root.is_absolute():
        config.memory.root = (path.parent / config.memory.root).resolve()
    return config
