"""The status line of a run (`worker-replay run`, `sandbox run`, `qa review`): done/total, rate and ETA on stderr."""

from __future__ import annotations

import shutil
import sys
import time
from typing import Any, ClassVar, Self

LOG_QUIET_S = 10.0
"""In a log, never two status lines within this many seconds (the last line excepted)."""
LOG_ALIVE_S = 300.0
"""In a log, a status line at least this often, so a long quarter still shows the run is alive."""
CLEAR_TO_END = "\x1b[K"
"""What is left of a longer line redrawn before (ANSI erase to the end of the line)."""
JOINED = "  |  "
"""Between the statuses of runs that share a terminal's line."""


class Progress:
    """One status line: done/total, rate and ETA; redrawn in place on a terminal. Where it is not a terminal
    (a CI log, a file) a line at each quarter of the work and at least every 5 minutes, never two within
    10 s, and the last one: a log gets a handful of lines however long the run (a line every 10 s made a
    demo's CI log hundreds of lines long). `stream` is read at construction (default: the `sys.stderr` of
    that moment, so a caller may redirect it).

    Runs of one process that go on at once (the demo's replay and its sandbox episodes) share a terminal's
    line: it shows every open status without its rate, cut to the terminal's width so a redraw never wraps;
    each leaves its own last line, rate and all, when it closes. Used as a context manager it closes however
    the run ends, so an error is printed on a line of its own."""

    _on_terminal: ClassVar[list[Progress]] = []

    def __init__(self, total: int, label: str, stream: Any = None):
        self.total, self.label = total, label
        self.stream = sys.stderr if stream is None else stream
        self.done = 0
        self.started = time.monotonic()
        self.last_print = self.started
        self.last_quarter = 0
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        if self.tty:
            Progress._on_terminal.append(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def advance(self) -> None:
        self.done += 1
        if self.tty:
            self._redraw()
        elif self._log_line_due():
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def _sharing(self) -> list[Progress]:
        return [p for p in Progress._on_terminal if p.stream is self.stream]

    def _redraw(self) -> None:
        sharing = self._sharing()
        shown = JOINED.join(p.line(rate=len(sharing) == 1) for p in sharing)
        self.stream.write("\r" + shown[:shutil.get_terminal_size().columns - 1] + CLEAR_TO_END)
        self.stream.flush()

    def _log_line_due(self) -> bool:
        now = time.monotonic()
        quarter = 4 * self.done // max(self.total, 1)
        quiet = now - self.last_print
        if self.done != self.total and (quiet < LOG_QUIET_S or (quarter == self.last_quarter and quiet < LOG_ALIVE_S)):
            return False
        self.last_print, self.last_quarter = now, quarter
        return True

    def line(self, rate: bool = True) -> str:
        """The status; `rate=False`: without the rate, for a line shared with another run's."""
        elapsed = max(time.monotonic() - self.started, 1e-9)
        per_s = self.done / elapsed
        eta = (self.total - self.done) / per_s if per_s > 0 else float("inf")
        pct = 100 * self.done / self.total if self.total else 100
        eta_text = f"{eta:,.0f}s" if eta != float("inf") else "?"
        shown_rate = f"  {per_s:.2f} req/s" if rate else ""
        return f"{self.label} {self.done}/{self.total} ({pct:.0f}%){shown_rate}  ETA {eta_text}"

    def close(self) -> None:
        """On a terminal: this run's last line, kept; the runs still going redrawn below it. Closing twice
        writes nothing more."""
        if self not in Progress._on_terminal:
            return
        Progress._on_terminal.remove(self)
        self.stream.write("\r" + self.line() + CLEAR_TO_END + "\n")
        self.stream.flush()
        if others := self._sharing():
            others[0]._redraw()
