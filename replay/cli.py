"""`worker-replay`: suites, replay runs, paired comparison, gates, reports, lessons and provenance."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from core.cli import pair_item, run_command
from core.names import excerpt
from core.records import Decision
from replay.analysis.compare import compare_run, format_comparison, load_results
from replay.analysis.gates import evaluate_gate, format_verdict, write_verdict
from replay.analysis.report import report_run
from replay.config import load_run_config
from replay.corpus.retrieval import SessionReads
from replay.corpus.sources import FORMATS
from replay.errors import ReplayError
from replay.memory.checks import check_memory, has_violations
from replay.memory.files import workspace_dirs
from replay.memory.ledger import Ledger
from replay.rundir import read_run_json
from replay.runner import run
from replay.sandbox import cli as sandbox_cli
from replay.suite import check_privacy, format_stats, freeze_suite, load_suite, suite_stats, validate_suite


def default_ledger() -> Path:
    return Path(os.environ.get("WORKER_REPLAY_LEDGER", "runs/ledger.sqlite"))


def _suite_validate(args: argparse.Namespace) -> int:
    problems = validate_suite(args.dir)
    for problem in problems:
        print(problem)
    print(f"{args.dir}: {'valid' if not problems else f'{len(problems)} problem(s)'}", file=sys.stderr)
    return 1 if problems else 0


def _suite_freeze(args: argparse.Namespace) -> int:
    manifest = freeze_suite(args.dir, synthetic=args.synthetic)
    print(f"{args.dir}: frozen, {manifest.decisions} decisions, sha256 {manifest.sha256}")
    return 0


def _suite_build(args: argparse.Namespace) -> int:
    from replay.corpus.capture_suite import build_suite
    from replay.corpus.claude_code import ClaudeCodeDir
    from replay.corpus.corpus_suite import build_corpus_suites, in_test_split
    from replay.corpus.resolve import load_keys
    from replay.corpus.sources import open_source

    if args.from_corpus is not None:
        if args.transcripts is not None:
            raise ReplayError("--from-corpus reads the corpus itself: --transcripts goes with --from-capture")
        outs: dict[Path, Callable[[str], bool] | None] = {args.out: None}
        if args.test_fraction is not None:
            test = in_test_split(args.test_fraction, args.split_seed)
            outs = {args.out / "train": lambda cluster: not test(cluster), args.out / "test": test}
        for report in build_corpus_suites(ClaudeCodeDir(args.from_corpus), outs, keys=load_keys(args.keys),
                                          since=args.since, until=args.until, name=args.name, version=args.version):
            print(report)
        return 0
    if args.test_fraction is not None:
        raise ReplayError("--test-fraction splits a corpus (--from-corpus) by cluster")
    if args.until is not None:
        raise ReplayError("--until cuts a corpus (--from-corpus); a capture store is cut with --since")
    transcripts = open_source(args.transcripts, args.transcript_format) if args.transcripts else None
    keys = load_keys(args.keys) if (transcripts is not None or args.keys) else None
    print(build_suite(args.from_capture, args.out, args.since, args.name, args.version, transcripts=transcripts,
                      keys=keys, verify=args.verify))
    return 0


def _corpus_audit(args: argparse.Namespace) -> int:
    from replay.corpus.audit import audit, format_audit
    from replay.corpus.claude_code import ClaudeCodeDir

    report = audit(ClaudeCodeDir(args.dir))
    print(report.model_dump_json(indent=2) if args.json else format_audit(report))
    return 0


def _corpus_reads(args: argparse.Namespace) -> int:
    from replay.corpus.retrieval import READ_TOOLS, format_retrieval, retrieval, session_records
    from replay.corpus.sources import open_source

    tools = dict(args.read_tool) or READ_TOOLS
    refused: list[str] = []
    memory = workspace_dirs(args.memory_root) if args.memory_root else None
    report = retrieval(session_records(open_source(args.dir, args.transcript_format), tools, refused),
                       str(args.dir), memory, refused)
    print(report.model_dump_json(indent=2) if args.json else format_retrieval(report))
    return 0


def _read_tool(text: str) -> tuple[str, str]:
    tool, sep, argument = text.partition("=")
    if not (sep and tool and argument):
        raise argparse.ArgumentTypeError(f"{text!r}: expected TOOL=ARGUMENT, e.g. Read=file_path")
    return tool, argument


def _suite_check_privacy(args: argparse.Namespace) -> int:
    problems = check_privacy(args.dir)
    for problem in problems:
        print(problem)
    print(f"{args.dir}: privacy check " + (f"failed: {len(problems)} detectable value(s)" if problems else "clean"),
          file=sys.stderr)
    return 1 if problems else 0


def _suite_stats(args: argparse.Namespace) -> int:
    print(format_stats(suite_stats(load_suite(args.dir))))
    return 0


def _memory_check(args: argparse.Namespace) -> int:
    dirs = workspace_dirs(args.dir) if args.root else {args.dir.name: args.dir}
    problems = [p for path in dirs.values() for p in check_memory(path)]
    for problem in problems:
        print(problem)
    return 1 if has_violations(problems) else 0


def _memory_stats(args: argparse.Namespace) -> int:
    from replay.memory.stats import fleet_stats, format_fleet, textfile, write_textfile

    stats = fleet_stats(args.roots, git=args.git)
    if args.textfile is not None:
        write_textfile(args.textfile, textfile(stats))
    print(stats.model_dump_json(indent=2) if args.json else format_fleet(stats))
    return 0


def _run(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite)
    config = load_run_config(args.config)
    sent, already = run(suite, config, args.out)
    with Ledger(args.ledger) as ledger:
        ledger.ingest_jsonl(args.out.name, args.out / "results.jsonl")
    print(f"{args.out}: {sent} result(s) written, {already} already there (resumed)" if already
          else f"{args.out}: {sent} result(s) written")
    return 0


def _tainted(args: argparse.Namespace) -> frozenset[str]:
    if not args.ledger.exists():
        return frozenset()
    with Ledger(args.ledger) as ledger:
        return frozenset(ledger.tainted_rule_ids())


def _compare(args: argparse.Namespace) -> int:
    comparison = compare_run(args.run_dir, args.baseline, args.candidate, by=args.by, tainted=_tainted(args))
    print(comparison.model_dump_json(indent=2) if args.json else format_comparison(comparison))
    return 0


def _gate(args: argparse.Namespace) -> int:
    verdict = evaluate_gate(args.policy, args.run_dir, args.baseline, args.candidate, evidence=dict(args.evidence),
                            tainted=_tainted(args))
    path = write_verdict(args.run_dir, verdict)
    print(format_verdict(verdict))
    print(f"verdict written: {path}", file=sys.stderr)
    return 0 if verdict.passed else 1


def _plan(args: argparse.Namespace) -> int:
    from replay.analysis.gates import load_policy
    from replay.analysis.plan import format_plan, plan

    policy = load_policy(args.policy)
    pilot = compare_run(args.pilot, args.baseline, args.candidate, tainted=_tainted(args))
    result = plan(pilot, policy, pilot=str(args.pilot), effect=args.effect, power=args.power, alpha=args.alpha,
                  max_decisions=args.max_decisions)
    print(result.model_dump_json(indent=2) if args.json else format_plan(result))
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    from replay.calibration.calibrate import calibrate
    from replay.calibration.report import format_calibration
    from replay.calibration.spec import load_spec

    spec = load_spec(args.spec)
    if args.memory is not None:
        spec = spec.model_copy(update={"memory": args.memory})
    if args.noise_from is not None:
        from replay.analysis.compare import load_results
        from replay.calibration.spec import with_pilot_noise

        spec, taken = with_pilot_noise(spec, load_results(args.noise_from))
        print(taken, file=sys.stderr)
    pack = None
    if args.pack is not None:
        from replay.sandbox.pack import load_pack

        pack = load_pack(args.pack)
    cal = calibrate(load_suite(args.suite), spec, args.out, replicates=args.replicates, pack=pack)
    print(format_calibration(cal), end="")
    print(f"calibration written: {args.out}", file=sys.stderr)
    return 0


def _report(args: argparse.Namespace) -> int:
    info = read_run_json(args.run_dir)
    suite_path = (info.get("suite") or {}).get("path")
    decisions = load_suite(suite_path).decisions if suite_path and Path(suite_path).is_dir() else ()
    # Default: the baseline (--baseline, else the run config's first arm) against every other arm.
    pairs = args.pair or None
    md, html = report_run(args.run_dir, pairs=pairs, decisions=decisions, tainted=_tainted(args),
                          baseline=args.baseline, reads=_session_reads(args, decisions))
    print(f"report: {md}\nreport: {html}")
    return 0


def _session_reads(args: argparse.Namespace,
                   decisions: Sequence[Decision]) -> dict[tuple[str, str], SessionReads] | None:
    """`report --corpus`: what the decisions' sessions read, from the corpus."""
    if args.corpus is None:
        return None
    from replay.corpus.retrieval import decision_reads
    from replay.corpus.sources import open_source

    if not decisions:
        raise ReplayError(f"{args.run_dir}: --corpus needs the run's suite, to know each decision's session")
    refused: list[str] = []
    reads = decision_reads(open_source(args.corpus, args.transcript_format), decisions, refused)
    for reason in refused:
        print(f"refused: {reason}", file=sys.stderr)
    return reads


