"""Engine configs (TOML) and the vLLM OpenAI server launcher.

The `[vllm]` table uses vLLM's own flag names (underscored): `max_model_len = 4096` becomes
`--max-model-len 4096`, so anyone who knows vLLM can read a config. Unknown keys are rejected
before anything starts.
"""

from __future__ import annotations

import ctypes.util
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from core.jsonfile import JsonFileError, read_json_value
from core.process import ServiceProcess
from core.records import EngineSettings, Strict
from core.tomlfile import ConfigError, load_toml
from serve.engine.modelbuild import cache_dir, default_model_dir
from serve.engine.quantize import SCHEMES, default_out

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
# vLLM flags declared with argparse.BooleanOptionalAction: `false` is written as `--no-<flag>`.
NEGATABLE_FLAGS = {"enable_prefix_caching", "enable_lora"}
# The instruction-set flags that decide which CPU kernels run (and so, at the last bit, the answers).
KERNEL_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "asimd", "sve")
# The call format each vLLM tool parser reads, for the parsers of the formats core/toolcalls reads.
PARSER_FORMATS = {"hermes": "hermes", "qwen3_json": "hermes", "qwen3_coder": "qwen3_coder", "qwen3_xml": "qwen3_coder"}
FORMAT_LOOKS = {"hermes": '<tool_call>{"name": …, "arguments": …}</tool_call>',
                "qwen3_coder": "<function=…><parameter=…>…</parameter></function>"}


class VllmArgs(Strict):
    """The subset of `vllm serve` flags this project sets; each maps 1:1 to a vLLM flag (`max_lora_rank` is
    `--max-lora-rank`), and a field left None is not passed, so vLLM's own default applies."""

    model: str
    """A model directory (never a hub name: nothing is downloaded); `{cache}` expands to the worker-tier cache
    directory."""
    served_model_name: str
    """The name clients send as `model` for the base model (the gateway's `base.served_model_name`)."""
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    kv_cache_memory_bytes: int | None = Field(None, gt=0)
    """The KV cache's size; on CPU the config's `VLLM_CPU_KVCACHE_SPACE` (GiB), when set, overrides it."""
    max_model_len: int | None = Field(None, gt=0)
    tensor_parallel_size: int = Field(1, ge=1)
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    max_num_seqs: int | None = Field(None, gt=0)
    enable_prefix_caching: bool | None = None
    enable_lora: bool | None = None
    max_lora_rank: int | None = Field(None, gt=0)
    max_loras: int | None = Field(None, gt=0)
    max_cpu_loras: int | None = Field(None, gt=0)
    enable_auto_tool_choice: bool = False
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    chat_template: str | None = None
    """A Jinja template file, relative to the config file."""
    generation_config: str | None = None
    seed: int | None = None
    enforce_eager: bool | None = None


class LaunchSettings(Strict):
    """`[launch]`: what the launcher adds to the server's process, and how it waits for it."""

    health_timeout_s: float = Field(900.0, gt=0)
    """Time allowed until `/health` answers (loading and compiling a model takes minutes)."""
    preload: list[Annotated[str, Field(pattern=r"^[^\s:]+$")]] = Field(default_factory=list)
    """Libraries for the server's `LD_PRELOAD`, as vLLM's CPU backend asks for them (its log warns without):
    a path (`{prefix}`: the Python environment the server runs in) or a name as `ctypes.util.find_library`
    takes it (`tcmalloc_minimal`). One this machine lacks is left out: the engine runs without it, slower.
    No entry may hold a space or a colon: the dynamic loader splits `LD_PRELOAD` at both."""


class CpuSettings(Strict):
    """`[[cpu]]`: settings for one kind of CPU, applied at launch over `[vllm]` and `[env]` when the
    host has every flag in `when` (as /proc/cpuinfo names them). The first match wins. A CPU engine's
    best dtype and thread binding depend on the instruction set (BENCHMARKS.md, engine settings)."""

    when: list[str] = Field(min_length=1)
    vllm: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)


