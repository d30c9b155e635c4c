"""The status line in a log (CI, a file): a few lines however long the run; redrawn in place on a terminal."""

from __future__ import annotations

import io
import sys
from types import SimpleNamespace

import pytest

import replay.progress
from replay.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(replay.progress, "time", SimpleNamespace(monotonic=clock.monotonic))
    return clock


def logged(clock: Clock, total: int, seconds_each: float, stream: io.StringIO | None = None) -> list[str]:
    log = stream or io.StringIO()
    progress = Progress(total, "replay", log)
    for _ in range(total):
        clock.now += seconds_each
        progress.advance()
    progress.close()
    return log.getvalue().splitlines()


def test_a_log_gets_a_line_a_quarter_and_the_last(clock: Clock) -> None:
    """The demo's replay (286 requests at 0.7/s): once a line every 10 s, 41 lines; now the quarters."""
    lines = logged(clock, 286, 1 / 0.7)
    assert [line.split()[1] for line in lines] == ["72/286", "143/286", "215/286", "286/286"]


def test_a_fast_run_logs_only_its_last_line(clock: Clock) -> None:
    assert [line.split()[1] for line in logged(clock, 231, 0.005)] == ["231/231"]


def test_a_long_quarter_still_logs_every_five_minutes(clock: Clock) -> None:
    lines = logged(clock, 8, 400.0)  # a quarter is two items, 800 s
    assert [line.split()[1] for line in lines] == [f"{n}/8" for n in range(1, 9)]
    assert len(logged(clock, 10_000, 0.36)) == 4 * 3  # an hour: each 15-minute quarter, two 5-minute lines before it


def test_a_terminal_redraws_one_line_and_the_default_stream_is_stderr_at_construction(
        clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = io.StringIO()
    terminal.isatty = lambda: True  # type: ignore[method-assign]
    logged(clock, 5, 0.001, terminal)
    assert terminal.getvalue().count("\r") == 5 and terminal.getvalue().endswith("\rreplay 5/5 (100%)  1000.00 req/s  ETA 0s\n")
    redirected = io.StringIO()
    monkeypatch.setattr(sys, "stderr", redirected)
    Progress(1, "quiet").advance()
    assert redirected.getvalue().startswith("quiet 1/1 (100%)")
