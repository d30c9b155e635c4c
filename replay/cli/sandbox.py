"""`worker-replay sandbox …`: scenario packs, sandboxed episodes, re-scoring and gate evidence."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from core.console import pair_item, reference_first
from replay.run.directory import RunError, read_run_json
from replay.run.run_config import load_run_config
from replay.sandbox.gate_evidence import evidence_subject, format_tables, pair_results, write_evidence
from replay.sandbox.measures import scores_json
from replay.sandbox.pack import (
    Pack,
    check_pack,
    format_pack_stats,
    freeze_pack,
    load_pack,
    pack_stats,
    validate_pack,
)
from replay.sandbox.report_section import write_sandbox_report
from replay.sandbox.runner import load_sandbox_results, rescore, run_sandbox


def _validate(args: argparse.Namespace) -> int:
    problems = validate_pack(args.dir)
    for problem in problems:
        print(problem)
    print(f"{args.dir}: {'valid' if not problems else f'{len(problems)} problem(s)'}", file=sys.stderr)
    return 1 if problems else 0


def _freeze(args: argparse.Namespace) -> int:
    frozen = freeze_pack(args.dir)
    print(f"{args.dir}: frozen, {frozen.scenarios} scenarios, sha256 {frozen.sha256}")
    return 0


def _stats(args: argparse.Namespace) -> int:
    print(format_pack_stats(pack_stats(load_pack(args.dir))))
    return 0


def _check(args: argparse.Namespace) -> int:
    results = check_pack(load_pack(args.dir))
    bad = 0
    for r in results:
        if not r.oracle_passes:
            bad += 1
            print(f"{r.scenario}: the oracle does not pass: {'; '.join(r.oracle.not_completed_because)} "
                  f"unsupported={r.oracle.unsupported_claims} critical={r.oracle.critical_hits}")
        if not r.broken_fails:
            bad += 1
            print(f"{r.scenario}: the broken variant does not fail")
    n = len(results)
    print(f"oracles {sum(r.oracle_passes for r in results)}/{n} pass, "
          f"broken variants {sum(r.broken_fails for r in results)}/{n} fail")
    return 1 if bad else 0


def _run(args: argparse.Namespace) -> int:
    pack = load_pack(args.pack)
    config = load_run_config(args.config)
    sent, already = run_sandbox(pack, config, args.out, endpoint_kind=args.via)
    print(f"{args.out}: {sent} episode(s) run" + (f", {already} already there (resumed)" if already else ""))
    return 0


def _pack_of(run_dir: Path) -> Pack:
    path = (read_run_json(run_dir).get("pack") or {}).get("path")
    if not path:
        raise RunError(f"{run_dir} is not a sandbox run (no pack in run.json)")
    return load_pack(path)


def _score(args: argparse.Namespace) -> int:
    results = load_sandbox_results(args.run_dir)
    pack = _pack_of(args.run_dir)
    started = time.perf_counter()
    rescored = rescore(pack, results)
    elapsed = time.perf_counter() - started
    differ = [r for r, s in rescored if scores_json(s) != scores_json(r.scores)]
    for r in differ:
        print(f"{r.arm} {r.scenario_id}: re-scored differently from the stored scores")
    per = 1000 * elapsed / len(rescored) if rescored else 0.0
    print(f"{len(rescored) - len(differ)}/{len(rescored)} episode(s) re-scored byte-identical "
          f"({per:.3f} ms per episode)")
    return 1 if differ else 0


def _evidence(args: argparse.Namespace) -> int:
    pairs = pair_results(load_sandbox_results(args.run_dir), args.baseline, args.candidate)
    print(format_tables(pairs))
    written = write_evidence(pairs, args.out, evidence_subject(args.run_dir, pairs))
    print("\nevidence for `worker-replay gate`:\n  " + " ".join(f"--evidence {k}={p}" for k, p in written.items()))
    if "isolated_live_replay" not in written:
        print("(no isolated_live_replay: this run did not go through the gateway; re-run with --via gateway)",
              file=sys.stderr)
    return 0


def _report(args: argparse.Namespace) -> int:
    results = load_sandbox_results(args.run_dir)
    arms = list(dict.fromkeys(r.arm for r in results))
    configured = [a.get("name") for a in (read_run_json(args.run_dir).get("config") or {}).get("arms", [])]
    ordered = reference_first(arms, configured, args.baseline)
    wanted = args.pair or [(ordered[0], a) for a in ordered[1:]]
    pairs = [pair_results(results, baseline, candidate) for baseline, candidate in wanted]
    print(f"report: {write_sandbox_report(args.run_dir, results, pairs)}")
    return 0


def add_parser(sub: Any) -> None:
    sandbox = sub.add_parser("sandbox", help="sandboxed task replay: packs, episodes, scores, evidence")
    actions = sandbox.add_subparsers(dest="action", required=True)
    for name, func, text in (("validate", _validate, "report every bad line with file:line"),
                             ("freeze", _freeze, "write the frozen manifest"),
                             ("stats", _stats, "counts per policy family, world, tool, critical category"),
                             ("check", _check, "every oracle passes, every broken variant fails")):
        p = actions.add_parser(name, help=text)
        p.add_argument("dir", type=Path, metavar="PACK", help="a scenario pack directory")
        p.set_defaults(func=func)
    p = actions.add_parser("run", help="every arm × scenario as a whole episode (resumable)")
    p.add_argument("--pack", type=Path, required=True, metavar="DIR", help="a frozen scenario pack")
    p.add_argument("--config", type=Path, required=True, metavar="RUN.toml",
                   help="the run config, as for `worker-replay run` (configs/runs/example.toml)")
    p.add_argument("--out", type=Path, required=True, help="the run directory (re-run into it to resume)")
    p.add_argument("--via", choices=("engine", "gateway"), default="engine",
                   help="what the endpoint is; a gateway route with the candidate pinned is isolated live replay")
    p.set_defaults(func=_run)
    p = actions.add_parser("score", help="re-score stored trajectories; exit 1 unless byte-identical")
    p.add_argument("run_dir", type=Path, help="a sandbox run directory")
    p.set_defaults(func=_score)
    p = actions.add_parser("evidence", help="paired tables and the gate evidence files of two arms")
    p.add_argument("run_dir", type=Path, help="a sandbox run directory")
    p.add_argument("--baseline", required=True, metavar="ARM", help="the reference arm")
    p.add_argument("--candidate", required=True, metavar="ARM", help="the arm judged against it")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="where the evidence JSON files are written")
    p.set_defaults(func=_evidence)
    p = actions.add_parser("report", help="sandbox-report.html: arms, paired tables, every episode step by step")
    p.add_argument("run_dir", type=Path, help="a sandbox run directory")
    p.add_argument("--pair", action="append", default=[], metavar="BASELINE:CANDIDATE", type=pair_item,
                   help="default: the baseline against every other arm")
    p.add_argument("--baseline", metavar="ARM", help="the reference arm (default: the run config's first arm)")
    p.set_defaults(func=_report)
