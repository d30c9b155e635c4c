"""`worker-replay curate build`: a training set from a corpus and the runs that proved its corrections
(DESIGN §12; 001 §4.3, E11, S14).

One pass over the corpus classes every decision (replay/curation/pool.py) and keeps, per decision, only what
choosing needs: its mix class, cluster, target tool and proof. Each decision is a candidate of one class at most —
a proven correction of a known failure is `recovery`, a decision a kept rule won is `policy`, an answer with no
call is `negative`, an action of the classes the policy's `clean_from` names is `clean` — and the boundaries
refuse it, each refusal counted by reason: the target's origin is Claude's or unknown, the call was rebuilt
without its request log, a shadow leg not approved, a session of an excluded frozen suite, or the same request and
target as an earlier candidate (a duplicate), or a target that repeats a call whose ok result the prompt already
holds (a redundant repeat, replay/curation/repeats.py). A proven correction attaches to a known failure only: it
is what makes a `recovery`, and proves nothing of any other decision. The excluded suites are those
`--exclude-suite` names and, unless `--no-eval-boundary` says otherwise, every frozen suite registered in the suites
directory (the eval boundary, `registry`).

Then each class is drawn from its own candidates, in a seeded order, scarcest class first, under the caps (per
cluster, per tool's share of the calls the set asks for); the draw renders each example from the corpus again,
redacted with the workspace's key (every registered workspace name and the paths the runtime wrote for the session
too), and refuses one whose redacted request is a decision of an excluded suite, or a near-copy of one by token
8-grams (core/near_duplicates.py), or that the privacy check still finds a value in. The privacy audit
(replay/privacy/release_audit.py) then reads the three files as they will be written, and the build writes nothing
when it finds anything. A class that cannot reach its ask fails the build, or (`shrink`) every class is cut alike, by
the share of its ask the shortest class got (a class that got nothing left out), and the draw is made again: the set
shrinks to what exists with the mix kept, the manifest shows asked against got, and a class is never padded from
another.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from pathlib import Path
from typing import Any, cast

from core.attestation import file_sha256
from core.canonical import request_digest
from core.capture_store import CapturedDecision, stored_time, thread_key
from core.chatrow import chat_row, target_turn
from core.curated import (
    ChatTrainingRow,
    ClassCount,
    CurationManifest,
    EvalBoundary,
    PolicyRef,
    RunRef,
    SuiteRef,
)
from core.guard import GuardKind, GuardRules
from core.keyset import canonical_json
from core.near_duplicates import NearDuplicates, state_text
from core.records import REQUESTS, ResultRecord
from core.wire import WIRES, DecisionApi
from replay.corpus.capture_suite import registered_workspaces, strip_request
from replay.corpus.claude_code import RECENT, ClaudeCodeDir
from replay.corpus.corpus_suite import CorpusRead, cluster_of
from replay.corpus.resolve import load_keys
from replay.curation.classes import DecisionClass, MixClass, Origin
from replay.curation.curation_policy import CurationPolicy, load_policy
from replay.curation.dataset import Provenance, check_out, set_lines, snapshot, write_set
from replay.curation.errors import CurationError
from replay.curation.pool import PoolDecision, open_corpora, read_pool, session_pool
from replay.curation.proofs import (
    Correction,
    Key,
    NextCall,
    Proof,
    RunEvidence,
    executed_corrections,
    known_failure_answers,
    lesson_wins,
    read_runs,
    recorded_correction,
)
from replay.curation.repeats import redundant
from replay.privacy.redact import Pseudonymizer, request_paths, residuals
from replay.privacy.release_audit import PrivacyAudit
from replay.privacy.tenants import TenantNames
from replay.suite import SUITE_TOML, Suite, load_suite
from replay.suite_checks import request_hash

DRAW_ORDER = (MixClass.RECOVERY, MixClass.POLICY, MixClass.NEGATIVE, MixClass.CLEAN)
"""Scarcest first: under the caps, a proven correction is never crowded out by a clean action."""


class Refusal(StrEnum):
    CLAUDE_ORIGIN = "claude_origin"
    UNKNOWN_ORIGIN = "unknown_origin"
    NO_REQUEST_LOG = "no_request_log"
    SHADOW_UNAPPROVED = "shadow_unapproved"
    EXCLUDED_SUITE_SESSION = "excluded_suite_session"
    EXCLUDED_SUITE_REQUEST = "excluded_suite_request"
    EXCLUDED_SUITE_NEAR_DUPLICATE = "excluded_suite_near_duplicate"
    DUPLICATE = "duplicate"
    NO_PSEUDONYM_KEY = "no_pseudonym_key"
    PRIVACY_CHECK_FAILED = "privacy_check_failed"
    CORRECTION_NOT_OFFERED = "correction_not_offered"
    NOT_A_CORRECTION = "not_a_correction"
    REDUNDANT_REPEAT = "redundant_repeat"


@dataclass(frozen=True)
class Candidate:
    """What drawing a decision needs; the example itself is rendered from the corpus when drawn."""

    mix_class: MixClass
    key: Key
    cluster: str
    corpus: int
    decision_class: DecisionClass
    tool: str | None
    """The target's tool (None: an answer): what the per-tool cap counts."""
    model: str
    correction: Correction | None = None
    proof: Proof | None = None


