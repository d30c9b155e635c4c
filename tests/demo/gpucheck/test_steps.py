"""The check's rules on their own: what is skipped and why, what a failure leaves not run, the verdict and
the printed table."""

from __future__ import annotations

from datetime import UTC, datetime

from demo.gpucheck.steps import (
    DRY_RUN_FACTOR,
    STEPS,
    GpuCheckReport,
    StepRecord,
    StepSpec,
    not_run,
    scaled,
    skip_reason,
    table,
    verdict,
)

SPEC = StepSpec("replay", "a replay", 60, ("gateway",))


def record(name: str, status: str, seconds: float = 1.0, detail: str = "ok") -> StepRecord:
    return StepRecord(name=name, status=status, seconds=seconds, budget_s=10, detail=detail)


def test_a_step_starts_only_when_its_prerequisites_passed_and_its_whole_budget_fits():
    assert skip_reason(SPEC, [record("gateway", "passed")], left_s=60) is None
    assert skip_reason(SPEC, [record("gateway", "passed")], left_s=59.9) == "does not fit: up to 60 s, 60 s left"
    assert skip_reason(SPEC, [record("gateway", "passed")], left_s=-5) == "does not fit: up to 60 s, 0 s left"
    assert skip_reason(SPEC, [record("gateway", "skipped")], left_s=600) == "needs gateway, which did not pass"
    assert skip_reason(SPEC, [], left_s=600) == "needs gateway, which did not pass"
    assert skip_reason(StepSpec("config", "x", 5), [], left_s=5) is None


def test_every_step_but_the_first_two_needs_steps_listed_before_it():
    names = [s.name for s in STEPS]
    assert names[:3] == ["install", "config", "model"]
    for index, spec in enumerate(STEPS):
        assert set(spec.needs) <= set(names[:index]), spec.name


def test_the_dry_run_scales_every_budget_and_keeps_names_and_prerequisites():
    dry = scaled(STEPS, DRY_RUN_FACTOR)
    assert [(s.name, s.needs) for s in dry] == [(s.name, s.needs) for s in STEPS]
    assert [s.budget_s for s in dry] == [s.budget_s * DRY_RUN_FACTOR for s in STEPS]


def test_the_verdict_is_the_first_failure_and_skips_are_not_failures():
    steps = [record("config", "passed"), record("nvml", "skipped"), record("chat", "failed", detail="HTTP 500"),
             *not_run(STEPS[-2:], "chat")]
    assert verdict(steps) == ("failed", "chat: HTTP 500")
    assert [s.status for s in steps[-2:]] == ["not run", "not run"]
    assert steps[-1].detail == "not run: chat failed"
    assert verdict([record("config", "passed"), record("nvml", "skipped")]) == ("passed", None)


def test_the_table_shows_each_step_with_its_time_against_its_budget_and_the_verdict_line():
    report = GpuCheckReport(mode="gpu", started_at=datetime(2026, 12, 2, tzinfo=UTC), total_s=301.4, limit_s=480,
                            host={}, result="failed", failed="lora: HTTP 502",
                            steps=[record("chat", "passed", 1.25, "200 in 40 ms"),
                                   record("nvml", "skipped", 0, "skipped: dry run"),
                                   record("lora", "failed", 12.0, "HTTP 502")])
    lines = table(report).splitlines()
    assert lines[0].split() == ["step", "status", "time", "budget", "detail"]
    assert set(lines[1]) == {"-"}
    assert lines[2].split() == ["chat", "passed", "1.2", "s", "10", "s", "200", "in", "40", "ms"]
    assert lines[-1] == "gpu-check (gpu): FAILED at lora: HTTP 502 in 301 s of 480 s; skipped: nvml"
    assert GpuCheckReport.model_validate_json(report.model_dump_json()) == report
