"""GPU series: absent (not zero, not a crash) without a GPU; one series per device with GPUs;
converted units."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest

from serve.gateway.gpu import GpuCollector
from tests.support.gpu_host import nvml_gpu_count

GPU_SERIES = ("worker_gpu_utilization_ratio", "worker_gpu_memory_used_bytes", "worker_gpu_memory_total_bytes",
              "worker_gpu_power_watts", "worker_gpu_temperature_celsius")


def scrape(collector: GpuCollector) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(collector)
    return registry


def test_the_real_nvml_exports_up_and_one_series_per_gpu_this_host_has():
    """Without a driver (this CPU host) only `worker_gpu_nvml_up 0`; on a GPU host `1` and one
    memory series per device NVML sees."""
    gpus = nvml_gpu_count()
    collector = GpuCollector()
    registry = scrape(collector)
    text = generate_latest(registry).decode()
    if gpus is None:
        assert registry.get_sample_value("worker_gpu_nvml_up") == 0.0
        assert not any(name in text for name in GPU_SERIES)
    else:
        assert registry.get_sample_value("worker_gpu_nvml_up") == 1.0
        total = {s.labels["gpu"] for m in registry.collect() for s in m.samples
                 if s.name == "worker_gpu_memory_total_bytes"}
        assert total == {str(i) for i in range(gpus)}
    collector.close()


def test_disabled_nvml_is_reported_as_down():
    assert scrape(GpuCollector(enabled=False)).get_sample_value("worker_gpu_nvml_up") == 0.0


class FakeNvml:
    """Stands in for pynvml on a machine with two GPUs; GPU 1 cannot report power."""

    class NVMLError(Exception):
        pass

    NVML_TEMPERATURE_GPU = 0

    def __init__(self) -> None:
        self.shut_down = False

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shut_down = True

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=[57, 3][handle], memory=10)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(used=[12 << 30, 1 << 30][handle], total=32 << 30, free=0)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        if handle == 1:
            raise self.NVMLError("Not Supported")
        return 412_345  # milliwatts

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        return [71, 40][handle]


def test_readings_are_converted_and_an_unsupported_one_is_left_out():
    nvml = FakeNvml()
    collector = GpuCollector(nvml=nvml)
    registry = scrape(collector)
    value = registry.get_sample_value
    assert value("worker_gpu_nvml_up") == 1.0
    assert value("worker_gpu_utilization_ratio", {"gpu": "0"}) == 0.57
    assert value("worker_gpu_memory_used_bytes", {"gpu": "0"}) == 12 * 2**30
    assert value("worker_gpu_memory_total_bytes", {"gpu": "1"}) == 32 * 2**30
    assert value("worker_gpu_power_watts", {"gpu": "0"}) == 412.345
    assert value("worker_gpu_power_watts", {"gpu": "1"}) is None
    assert value("worker_gpu_temperature_celsius", {"gpu": "1"}) == 40.0
    collector.close()
    assert nvml.shut_down
