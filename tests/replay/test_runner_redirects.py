"""The replay runner's sandbox holds for every hop (issue 14 item 4).

Uses the fault injector (tests/support/fault_upstream.py): a 307 to another address is a fault
the real engine never shows.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from core.records import Decision
from replay.config import RunConfig
from replay.runner import RunError, execute, fetch_models, plan
from replay.suite import Suite, SuiteManifest
from tests.support.fault_upstream import BASE, FaultUpstream

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


# --- item 4: loopback holds for every hop ----------------------------------------------------


def test_a_redirect_off_the_endpoint_is_not_followed(tmp_path: Path) -> None:
    with FaultUpstream() as elsewhere, FaultUpstream() as fault:
        fault.redirect_to = elsewhere.url
        cfg = config(f"{fault.url}/v1")
        with pytest.raises(RunError, match="307"):
            asyncio.run(fetch_models(cfg))
        items = plan(suite(tmp_path), cfg, set())
        results = tmp_path / "results.jsonl"
        asyncio.run(execute(items, cfg, results))
        rows = [json.loads(line) for line in results.read_text().splitlines()]
        assert [r["parsed"]["outcome"] for r in rows] == ["transport_error", "transport_error"]
        assert all("redirect" in r["parsed"]["error"] and elsewhere.url in r["parsed"]["error"] for r in rows)
        assert elsewhere.requests == []
