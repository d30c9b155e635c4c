"""A two-decision suite and a one-arm run config, built in memory for the runner's unit tests."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel

from core.attestation import DerivedFrom, ServedIdentity
from core.records import Decision
from replay.run.decisions import WorkItem, perform
from replay.run.directory import RESULTS, RUN_JSON, SERVED, seal_run
from replay.run.executor import execute
from replay.run.run_config import RunConfig
from replay.suite import Suite, SuiteManifest, freeze_suite, load_suite

BASE = "worker-base"
SUITE_SHA256 = "5" * 64
"""The suite digest hand-written runs record unless told otherwise: runs written alike are of the same suite."""

TOOLS = [{"type": "function", "function": {"name": "list_invoices", "parameters": {"type": "object", "properties": {}}}}]


def decision(i: int) -> Decision:
    return Decision.model_validate({
        "id": f"d-{i}", "stratum": "verified_action", "cluster": "c", "workspace": "ws-a", "session": f"s-{i}",
        "captured_at": "2026-07-01T10:00:00Z",
        "request": {"messages": [{"role": "user", "content": f"task {i}"}], "tools": TOOLS, "tool_choice": "auto"},
        "target": {"tool": "list_invoices", "arg_keys": []},
    })


def suite(tmp_path: Path) -> Suite:
    manifest = SuiteManifest(name="t", version="1", created="2026-08-01T00:00:00Z")
    return Suite(tmp_path / "suite", manifest, (decision(1), decision(2)), "0" * 64)


def config(base_url: str = "http://127.0.0.1:9/v1", memory: str = "withheld", **extra: object) -> RunConfig:
    return RunConfig.model_validate({"endpoint": {"base_url": base_url, "timeout_s": 10},
                                     "runner": {"retries": 0, "concurrency": 1},
                                     "arms": [{"name": "base", "model": BASE, "memory": memory}], **extra})


def send(items: Sequence[WorkItem], cfg: RunConfig, results: Path) -> int:
    """The executor's sending alone (no run directory): each item's result appended to `results`."""
    written, _ = asyncio.run(execute(items, perform(cfg), cfg, results, "replay"))
    return written


def write_sealed(run_dir: Path, lines: Iterable[BaseModel], suite_sha256: str | None = None) -> Path:
    """A finished run as the executor leaves it: `results.jsonl` holding `lines`, and a run.json with a run id of
    its own, the suite it replayed (`suite_sha256`) and its seal."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / RESULTS).write_text("".join(line.model_dump_json() + "\n" for line in lines), encoding="utf-8")
    return seal(run_dir, suite_sha256)


def seal(run_dir: Path, suite_sha256: str | None = None) -> Path:
    """Seal `run_dir/results.jsonl` as it stands, replacing any seal, and give run.json (made when there is none)
    the run id and suite digest a run records where it has none (`suite_sha256`: this suite's, always): for tests
    whose results are hand-written or edited on purpose (bad lines, duplicates, an added arm), so that a reader's
    own check is what they reach."""
    path = run_dir / RUN_JSON
    manifest = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    manifest.pop("seal", None)
    manifest.setdefault("run_id", uuid.uuid4().hex)
    manifest.setdefault(SERVED, {arm: dump(high_precision(arm)) for arm in _arms(run_dir / RESULTS)})
    if isinstance(manifest.setdefault("suite", {}), dict):
        manifest["suite"].setdefault("sha256", SUITE_SHA256)
        if suite_sha256 is not None:
            manifest["suite"]["sha256"] = suite_sha256
    path.write_text(json.dumps(manifest) + "\n", encoding="utf-8")
    seal_run(run_dir, RESULTS)
    return run_dir


BASE_MODEL_SHA256 = "6" * 64
"""The base model digest hand-written runs record as served: runs written alike were served the same weights."""


def high_precision(arm: str, weights: tuple[str | None, str | None] = (None, BASE_MODEL_SHA256)) -> ServedIdentity:
    """What served `arm` unquantised: an adapter (None: none) over a base model, by digest."""
    return ServedIdentity(model=arm, fingerprint=weights[0], base_sha256=weights[1])


def quantised_build(identity: ServedIdentity, scheme: str = "w8a8-int8") -> ServedIdentity:
    """A quantised build of what `identity` served (merged first where it has an adapter), served as the base
    model, as the gateway names it from `model quantize`'s record."""
    adapter, base = identity.weights()
    return ServedIdentity(model=identity.model, base_sha256="9" * 64, quantization=scheme, derived_from=DerivedFrom(
        source_sha256="8" * 64 if adapter else str(base), fingerprint=adapter, base_sha256=str(base)))


