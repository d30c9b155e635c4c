"""`worker-replay`: suites, replay runs, paired comparison, gates, reports, lessons and provenance.

One module per command group, each registering its own subcommands with `add_parser(sub)`:

- `suite.py`: suite validate, freeze, stats, check-privacy, build
- `corpus.py`: corpus audit, reads
- `memory.py`: memory check, stats
- `run.py`: run
- `sandbox.py`: sandbox validate, freeze, stats, check, run, score, evidence, report
- `compare.py`: compare
- `gate.py`: gate, verify
- `plan.py`: plan
- `calibrate.py`: calibrate
- `report.py`: report
- `lessons.py`: lessons propose, trace, dispute, undispute
- `curate.py`: curate pool, build
- `privacy.py`: privacy audit
- `qa.py`: qa check, labels, review, agree, plant, gate (Stop-QA)
- `common.py`: what several groups share: the `CORPUS...` positional, the ledger's default path, the `--ledger`
  option, the disputed rules, the registered workspace names
"""

from __future__ import annotations

import argparse

from core.console import run_command
from replay.cli import (
    calibrate,
    compare,
    corpus,
    curate,
    gate,
    lessons,
    memory,
    plan,
    privacy,
    qa,
    report,
    run,
    sandbox,
    suite,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="worker-replay", description=__doc__.partition("\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    suite.add_parser(sub)
    corpus.add_parser(sub)
    memory.add_parser(sub)
    run.add_parser(sub)
    sandbox.add_parser(sub)
    compare.add_parser(sub)
    gate.add_parser(sub)
    plan.add_parser(sub)
    calibrate.add_parser(sub)
    report.add_parser(sub)
    lessons.add_parser(sub)
    curate.add_parser(sub)
    privacy.add_parser(sub)
    qa.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser(), argv)