SUITES_ENV = "WORKER_REPLAY_SUITES"
DEFAULT_SUITES = Path("suites")


def registry(policy: CurationPolicy) -> tuple[Path, list[Path]]:
    """The suites directory (the policy's `suites_dir`, else $WORKER_REPLAY_SUITES, else `suites`) and the
    suites registered in it: each subdirectory holding a `suite.toml`. A directory named by the policy or the
    environment must exist; the default may not (no suite is registered then)."""
    named = policy.suites_dir or os.environ.get(SUITES_ENV)
    directory = Path(named) if named else DEFAULT_SUITES
    if not directory.is_dir():
        if named:
            raise CurationError(f"{directory}: the suites directory (the policy's suites_dir or ${SUITES_ENV}) "
                                "is not a directory")
        return directory, []
    return directory, sorted(p.parent for p in directory.glob(f"*/{SUITE_TOML}"))


@dataclass
class Excluded:
    """The frozen suites no example may come from: their sessions, their requests as a suite holds them, and
    their decision states' n-grams (the near-duplicate rule)."""

    suites: list[Suite]
    boundary: EvalBoundary
    clusters: set[str]
    requests: set[str]
    near: NearDuplicates

    @classmethod
    def load(cls, paths: Sequence[Path], policy: CurationPolicy, *, eval_boundary: bool = True) -> Excluded:
        """The suites named, and every suite registered unless `eval_boundary` is false."""
        directory, registered = registry(policy)
        chosen = {p.resolve(): p for p in [*paths, *(registered if eval_boundary else [])]}
        suites = [load_suite(p) for p in chosen.values()]
        for suite in suites:
            if not suite.frozen:
                raise CurationError(f"{suite.path}: not frozen; only a frozen suite can be excluded (its manifest "
                                    "proves which decisions it holds): run `worker-replay suite freeze` first")
        decisions = [d for s in suites for d in s.decisions]
        return cls(suites, EvalBoundary(suites_dir=str(directory), registered=[str(p) for p in registered],
                                        enforced=eval_boundary),
                   {f"{d.workspace}/{d.session}" for d in decisions} | {d.cluster for d in decisions},
                   {request_hash(d.request) for d in decisions},
                   NearDuplicates([state_text(d.request.model_dump(mode="json", exclude_none=True))
                                   for d in decisions], policy.near_duplicate_ngram, policy.near_duplicate_threshold))


@dataclass
class Inputs:
    """Everything a build reads, opened and checked before any decision is read."""

    corpora: list[ClaudeCodeDir]
    shadow: frozenset[int]
    """Indexes of the corpora recorded from shadow legs."""
    keys: Mapping[str, bytes]
    policy: CurationPolicy
    policy_ref: PolicyRef
    excluded: Excluded
    runs: RunEvidence
    run_dirs: list[Path]
    workspaces: frozenset[str] = frozenset()
    """Every registered workspace name (the keys file's, the corpora's directory names): replaced wherever it
    stands in what is written."""


@dataclass
class Pool:
    """Pass one's yield: the candidates per class and what was refused."""

    candidates: dict[MixClass, list[Candidate]] = field(default_factory=lambda: {c: [] for c in MixClass})
    refusals: Counter[str] = field(default_factory=Counter)
    unproven: int = 0
    keys: set[Key] = field(default_factory=set)


