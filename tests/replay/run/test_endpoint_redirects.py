"""The replay runner's sandbox holds for every hop (issue 14 item 4).

Uses the fault injector (tests/support/fault_upstream.py): a 307 to another address is a fault
the real engine never shows.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from replay.run.decisions import plan
from replay.run.directory import RunError
from replay.run.endpoint import fetch_models
from tests.support.fault_upstream import FaultUpstream
from tests.support.runs import config, send, suite

# --- item 4: loopback holds for every hop ----------------------------------------------------


def test_a_redirect_off_the_endpoint_is_not_followed(tmp_path: Path) -> None:
    with FaultUpstream() as elsewhere, FaultUpstream() as fault:
        fault.redirect_to = elsewhere.url
        cfg = config(f"{fault.url}/v1")
        with pytest.raises(RunError, match="307"):
            asyncio.run(fetch_models(cfg))
        items = plan(suite(tmp_path), cfg, set())
        results = tmp_path / "results.jsonl"
        send(items, cfg, results)
        rows = [json.loads(line) for line in results.read_text().splitlines()]
        assert [r["parsed"]["outcome"] for r in rows] == ["transport_error", "transport_error"]
        assert all("redirect" in r["parsed"]["error"] and elsewhere.url in r["parsed"]["error"] for r in rows)
        assert elsewhere.requests == []
