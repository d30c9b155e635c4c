"""What a corpus could give a training set (001 S18, DESIGN §12): every answered call, classed and with the
origin of its answer, counted before anything is written (`worker-replay curate pool`).

A call's class comes from its outcome as the guard read the `tool_result` that answered it, by the strata a
corpus suite uses (replay/corpus/capture_suite.py), with DESIGN §12's one widening: a successful call right
after a rejected one is a `recovery` when it changed the tool *or the key set* (a suite's `verified_recovery`
asks for a changed tool). An answer with no call is `no_tool`. A call whose outcome proves nothing (no result
recorded, a result the guard calls neither ok nor failed) has no class and is not counted as a decision.

Sessions are read one at a time (memory is bounded by the largest session); only counts are kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from core.capture_store import CapturedDecision, thread_key
from core.guard import FAILURES, GuardRules
from core.records import KNOWN_FAILURE, ParseOutcome, Strict
from core.wireshapes import NeutralAnswer
from replay.corpus.capture_suite import assign_strata
from replay.corpus.claude_code import ClaudeCodeDir, SessionFile
from replay.corpus.corpus_suite import CorpusRead, session_calls
from replay.curation.classes import DecisionClass, Origin
from replay.curation.curation_policy import CurationPolicy
from replay.curation.errors import CurationError
from replay.curation.repeats import redundant

TOP_TOOLS = 5
"""S18 reads the share of actions the top five tools take."""


_BY_STRATUM = {"clean_trajectory_action": DecisionClass.CLEAN, "verified_action": DecisionClass.VERIFIED_ACTION,
               "verified_recovery": DecisionClass.RECOVERY, KNOWN_FAILURE: DecisionClass.KNOWN_FAILURE}


@dataclass(frozen=True)
class PoolDecision:
    """One answered call of the corpus: its capture row (request and chosen arguments held), its class, the
    model its record names, and where it came from."""

    row: CapturedDecision
    decision_class: DecisionClass | None
    model: str | None
    answer: NeutralAnswer
    """The neutral answer (an OpenAI chat assistant message): the text of a `no_tool` answer."""
    conversation_only: bool
    """Rebuilt without the request log: no system prompt, tools or reminders (never a training prompt)."""
    corpus: Path
    paths: frozenset[str] = frozenset()
    """The paths the runtime wrote for the session (`cwd`): redaction replaces them."""

    @property
    def key(self) -> tuple[str, str]:
        return self.row.workspace, self.row.id


def decision_classes(rows: Sequence[CapturedDecision]) -> list[DecisionClass | None]:
    """The class of each row of one session (in call order)."""
    previous: dict[tuple[str, str, str | None], CapturedDecision] = {}
    classes: list[DecisionClass | None] = []
    for row, stratum in zip(rows, assign_strata(rows), strict=True):
        before = previous.get(thread_key(row))
        previous[thread_key(row)] = row
        if row.chosen_tool is None:
            classes.append(DecisionClass.NO_TOOL if row.parse_outcome == ParseOutcome.NO_CALL else None)
        elif (stratum == "verified_action" and before is not None and before.outcome in FAILURES
              and before.chosen_tool == row.chosen_tool and set(before.chosen_keys) != set(row.chosen_keys)):
            classes.append(DecisionClass.RECOVERY)
        else:
            classes.append(_BY_STRATUM.get(stratum) if stratum else None)
    return classes


def session_pool(corpus: Path, workspace: str, session: str, files: list[SessionFile], rules: GuardRules,
                 read: CorpusRead) -> list[PoolDecision]:
    """The answered calls of one session, in call order, classed (`request_sha256` left empty: the build hashes
    only the requests of the decisions it keeps)."""
    calls = list(session_calls(workspace, session, files, rules, read, hashed=False))
    classes = decision_classes([row for row, _ in calls])
    return [PoolDecision(row, cls, logged.model, logged.answer or {}, logged.conversation_only, corpus, logged.paths)
            for (row, logged), cls in zip(calls, classes, strict=True)]


def read_pool(corpus: ClaudeCodeDir, rules: GuardRules, read: CorpusRead) -> Iterator[list[PoolDecision]]:
    """The answered calls of a corpus, one session at a time."""
    for workspace, session, files in corpus.read_sessions(read.refused_files):
        yield session_pool(corpus.root, workspace, session, files, rules, read)


class ToolActions(Strict):
    tool: str
    actions: int
    share: float


class PoolAudit(Strict):
    """`curate pool --json`: what the corpus could give, by class and origin."""

    corpora: list[str]
    sessions: int = 0
    clusters: int = 0
    """Sessions with at least one classed decision (a cluster is a session: its decisions are one task)."""
    decisions: int = 0
    classes: dict[DecisionClass, int] = Field(default_factory=dict)
    origins: dict[Origin, int] = Field(default_factory=dict)
    """Classed decisions by the origin of their answer (the policy's model patterns)."""
    examples: dict[DecisionClass, int] = Field(default_factory=dict)
    """Classed decisions that could become an example under the policy: the worker's own answers, rebuilt with
    their request log, of a class the policy fills (`clean_from`, or `no_tool` for negative). A known failure
    never can by itself: it becomes `recovery` only with a proof from a run (`curate build --runs`)."""
    cannot: dict[DecisionClass, dict[str, int]] = Field(default_factory=dict)
    """Per class, the rest by why (the first reason that applies, in `CANNOT`'s order)."""
    conversation_only: int = 0
    top_tools: list[ToolActions] = Field(default_factory=list)
    top_tools_share: float = 0.0
    """Of the classed decisions' actions (calls), the share the top five tools take (S18: about 0.84)."""
    models: dict[str, int] = Field(default_factory=dict)
    """Classed decisions by the model their record names (`(none)` where it names none)."""
    refused: list[str] = Field(default_factory=list)


CANNOT = {
    "no_proof": "a known failure becomes recovery only when a run proves its correction",
    "claude_origin": "Claude's answer (refused pending legal review, S14)",
    "unknown_origin": "the record names no model, or one neither the policy's worker_models nor claude_models match",
    "no_request_log": "rebuilt without its request log (no prompt to train on)",
    "not_in_clean_from": "a successful action of a class the policy's clean_from leaves out",
    "redundant_repeat": "makes again, with the same values, a call whose ok result its prompt holds",
}
"""Why a classed decision cannot become an example, in the order they are tried."""

FILLS = {DecisionClass.NO_TOOL: "negative", DecisionClass.KNOWN_FAILURE: "recovery"}
"""The mix class each decision class fills (the successful actions fill `clean` where `clean_from` names them)."""


def cannot_reason(decision_class: DecisionClass, origin: Origin, conversation_only: bool,
                  policy: CurationPolicy) -> str | None:
    """Why a decision cannot become an example as the corpus alone stands (None: it could), a `CANNOT` key
    (all but `redundant_repeat`, which reads the prompt: `audit_pool` tries it last, on what passed these)."""
    if decision_class is DecisionClass.KNOWN_FAILURE:
        return "no_proof"
    if origin is not Origin.WORKER:
        return f"{origin.value}_origin"
    if conversation_only:
        return "no_request_log"
    if decision_class is not DecisionClass.NO_TOOL and decision_class not in policy.clean_from:
        return "not_in_clean_from"
    return None


def open_corpora(roots: Sequence[Path]) -> list[ClaudeCodeDir]:
    """The corpora to read; a path that is no directory is a CurationError naming it."""
    for root in roots:
        if not root.is_dir():
            raise CurationError(f"{root}: not a corpus (not a directory)")
    return [ClaudeCodeDir(root) for root in roots]


def audit_pool(corpora: Sequence[ClaudeCodeDir], policy: CurationPolicy, rules: GuardRules | None = None) -> PoolAudit:
    """The pool's counts, one session at a time."""
    read, rules = CorpusRead(), rules or GuardRules()
    classes, origins, examples, tools, models = (Counter[DecisionClass](), Counter[Origin](),
                                                 Counter[DecisionClass](), Counter[str](), Counter[str]())
    cannot: dict[DecisionClass, Counter[str]] = {c: Counter() for c in DecisionClass}
    report = PoolAudit(corpora=[str(c.root) for c in corpora])
    for session in (s for corpus in corpora for s in read_pool(corpus, rules, read)):
        report.sessions += 1
        classed = [d for d in session if d.decision_class is not None]
        report.clusters += bool(classed)
        for d in classed:
            assert d.decision_class is not None
            origin = policy.origin(d.model)
            classes[d.decision_class] += 1
            origins[origin] += 1
            models[d.model or "(none)"] += 1
            report.conversation_only += d.conversation_only
            reason = cannot_reason(d.decision_class, origin, d.conversation_only, policy)
            if reason is None and redundant(d.row.request or {}, d.row.chosen_tool, d.row.chosen_arguments or {},
                                            rules):
                reason = "redundant_repeat"
            if reason is None:
                examples[d.decision_class] += 1
            else:
                cannot[d.decision_class][reason] += 1
            if d.row.chosen_tool is not None:
                tools[d.row.chosen_tool] += 1
    actions = sum(tools.values())
    report.decisions = sum(classes.values())
    report.classes = {c: classes[c] for c in DecisionClass}
    report.origins = {o: origins[o] for o in Origin}
    report.examples = {c: examples[c] for c in DecisionClass}
    report.cannot = {c: {r: cannot[c][r] for r in CANNOT if cannot[c][r]} for c in DecisionClass}
    report.models = dict(sorted(models.items()))
    report.top_tools = [ToolActions(tool=t, actions=n, share=round(n / actions, 4))
                        for t, n in tools.most_common(TOP_TOOLS)]
    report.top_tools_share = round(sum(t.actions for t in report.top_tools) / actions, 4) if actions else 0.0
    report.refused = read.refused_files + read.unrebuilt_calls
    return report


def format_pool(report: PoolAudit, policy: CurationPolicy) -> str:
    """The pool audit as a table: per class, its decisions, how many could become an example and of which mix
    class, and why the rest cannot; then what would make the rest count."""
    lines = [f"pool of {', '.join(report.corpora)}: {report.sessions} sessions, {report.clusters} clusters "
             "(sessions with a classed decision; a cluster is one task, so a build takes at most max_per_cluster "
             f"of its decisions), {report.decisions} classed decisions",
             f"  {'class':<16} {'decisions':>9} {'could be':>8}  {'as':<9} why the rest cannot"]
    for c in DecisionClass:
        fills = FILLS.get(c, "clean" if c in policy.clean_from else "-")
        why = ", ".join(f"{reason} {n:,}" for reason, n in report.cannot.get(c, {}).items())
        lines.append(f"  {c.value:<16} {report.classes.get(c, 0):>9,} {report.examples.get(c, 0):>8,}  {fills:<9} "
                     f"{why}".rstrip())
    reasons = {r for why in report.cannot.values() for r in why}
    lines += [f"    {r}: {text}" for r, text in CANNOT.items() if r in reasons]
    lines.append("  origin of the answers: " + ", ".join(f"{o.value} {n:,}" for o, n in report.origins.items()))
    if "no_proof" in reasons:
        lines.append("  a known failure is proven by a replay run of a suite of this corpus (`worker-replay run`: an "
                     "arm that chooses the session's own next successful call) or a sandbox run of a scenario that "
                     "reproduces it (`worker-replay sandbox run`); give the run directories to `curate build --runs`")
    if "not_in_clean_from" in reasons:
        lines.append('  clean_from = ["clean", "verified_action"] in the policy lets the worker\'s successful actions '
                     "in a session with a failure fill clean (configs/curation/s1.1.toml documents every key)")
    lines.append("  a build may still refuse a candidate at its boundaries (a session of an excluded suite, a "
                 "duplicate, a workspace without a pseudonym key, the privacy check) or pass it over for the caps; "
                 "policy examples come only from the lesson gate's kept rules in --runs")
    if report.top_tools:
        lines.append(f"  top {len(report.top_tools)} tools take {100 * report.top_tools_share:.1f}% of the actions: "
                     + ", ".join(f"{t.tool} {100 * t.share:.1f}%" for t in report.top_tools))
    if report.refused:
        lines.append(f"  refused: {len(report.refused)}")
        lines += [f"    {reason}" for reason in report.refused]
    return "\n".join(lines)
