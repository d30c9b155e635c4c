"""The two-step trial policy (25 %, then 50 %) the trial tests start, written as a user would."""

from __future__ import annotations

from pathlib import Path

GATE = Path(__file__).resolve().parents[2] / "configs" / "gates" / "production-candidate.toml"


def two_step_policy(path: Path, name: str, candidate: str, min_requests: int, alpha: float,
                    max_duration_s: float, signals: str = "") -> Path:
    """Steps a few requests can pass (0.5 s each); `signals` is TOML appended as written."""
    steps = "".join(f"\n[[steps]]\npercent = {percent}\nmin_duration_s = 0.5\nmin_requests = {min_requests}\n"
                    for percent in (25, 50))
    path.write_text(f'name = "{name}"\nroute = "worker"\ncandidate = "{candidate}"\nalpha = {alpha}\n'
                    f'interval_s = 0.2\nmax_duration_s = {max_duration_s}\ngate_policy = "{GATE}"\n'
                    + steps + signals)
    return path
