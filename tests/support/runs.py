"""A two-decision suite and a one-arm run config, built in memory for the runner's unit tests."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel

from core.records import Decision
from replay.run.config import RunConfig
from replay.run.decisions import WorkItem, perform
from replay.run.directory import RESULTS, RUN_JSON, seal_run
from replay.run.executor import execute
from replay.suite import Suite, SuiteManifest

BASE = "worker-base"

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


def write_sealed(run_dir: Path, lines: Iterable[BaseModel]) -> Path:
    """A finished run as the executor leaves it: `results.jsonl` holding `lines`, and a run.json with its seal."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / RESULTS).write_text("".join(line.model_dump_json() + "\n" for line in lines), encoding="utf-8")
    return seal(run_dir)


def seal(run_dir: Path) -> Path:
    """Seal `run_dir/results.jsonl` as it stands, replacing any seal (a run.json made when there is none): for
    tests whose results are hand-written or edited on purpose (bad lines, duplicates, an added arm), so that a
    reader's own check is what they reach."""
    path = run_dir / RUN_JSON
    manifest = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"run_id": uuid.uuid4().hex}
    manifest.pop("seal", None)
    path.write_text(json.dumps(manifest) + "\n", encoding="utf-8")
    seal_run(run_dir, RESULTS)
    return run_dir
