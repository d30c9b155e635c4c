"""The status line of a run (`worker-replay run`, `sandbox run`, `qa review`): done/total, rate and ETA on stderr."""

from __future__ import annotations

import sys
import time
from typing import Any

LOG_QUIET_S = 10.0
"""In a log, never two status lines within this many seconds (the last line excepted)."""
LOG_ALIVE_S = 300.0
"""In a log, a status line at least this often, so a long quarter still shows the run is alive."""


class Progress:
    """One status line: done/total, rate and ETA; redrawn in place on a terminal. Where it is not a terminal
    (a CI log, a file) a line at each quarter of the work and at least every 5 minutes, never two within
    10 s, and the last one: a log gets a handful of lines however long the run (a line every 10 s made a
    demo's CI log hundreds of lines long). `stream` is read at construction (default: the `sys.stderr` of
    that moment, so a caller may redirect it)."""

    def __init__(self, total: int, label: str, stream: Any = None):
        self.total, self.label = total, label
        self.stream = sys.stderr if stream is None else stream
        self.done = 0
        self.started = time.monotonic()
        self.last_print = self.started
        self.last_quarter = 0
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def advance(self) -> None:
        self.done += 1
        if self.tty or self._log_line_due():
            self.stream.write(("\r" if self.tty else "") + self.line() + ("" if self.tty else "\n"))
            self.stream.flush()

    def _log_line_due(self) -> bool:
        now = time.monotonic()
        quarter = 4 * self.done // max(self.total, 1)
        quiet = now - self.last_print
        if self.done != self.total and (quiet < LOG_QUIET_S or (quarter == self.last_quarter and quiet < LOG_ALIVE_S)):
            return False
        self.last_print, self.last_quarter = now, quarter
        return True

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = self.done / elapsed
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        pct = 100 * self.done / self.total if self.total else 100
        eta_text = f"{eta:,.0f}s" if eta != float("inf") else "?"
        return f"{self.label} {self.done}/{self.total} ({pct:.0f}%)  {rate:.2f} req/s  ETA {eta_text}"

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
