"""An upstream's error body gives one message whatever its text; failed health probes take an engine out
of the rotation only when they mean it is down."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from serve.gateway.config import load_gateway_config
from serve.gateway.service import Gateway
from serve.gateway.upstreams import _error_message
from tests.support.fault_upstream import FaultUpstream
from tests.support.gateway_harness import write_config


def test_the_message_of_an_openai_error_body_or_the_text() -> None:
    assert _error_message(400, '{"error": {"message": "bad lora"}}') == "HTTP 400: bad lora"
    assert _error_message(500, '{"message": "boom"}') == "HTTP 500: boom"
    assert _error_message(500, '{"error": "flat"}') == 'HTTP 500: {"error": "flat"}'
    assert _error_message(502, "1" * 5000).startswith("HTTP 502: 111")  # int() would refuse 5000 digits
    assert _error_message(502, "[" * 100_000).startswith("HTTP 502: [[[")


@given(st.text(max_size=300))
def test_any_body_text_gives_a_message(text: str) -> None:
    assert _error_message(500, text).startswith("HTTP 500: ")


def test_a_slow_engine_stays_in_until_probes_fail_threshold_times_in_a_row_and_a_refusal_takes_it_out_at_once(
        tmp_path: Path) -> None:
    """A CPU engine busy on a long prefill can miss a probe and still serve: one timeout must not
    turn its traffic into 503s (what CI saw on two cores). Probes are driven one at a time."""
    with FaultUpstream() as fault:
        config = load_gateway_config(write_config(tmp_path, [fault.url], tmp_path / "adapters",
                                                  health_interval_s=3600, health_timeout_s=0.3))
        assert config.health.unhealthy_threshold == 3

        async def scenario() -> list[bool]:
            gw = Gateway(config, lambda *_: asyncio.sleep(0))
            await gw.pool.open()
            engine = gw.pool.upstreams[0]
            verdicts = []

            async def probe(slow: int = 0) -> None:
                fault.slow_health = slow
                await gw.check(engine)
                verdicts.append(engine.healthy)

            try:
                await probe()
                await probe(1)
                await probe(1)
                assert "TimeoutError" in (engine.last_error or "") and "2 of 3" in (engine.last_error or "")
                await probe()  # passing one resets the count: two more slow ones leave it in
                await probe(1)
                await probe(1)
                await probe(1)  # the third in a row
                assert "TimeoutError" in (engine.last_error or "") and "of 3" not in (engine.last_error or "")
                await probe()  # back at the first probe that passes
                fault.stop()
                await gw.check(engine)
                verdicts.append(engine.healthy)
                assert "ClientConnectorError" in (engine.last_error or "")
                failures = gw.metrics.upstream_probe_failures.labels("engine-0")._value.get()
                assert failures == 6
            finally:
                await gw.stop()
            return verdicts

        assert asyncio.run(scenario()) == [True, True, True, True, True, True, False, True, False]