def open_inputs(corpora: Sequence[Path], shadow: Sequence[Path], keys: Path | None, policy: Path,
                excluded: Sequence[Path], runs: Sequence[Path], *, eval_boundary: bool = True) -> Inputs:
    """`eval_boundary=False` (`--no-eval-boundary`) leaves the registered suites out of the exclusion."""
    dirs = open_corpora([*corpora, *shadow])
    loaded, sha256 = load_policy(policy)
    workspace_keys = load_keys(keys)
    workspaces = frozenset().union(*(registered_workspaces(workspace_keys, d.root) for d in dirs))
    return Inputs(dirs, frozenset(range(len(corpora), len(dirs))), workspace_keys, loaded,
                  PolicyRef(path=str(policy), name=loaded.name, version=loaded.version, sha256=sha256),
                  Excluded.load(excluded, loaded, eval_boundary=eval_boundary), read_runs(runs), list(runs), workspaces)


def _next_calls(session: Sequence[PoolDecision]) -> dict[Key, NextCall]:
    """Each known failure's next call in its thread, as a recorded proof reads it."""
    found: dict[Key, NextCall] = {}
    last: dict[tuple[str, str, str | None], PoolDecision] = {}
    for d in session:
        before = last.get(thread_key(d.row))
        last[thread_key(d.row)] = d
        if before is not None and before.decision_class is DecisionClass.KNOWN_FAILURE:
            found[before.key] = NextCall(d.row.chosen_tool, frozenset(d.row.chosen_keys), d.row.chosen_arguments,
                                         d.row.outcome == GuardKind.OK, d.model)
    return found


def _correction(d: PoolDecision, executed: Mapping[Key, Correction],
                answers: Mapping[Key, list[tuple[str, ResultRecord]]],
                after: Mapping[Key, NextCall]) -> Correction | None:
    """A proven correction of `d`, when `d` is a known failure: a correction proves `recovery` only (an episode
    of a scenario that names a `no_tool` or successful decision corrects nothing there)."""
    if d.decision_class is not DecisionClass.KNOWN_FAILURE:
        return None
    return executed.get(d.key) or recorded_correction(answers.get(d.key, []), after.get(d.key))


def _mix_class(d: PoolDecision, policy: CurationPolicy, wins: Mapping[Key, Proof],
               correction: Correction | None) -> MixClass | None:
    if d.decision_class is DecisionClass.KNOWN_FAILURE:
        return MixClass.RECOVERY if correction is not None else None
    if d.key in wins and d.row.outcome == GuardKind.OK:
        return MixClass.POLICY
    if d.decision_class is DecisionClass.NO_TOOL:
        return MixClass.NEGATIVE
    return MixClass.CLEAN if d.decision_class in policy.clean_from else None


def _boundary(d: PoolDecision, candidate: Candidate, inputs: Inputs, failed: CapturedDecision | None,
              seen: set[str], rules: GuardRules) -> Refusal | None:
    """The first boundary a candidate crosses (S14, and a target the prompt already holds the answer of), or
    None."""
    origin = inputs.policy.origin(candidate.model or None)
    if origin is Origin.CLAUDE:
        return Refusal.CLAUDE_ORIGIN
    if origin is Origin.UNKNOWN:
        return Refusal.UNKNOWN_ORIGIN
    if d.conversation_only:
        return Refusal.NO_REQUEST_LOG
    if candidate.corpus in inputs.shadow and Path(d.corpus).name not in inputs.policy.approved_shadow_sources:
        return Refusal.SHADOW_UNAPPROVED
    if candidate.cluster in inputs.excluded.clusters:
        return Refusal.EXCLUDED_SUITE_SESSION
    if d.row.workspace not in inputs.keys:
        return Refusal.NO_PSEUDONYM_KEY
    if candidate.correction is not None and failed is not None:
        if candidate.correction.tool not in failed.tools_offered:
            return Refusal.CORRECTION_NOT_OFFERED
        if (candidate.correction.tool, canonical_json(candidate.correction.arguments)) == \
                (failed.chosen_tool, canonical_json(failed.chosen_arguments or {})):
            return Refusal.NOT_A_CORRECTION
    if redundant(d.row.request or {}, candidate.tool, _target_arguments(d, candidate), rules):
        return Refusal.REDUNDANT_REPEAT
    target = (candidate.tool, canonical_json(_target_arguments(d, candidate)), d.answer.get("content")
              if candidate.tool is None else None)
    request = request_digest(cast(DecisionApi, d.row.api), d.row.request or {})
    identity = hashlib.sha256(canonical_json([request, candidate.mix_class, *target]).encode()).hexdigest()
    if identity in seen:
        return Refusal.DUPLICATE
    seen.add(identity)
    return None


