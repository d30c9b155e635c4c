"""Which metric names a target exports: every series name its /metrics text declares or carries."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from serve.gateway.gpu import GpuCollector

# The names a declared family's samples take (the parser strips `_total` from a counter's family name).
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "summary": ("", "_sum", "_count")}


def exported_names(text: str) -> frozenset[str]:
    """Sample names present, plus the names of declared families that have no sample yet (a
    labelled counter before its first increment is still exported, under HELP and TYPE)."""
    names = set()
    for family in text_string_to_metric_families(text):
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return frozenset(names)


class OneGpuNvml:
    """Stands in for pynvml on a host with one GPU, to learn the series names the gateway exports
    there (on this machine NVML is absent, so the real scrape carries none)."""

    class NVMLError(Exception):
        pass

    NVML_TEMPERATURE_GPU = 0

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=50, memory=10)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(used=2**30, total=2**34)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return 300_000

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return 60


def gpu_series_names() -> frozenset[str]:
    """The names the gateway's real GPU collector exports on a GPU host."""
    registry = CollectorRegistry()
    registry.register(GpuCollector(nvml=OneGpuNvml()))
    return exported_names(generate_latest(registry).decode())
