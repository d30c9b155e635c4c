"""Shadow comparison: agreement levels, stream reconstruction, the bounded queue."""

from __future__ import annotations

import asyncio

import pytest

from core.records import ParsedResponse, ParseOutcome, ToolCall
from core.scoring import CallAgreement, compare_calls
from serve.gateway.errors import GatewayError
from serve.gateway.metrics import GatewayMetrics
from serve.gateway.registry import Registry
from serve.gateway.shadow import ShadowJob, ShadowRunner


def ok(tool: str, arguments: dict, keys: list[str]) -> ParsedResponse:
    return ParsedResponse(outcome=ParseOutcome.OK, calls=[ToolCall(tool=tool, arguments=arguments, key_set=keys)])


SEARCH = ok("search", {"customer": "C-1", "filter": {"status": "open"}}, ["customer", "filter", "filter.status"])
NO_CALL = ParsedResponse(outcome=ParseOutcome.NO_CALL)


@pytest.mark.parametrize(("other", "expected"), [
    (ok("search", {"filter": {"status": "open"}, "customer": "C-1"}, ["customer", "filter", "filter.status"]),
     CallAgreement.EXACT),
    (ok("search", {"customer": "C-2", "filter": {"status": "paid"}}, ["customer", "filter", "filter.status"]),
     CallAgreement.SAME_SHAPE),
    (ok("search", {"customer": "C-1"}, ["customer"]), CallAgreement.SAME_TOOL),
    (ok("send_email", {"to": "a"}, ["to"]), CallAgreement.DIFFERENT),
    (NO_CALL, CallAgreement.DIFFERENT),
    (ParsedResponse(outcome=ParseOutcome.MALFORMED_CALL, error="bad json"), CallAgreement.UNPARSED),
    (ParsedResponse(outcome=ParseOutcome.TRANSPORT_ERROR, error="timeout"), CallAgreement.UNPARSED),
    (ParsedResponse(outcome=ParseOutcome.EMPTY_RESPONSE), CallAgreement.UNPARSED),
])
def test_agreement_levels(other, expected):
    assert compare_calls(SEARCH, other) is expected
    assert compare_calls(other, SEARCH) is expected


def test_two_answers_without_a_call_agree_and_numbers_compare_canonically():
    assert compare_calls(NO_CALL, NO_CALL) is CallAgreement.EXACT
    assert compare_calls(ok("f", {"n": 1}, ["n"]), ok("f", {"n": 1.0}, ["n"])) is CallAgreement.EXACT





def job(i: int) -> ShadowJob:
    return ShadowJob(f"r{i}", "worker", "prod-v1", "cand-v1", "chat", {"model": "cand-v1"},
                     {"role": "assistant", "content": "hi"}, None, "sha")


def test_full_queue_drops_and_counts_without_waiting(tmp_path):
    metrics = GatewayMetrics(nvml=False)
    registry = Registry(tmp_path / "s.sqlite", ["worker"], "worker-base")

    async def scenario() -> tuple[list[bool], int]:
        release = asyncio.Event()

        async def slow_send(_: ShadowJob) -> dict:
            await release.wait()
            return {"choices": [{"message": {"role": "assistant", "content": "hi"}}]}

        runner = ShadowRunner(queue_size=2, concurrency=1, timeout_s=30, send=slow_send, registry=registry,
                              metrics=metrics)
        runner.start()
        accepted = [runner.submit(job(0))]
        while runner.running == 0:  # the worker has taken job 0 and waits on the slow candidate
            await asyncio.sleep(0.001)
        accepted += [runner.submit(job(i)) for i in range(1, 5)]
        release.set()
        await runner.queue.join()
        await runner.stop()
        return accepted, len(registry.shadow_results())

    accepted, stored = asyncio.run(scenario())
    assert accepted == [True, True, True, False, False]
    assert stored == 3
    assert metrics.registry.get_sample_value("worker_gateway_shadow_dropped_total",
                                             {"route": "worker", "reason": "queue_full"}) == 2


def test_a_failing_candidate_is_stored_as_unparsed_with_its_error(tmp_path):
    metrics = GatewayMetrics(nvml=False)
    registry = Registry(tmp_path / "s.sqlite", ["worker"], "worker-base")

    async def failing(_: ShadowJob) -> dict:
        raise GatewayError(502, "upstream engine-0 failed with HTTP 500: boom", "upstream_error")

    runner = ShadowRunner(2, 1, 30, failing, registry, metrics)
    assert asyncio.run(runner.run(job(1))) is CallAgreement.UNPARSED
    row = registry.shadow_results()[0]
    assert (row["shadow_outcome"], row["agreement"], row["shadow_answer"]) == ("transport_error", "unparsed", None)
    assert "boom" in row["error"]
    assert metrics.registry.get_sample_value("worker_gateway_errors_total", {
        "route": "worker", "adapter": "cand-v1", "kind": "shadow", "api": "chat", "reason": "upstream_error"}) == 1
