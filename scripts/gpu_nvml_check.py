#!/usr/bin/env python3
"""The gateway's NVML series (serve/gateway/gpu.py, `GpuCollector`) against a real GPU, without vLLM.

    PYTHONUNBUFFERED=1 python3 scripts/gpu_nvml_check.py [--gib 8] [--seconds 10]

Scrapes the collector through prometheus_client (as the gateway's /metrics does) at idle, then while
torch holds a known amount of GPU memory and runs bf16 matrix products on a daemon thread (a sample
every 0.5 s), then after that memory is freed, and judges the readings: `worker_gpu_nvml_up` 1, the
memory total against torch's, memory used rising by the allocation and falling back, utilization a
ratio that passes 0.5 under load, power and temperature plausible, the `gpu` label values. Prints a
PASS/FAIL table; with $OUT set writes $OUT/gpu-nvml-check.json (every sample and verdict) and the raw
/metrics text at idle and under load ($OUT/metrics-idle.txt, $OUT/metrics-load.txt).

Needs only the standard library, torch, prometheus_client and nvidia-ml-py. Exit status: 0 all
passed, 1 a check failed, 2 no NVML or no CUDA GPU here (nothing judged).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

try:
    from prometheus_client import CollectorRegistry, generate_latest
except ImportError:
    print("NVML check not run: prometheus_client is not installed (the collector needs it)", file=sys.stderr)
    sys.exit(2)

from serve.gateway.gpu import GpuCollector, _load_nvml  # noqa: E402

GIB = 1 << 30
SERIES = {
    "utilization": "worker_gpu_utilization_ratio",
    "used": "worker_gpu_memory_used_bytes",
    "total": "worker_gpu_memory_total_bytes",
    "power": "worker_gpu_power_watts",
    "temperature": "worker_gpu_temperature_celsius",
}
SAMPLE_EVERY_S = 0.5


def unavailable(why: str) -> None:
    print(f"NVML check not run: {why}", file=sys.stderr)
    sys.exit(2)


def nvml_reason() -> str:
    """Why the collector found no NVML: the package missing, or nvmlInit's own error."""
    nvml = _load_nvml()
    if nvml is None:
        return "NVML is unavailable: the pynvml module (nvidia-ml-py) is not installed"
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return f"NVML is unavailable: nvmlInit failed ({exc}); no NVIDIA driver on this machine?"
    with contextlib.suppress(nvml.NVMLError):
        nvml.nvmlShutdown()
    return "NVML is unavailable: the collector reports worker_gpu_nvml_up 0"


class Sampler:
    """Scrapes the collector through a registry, as /metrics does, and keeps every sample."""

    def __init__(self, collector: GpuCollector) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(collector)
        self.samples: list[dict[str, Any]] = []
        self.started = time.monotonic()

    def sample(self, phase: str) -> tuple[dict[str, Any], str]:
        t0 = time.perf_counter()
        text = generate_latest(self.registry).decode()
        scrape_ms = (time.perf_counter() - t0) * 1000.0
        up = self.registry.get_sample_value("worker_gpu_nvml_up")
        series: dict[str, dict[str, float]] = {key: {} for key in SERIES}
        names = {name: key for key, name in SERIES.items()}
        for family in self.registry.collect():
            for s in family.samples:
                if s.name in names:
                    series[names[s.name]][s.labels.get("gpu", "")] = s.value
        row = {"phase": phase, "t_s": round(time.monotonic() - self.started, 3),
               "scrape_ms": round(scrape_ms, 3), "nvml_up": up, **series}
        self.samples.append(row)
        return row, text


def torch_gpu() -> Any:
    try:
        import torch
    except ImportError:
        unavailable("torch is not installed (it makes the load)")
    if not torch.cuda.is_available():
        unavailable("torch sees no CUDA GPU")
    return torch


