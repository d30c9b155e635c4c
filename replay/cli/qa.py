"""`worker-replay qa …`: Stop-QA on the worker tier (DESIGN §13): the deterministic checks over a corpus's
finished runs, labelled runs, reviewer replay, reviewer-against-people agreement, the planted reviewer, the
reviewer gate."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from replay.cli.common import corpora_argument

if TYPE_CHECKING:
    from replay.corpus.claude_code import ClaudeCodeDir

DEFAULT_CONFIG = Path("configs/qa/checks.toml")
DEFAULT_POLICY = Path("configs/gates/reviewer-enforce.toml")
DEFAULT_REVIEWER = "qwen"


def _corpora(roots: Sequence[Path]) -> list[ClaudeCodeDir]:
    from replay.corpus.claude_code import ClaudeCodeDir
    from replay.qa.errors import QAError

    for root in roots:
        if not root.is_dir():
            raise QAError(f"{root}: not a corpus (not a directory)")
    return [ClaudeCodeDir(root) for root in roots]


def _check(args: argparse.Namespace) -> int:
    from replay.qa.check_config import load_config
    from replay.qa.findings_report import check_corpora, format_check

    rules, guard = load_config(args.config)
    report = check_corpora(_corpora(args.corpora), rules, guard)
    print(report.model_dump_json(indent=2) if args.json else format_check(report))
    return 0


def _labels(args: argparse.Namespace) -> int:
    from core.evidence import Disposition
    from core.guard import GuardRules
    from replay.qa.errors import QAError
    from replay.qa.finished_run import Run, corpus_runs
    from replay.qa.labels import build_labels, read_dispositions
    from replay.qa.qa_files import write_jsonl

    corpora = _corpora(args.corpora)
    if any(corpus.holds(args.out) for corpus in corpora):
        raise QAError(f"{args.out}: inside a corpus; the corpus is only ever read")
    lines = read_dispositions(args.dispositions)
    unreadable: list[str] = []
    finals = [(r.workspace, r.session, r.final_record) for r in corpus_runs(corpora, GuardRules(), unreadable)
              if isinstance(r, Run)]
    try:
        build = build_labels(finals, lines)
    except QAError as exc:
        raise QAError(f"{args.dispositions}: {exc}") from exc
    write_jsonl(args.out, build.runs)
    people = [r.disposition for r in build.runs if r.disposition is not None]
    print(f"{args.out}: {len(build.runs)} finished run(s): {build.labelled} with a person's disposition "
          f"({people.count(Disposition.PASS)} pass, {people.count(Disposition.FAIL)} fail), "
          f"{len(build.runs) - build.labelled} without; "
          f"{sum(bool(r.reviewer) for r in build.runs)} with a production reviewer verdict")
    if build.refused:
        print(f"dispositions not used: {', '.join(f'{reason} {n}' for reason, n in sorted(build.refused.items()))}")
        print("\n".join(f"  {example}" for example in build.examples))
    for reason in unreadable:
        print(f"  unreadable: {reason}")
    return 0


def _review(args: argparse.Namespace) -> int:
    from replay.qa.check_config import load_config
    from replay.qa.errors import QAError
    from replay.qa.labels import read_labels
    from replay.qa.review import review
    from replay.run.run_config import Arm, Decoding, Endpoint, RunConfig, Runner

    corpora = _corpora(args.corpora)
    if any(corpus.holds(args.out) for corpus in corpora):
        raise QAError(f"{args.out}: inside a corpus; the corpus is only ever read")
    if args.limit is not None and args.limit < 1:
        raise QAError(f"--limit {args.limit}: give at least 1 run")
    try:
        config = RunConfig(endpoint=Endpoint(base_url=args.endpoint, api_key_env=args.api_key_env,
                                             allow_hosts=args.allow_host),
                           decoding=Decoding(max_tokens=args.max_tokens),
                           runner=Runner(concurrency=args.concurrency),
                           arms=[Arm(name=args.reviewer, model=args.model)])
    except ValidationError as exc:
        raise QAError("qa review: " + "; ".join(e["msg"] for e in exc.errors())) from exc
    rules, guard = load_config(args.config)
    labelled = read_labels(args.labels)[:args.limit]
    summary = review(labelled, args.labels, corpora, config, rules, guard, args.out)
    outcomes = ", ".join(f"{outcome} {n}" for outcome, n in sorted(summary.written.items()))
    print(f"{args.out}: {sum(summary.written.values())} verdict(s) written ({outcomes or 'none'}), "
          f"{summary.already} already there")
    if summary.not_reviewed:
        print(f"not reviewed: {len(summary.not_reviewed)} labelled run(s)")
        print("\n".join(f"  {reason}" for reason in summary.not_reviewed))
    return 0


def _agree(args: argparse.Namespace) -> int:
    from replay.qa.agreement import agreement, format_agreement
    from replay.qa.labels import read_labels
    from replay.qa.qa_files import write_text
    from replay.qa.verdicts import gather, production_lines, read_verdicts

    runs = read_labels(args.labels)
    lines = [(str(args.labels), line) for line in production_lines(runs)]
    lines += [line for path in args.verdicts for line in read_verdicts(path)]
    report = agreement(runs, gather(runs, lines))
    if args.out is not None:
        write_text(args.out, report.model_dump_json(indent=2) + "\n")
    print(report.model_dump_json(indent=2) if args.json else format_agreement(report))
    return 0


def _plant(args: argparse.Namespace) -> int:
    from replay.qa.errors import QAError
    from replay.qa.labels import read_labels
    from replay.qa.planted_reviewer import PlantedRates, planted_verdicts
    from replay.qa.qa_files import write_jsonl

    try:
        rates = PlantedRates(false_pass=args.false_pass, escalation=args.escalation, false_fail=args.false_fail)
    except ValidationError as exc:
        raise QAError("planted rates: " + "; ".join(e["msg"] for e in exc.errors())) from exc
    verdicts = planted_verdicts(read_labels(args.labels), rates, args.seed)
    write_jsonl(args.out, verdicts)
    print(f"{args.out}: the planted reviewer's verdicts on {len(verdicts)} labelled run(s) (false pass "
          f"{rates.false_pass}, escalation {rates.escalation}, false fail {rates.false_fail}, seed {args.seed})")
    return 0


def _gate(args: argparse.Namespace) -> int:
    from replay.analysis.gates import format_verdict, write_verdict
    from replay.qa.errors import QAError
    from replay.qa.gate import evaluate_reviewer_gate

    verdict = evaluate_reviewer_gate(args.policy, args.agreement, args.reviewer)
    try:
        path = write_verdict(args.agreement.parent, verdict)
    except OSError as exc:
        raise QAError(f"{args.agreement.parent}: cannot write the verdict: {exc.strerror or exc}") from exc
    print(format_verdict(verdict))
    print(f"verdict written: {path}", file=sys.stderr)
    return 0 if verdict.passed else 1


def add_parser(sub: Any) -> None:
    qa = sub.add_parser("qa", help="Stop-QA: deterministic checks of finished runs, labelled runs, reviewer replay, "
                                   "reviewer agreement with people, the reviewer-enforce gate (DESIGN §13)")
    actions = qa.add_subparsers(dest="action", required=True)
    _add_check(actions)
    _add_labels(actions)
    _add_review(actions)
    _add_agree(actions)
    _add_plant(actions)
    _add_gate(actions)


def _add_check(actions: Any) -> None:
    p = actions.add_parser("check", help="the deterministic checks (placeholder, unacknowledged_tool_error, "
                                         "count_mismatch) on every finished run: findings citing record ids, "
                                         "counts per workspace and kind")
    corpora_argument(p, "a Claude Code corpus (<workspace>/projects/...), read-only")
    p.add_argument("--config", type=Path, default=DEFAULT_CONFIG,
                   help=f"admission words, count nouns, the placeholders file (default {DEFAULT_CONFIG})")
    p.add_argument("--json", action="store_true", help="the findings, runs and counts as JSON")
    p.set_defaults(func=_check)


def _add_labels(actions: Any) -> None:
    p = actions.add_parser("labels", help="reviews.jsonl: every finished run of the corpus, with the production "
                                          "reviewer's verdict per mode and a person's disposition where given")
    corpora_argument(p)
    p.add_argument("--dispositions", type=Path, required=True, metavar="FILE",
                   help='JSONL: {"workspace", "session", "final_record"?, "disposition"?: "pass"|"fail", '
                        '"reviewer"?: {MODE: "pass"|"fail"|"escalate"}}')
    p.add_argument("--out", type=Path, required=True, metavar="REVIEWS.jsonl",
                   help="written atomically; never inside a corpus")
    p.set_defaults(func=_labels)


def _add_review(actions: Any) -> None:
    p = actions.add_parser("review", help="reviewer replay: a served model judges every labelled run through the "
                                          "evidence-bound prompt and the forced `verdict` tool; one verdict line a "
                                          "run in OUT/verdicts.jsonl (resumable, one writer at a time)")
    corpora_argument(p, "the Claude Code corpus the labels were made from, read-only")
    p.add_argument("--labels", type=Path, required=True, metavar="REVIEWS.jsonl",
                   help="`qa labels` output: the runs judged, in its order")
    p.add_argument("--endpoint", required=True, metavar="URL",
                   help="the OpenAI-compatible server, up to /v1 (the gateway, or vLLM itself), as a run config's "
                        "[endpoint] base_url: loopback unless --allow-host names its host")
    p.add_argument("--model", required=True, help="the model the requests name (a route, a base, an adapter)")
    p.add_argument("--reviewer", default=DEFAULT_REVIEWER,
                   help=f"who judges, as `qa agree` names it (default {DEFAULT_REVIEWER})")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding a bearer token, sent when set")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                   help="a non-loopback endpoint host allowed on purpose (repeatable)")
    p.add_argument("--max-tokens", type=int, default=256, metavar="N", help="the answer's bound (default 256)")
    p.add_argument("--concurrency", type=int, default=4, metavar="N", help="requests in flight at once (default 4)")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N runs of the labels file")
    p.add_argument("--config", type=Path, default=DEFAULT_CONFIG,
                   help=f"the deterministic checks whose findings the prompt holds (default {DEFAULT_CONFIG})")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="the run directory: run.json, verdicts.jsonl (re-run into it to resume)")
    p.set_defaults(func=_review)


def _add_agree(actions: Any) -> None:
    p = actions.add_parser("agree", help="per reviewer, workspace and mode against people: confusion matrix, "
                                         "false-pass rate (exact CP), escalation rate, Cohen's kappa; reviewer "
                                         "pairs by the exact McNemar test")
    p.add_argument("--labels", type=Path, required=True, metavar="REVIEWS.jsonl",
                   help="`qa labels` output: people's dispositions and the production verdicts per mode")
    p.add_argument("--verdicts", type=Path, nargs="*", default=[], metavar="FILE",
                   help='more reviewers\' verdicts, JSONL: {"workspace", "session", "reviewer", "verdict", '
                        '"mode"?, "final_record"?, …} (`qa plant` writes one), or a `qa review` run directory')
    p.add_argument("--out", type=Path, metavar="FILE",
                   help="also write the figures as JSON: the reviewer_agreement gate's evidence")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(func=_agree)


def _add_plant(actions: Any) -> None:
    p = actions.add_parser("plant", help="the planted reviewer (no model): seeded verdicts with known false-pass, "
                                         "escalation and false-fail rates on the labelled runs, to calibrate "
                                         "`qa agree` and the gate")
    p.add_argument("--labels", type=Path, required=True, metavar="REVIEWS.jsonl",
                   help="the labelled runs; runs without a person's disposition get no verdict")
    p.add_argument("--false-pass", type=float, required=True, metavar="RATE",
                   help="P(pass | people failed the run)")
    p.add_argument("--escalation", type=float, required=True, metavar="RATE", help="P(escalate), on any run")
    p.add_argument("--false-fail", type=float, default=0.0, metavar="RATE",
                   help="P(fail | people passed the run) (default 0)")
    p.add_argument("--seed", type=int, default=0, help="draws are seeded by it and the run, never by order")
    p.add_argument("--out", type=Path, required=True, metavar="VERDICTS.jsonl",
                   help="the verdicts file (reviewer `planted`), for `qa agree --verdicts`")
    p.set_defaults(func=_plant)


def _add_gate(actions: Any) -> None:
    p = actions.add_parser("gate", help="judge a reviewer by a pre-registered reviewer_agreement policy; exit 0 "
                                        "only on pass, the verdict written beside the agreement file")
    p.add_argument("--policy", type=Path, default=DEFAULT_POLICY,
                   help=f"a policy of reviewer_agreement conditions (default {DEFAULT_POLICY})")
    p.add_argument("--agreement", type=Path, required=True, metavar="FILE", help="`qa agree --out` output")
    p.add_argument("--reviewer", required=True,
                   help="the reviewer judged, as `qa agree` names it (`qwen`, `production@shadow-cascade`)")
    p.set_defaults(func=_gate)
