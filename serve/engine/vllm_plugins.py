"""What vLLM loads from this package (pyproject.toml's `vllm.platform_plugins`): on a CPU build,
vLLM's own CPU platform with only its LoRA wrapper changed, to `serve.engine.cpulora`'s grouped ops.

vLLM imports this while it resolves its platform, so nothing here may import the LoRA code (it
needs the resolved platform); the wrapper is named by its path and imported when vLLM needs it.
"""

from __future__ import annotations

from vllm.platforms.cpu import CpuPlatform

GROUPED_LORA_WRAPPER = "serve.engine.cpulora.GroupedPunicaWrapperCPU"


class GroupedLoRACpuPlatform(CpuPlatform):
    """vLLM's CPU platform, LoRA through `serve.engine.cpulora.GroupedPunicaWrapperCPU`."""

    @classmethod
    def get_punica_wrapper(cls) -> str:
        return GROUPED_LORA_WRAPPER


def cpu_platform() -> str | None:
    """The platform for a CPU build of vLLM; None elsewhere (the GPU hosts), so vLLM picks its own.
    `VLLM_PLUGINS` set without `worker_tier_cpu` turns it off."""
    from vllm.platforms import cpu_platform_plugin

    return f"{__name__}.{GroupedLoRACpuPlatform.__qualname__}" if cpu_platform_plugin() else None