def _target_arguments(d: PoolDecision, candidate: Candidate) -> dict[str, Any]:
    if candidate.correction is not None:
        return candidate.correction.arguments
    return d.row.chosen_arguments or {}


def gather(inputs: Inputs, rules: GuardRules) -> Pool:
    """Pass one: every decision of every corpus, classed, proven and checked against the boundaries, one
    session at a time."""
    pool, seen, read = Pool(), set[str](), CorpusRead()
    executed, answers, wins = (executed_corrections(inputs.runs), known_failure_answers(inputs.runs),
                               lesson_wins(inputs.runs))
    for index, corpus in enumerate(inputs.corpora):
        for session in read_pool(corpus, rules, read):
            after = _next_calls(session)
            for d in session:
                pool.keys.add(d.key)
                correction = _correction(d, executed, answers, after)
                mix = _mix_class(d, inputs.policy, wins, correction)
                if mix is None:
                    pool.unproven += d.decision_class is DecisionClass.KNOWN_FAILURE
                    continue
                assert d.decision_class is not None
                candidate = Candidate(mix, d.key, cluster_of(d.row), index, d.decision_class,
                                      correction.tool if correction else d.row.chosen_tool,
                                      (correction.model if correction else d.model) or "", correction,
                                      correction.proof if correction else wins.get(d.key))
                refusal = _boundary(d, candidate, inputs, d.row if correction else None, seen, rules)
                if refusal is None:
                    pool.candidates[mix].append(candidate)
                else:
                    pool.refusals[refusal] += 1
    _check_runs(inputs.runs, pool.keys)
    pool.refusals.update(Counter("unread" for _ in read.refused_files))
    return pool


def _check_runs(runs: RunEvidence, keys: set[Key]) -> None:
    """Every decision a run names is one of this corpus's: a run of another suite proves nothing here."""
    for run, key in runs.decisions():
        if key not in keys:
            raise CurationError(f"{run}: decision {key[1]} of workspace {key[0]} is not in the corpus; the run "
                                "replayed another corpus's suite (or a scenario names a decision this corpus lacks)")


@dataclass
class Drawn:
    """The draw's yield: the examples in order, and what it passed over or refused."""

    rows: list[ChatTrainingRow] = field(default_factory=list)
    provenance: list[Provenance] = field(default_factory=list)
    got: Counter[MixClass] = field(default_factory=Counter)
    refusals: Counter[str] = field(default_factory=Counter)
    capped: Counter[str] = field(default_factory=Counter)
    redactions: Counter[str] = field(default_factory=Counter)