def _lessons_propose(args: argparse.Namespace) -> int:
    from replay.memory.lessons import (
        AblationPolicy,
        LiftPolicy,
        apply_plan,
        plan_lessons,
        record_verdicts,
    )

    records = load_results(args.run_dir)
    memory_dirs = workspace_dirs(args.memory_root)
    today = datetime.now(UTC).date()
    plan = plan_lessons(records, memory_dirs, today, AblationPolicy(), LiftPolicy())
    for verdict in plan.verdicts:
        print(verdict.summary())
    for workspace, diff in plan.diffs.items():
        if diff:
            print(f"\n# proposed edit for {workspace}\n{diff}")
    if args.apply:
        changed = apply_plan(plan, memory_dirs, today)
        print("applied: " + ", ".join(str(p) for p in changed) if changed else "nothing to apply")
    with Ledger(args.ledger) as ledger:
        record_verdicts(ledger, args.run_dir.name, plan.verdicts)
    return 0


def _trace(args: argparse.Namespace) -> int:
    with Ledger(args.ledger) as ledger:
        print(ledger.trace(args.rule_id, workspace=args.workspace).format())
    return 0


def _dispute(args: argparse.Namespace) -> int:
    with Ledger(args.ledger) as ledger:
        print(ledger.dispute(args.rule_id, args.reason, workspace=args.workspace).format())
    return 0


