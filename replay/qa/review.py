"""Reviewer replay (DESIGN §13; `worker-replay qa review`): every labelled run of `reviews.jsonl`, read again from
the corpus, judged by a served model through the evidence-bound prompt (replay/qa/prompt.py), its answer read
(replay/qa/answer.py) into one `ReviewerVerdictLine` a run in the run directory's `verdicts.jsonl`, the file
`qa agree` reads.

A review run is a replay run directory, run by replay's one executor (replay/run/executor.py): one writer at a
time (`run.lock`), a `run.json` manifest (the reviewer, the model, its decoding, the prompt's version and the
content of the reviews file and of the checks' rules: what decides the verdicts), and a resume only of the same
run. Requests go through
replay's endpoint client (replay/run/endpoint.py: loopback unless allowed, no redirects, retries with backoff).
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

import aiohttp

from core.guard import GuardRules
from core.jsonfile import cut_torn_tail
from core.regularfile import read_regular_bytes
from replay.corpus.claude_code import ClaudeCodeDir
from replay.qa.answer import ReviewOutcome, read_answer
from replay.qa.checks import CheckRules, check_run
from replay.qa.errors import QAError
from replay.qa.finished_run import Run, corpus_runs
from replay.qa.labels import LabelledRun
from replay.qa.prompt import PROMPT_VERSION, held_ids, review_body
from replay.qa.verdicts import VERDICTS, ReviewerVerdictLine, read_verdicts
from replay.run.endpoint import chat_url, send_chat
from replay.run.executor import Done, Halt, Job, Served, run_job
from replay.run.run_config import RunConfig

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


def reviewed(verdicts: Path) -> set[tuple[str, str]]:
    """(workspace, session) of the verdicts already written; a torn last line (killed mid-write) is cut off."""
    if not verdicts.exists():
        return set()
    cut_torn_tail(verdicts)
    return {(line.workspace, line.session) for _, line in read_verdicts(verdicts)}


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


def review_job(labelled: Sequence[LabelledRun], labels: Path, corpora: Sequence[ClaudeCodeDir], config: RunConfig,
               rules: CheckRules, guard: GuardRules, served: Served,
               summary: ReviewSummary) -> Job[tuple[LabelledRun, Run]]:
    """`qa review` as the executor runs it: one line per labelled run in `verdicts.jsonl`; what it did and what it
    could not review go into `summary`."""
    [arm] = config.arms

    def plan(done: Done) -> list[tuple[LabelledRun, Run]]:
        summary.already = sum((r.workspace, r.session) in done for r in labelled)
        work, summary.not_reviewed = match_runs([r for r in labelled if (r.workspace, r.session) not in done],
                                                corpora, guard)
        return work

    async def judge(session: aiohttp.ClientSession, pair: tuple[LabelledRun, Run]) -> ReviewerVerdictLine | Halt:
        label, run = pair
        body = review_body(run, check_run(run, rules), arm.model, config.decoding.max_tokens)
        outcome = await send_chat(session, chat_url(config), body, {"X-Worker-Replay": "1"}, config)
        if outcome.body is None:
            return Halt(outcome.error or "no response")
        line = verdict_line(label, run, arm.name, outcome.body)
        summary.written[line.outcome or ReviewOutcome.OK] += 1
        return line

    return Job(label=f"qa review {arm.name}", results=VERDICTS,
               manifest=review_manifest(config, labels, rules, guard, served[config.endpoint.base_url]),
               completed=reviewed, plan=plan, perform=judge)


def review(labelled: Sequence[LabelledRun], labels: Path, corpora: Sequence[ClaudeCodeDir], config: RunConfig,
           rules: CheckRules, guard: GuardRules, run_dir: Path) -> ReviewSummary:
    """Judge every labelled run not yet judged in `run_dir` (see the module docstring). The first request that
    still fails after its retries stops the run (a `QAError`) once the requests in flight end."""
    summary = ReviewSummary()
    executed = asyncio.run(run_job(config, run_dir, lambda served, _: review_job(
        labelled, labels, corpora, config, rules, guard, served, summary)))
    if executed.halted is not None:
        raise QAError(f"the endpoint {chat_url(config)} did not answer ({executed.halted}); "
                      f"{sum(summary.written.values())} verdict(s) written now and {summary.already} before are "
                      f"kept in {run_dir / VERDICTS}: run the same command again to resume")
    return summary