class EngineConfig(Strict):
    """The whole engine config (configs/engine/*.toml)."""

    vllm: VllmArgs
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables for the server process (e.g. `VLLM_ALLOW_RUNTIME_LORA_UPDATING`)."""
    launch: LaunchSettings = Field(default_factory=LaunchSettings)
    cpu: list[CpuSettings] = Field(default_factory=list)

    @model_validator(mode="after")
    def _cpu_settings_are_flags(self) -> EngineConfig:
        for i, kind in enumerate(self.cpu):
            unknown = set(kind.vllm) - set(VllmArgs.model_fields)
            if unknown:
                raise ValueError(f"cpu[{i}].vllm: not vLLM flags this project sets: {sorted(unknown)}")
            VllmArgs.model_validate({**self.vllm.model_dump(), **kind.vllm})
        return self

    @property
    def base_url(self) -> str:
        return f"http://{self.vllm.host}:{self.vllm.port}"

    def on_model(self, model: Path) -> EngineConfig:
        """This config serving another model directory: one quantised checkpoint per engine, the config shared."""
        return self.model_copy(update={"vllm": self.vllm.model_copy(update={"model": str(model.absolute())})})


def _cpuinfo_value(cpuinfo: Path, keys: tuple[str, ...]) -> str | None:
    """The first value under one of `keys` in /proc/cpuinfo (None where it is not readable)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return next((value.strip() for key, _, value in (line.partition(":") for line in text.splitlines())
                 if key.strip() in keys), None)


def host_cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The instruction-set flags of this machine's CPU (x86 `flags`, aarch64 `Features`)."""
    return frozenset((_cpuinfo_value(cpuinfo, ("flags", "Features")) or "").split())


def host_cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The CPU's model name, as /proc/cpuinfo gives it."""
    return _cpuinfo_value(cpuinfo, ("model name",))


def engine_settings(config: EngineConfig, cpuinfo: Path = Path("/proc/cpuinfo")) -> EngineSettings:
    """What a run directory's engine.json records of an engine started on this host."""
    flags = host_cpu_flags(cpuinfo)
    return EngineSettings(dtype=config.vllm.dtype, settings=settings_line(config), cpu_model=host_cpu_model(cpuinfo),
                          cpu_flags=[f for f in KERNEL_FLAGS if f in flags])


def asymmetric_int8_activations(model_dir: Path) -> bool:
    """Whether config.json quantises activations to int8 with a zero point (as `model quantize`'s w8a8-int8 does)."""
    try:
        config = read_json_value(model_dir / "config.json")
    except JsonFileError:
        return False
    quant = config.get("quantization_config") if isinstance(config, dict) else None
    groups = quant.get("config_groups") if isinstance(quant, dict) else None
    inputs = [group.get("input_activations") for group in groups.values()
              if isinstance(group, dict)] if isinstance(groups, dict) else []
    return any(isinstance(i, dict) and i.get("symmetric") is False and i.get("num_bits") == 8 for i in inputs)


def kernel_warning(config: EngineConfig, flags: frozenset[str]) -> str | None:
    """A warning where this CPU is known to serve the model wrongly: vLLM 0.32's int8 kernel on an x86 CPU with AVX2
    but no AVX-512 (oneDNN's AVX2 path) answers gibberish for int8 activations with a zero point. "What is the
    capital of France?" got "undergroundfortheexposed…" from the w8a8-int8 checkpoint, "Paris" from the same
    checkpoint with symmetric activations and from the unquantised model; on AVX-512 the w8a8-int8 checkpoint
    agreed with the unquantised model on 29 of 32 tool decisions (BENCHMARKS.md). The engine still starts: the
    quantised stage's gate is what judges it."""
    if "avx2" not in flags or "avx512f" in flags or not asymmetric_int8_activations(Path(config.vllm.model)):
        return None
    return (f"warning: {config.vllm.model} has int8 activations with a zero point, and this CPU has no AVX-512: "
            "vLLM's int8 kernel answers gibberish for those here (BENCHMARKS.md); the quantisation-survives gate "
            "will judge it, but do not trust its answers")