class Renderer:
    """Renders a drawn candidate from the corpus (its session read again, a few kept), redacted."""

    def __init__(self, inputs: Inputs, rules: GuardRules) -> None:
        self.inputs, self.rules = inputs, rules
        self._sessions: dict[tuple[int, str, str], dict[str, PoolDecision]] = {}

    def decision(self, candidate: Candidate) -> PoolDecision:
        workspace, decision_id = candidate.key
        session = candidate.cluster.split("/", 1)[1]
        key = (candidate.corpus, workspace, session)
        if key not in self._sessions:
            if len(self._sessions) >= RECENT:
                self._sessions.pop(next(iter(self._sessions)))
            corpus = self.inputs.corpora[candidate.corpus]
            read = corpus.session(workspace, session)
            if read is None:
                raise CurationError(f"{corpus.root}: session {session} of {workspace} went away during the build")
            self._sessions[key] = {d.row.id: d for d in session_pool(corpus.root, workspace, session, read.files,
                                                                       self.rules, CorpusRead())}
        return self._sessions[key][decision_id]

    @staticmethod
    def _as_suite_holds(api: DecisionApi, request: dict[str, Any], key: bytes, names: TenantNames) -> dict[str, Any]:
        """The request as a suite of the same decision holds it: memory stripped, then redacted (a suite built
        with the same keys file and corpus replaces the same names)."""
        stripped = REQUESTS[api].model_validate(strip_request(api, request)).model_dump(mode="json", exclude_none=True)
        redacted = REQUESTS[api].model_validate(Pseudonymizer(key, names=names).value(stripped))
        return redacted.model_dump(mode="json", exclude_none=True)

    def _boundary(self, api: DecisionApi, request: dict[str, Any], key: bytes,
                  names: TenantNames) -> tuple[Refusal | None, str]:
        """The eval boundary's rule a drawn request meets (one of an excluded suite's decisions, or its near-copy;
        None: neither), and its request hash as a suite holds it (provenance records it for a later check)."""
        held = self._as_suite_holds(api, request, key, names)
        digest = request_hash(REQUESTS[api].model_validate(held))
        if digest in self.inputs.excluded.requests:
            return Refusal.EXCLUDED_SUITE_REQUEST, digest
        if self.inputs.excluded.near.matches(state_text(held)):
            return Refusal.EXCLUDED_SUITE_NEAR_DUPLICATE, digest
        return None, digest

    def render(self, candidate: Candidate, drawn: Drawn) -> tuple[ChatTrainingRow, Provenance] | Refusal:
        d = self.decision(candidate)
        api = WIRES[cast(DecisionApi, d.row.api)].api
        request = dict(d.row.request or {})
        names = TenantNames(self.inputs.workspaces, d.paths | request_paths(request))
        if candidate.mix_class is MixClass.POLICY:
            request = strip_request(api, request)
        pseudonymizer = Pseudonymizer(self.inputs.keys[d.row.workspace], names=names)
        refusal, digest = self._boundary(api, request, pseudonymizer.key, names)
        if refusal is not None:
            return refusal
        text = d.answer.get("content") if candidate.tool is None else None
        row = chat_row(pseudonymizer.value(request),
                       target_turn(candidate.tool, pseudonymizer.value(_target_arguments(d, candidate)),
                                   pseudonymizer.text(text) if isinstance(text, str) else None))
        if residuals(row.model_dump(mode="json"), names=TenantNames(self.inputs.workspaces)):
            return Refusal.PRIVACY_CHECK_FAILED
        drawn.redactions.update(pseudonymizer.counts)
        return row, Provenance(example=len(drawn.rows) + 1, decision=d.row.id,
                               workspace=pseudonymizer.pseudonym("WORKSPACE", d.row.workspace),
                               corpus=str(d.corpus), mix_class=candidate.mix_class,
                               decision_class=candidate.decision_class, origin_model=candidate.model,
                               proof=candidate.proof, request_sha256=digest, captured_at=d.row.captured_at)


def data_until(provenance: Sequence[Provenance]) -> str | None:
    """The newest capture time of the set's source decisions, in UTC as the capture store writes times."""
    dated = [stored_time(p.captured_at) for p in provenance if p.captured_at is not None]
    return max(dated) if dated else None


def tool_limit(policy: CurationPolicy, asks: Mapping[MixClass, int]) -> int | None:
    """The most examples one tool may be the target of: `max_tool_share` of the calls the set asks for (every
    class but `negative`, whose targets are answers), at least 1. A set drawn in full holds those calls, so no
    tool is more than that share of its calls (S18 counts a tool's share of actions)."""
    if policy.max_tool_share is None:
        return None
    calls = sum(n for c, n in asks.items() if c is not MixClass.NEGATIVE)
    return max(1, int(Fraction(str(policy.max_tool_share)) * calls))


