"""GPU series from NVML (nvidia-ml-py), read at scrape time.

Without a GPU (no driver, no NVML library, or `metrics.nvml = false`) only
`worker_gpu_nvml_up 0` is exported: the GPU series are absent, never zero, so a dashboard
shows "no data" instead of an idle GPU. A reading one GPU does not support (power on some
boards) is left out for that GPU alone.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

log = logging.getLogger(__name__)


def _load_nvml() -> Any:
    """The `pynvml` module, or None without it (it ships no type information, hence `Any`)."""
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


class GpuCollector:
    def __init__(self, enabled: bool = True, nvml: Any | None = None) -> None:
        self._nvml: Any = nvml if nvml is not None else (_load_nvml() if enabled else None)
        self.up = False
        if self._nvml is not None:
            try:
                self._nvml.nvmlInit()
                self.up = True
            except self._nvml.NVMLError as exc:
                log.info("NVML unavailable, GPU metrics absent: %s", exc)

    def close(self) -> None:
        if self.up:
            self.up = False
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()

    def collect(self) -> Iterator[Metric]:
        families = {
            "utilization": GaugeMetricFamily("worker_gpu_utilization_ratio", "GPU busy time over the last sample "
                                             "period (0-1)", labels=["gpu"]),
            "used": GaugeMetricFamily("worker_gpu_memory_used_bytes", "GPU memory in use", labels=["gpu"]),
            "total": GaugeMetricFamily("worker_gpu_memory_total_bytes", "GPU memory installed", labels=["gpu"]),
            "power": GaugeMetricFamily("worker_gpu_power_watts", "GPU power draw", labels=["gpu"]),
            "temperature": GaugeMetricFamily("worker_gpu_temperature_celsius", "GPU core temperature",
                                             labels=["gpu"]),
        }
        up = self.up and self._read_all(families)
        yield GaugeMetricFamily("worker_gpu_nvml_up", "1 when NVML answers (GPU series exist only then)",
                                value=1.0 if up else 0.0)
        if up:
            yield from families.values()

    def _read_all(self, families: dict[str, GaugeMetricFamily]) -> bool:
        nvml = self._nvml
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as exc:
            log.warning("NVML stopped answering: %s", exc)
            return False
        for index in range(count):
            gpu = [str(index)]
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except nvml.NVMLError:
                continue
            for key, read in _readings(nvml, handle).items():
                try:
                    families[key].add_metric(gpu, read())
                except nvml.NVMLError:
                    continue
        return True


def _readings(nvml: Any, handle: Any) -> dict[str, Callable[[], float]]:
    """One reader per series for one GPU; each may raise `NVMLError` on its own."""
    return {
        "utilization": lambda: float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu) / 100.0,
        "used": lambda: float(nvml.nvmlDeviceGetMemoryInfo(handle).used),
        "total": lambda: float(nvml.nvmlDeviceGetMemoryInfo(handle).total),
        "power": lambda: float(nvml.nvmlDeviceGetPowerUsage(handle)) / 1000.0,
        "temperature": lambda: float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
    }
