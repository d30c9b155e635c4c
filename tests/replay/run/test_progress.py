"""The status line in a log (CI, a file): a few lines however long the run; redrawn in place on a terminal."""

from __future__ import annotations

import io
import sys
from types import SimpleNamespace

import pytest

import replay.run.progress
from replay.run.progress import CLEAR_TO_END, JOINED, Progress


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(replay.run.progress, "time", SimpleNamespace(monotonic=clock.monotonic))
    return clock


def terminal_stream() -> io.StringIO:
    stream = io.StringIO()
    stream.isatty = lambda: True  # type: ignore[method-assign]
    return stream


def redraws(stream: io.StringIO) -> list[str]:
    """What each redraw left on the terminal's line (carriage returns and line ends split it)."""
    return [part.removesuffix(CLEAR_TO_END) for part in stream.getvalue().replace("\n", "\r").split("\r") if part]


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
    terminal = terminal_stream()
    logged(clock, 5, 0.001, terminal)
    assert terminal.getvalue().count("\r") == 6  # each advance, and the last line kept at close
    assert terminal.getvalue().endswith(f"\rreplay 5/5 (100%)  1000.00 req/s  ETA 0s{CLEAR_TO_END}\n")
    redirected = io.StringIO()
    monkeypatch.setattr(sys, "stderr", redirected)
    Progress(1, "quiet").advance()
    assert redirected.getvalue().startswith("quiet 1/1 (100%)")


def test_runs_going_on_at_once_share_the_terminals_line_and_each_keeps_its_last_line(
        clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's replay beside its sandbox: one line shows both; the replay's end stays on the screen and the
    sandbox goes on below it; an error (the context manager's exit) still ends the line."""
    monkeypatch.setenv("COLUMNS", "200")
    terminal = terminal_stream()
    with Progress(2, "replay", terminal) as replay, Progress(1, "sandbox", terminal) as sandbox:
        clock.now += 1
        replay.advance()
        assert redraws(terminal)[-1] == "replay 1/2 (50%)  ETA 1s" + JOINED + "sandbox 0/1 (0%)  ETA ?"
        replay.advance()
        replay.close()
        assert terminal.getvalue().endswith(f"\rreplay 2/2 (100%)  2.00 req/s  ETA 0s{CLEAR_TO_END}\n"
                                            f"\rsandbox 0/1 (0%)  0.00 req/s  ETA ?{CLEAR_TO_END}")  # alone again
        with pytest.raises(RuntimeError), sandbox:
            raise RuntimeError("the engine went away")
    assert terminal.getvalue().endswith(f"\rsandbox 0/1 (0%)  0.00 req/s  ETA ?{CLEAR_TO_END}\n")
    replay.close()
    assert terminal.getvalue().endswith("ETA ?\x1b[K\n")  # closing again writes nothing


def test_a_shared_line_is_cut_to_the_terminals_width_so_a_redraw_never_wraps(
        clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    terminal = terminal_stream()
    with Progress(3, "[demo] replay", terminal) as replay, Progress(3, "sandbox", terminal):
        clock.now += 1
        replay.advance()
        assert len(redraws(terminal)[-1]) == 39 and redraws(terminal)[-1].startswith("[demo] replay 1/3")