def dump(identity: ServedIdentity) -> dict[str, object]:
    return json.loads(identity.model_dump_json())  # type: ignore[no-any-return]


def served(run_dir: Path, identities: Mapping[str, ServedIdentity]) -> Path:
    """Record in run.json what served each arm, as `worker-replay run` does (the seal covers the results only)."""
    path = run_dir / RUN_JSON
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest[SERVED] = {arm: dump(identity) for arm, identity in identities.items()}
    path.write_text(json.dumps(manifest) + "\n", encoding="utf-8")
    return run_dir


def read_served(run_dir: Path) -> dict[str, ServedIdentity]:
    found = json.loads((run_dir / RUN_JSON).read_text(encoding="utf-8")).get(SERVED) or {}
    return {arm: ServedIdentity.model_validate(identity) for arm, identity in found.items()}


def quantised(run_dir: Path, scheme: str = "w8a8-int8") -> Path:
    """`run_dir` as if replayed on quantised builds of what served each of its arms."""
    return served(run_dir, {arm: quantised_build(identity, scheme) for arm, identity in read_served(run_dir).items()})


def _arms(results: Path) -> list[str]:
    """The arms a results file names (lines that are not JSON objects, as some tests write on purpose, skipped)."""
    arms: set[str] = set()
    for line in results.read_bytes().splitlines() if results.is_file() else []:
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(row, dict) and isinstance(row.get("arm"), str):
            arms.add(row["arm"])
    return sorted(arms)


def bind(run_dir: Path, suite_dir: Path) -> Path:
    """A hand-written run as `worker-replay run --suite SUITE_DIR` records it: of that suite, sealed."""
    path = run_dir / RUN_JSON
    manifest = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    manifest["suite"] = {"path": str(suite_dir), "sha256": load_suite(suite_dir).sha256}
    path.write_text(json.dumps(manifest) + "\n", encoding="utf-8")
    return seal(run_dir)


def judged_beside(evidence: Mapping[str, Path] | None, arms: Sequence[str] = ("base", "strong")) -> Path | None:
    """For a gate judged on a crafted comparison: a judged run (no results: the comparison stands for them) made
    beside the evidence, of the suite hand-written runs record, served by the weights the first evidence run was
    (for evidence files: the base model on each of `arms`), and the `fresh` run bound to its `fresh_suite` (None
    without evidence)."""
    if not evidence:
        return None
    fresh, fresh_suite = evidence.get("fresh"), evidence.get("fresh_suite")
    if fresh and fresh_suite and (fresh / RESULTS).is_file() and (fresh_suite / "suite.toml").is_file():
        bind(fresh, fresh_suite)
    judged = write_sealed(next(iter(evidence.values())).parent / "judged", [])
    first = next(iter(evidence.values()))
    weights = read_served(first) if (first / RUN_JSON).is_file() else {arm: high_precision(arm) for arm in arms}
    return served(judged, {arm: high_precision(arm, identity.weights()) for arm, identity in weights.items()})


LENIENT_POLICY = """name = "lenient"
version = "1"
[[conditions]]
id = "no-worse"
kind = "non_inferiority"
scope = "all_positive"
min_points = -100
description = "no worse than -100 points: met by any candidate"
"""
"""A one-condition gate policy any answers meet: for tests about what a verdict rests on, not what it judges."""


def demo_slice(out: Path, demo_root: Path, strata: Sequence[str]) -> list[Decision]:
    """One decision of each of `strata` from the demo suite, frozen as its own suite in `out`; returns them."""
    from demo.demo_data import write_demo

    suite_dir, _ = write_demo(demo_root, seed=0)
    decisions = load_suite(suite_dir).decisions
    picked = [next(d for d in decisions if d.stratum == s) for s in strata]
    out.mkdir()
    (out / "suite.toml").write_text(f'name = "{out.name}"\nversion = "1"\ncreated = 2026-08-01T00:00:00Z\n')
    (out / "decisions.jsonl").write_text("".join(d.model_dump_json(exclude_none=False) + "\n" for d in picked))
    freeze_suite(out, synthetic=True)  # the demo suite's invented values
    return picked
