"""Reviewer replay (DESIGN §13; `worker-replay qa review`): every labelled run of `reviews.jsonl`, read again from
the corpus, judged by a served model through the evidence-bound prompt (replay/qa/prompt.py), its answer read
(replay/qa/answer.py) into one `ReviewerVerdictLine` a run in the run directory's `verdicts.jsonl`, the file
`qa agree` reads.

A review run is a replay run directory (replay/rundir.py): one writer at a time (`run.lock`), a `run.json`
manifest (the reviewer, the model, its decoding, the prompt's version and the content of the reviews file and
of the checks' rules: what decides the verdicts), and a resume only of the same run. Requests go through
replay's endpoint client (replay/endpoint.py: loopback unless allowed, no redirects, retries with backoff).
Each verdict line is appended and flushed as soon as it exists, so a run killed at any point resumes with one
line a run, none twice, none lost. An endpoint that still fails after its retries stops the run with an error
that says so; what was written stays, and the same command resumes it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.guard import GuardRules
from core.jsonfile import cut_torn_tail
from core.regularfile import read_regular_bytes
from replay.config import RunConfig
from replay.corpus.claude_code import ClaudeCodeDir
from replay.endpoint import chat_session, chat_url, check_served, fetch_served, send_chat
from replay.progress import Progress
from replay.qa.answer import ReviewOutcome, read_answer
from replay.qa.checks import CheckRules, check_run
from replay.qa.errors import QAError
from replay.qa.labels import LabelledRun
from replay.qa.prompt import PROMPT_VERSION, held_ids, review_body
from replay.qa.run import Run, corpus_runs
from replay.qa.verdicts import VERDICTS, ReviewerVerdictLine, read_verdicts
from replay.rundir import check_run_dir, prepare_run_dir, run_lock

MAX_LABELS_BYTES = 1 << 30


@dataclass
class ReviewSummary:
    """What one invocation did."""

    written: Counter[ReviewOutcome] = field(default_factory=Counter)
    already: int = 0
    not_reviewed: list[str] = field(default_factory=list)
    """Labelled runs the corpus no longer holds as labelled, each with why (they stay to do)."""


def rules_sha256(rules: CheckRules, guard: GuardRules) -> str:
    """The checks' rules as the prompt's findings depend on them (not where the placeholders file lies)."""
    value = {**dataclasses.asdict(rules), "placeholders": [p.pattern for p in rules.placeholders],
             "guard": json.loads(guard.model_dump_json())}
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def review_manifest(config: RunConfig, labels: Path, rules: CheckRules, guard: GuardRules,
                    served: list[str]) -> dict[str, Any]:
    """The `run.json` of a review run; its `config` is what a resume must match (the endpoint's address is not:
    a run may resume through a gateway restarted on another port)."""
    [arm] = config.arms
    sha256 = hashlib.sha256(read_regular_bytes(labels, MAX_LABELS_BYTES)).hexdigest()
    return {"config": {"kind": "qa-review", "reviewer": arm.name, "model": arm.model,
                       "max_tokens": config.decoding.max_tokens, "prompt_version": PROMPT_VERSION,
                       "reviews_sha256": sha256, "checks_sha256": rules_sha256(rules, guard)},
            "reviews": {"path": str(labels), "sha256": sha256},
            "endpoint": config.endpoint.base_url, "models": served,
            "started_at": datetime.now(UTC).isoformat()}


def reviewed(run_dir: Path) -> set[tuple[str, str]]:
    """(workspace, session) of the verdicts already written; a torn last line (killed mid-write) is cut off."""
    path = run_dir / VERDICTS
    if not path.exists():
        return set()
    cut_torn_tail(path)
    return {(line.workspace, line.session) for _, line in read_verdicts(path)}


def match_runs(labelled: Sequence[LabelledRun], corpora: Sequence[ClaudeCodeDir],
               guard: GuardRules) -> tuple[list[tuple[LabelledRun, Run]], list[str]]:
    """Each labelled run with the corpus's run of its session, when that run ends in the labelled final answer;
    the others with why not."""
    wanted = {(r.workspace, r.session): r for r in labelled}
    found: dict[tuple[str, str], Run] = {}
    refused: list[str] = []
    for read in corpus_runs(corpora, guard, refused):
        if isinstance(read, Run) and (read.workspace, read.session) in wanted:
            found[read.workspace, read.session] = read
    pairs: list[tuple[LabelledRun, Run]] = []
    missing = [f"unreadable: {reason}" for reason in refused]
    for key, label in wanted.items():
        run = found.get(key)
        if run is None:
            missing.append(f"{label.workspace}/{label.session}: the corpus holds no finished run of it")
        elif run.final_record != label.final_record:
            missing.append(f"{label.workspace}/{label.session}: its final answer is now {run.final_record}, "
                           f"not the labelled {label.final_record}")
        else:
            pairs.append((label, run))
    return pairs, missing


def verdict_line(label: LabelledRun, run: Run, reviewer: str, payload: Any) -> ReviewerVerdictLine:
    """The verdicts file's line for one answer (the parsed JSON body)."""
    read = read_answer(payload, held_ids(run))
    return ReviewerVerdictLine(workspace=label.workspace, session=label.session, reviewer=reviewer,
                               verdict=read.counted, final_record=label.final_record, outcome=read.outcome,
                               answered=read.verdict, evidence=list(read.evidence), error=read.error)


