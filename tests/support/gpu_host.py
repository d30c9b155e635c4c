"""How many GPUs NVML sees on this host, probed as the gateway's collector does
(serve/gateway/gpu.py): tests assert what holds on a host without a GPU and on one with GPUs."""

from __future__ import annotations

import contextlib

from serve.gateway.gpu import _load_nvml


def nvml_gpu_count() -> int | None:
    """None where NVML is absent (no nvidia-ml-py, or no driver), else the number of devices."""
    nvml = _load_nvml()
    if nvml is None:
        return None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return None
    try:
        return int(nvml.nvmlDeviceGetCount())
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()
