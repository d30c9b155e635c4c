"""Stop-QA coverage (DESIGN §13, 001 S26): which mode each registered workspace is in, and how many of its
finished runs carry a reviewer verdict and a person's disposition — so "extend it to a measured majority"
is a number that `memory stats` writes beside the fast loop's counters, and a time series.

The modes come from the platform's setting as one JSON object, workspace → mode (what
`SELECT json_group_object(workspace, value) … WHERE key='SCALABLY_STOP_QA_MODE'` prints); a registered
workspace the object leaves out is `off`, the platform's default. The runs come from `reviews.jsonl`
(replay/qa/labels.py). A workspace named by either file but registered on no root is listed, not counted:
the fleet is the workspaces the roots hold.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import Field, RootModel

from core.jsonfile import JsonFileError, read_json
from core.names import Name
from core.records import Strict
from replay.memory.counters import FleetStats, label_value
from replay.qa.errors import QAError
from replay.qa.labels import LabelledRun, Mode


class ModeSetting(RootModel[dict[Name, Mode]]):
    """The platform's Stop-QA mode per workspace."""


class WorkspaceCoverage(Strict):
    root: str
    workspace: str
    mode: Mode
    runs: int = 0
    """Finished runs of the workspace in `reviews.jsonl`."""
    reviewed: int = 0
    """Those with a production reviewer's verdict in any mode."""
    disposed: int = 0
    """Those with a person's disposition."""


class QACoverage(Strict):
    """`memory stats --json`'s `qa`: per registered workspace, then the fleet."""

    workspaces: list[WorkspaceCoverage]
    modes: dict[Mode, int]
    """Registered workspaces per mode, every mode listed (zero included)."""
    runs: int
    reviewed: int
    disposed: int
    unregistered: list[str] = Field(default_factory=list)
    """Workspaces the modes or the reviews name that no root holds."""


class FleetCoverage(FleetStats):
    """`memory stats --json` with `--qa-modes`/`--reviews`: the fast loop's counters and Stop-QA's coverage."""

    qa: QACoverage


def read_modes(path: Path) -> dict[str, Mode]:
    """The modes file; anything but a JSON object of workspace names to modes is a `QAError` naming the file."""
    try:
        return dict(read_json(path, ModeSetting).root)
    except JsonFileError as exc:
        raise QAError(f"{exc} (the modes file: a JSON object, workspace → one of "
                      f"{', '.join(m.value for m in Mode)})") from exc


def qa_coverage(fleet: Mapping[str, Sequence[str]], modes: Mapping[str, Mode],
                runs: Sequence[LabelledRun]) -> QACoverage:
    """Coverage of the fleet (root → its workspaces) under `modes`, counting `runs`."""
    counted: dict[str, Counter[str]] = {}
    for run in runs:
        tally = counted.setdefault(run.workspace, Counter())
        tally["runs"] += 1
        tally["reviewed"] += bool(run.reviewer)
        tally["disposed"] += run.disposition is not None
    rows = [WorkspaceCoverage(root=root, workspace=name, mode=modes.get(name, Mode.OFF),
                              **counted.get(name, Counter()))
            for root, names in fleet.items() for name in names]
    registered = {row.workspace for row in rows}
    per_mode = Counter(row.mode for row in rows)
    return QACoverage(workspaces=rows, modes={mode: per_mode[mode] for mode in Mode},
                      runs=sum(r.runs for r in rows), reviewed=sum(r.reviewed for r in rows),
                      disposed=sum(r.disposed for r in rows),
                      unregistered=sorted((set(modes) | set(counted)) - registered))


def fleet_coverage(stats: FleetStats, modes: Mapping[str, Mode], runs: Sequence[LabelledRun]) -> FleetCoverage:
    """`stats` with the coverage of the workspaces its roots hold."""
    fleet = {r.root: [w.workspace for w in r.workspaces] for r in stats.roots}
    return FleetCoverage.model_validate({**stats.model_dump(), "qa": qa_coverage(fleet, modes, runs)})


def _share(part: int, whole: int) -> str:
    return f"{part:,} of {whole:,}" + (f" ({100 * part / whole:.0f}%)" if whole else "")


def coverage_lines(coverage: QACoverage) -> list[str]:
    """What `memory stats` prints for Stop-QA."""
    workspaces = sum(coverage.modes.values())
    set_modes = ", ".join(f"{mode} {n}" for mode, n in coverage.modes.items() if n and mode is not Mode.OFF)
    lines = [f"Stop-QA: a mode set on {_share(workspaces - coverage.modes[Mode.OFF], workspaces)} workspaces"
             + (f" ({set_modes})" if set_modes else ""),
             f"  finished runs {coverage.runs:,}: with a reviewer verdict {_share(coverage.reviewed, coverage.runs)}, "
             f"with a person's disposition {_share(coverage.disposed, coverage.runs)}"]
    if coverage.unregistered:
        lines.append(f"  not on any root, not counted: {', '.join(coverage.unregistered)}")
    return lines


QA_METRICS = {"worker_qa_runs": ("runs", "Finished runs in reviews.jsonl."),
              "worker_qa_runs_reviewed": ("reviewed", "Finished runs with a production reviewer's verdict."),
              "worker_qa_runs_disposed": ("disposed", "Finished runs with a person's disposition.")}


def coverage_textfile(coverage: QACoverage) -> str:
    """The coverage in the Prometheus text format, to follow `memory stats`' textfile: workspaces per root and
    mode (every mode, so a share is one division), and the run counts per workspace."""
    roots = list(dict.fromkeys(row.root for row in coverage.workspaces))
    per_root = Counter((row.root, row.mode) for row in coverage.workspaces)
    name = "worker_qa_workspaces"
    out = [f"# HELP {name} Registered workspaces in each Stop-QA mode.", f"# TYPE {name} gauge"]
    out += [f'{name}{{root="{label_value(root)}",mode="{mode}"}} {per_root[root, mode]}'
            for root in roots for mode in Mode]
    for name, (key, text) in QA_METRICS.items():
        out += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
        out += [f'{name}{{root="{label_value(row.root)}",workspace="{label_value(row.workspace)}"}} {getattr(row, key)}'
                for row in coverage.workspaces]
    return "\n".join(out) + "\n"
