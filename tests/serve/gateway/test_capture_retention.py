"""The gateway's capture runtime enforces the store's bounds while serving: at start-up and then every
`retention_interval_s`, off the event loop, with the rows and bytes held as gauges."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from core.capture_store import CaptureStore, read_decisions, stored_time
from serve.gateway.capture import Capture
from serve.gateway.config import CaptureSection
from serve.gateway.metrics import GatewayMetrics
from tests.core.test_capture_retention import BASE


def test_the_running_gateway_deletes_what_is_past_retention_and_reports_what_it_holds(tmp_path: Path) -> None:
    path = tmp_path / "capture.sqlite"
    store = CaptureStore(path)
    now = datetime.now(UTC)
    for n, age in enumerate((40, 35, 1, 0)):
        store.insert(replace(BASE, id=f"r-{n}", captured_at=stored_time(now - timedelta(days=age))))
    store.close()
    metrics = GatewayMetrics(nvml=False)
    settings = CaptureSection(mode="descriptor", db=path, retention_days=30, max_rows=1, retention_interval_s=0.05)

    async def serve_a_while() -> None:
        capture = Capture(settings, metrics)
        capture.start()
        try:
            for _ in range(200):
                await asyncio.sleep(0.01)
                if metrics.registry.get_sample_value("worker_capture_rows") == 1:
                    break
        finally:
            await capture.stop()

    asyncio.run(serve_a_while())
    assert [d.id for d in read_decisions(path)] == ["r-3"]
    assert metrics.registry.get_sample_value("worker_capture_pruned_rows_total") == 3
    assert 0 < (metrics.registry.get_sample_value("worker_capture_bytes") or 0) <= path.stat().st_size + 4096
