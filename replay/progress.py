"""The status line of a run (`worker-replay run`, `sandbox run`): done/total, rate and ETA on stderr."""

from __future__ import annotations

import sys
import time
from typing import Any


class Progress:
    """One status line: done/total, rate and ETA; redrawn in place on a terminal, else every 10 s."""

    def __init__(self, total: int, label: str, stream: Any = sys.stderr):
        self.total, self.label, self.stream = total, label, stream
        self.done = 0
        self.started = time.monotonic()
        self.last_print = 0.0
        self.tty = hasattr(stream, "isatty") and stream.isatty()

    def advance(self) -> None:
        self.done += 1
        now = time.monotonic()
        if self.tty or now - self.last_print >= 10 or self.done == self.total:
            self.last_print = now
            self.stream.write(("\r" if self.tty else "") + self.line() + ("" if self.tty else "\n"))
            self.stream.flush()

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