def cpu_settings_for(config: EngineConfig, flags: frozenset[str]) -> CpuSettings | None:
    """The `[[cpu]]` entry these flags select, if any."""
    return next((kind for kind in config.cpu if set(kind.when) <= flags), None)


def load_engine_config(path: Path, port: int | None = None, cpu_flags: frozenset[str] | None = None) -> EngineConfig:
    """Parse and validate; apply the `[[cpu]]` settings for `cpu_flags` (default: this host's);
    expand `{cache}` in paths and resolve `chat_template` beside the file."""
    config = load_toml(path, EngineConfig, "engine config")
    kind = cpu_settings_for(config, host_cpu_flags() if cpu_flags is None else cpu_flags)
    if kind is not None:
        config = config.model_copy(update={"vllm": VllmArgs.model_validate({**config.vllm.model_dump(), **kind.vllm}),
                                           "env": {**config.env, **kind.env}})
    args = config.vllm
    updates: dict[str, object] = {"model": args.model.replace("{cache}", str(cache_dir()))}
    if args.chat_template:
        template = (path.parent / args.chat_template).resolve()
        if not template.is_file():
            raise ConfigError(f"{path}: vllm.chat_template: no such file {template}")
        updates["chat_template"] = str(template)
    if port is not None:
        updates["port"] = port
    resolved = config.model_copy(update={"vllm": args.model_copy(update=updates)})
    check_tool_format(path, resolved.vllm)
    return resolved


def check_checkpoint(path: Path, config: EngineConfig) -> None:
    """Refuse a `vllm.model` that holds no checkpoint before vLLM starts: vLLM would take the path for a hub
    name and fail, after its start-up wait, in a transformers traceback. Names the command that builds it."""
    model = Path(config.vllm.model)
    if (model / "config.json").is_file():
        return
    embedded = default_model_dir()
    build = "" if (embedded / "config.json").is_file() else "worker-serve model build && "
    builders = {embedded: "worker-serve model build",
                **{default_out(embedded, s): f"{build}worker-serve model quantize --scheme {s}" for s in SCHEMES}}
    how = (f"build it with `{builders[model]}`" if model in builders else
           "copy the model directory there (its config.json and weights) or point vllm.model at one")
    raise ConfigError(f"{path}: vllm.model: no checkpoint at {model}; {how}")


def template_tool_format(template: str) -> str | None:
    """The tool-call format a chat template writes: `qwen3_coder` XML, `hermes` JSON, or None."""
    if "<function=" in template and "<parameter=" in template:
        return "qwen3_coder"
    if "<tool_call>" in template:
        return "hermes"
    return None


def _template_text(path: Path) -> str:
    """A chat template's text; one that is not UTF-8 text is a ConfigError naming it."""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}): a chat template is UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read this chat template ({exc.strerror})") from None


def _model_template(model: str) -> tuple[Path, str] | None:
    """The chat template shipped with a local model directory (vLLM's default when none is set)."""
    directory = Path(model)
    jinja = directory / "chat_template.jinja"
    if jinja.is_file():
        return jinja, _template_text(jinja)
    tokenizer_config = directory / "tokenizer_config.json"
    if not tokenizer_config.is_file():
        return None
    try:
        config = read_json_value(tokenizer_config)
    except JsonFileError:
        return None
    template: Any = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(template, list):  # named templates: [{"name": "default", "template": ...}, ...]
        template = "\n".join(t.get("template", "") for t in template if isinstance(t, dict))
    return (tokenizer_config, template) if isinstance(template, str) else None