async def execute(work: Sequence[tuple[LabelledRun, Run]], config: RunConfig, rules: CheckRules, out_path: Path,
                  summary: ReviewSummary) -> None:
    """Ask for every verdict with bounded concurrency, appending each line as soon as it exists; the first
    request that still fails after its retries stops the run (a `QAError`) once the requests in flight end."""
    [arm] = config.arms
    queue = list(reversed(work))
    failed: list[str] = []
    with Progress(len(work), f"qa review {arm.name}") as progress, out_path.open("a", encoding="utf-8") as out:
        async with chat_session(config) as session:

            async def worker() -> None:
                while queue and not failed:
                    label, run = queue.pop()
                    body = review_body(run, check_run(run, rules), arm.model, config.decoding.max_tokens)
                    outcome = await send_chat(session, chat_url(config), body, {"X-Worker-Replay": "1"}, config)
                    if outcome.body is None:
                        failed.append(outcome.error or "no response")
                        return
                    line = verdict_line(label, run, arm.name, outcome.body)
                    out.write(line.model_dump_json() + "\n")
                    out.flush()
                    summary.written[line.outcome or ReviewOutcome.OK] += 1
                    progress.advance()

            await asyncio.gather(*(worker() for _ in range(min(config.runner.concurrency, len(work)) or 1)))
    if failed:
        raise QAError(f"the endpoint {chat_url(config)} did not answer ({failed[0]}); "
                      f"{sum(summary.written.values())} verdict(s) written now and {summary.already} before are "
                      f"kept in {out_path}: run the same command again to resume")


def review(labelled: Sequence[LabelledRun], labels: Path, corpora: Sequence[ClaudeCodeDir], config: RunConfig,
           rules: CheckRules, guard: GuardRules, run_dir: Path) -> ReviewSummary:
    """Judge every labelled run not yet judged in `run_dir` (see the module docstring)."""
    served, _ = asyncio.run(fetch_served(config))
    check_served(config, served)
    summary = ReviewSummary()
    with run_lock(run_dir):
        manifest = review_manifest(config, labels, rules, guard, served[config.endpoint.base_url])
        check_run_dir(run_dir, manifest)
        done = reviewed(run_dir)
        summary.already = sum((r.workspace, r.session) in done for r in labelled)
        work, summary.not_reviewed = match_runs([r for r in labelled if (r.workspace, r.session) not in done],
                                                corpora, guard)
        prepare_run_dir(run_dir, manifest)
        asyncio.run(execute(work, config, rules, run_dir / VERDICTS, summary))
    return summary