def nvml_label_for_torch_device(collector_nvml: Any, torch: Any) -> tuple[str, dict[str, Any]]:
    """The NVML index (the collector's `gpu` label) of torch's device 0, matched by UUID, and what NVML
    says about the machine."""
    nvml = collector_nvml
    info: dict[str, Any] = {}
    with contextlib.suppress(Exception):
        info["driver"] = _text(nvml.nvmlSystemGetDriverVersion())
    count = int(nvml.nvmlDeviceGetCount())
    info["nvml_count"] = count
    props = torch.cuda.get_device_properties(0)
    torch_uuid = str(getattr(props, "uuid", "")).lower().removeprefix("gpu-")
    devices = []
    match = None
    for index in range(count):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        uuid = _text(nvml.nvmlDeviceGetUUID(handle))
        devices.append({"index": index, "name": _text(nvml.nvmlDeviceGetName(handle)), "uuid": uuid})
        if torch_uuid and uuid.lower().removeprefix("gpu-") == torch_uuid:
            match = index
    info["devices"] = devices
    info["torch_uuid"] = torch_uuid
    info["matched_by"] = "uuid" if match is not None else "index 0 (no UUID match)"
    return str(match if match is not None else 0), info


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def load_thread(torch: Any, stop: threading.Event, done: dict[str, Any]) -> threading.Thread:
    """bf16 matrix products until `stop`, synchronising every few so the queue stays short; a daemon,
    so a SIGTERM or a failure in the main thread never waits on it."""

    def work() -> None:
        try:
            n = 8192
            a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
            c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
            torch.cuda.synchronize()
            started = time.perf_counter()
            products = 0
            while not stop.is_set():
                for _ in range(20):
                    torch.matmul(a, b, out=c)
                torch.cuda.synchronize()
                products += 20
            took = time.perf_counter() - started
            done.update(products=products, seconds=round(took, 3),
                        tflops=round(2 * n**3 * products / took / 1e12, 1) if took else None)
            del a, b, c
        except Exception as exc:  # reported as a FAIL, not a silent thread death
            done["error"] = repr(exc)

    thread = threading.Thread(target=work, name="bf16-load", daemon=True)
    thread.start()
    return thread