def draw(pool: Pool, asks: Mapping[MixClass, int], policy: CurationPolicy, renderer: Renderer) -> Drawn:
    """Each class from its own candidates, in a seeded order, scarcest first, under the caps (the per-tool cap
    of the calls these asks hold: a shrunk set's own)."""
    drawn, per_cluster, per_tool = Drawn(), Counter[str](), Counter[str]()
    limit = tool_limit(policy, asks)
    for mix in DRAW_ORDER:
        order = sorted(pool.candidates[mix], key=lambda c: c.key)
        random.Random(f"{policy.seed}:{mix.value}").shuffle(order)
        for candidate in order:
            if drawn.got[mix] >= asks.get(mix, 0):
                break
            if policy.max_per_cluster is not None and per_cluster[candidate.cluster] >= policy.max_per_cluster:
                drawn.capped["cluster"] += 1
                continue
            if limit is not None and candidate.tool is not None and per_tool[candidate.tool] >= limit:
                drawn.capped["tool"] += 1
                continue
            rendered = renderer.render(candidate, drawn)
            if isinstance(rendered, Refusal):
                drawn.refusals[rendered] += 1
                continue
            drawn.rows.append(rendered[0])
            drawn.provenance.append(rendered[1])
            drawn.got[mix] += 1
            per_cluster[candidate.cluster] += 1
            if candidate.tool is not None:
                per_tool[candidate.tool] += 1
    return drawn


def _shrunk(asks: Mapping[MixClass, int], got: Mapping[MixClass, int]) -> dict[MixClass, int]:
    """Every class cut alike, by the share of its ask that the shortest class got (rounded down), so the classes
    keep their shares of the set; a class that got nothing is left out (asked 0) rather than emptying the set.
    No class fills another's room."""
    gave = {c: n for c, n in asks.items() if n and got.get(c, 0)}
    factor = min((Fraction(min(got[c], n), n) for c, n in gave.items()), default=Fraction(0))
    return {c: int(n * factor) if c in gave else 0 for c, n in asks.items()}


def _shortfall(asks: Mapping[MixClass, int], drawn: Drawn, pool: Pool) -> str:
    """The short classes, and what the boundaries refused (so a set the eval boundary emptied says so)."""
    refused = ", ".join(f"{k} {v}" for k, v in sorted((pool.refusals + drawn.refusals).items()))
    return "; ".join([*(f"{c.value}: asked {n}, got {drawn.got[c]} of {len(pool.candidates[c])} candidates"
                        for c, n in asks.items() if drawn.got[c] < n), f"refused: {refused or 'none'}"])


def curate(inputs: Inputs, out: Path, rules: GuardRules | None = None) -> CurationManifest:
    """Build the set into `out`; a class that falls short fails the build (nothing written) unless the policy
    shrinks."""
    check_out(out, inputs.corpora)
    rules = rules or GuardRules()
    pool = gather(inputs, rules)
    renderer = Renderer(inputs, rules)
    asks = asked = inputs.policy.asked()
    drawn = draw(pool, asks, inputs.policy, renderer)
    shrunk, shortfall = False, ""
    while any(drawn.got[c] < n for c, n in asks.items()):
        shortfall = _shortfall(asks, drawn, pool)
        if inputs.policy.shortfall == "fail":
            raise CurationError(f"{inputs.policy_ref.path}: classes fall short ({shortfall}); "
                                "the policy says `shortfall = \"fail\"`, so nothing was written (`shrink` cuts "
                                "every class alike to the size the shortest allows, leaving out a class with none)"
                                + _why_short(inputs, pool, drawn, asks))
        asks, shrunk = _shrunk(asks, drawn.got), True
        drawn = draw(pool, asks, inputs.policy, renderer)
    if not drawn.rows:
        raise CurationError(f"{inputs.policy_ref.path}: no example could be drawn ({shortfall}); nothing was written"
                            + _why_short(inputs, pool, drawn, asked))
    manifest = CurationManifest(
        policy=inputs.policy_ref, seed=inputs.policy.seed, shrunk=shrunk,
        classes={c.value: ClassCount(asked=asked.get(c, 0), got=drawn.got[c], candidates=len(pool.candidates[c]))
                 for c in MixClass},
        examples=len(drawn.rows), refusals=dict(sorted((pool.refusals + drawn.refusals).items())),
        capped=dict(sorted(drawn.capped.items())), unproven_failures=pool.unproven,
        redactions=dict(sorted(drawn.redactions.items())),
        excluded_suites=[SuiteRef(path=str(s.path), name=s.manifest.name, version=s.manifest.version, sha256=s.sha256,
                                  decisions=len(s.decisions)) for s in inputs.excluded.suites],
        eval_boundary=inputs.excluded.boundary,
        corpora=[snapshot(c) for c in inputs.corpora],
        runs=[RunRef(path=str(r), kind="sandbox" if str(r) in inputs.runs.episodes else "replay",
                     results_sha256=file_sha256(r / "results.jsonl")) for r in inputs.run_dirs],
        train_sha256="", data_until=data_until(drawn.provenance))
    audit = PrivacyAudit(str(out))
    for name, lines in set_lines(drawn.rows, drawn.provenance, manifest).items():
        audit.scan(str(out / name), lines.splitlines(), TenantNames(inputs.workspaces))
    if not audit.clean:
        raise CurationError(f"refusing to write {out}: {audit.refusal()}; nothing written")
    return write_set(out, drawn.rows, drawn.provenance, manifest)