def check_tool_format(path: Path, args: VllmArgs) -> None:
    """Refuse a tool-call parser that cannot read the calls the chat template teaches the model
    to write: vLLM would return them as plain text, and every tool call would look like none."""
    expected = PARSER_FORMATS.get(args.tool_call_parser or "")
    if expected is None:
        return
    found = (Path(args.chat_template), _template_text(Path(args.chat_template))) \
        if args.chat_template else _model_template(args.model)
    if found is None:
        return
    source, template = found
    written = template_tool_format(template)
    if written is not None and written != expected:
        raise ConfigError(
            f"{path}: vllm.tool_call_parser = {args.tool_call_parser!r} reads {FORMAT_LOOKS[expected]}, but the "
            f"chat template {source} writes {FORMAT_LOOKS[written]}: use a {written!r} parser"
        )


def server_args(args: VllmArgs) -> list[str]:
    """vLLM CLI flags for the set fields, in declaration order."""
    out: list[str] = []
    for name in VllmArgs.model_fields:
        value = getattr(args, name)
        if value is None:
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            if value:
                out.append(flag)
            elif name in NEGATABLE_FLAGS:
                out.append("--no-" + name.replace("_", "-"))
        else:
            out += [flag, str(value)]
    return out


def server_command(config: EngineConfig) -> list[str]:
    """The argv that starts vLLM's OpenAI server with the config's flags."""
    # `python -m` rather than the `vllm` script: the CPU build's distribution is `vllm-cpu`,
    # and the `vllm` console script fails to find its own metadata under that name.
    return [sys.executable, "-m", SERVER_MODULE, *server_args(config.vllm)]


def preloaded(config: EngineConfig) -> list[str]:
    """The `[launch] preload` libraries this machine has, as `LD_PRELOAD` names them."""
    found = []
    for entry in config.launch.preload:
        if "/" in entry:
            path = entry.replace("{prefix}", sys.prefix)
            if Path(path).is_file():
                found.append(path)
        elif (name := ctypes.util.find_library(entry)) is not None:
            found.append(name)
    return found


def server_env(config: EngineConfig) -> dict[str, str]:
    """This process's environment plus the config's `env`, and its `preload` ahead of any `LD_PRELOAD` set."""
    env = {**os.environ, **config.env}
    if libraries := preloaded(config):
        env["LD_PRELOAD"] = ":".join([*libraries, *filter(None, [env.get("LD_PRELOAD")])])
    return env


class EngineProcess(ServiceProcess):
    """A running vLLM server; used by the CLI, the demo, the benchmarks and the test session."""

    def __init__(self, config: EngineConfig, log_path: Path | None = None):
        self.config = config
        super().__init__("vLLM", server_command(config), server_env(config), config.base_url,
                         config.launch.health_timeout_s, log_path)


def settings_line(config: EngineConfig) -> str:
    """The settings that differ between CPU kinds, as the engine was started with them."""
    reserved = config.env.get("VLLM_CPU_NUM_OF_RESERVED_CPU")
    libraries = " and ".join(Path(library).name for library in preloaded(config))
    return (f"dtype {config.vllm.dtype}" + (f", {reserved} core(s) reserved for vLLM's front end" if reserved else "")
            + (f", {libraries} preloaded" if libraries else ""))


def run_foreground(config: EngineConfig) -> int:
    """`worker-serve engine`: start vLLM, report health, exit with its status. A stop signal (SIGTERM as
    Ctrl-C: `core.console` makes both unwind) stops vLLM's whole process group on the way out."""
    if warning := kernel_warning(config, host_cpu_flags()):
        print(warning, file=sys.stderr, flush=True)
    engine = EngineProcess(config)
    engine.start()
    assert engine.proc is not None
    try:
        seconds = engine.wait_healthy()
        print(f"engine healthy at {engine.base_url} after {seconds:.0f} s ({settings_line(config)})",
              file=sys.stderr, flush=True)
        return engine.proc.wait()
    except (RuntimeError, TimeoutError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        engine.stop()