def judge(samples: list[dict[str, Any]], label: str, labels_expected: set[str], torch_total: int,
          allocated: int, load: dict[str, Any]) -> list[dict[str, Any]]:
    """Every verdict from the samples alone: a list of {check, ok, detail}."""
    verdicts: list[dict[str, Any]] = []

    def check(name: str, ok: bool, detail: str) -> None:
        verdicts.append({"check": name, "ok": bool(ok), "detail": detail})

    def values(phase: str, key: str) -> list[float]:
        return [s[key][label] for s in samples if s["phase"] == phase and label in s[key]]

    ups = [s["nvml_up"] for s in samples]
    check("worker_gpu_nvml_up is 1", bool(ups) and all(u == 1.0 for u in ups),
          f"{sum(u == 1.0 for u in ups)}/{len(ups)} samples")

    missing = sorted({f"{SERIES[k]}@{s['phase']}" for s in samples for k in SERIES if label not in s[k]})
    check("all five series present for the GPU", not missing,
          "every sample" if not missing else f"missing: {', '.join(missing[:6])}")

    seen_labels = {g for s in samples for k in SERIES for g in s[k]}
    check("gpu label values", seen_labels == labels_expected and label in seen_labels,
          f"seen {sorted(seen_labels)}, NVML devices {sorted(labels_expected)}, torch's device 0 is gpu=\"{label}\"")

    totals = [t for s in samples for t in ([s["total"][label]] if label in s["total"] else [])]
    off = max((abs(t - torch_total) / torch_total for t in totals), default=None)
    check("memory_total within 2% of torch's total_memory", off is not None and off <= 0.02,
          f"NVML {totals[0] / GIB:.2f} GiB vs torch {torch_total / GIB:.2f} GiB ({off:.2%} off)"
          if off is not None else "no memory_total sample")

    base, loaded, after = values("baseline", "used"), values("load", "used"), values("freed", "used")
    if base and loaded and after:
        rise = max(loaded) - max(base)
        check("memory_used rises by >= 90% of the allocation", rise >= 0.9 * allocated,
              f"+{rise / GIB:.2f} GiB for {allocated / GIB:.2f} GiB allocated ({rise / allocated:.1%})")
        fall = max(loaded) - min(after)
        residual = min(after) - max(base)
        check("memory_used falls back after freeing", fall >= 0.9 * allocated and residual <= 0.1 * allocated,
              f"-{fall / GIB:.2f} GiB; {residual / GIB:+.2f} GiB vs before the allocation")
    else:
        check("memory_used rises by >= 90% of the allocation", False, "no memory_used samples for a phase")
        check("memory_used falls back after freeing", False, "no memory_used samples for a phase")

    utils = [u for s in samples for u in s["utilization"].values()]
    check("utilization is a ratio in [0,1]", bool(utils) and all(0.0 <= u <= 1.0 for u in utils),
          f"{len(utils)} readings, {min(utils, default=float('nan')):.2f}..{max(utils, default=float('nan')):.2f}")
    load_util = values("load", "utilization")
    check("utilization > 0.5 under load", bool(load_util) and max(load_util) > 0.5,
          f"max {max(load_util, default=float('nan')):.2f}, median {_median(load_util):.2f} under load; "
          f"idle {max(values('idle', 'utilization'), default=float('nan')):.2f}")

    powers = values("load", "power")
    idle_power = values("idle", "power")
    all_power = [p for s in samples for p in ([s["power"][label]] if label in s["power"] else [])]
    check("power present, > 50 W under load", bool(powers) and max(powers) > 50.0
          and all(0.0 < p < 2000.0 for p in all_power),
          f"idle {_median(idle_power):.0f} W, load max {max(powers, default=float('nan')):.0f} W")

    temps = [t for s in samples for t in ([s["temperature"][label]] if label in s["temperature"] else [])]
    check("temperature present, 10-100 C", bool(temps) and all(10.0 <= t <= 100.0 for t in temps),
          f"{min(temps, default=float('nan')):.0f}..{max(temps, default=float('nan')):.0f} C")

    check("the load ran (bf16 matmuls on a side thread)", "error" not in load and load.get("products", 0) > 0,
          load.get("error") or f"{load.get('products')} products in {load.get('seconds')} s, "
                                f"{load.get('tflops')} TFLOP/s")
    return verdicts


def _median(values: list[float]) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def print_table(verdicts: list[dict[str, Any]]) -> None:
    width = max(len(v["check"]) for v in verdicts)
    print(f"{'result':6}  {'check':{width}}  detail")
    for v in verdicts:
        print(f"{'PASS' if v['ok'] else 'FAIL':6}  {v['check']:{width}}  {v['detail']}")