def _evidence_item(text: str) -> tuple[str, str]:
    """One `--evidence KEY=PATH`; a malformed one is a usage error, not a traceback."""
    key, sep, path = text.partition("=")
    if not sep or not key or not path:
        raise argparse.ArgumentTypeError(f"expected KEY=PATH, got {excerpt(text)}")
    return key, path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="worker-replay", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def ledger_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--ledger", type=Path, default=default_ledger(),
                       help="outcome/provenance ledger (default: $WORKER_REPLAY_LEDGER or runs/ledger.sqlite)")

    suite = sub.add_parser("suite", help="decision suites").add_subparsers(dest="action", required=True)
    for name, func, text in (("validate", _suite_validate, "report every bad line with file:line"),
                             ("freeze", _suite_freeze, "write the frozen manifest (after the privacy check)"),
                             ("stats", _suite_stats, "counts per stratum, cluster, workspace, tool"),
                             ("check-privacy", _suite_check_privacy,
                              "every detectable value left in the suite (decision id, JSON path, type)")):
        p = suite.add_parser(name, help=text)
        p.add_argument("dir", type=Path)
        if name == "freeze":
            p.add_argument("--synthetic", action="store_true",
                           help="the suite's values are invented (a generated demo): skip the privacy check")
        p.set_defaults(func=func)
    p = suite.add_parser("build", help="a versioned suite from the gateway's capture store, or from the runtime's "
                                       "own session files")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--from-capture", type=Path, metavar="DB", help="the gateway's capture.sqlite")
    source.add_argument("--from-corpus", type=Path, metavar="DIR",
                        help="a Claude Code corpus (<workspace>/projects/...): every call it logged, no capture")
    p.add_argument("--transcripts", type=Path, metavar="DIR",
                   help="the read-only transcript corpus that resolves descriptors: Claude Code's session files "
                        "(<workspace>/projects/...) or <workspace>/<session>.jsonl")
    p.add_argument("--transcript-format", choices=FORMATS, default="auto",
                   help="how --transcripts is laid out (default: told from the directory)")
    p.add_argument("--keys", type=Path, metavar="FILE",
                   help="workspace pseudonym keys (TOML [keys]; default $WORKER_REPLAY_PSEUDONYM_KEYS); "
                        "needed with --transcripts, redacts every decision")
    p.add_argument("--verify", choices=("request", "messages"), default="request",
                   help="what a descriptor must match: the request hash too (default) or the message hashes")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="the suite directory (never a frozen one)")
    p.add_argument("--since", metavar="ISO", help="only decisions captured at or after this time")
    p.add_argument("--until", metavar="ISO", help="--from-corpus: only calls made before this time")
    p.add_argument("--test-fraction", type=float, metavar="F",
                   help="--from-corpus: write OUT/train and OUT/test, task-disjoint (a session's decisions on one "
                        "side), about F of the sessions in test")
    p.add_argument("--split-seed", default="", metavar="TEXT", help="with --test-fraction: another stable split")
    p.add_argument("--name", default="capture")
    p.add_argument("--version", default="1")
    p.set_defaults(func=_suite_build)

    corpus = sub.add_parser("corpus", help="the runtime's own session files").add_subparsers(dest="action",
                                                                                           required=True)
    p = corpus.add_parser("audit", help="sessions, subagent runs, records, tool calls, errors, decisions per "
                                        "stratum, top tools, time span of a Claude Code corpus")
    p.add_argument("dir", type=Path, help="<workspace>/projects/<cwd-slug>/<session>.jsonl under it")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_corpus_audit)
    p = corpus.add_parser("reads", help="memory reads per turn and the index's coverage, per session and workspace "
                                        "(001 §10 items 1 and 7)")
    p.add_argument("dir", type=Path, help="a Claude Code corpus or this project's transcripts")
    p.add_argument("--transcript-format", choices=FORMATS, default="auto")
    p.add_argument("--memory-root", type=Path, metavar="DIR",
                   help="the workspaces' memory (one directory each): adds the index's coverage")
    p.add_argument("--read-tool", action="append", default=[], type=_read_tool, metavar="TOOL=ARGUMENT",
                   help="the runtime's file-read tool and its path argument (repeatable; default Read=file_path)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_corpus_reads)

    memory = sub.add_parser("memory", help="workspace memory").add_subparsers(dest="action", required=True)
    check = memory.add_parser("check", help="check memory files like the public check script")
    check.add_argument("dir", type=Path)
    check.add_argument("--root", action="store_true", help="DIR holds one sub-directory per workspace")
    check.set_defaults(func=_memory_check)
    stats = memory.add_parser("stats", help="the fast loop's counters per workspace and root (S25), read-only")
    stats.add_argument("roots", type=Path, nargs="+", metavar="ROOT", help="one directory per workspace under it")
    stats.add_argument("--json", action="store_true")
    stats.add_argument("--git", action="store_true",
                       help="also count the rule churn from each workspace's git history and list where it disagrees "
                            "with the provenance log")
    stats.add_argument("--textfile", type=Path, metavar="FILE",
                       help="also write the counters for node_exporter's textfile collector (atomically)")
    stats.set_defaults(func=_memory_stats)

    p = sub.add_parser("run", help="replay every arm × decision (resumable)")
    p.add_argument("--suite", type=Path, required=True)
    p.add_argument("--config", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True, help="the run directory (re-run into it to resume)")
    ledger_option(p)
    p.set_defaults(func=_run)

    sandbox_cli.add_parser(sub)

    p = sub.add_parser("compare", help="paired comparison of two arms")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--baseline", required=True)
    p.add_argument("--candidate", required=True)
    p.add_argument("--by", choices=("workspace", "cluster", "tool"))
    p.add_argument("--json", action="store_true")
    ledger_option(p)
    p.set_defaults(func=_compare)

    p = sub.add_parser("gate", help="evaluate a pre-registered gate policy; exit 0 only on pass")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--policy", type=Path, required=True)
    p.add_argument("--baseline", required=True)
    p.add_argument("--candidate", required=True)
    p.add_argument("--evidence", action="append", default=[], metavar="KEY=PATH", type=_evidence_item,
                   help="evidence a condition reads from elsewhere (see the policy's comments)")
    ledger_option(p)
    p.set_defaults(func=_gate)

    p = sub.add_parser("plan", help="decisions the gate's paired test needs, and the suite's minimum detectable "
                                    "effect, from a pilot run")
    p.add_argument("--pilot", type=Path, required=True, metavar="RUN_DIR", help="a run with both arms")
    p.add_argument("--baseline", required=True)
    p.add_argument("--candidate", required=True)
    p.add_argument("--effect", type=float, metavar="POINTS",
                   help="the gain to detect (default: the policy's paired-gain min_points)")
    p.add_argument("--power", type=float, default=0.8, help="target power (default 0.8)")
    p.add_argument("--policy", type=Path, default=Path("configs/gates/serious-candidate.toml"),
                   help="the gate policy whose paired-gain condition is planned for")
    p.add_argument("--alpha", type=float,
                   help="the test's α when the policy's paired-gain sets no max_p (default 0.05)")
    p.add_argument("--max-decisions", type=int, default=20000, metavar="N", help="search cap (default 20000)")
    p.add_argument("--json", action="store_true")
    ledger_option(p)
    p.set_defaults(func=_plan)

    p = sub.add_parser("calibrate", help="false-pass rate and power of the gates, the lesson gate and the sandbox "
                                         "measures, measured against the planted-effect endpoint (DESIGN §10)")
    p.add_argument("--suite", type=Path, required=True, metavar="DIR")
    p.add_argument("--pack", type=Path, metavar="DIR",
                   help="a scenario pack: calibrate the gate's sandbox conditions on it (the spec's [pack])")
    p.add_argument("--spec", type=Path, required=True, metavar="CAL.toml",
                   help="the planted policy and what to calibrate")
    p.add_argument("--out", type=Path, required=True, metavar="DIR")
    p.add_argument("--memory", type=Path, metavar="DIR", help="workspace memory root (overrides the spec's)")
    p.add_argument("--replicates", type=int, metavar="N", help="Monte-Carlo replicates (overrides the spec's)")
    p.add_argument("--noise-from", type=Path, metavar="RUN_DIR",
                   help="plant the noise floor an A/A pilot measured (a run with a replicate arm; overrides the "
                        "spec's noise): every rate is then shown with it beside the exact one")
    p.set_defaults(func=_calibrate)

    p = sub.add_parser("report", help="write report.md and a self-contained report.html")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--pair", action="append", default=[], metavar="BASELINE:CANDIDATE", type=pair_item,
                   help="a comparison to report (repeatable); default: the baseline against every other arm")
    p.add_argument("--baseline", metavar="ARM",
                   help="the reference arm: of the default comparisons and of the summary's changed calls "
                        "(default: the run config's first arm; with --pair, the pairs' baseline)")
    p.add_argument("--corpus", type=Path, metavar="DIR",
                   help="the transcripts or Claude Code session files: adds each arm's outcome by what the decisions' "
                        "sessions read from memory")
    p.add_argument("--transcript-format", choices=FORMATS, default="auto")
    ledger_option(p)
    p.set_defaults(func=_report)

    lessons = sub.add_parser("lessons", help="the lesson gate").add_subparsers(dest="action", required=True)
    p = lessons.add_parser("propose", help="per-rule verdicts and the proposed memory edit (a diff)")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--memory-root", type=Path, required=True)
    p.add_argument("--apply", action="store_true", help="apply the proposed moves to the memory files")
    ledger_option(p)
    p.set_defaults(func=_lessons_propose)

    for name, func, text in (("trace", _trace, "every run, result, comparison and verdict that used a rule"),
                             ("dispute", _dispute, "mark everything that used a rule as needing a re-run")):
        p = sub.add_parser(name, help=text)
        p.add_argument("rule_id", metavar="lc:<slug>")
        p.add_argument("--workspace")
        if name == "dispute":
            p.add_argument("--reason", required=True)
        ledger_option(p)
        p.set_defaults(func=func)

    return parser


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