def _why_short(inputs: Inputs, pool: Pool, drawn: Drawn, asks: Mapping[MixClass, int]) -> str:
    """A failed build's counts, as a written one's manifest shows them, and, where a class that needs proofs got
    none, the runs that would make them."""
    lines = _count_lines(dict(pool.refusals + drawn.refusals), dict(drawn.capped), {}, pool.unproven)
    if asks.get(MixClass.RECOVERY, 0) and not pool.candidates[MixClass.RECOVERY]:
        given = f" ({len(inputs.run_dirs)} run(s) given prove none)" if inputs.run_dirs else " (no --runs given)"
        lines.append(f"  recovery has no proven correction{given}: replay a suite of this corpus (`worker-replay "
                     "suite build --from-corpus`, then `worker-replay run`: an arm that chooses a session's own next "
                     "successful call proves it) or run a scenario pack that reproduces its known failures "
                     "(`worker-replay sandbox run`), and give the run directories to --runs")
    if asks.get(MixClass.POLICY, 0) and not pool.candidates[MixClass.POLICY]:
        lines.append("  policy has no kept rule's win: it needs a run in --runs whose arms carry a rule and its "
                     "ablation (`workspace-minus:<id>`) and where the lesson gate keeps it (`worker-replay lessons "
                     "propose`)")
    return "".join(f"\n{line}" for line in lines)


def _count_lines(refusals: Mapping[str, int], capped: Mapping[str, int], redactions: Mapping[str, int],
                 unproven: int) -> list[str]:
    """What a build refused, passed over and redacted: the same lines whether it wrote a set or failed."""
    lines = []
    for title, counts in (("refused", refusals), ("passed over for the caps", capped), ("redacted", redactions)):
        if counts:
            lines.append(f"  {title}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if unproven:
        lines.append(f"  known failures without a proven correction: {unproven}")
    return lines


def format_manifest(manifest: CurationManifest, out: Path) -> str:
    """What a build wrote, asked against got per class, and what it refused."""
    lines = [f"{out}: {manifest.examples} examples under {manifest.policy.name} v{manifest.policy.version}"
             + (" (shrunk: a class fell short, so every class was cut alike; asked is the policy's)"
                if manifest.shrunk else ""),
             f"  {'class':<10} {'asked':>6} {'got':>6} {'candidates':>10}"]
    lines += [f"  {c:<10} {n.asked:>6} {n.got:>6} {n.candidates:>10}" for c, n in manifest.classes.items()]
    lines += _count_lines(manifest.refusals, manifest.capped, manifest.redactions, manifest.unproven_failures)
    boundary, removed = manifest.eval_boundary, manifest.refusals
    lines.append(f"  eval boundary: {len(manifest.excluded_suites)} suites excluded "
                 f"({len(boundary.registered)} registered in {boundary.suites_dir}"
                 + ("" if boundary.enforced else ", NOT excluded: --no-eval-boundary") + "); removed by session "
                 f"{removed.get(Refusal.EXCLUDED_SUITE_SESSION, 0)}, request hash "
                 f"{removed.get(Refusal.EXCLUDED_SUITE_REQUEST, 0)}, near-duplicate "
                 f"{removed.get(Refusal.EXCLUDED_SUITE_NEAR_DUPLICATE, 0)}")
    lines.append(f"  train.jsonl sha256 {manifest.train_sha256}")
    return "\n".join(lines)