def summary(samples: list[dict[str, Any]], label: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for phase in ("idle", "baseline", "load", "freed"):
        rows = [s for s in samples if s["phase"] == phase]
        if not rows:
            continue
        pick = {k: [r[k][label] for r in rows if label in r[k]] for k in SERIES}
        out[phase] = {
            "samples": len(rows),
            "used_gib": [round(min(pick["used"]) / GIB, 3), round(max(pick["used"]) / GIB, 3)]
            if pick["used"] else None,
            "utilization_max": max(pick["utilization"], default=None),
            "power_w": [min(pick["power"], default=None), max(pick["power"], default=None)],
            "temperature_c": [min(pick["temperature"], default=None), max(pick["temperature"], default=None)],
            "scrape_ms_max": max(r["scrape_ms"] for r in rows),
        }
    return out


def load_and_free(torch: Any, sampler: Sampler, label: str, gib: float, seconds: float,
                  report: dict[str, Any]) -> tuple[int, dict[str, Any], str]:
    """The load phase (`gib` GiB held and touched, bf16 products on a side thread, sampled for `seconds`), then
    the freed phase: the bytes the load reserved, what the load thread reported, and /metrics under load."""
    reserved_before = torch.cuda.memory_reserved(0)
    block = torch.empty(int(gib * GIB), dtype=torch.uint8, device="cuda")
    block.fill_(1)  # touched, not only reserved
    stop, load = threading.Event(), dict[str, Any]()
    thread = load_thread(torch, stop, load)
    time.sleep(1.0)  # the thread's operands allocated, its first products running
    allocated = torch.cuda.memory_reserved(0) - reserved_before
    report["allocated_bytes"] = allocated
    load_text = ""
    ends = time.monotonic() + seconds
    while time.monotonic() < ends and thread.is_alive():
        row, text = sampler.sample("load")
        if not load_text or row["utilization"].get(label, 0.0) >= 0.5:
            load_text = text
        time.sleep(SAMPLE_EVERY_S)
    stop.set()
    thread.join(timeout=30)

    del block
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    report["reserved_after_free"] = torch.cuda.memory_reserved(0)
    time.sleep(1.0)
    for _ in range(3):
        sampler.sample("freed")
        time.sleep(SAMPLE_EVERY_S)
    return allocated, load, load_text


def print_and_write(report: dict[str, Any], out_dir: Path | None, idle_text: str, load_text: str) -> int:
    """The verdict table and the per-phase summary; with an output directory, the report and both scrapes.
    The exit status: 1 if a check failed."""
    verdicts = report["verdicts"]
    print()
    print_table(verdicts)
    s = report["summary"]
    print()
    for phase, fig in s.items():
        print(f"{phase:8} used {fig['used_gib']} GiB, util max {fig['utilization_max']}, "
              f"power {fig['power_w']} W, temp {fig['temperature_c']} C, scrape max {fig['scrape_ms_max']} ms")
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "gpu-nvml-check.json").write_text(json.dumps(report, indent=2))
        (out_dir / "metrics-idle.txt").write_text(idle_text)
        (out_dir / "metrics-load.txt").write_text(load_text)
        print(f"\nwrote {out_dir}/gpu-nvml-check.json, metrics-idle.txt, metrics-load.txt")
    failed = [v["check"] for v in verdicts if not v["ok"]]
    print(f"\n{'FAILED: ' + '; '.join(failed) if failed else 'ALL PASSED'}")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=8.0, help="GPU memory to allocate under load (GiB)")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the load runs")
    args = parser.parse_args()
    out_dir = Path(os.environ["OUT"]) if os.environ.get("OUT") else None

    collector = GpuCollector()
    if not collector.up:
        unavailable(nvml_reason())
    torch = torch_gpu()
    sampler = Sampler(collector)
    report: dict[str, Any] = {"started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "argv": sys.argv[1:], "gib": args.gib, "seconds": args.seconds}
    try:
        # Idle: before this process makes a CUDA context.
        for _ in range(3):
            _, idle_text = sampler.sample("idle")
            time.sleep(SAMPLE_EVERY_S)
        props = torch.cuda.get_device_properties(0)
        label, machine = nvml_label_for_torch_device(collector._nvml, torch)
        labels_expected = {str(i) for i in range(machine["nvml_count"])}
        report["machine"] = {**machine, "torch": torch.__version__, "torch_device": props.name,
                             "torch_total_memory": props.total_memory, "label": label}
        print(f"GPU {label}: {props.name}, torch {torch.__version__}, driver {machine.get('driver')}, "
              f"matched by {machine['matched_by']}", flush=True)

        # Baseline: the CUDA context exists, nothing allocated yet.
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        time.sleep(SAMPLE_EVERY_S)
        for _ in range(2):
            sampler.sample("baseline")
            time.sleep(SAMPLE_EVERY_S)

        allocated, load, load_text = load_and_free(torch, sampler, label, args.gib, args.seconds, report)

        verdicts = judge(sampler.samples, label, labels_expected, props.total_memory, allocated, load)
    finally:
        collector.close()

    report.update(load=load, summary=summary(sampler.samples, label), verdicts=verdicts,
                  samples=sampler.samples, passed=all(v["ok"] for v in verdicts))
    return print_and_write(report, out_dir, idle_text, load_text)


if __name__ == "__main__":
    sys.exit(main())
