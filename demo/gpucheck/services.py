"""The steps that bring the stack up: the engine config checked against production, the embedded model,
the engine (`serve.engine.launcher`, as `worker-serve engine` starts it) and the gateway
(`worker-serve gateway` in its own process, as systemd runs it). Each service is stopped by the
check's exit stack, at exit and on SIGTERM."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from core.process import ServiceProcess, free_port, is_healthy
from demo.gpucheck.check_context import (
    GPU_CONFIG,
    PRODUCTION_CONFIG,
    CheckFailedError,
    Done,
    GpuCheckContext,
    log_tail,
    run_bounded,
)
from demo.serving import gateway_config
from serve.engine.launcher import (
    EngineConfig,
    EngineProcess,
    LaunchSettings,
    load_engine_config,
    server_command,
    settings_line,
)
from serve.engine.modelbuild import default_model_dir

# The production settings that apply to any model on one GPU: the GPU config must have them as production
# does. What differs on purpose is each model's own: weights, dtype, context, tensor parallelism, tool-call
# parser and chat template (configs/engine/gpu-smollm2.toml says why).
AS_PRODUCTION = ("served_model_name", "host", "port", "gpu_memory_utilization", "max_num_seqs",
                 "enable_prefix_caching", "enable_lora", "max_lora_rank", "max_loras", "max_cpu_loras",
                 "enable_auto_tool_choice", "generation_config", "seed")
ENV_AS_PRODUCTION = ("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "HF_HUB_OFFLINE")


def production_differences(config: EngineConfig, production: EngineConfig) -> list[str]:
    """The settings in AS_PRODUCTION and ENV_AS_PRODUCTION on which `config` differs from production."""
    ours, theirs = config.vllm.model_dump(), production.vllm.model_dump()
    out = [f"{key} = {ours[key]!r} (production: {theirs[key]!r})" for key in AS_PRODUCTION if ours[key] != theirs[key]]
    out += [f"env {key} = {config.env.get(key)!r} (production: {production.env.get(key)!r})"
            for key in ENV_AS_PRODUCTION if config.env.get(key) != production.env.get(key)]
    return out


def check_config(ctx: GpuCheckContext, timeout_s: float) -> Done:
    """The GPU config loads (flags, chat template against the tool parser) and is production's shape."""
    config = load_engine_config(GPU_CONFIG, cpu_flags=frozenset())
    production = load_engine_config(PRODUCTION_CONFIG, cpu_flags=frozenset())
    args = config.vllm
    wanted = {"dtype bfloat16": args.dtype == "bfloat16", "prefix caching": args.enable_prefix_caching is True,
              "LoRA": args.enable_lora is True}
    missing = [what for what, ok in wanted.items() if not ok]
    differences = production_differences(config, production)
    if missing or differences:
        raise CheckFailedError(f"{GPU_CONFIG.name}: " + "; ".join([*(f"{m} is off" for m in missing), *differences]))
    command = " ".join(server_command(config)[1:])
    return Done(f"{GPU_CONFIG.name}: {', '.join(wanted)}; as production on {len(AS_PRODUCTION)} flags and "
                f"{len(ENV_AS_PRODUCTION)} env", {"command": command, "production_command": " ".join(
                    server_command(production)[1:])})


def build_model(ctx: GpuCheckContext, timeout_s: float) -> Done:
    """`worker-serve model build`: the wheel fetched and converted once, then cached."""
    log = ctx.logs / "model.log"
    run_bounded("worker-serve model build", ["-m", "serve", "model", "build"], log, timeout_s)
    return Done(log_tail(log, 1) or f"model at {default_model_dir()}")


def start_engine(ctx: GpuCheckContext, timeout_s: float) -> Done:
    """vLLM from the engine config, on a free port; or, with `--engine-url`, the engine already running."""
    url = ctx.options.engine_url
    if url is not None:
        if not is_healthy(url, timeout=min(timeout_s, 10)):
            raise CheckFailedError(f"no engine answers at {url}/health")
        ctx.engine_url = url
        return Done(f"reused the running engine at {url} (--engine-url; not started by the check)")
    config = load_engine_config(ctx.options.engine_config, port=free_port())
    config = config.model_copy(update={"launch": LaunchSettings(health_timeout_s=timeout_s)})
    log = ctx.logs / "engine.log"
    engine = EngineProcess(config, log_path=log)
    seconds = _healthy(ctx, engine, log)
    ctx.engine_url = engine.base_url
    return Done(f"{ctx.options.engine_config.name} healthy after {seconds:.0f} s ({settings_line(config)})",
                {"healthy_s": round(seconds, 1), "command": " ".join(server_command(config)[1:])})


def start_gateway(ctx: GpuCheckContext, timeout_s: float) -> Done:
    """The gateway in front of the engine, with NVML on and the check's own state and adapter root."""
    port = free_port()
    ctx.adapter_root.mkdir(parents=True, exist_ok=True)
    config = gateway_config(ctx.options.out / "gateway" / "gateway.toml", port, ctx.engine(), ctx.adapter_root,
                            "[metrics]\nnvml = true\n")
    log = ctx.logs / "gateway.log"
    gateway = ServiceProcess("gateway", [sys.executable, "-m", "serve", "gateway", "--config", str(config),
                                         "--log-level", "warning"],
                             {**os.environ, "WORKER_GATEWAY_ADMIN_TOKEN": ctx.token}, f"http://127.0.0.1:{port}",
                             timeout_s, log)
    seconds = _healthy(ctx, gateway, log)
    ctx.gateway_url = gateway.base_url
    return Done(f"healthy after {seconds:.1f} s at {gateway.base_url}", {"healthy_s": round(seconds, 2)})


def _healthy(ctx: GpuCheckContext, service: ServiceProcess, log: Path) -> float:
    """Start `service` (stopped with the check) and wait for it; a failure names the end of its log."""
    ctx.stack.callback(service.stop)
    service.start()
    try:
        return service.wait_healthy()
    except (RuntimeError, TimeoutError) as exc:
        raise CheckFailedError(f"{exc}; {log}: {log_tail(log)}") from None
