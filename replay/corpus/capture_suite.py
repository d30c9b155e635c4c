"""Suites from captured live decisions (001 S13/S15): strata from what happened, then a versioned suite.

A captured decision's stratum comes from the guard's label on its call (core/guard.py) and
from its conversation — its session's thread: the main loop, or a subagent's loop that the runtime
ran under the same session id (disjoint, first match wins):

* the call was rejected (a `FAILURES` kind) → `known_failure`, with the call as its failed action;
* the call succeeded (`ok`), the thread's previous call was rejected, and this one chose a
  different tool → `verified_recovery`;
* the call succeeded in a thread without any anomaly → `clean_trajectory_action`;
* the call succeeded otherwise → `verified_action`.

Decisions without a label (no call, or no next turn yet) and decisions whose label is an
anomaly that is no verdict (`empty_result`, `partial`, `pending`, `no_op`) get no stratum.
A capture whose workspace or session (request headers) is no name (`core.names`) is left out:
those ids become paths (`<memory.root>/<workspace>`, the corpus's `<workspace>/<session>.jsonl`).
A `full`-mode capture holds its request; a `descriptor` holds only hashes and becomes a
decision when a transcript corpus resolves it (replay/corpus/resolve.py: proven by hash, or refused
with its reason). Requests end before the answer (the contract excludes its target), memory
blocks are stripped (replay injects memory; the workspace is recorded instead), and a decision
state seen twice is kept once. A decision keeps the API it was captured on (`api`) and its request
in that API's own shape (Messages: `system`, `messages`, tools with `input_schema`), so replay sends
it through the same API and the engine renders the same prompt. With workspace keys, every
decision is redacted before it is written (replay/privacy/redact.py: typed pseudonyms, one key per
workspace, never in the suite; every registered workspace name and the paths the runtime wrote for the session
too), and the privacy audit (replay/privacy/release_audit.py) runs on what is about to be written: a suite in which it
finds anything is not written.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from core.capture_store import CORPUS, CapturedDecision, Threaded, read_decisions, thread_key
from core.guard import FAILURES, GuardKind
from core.names import excerpt, is_name
from core.records import KNOWN_FAILURE, REQUESTS, Decision, FailedAction, MemoryRef, Target
from core.tomlfile import read_toml
from core.wire import WIRES, DecisionApi
from replay.corpus.resolve import CaptureRefusal, RefusalReason, Resolved, Verify, resolve
from replay.corpus.transcripts import TranscriptSource
from replay.memory.inject import MEMORY_CLOSE, MEMORY_OPEN, RULES_CLOSE, RULES_OPEN
from replay.privacy.redact import PSEUDONYM, Pseudonymizer, request_paths
from replay.privacy.release_audit import PrivacyAudit
from replay.privacy.tenants import NO_NAMES, TenantNames
from replay.suite import DECISIONS_JSONL, SUITE_TOML, SuiteError, SuiteProblem, validate_suite
from replay.suite_checks import request_hash

_BLOCKS = re.compile("|".join(f"{re.escape(o)}.*?{re.escape(c)}" for o, c in ((MEMORY_OPEN, MEMORY_CLOSE),
                                                                             (RULES_OPEN, RULES_CLOSE))),
                     re.DOTALL | re.IGNORECASE)


class Stratifiable(Threaded, Protocol):
    """What a stratum is read from: the conversation, and the chosen call with its outcome."""

    @property
    def chosen_tool(self) -> str | None: ...

    @property
    def outcome(self) -> str | None: ...


def assign_strata(decisions: Sequence[Stratifiable]) -> list[str | None]:
    """The stratum of each decision (in capture order), None when its outcome proves nothing.

    A thread is a (workspace, session, thread) triple: session ids are the client's, two tenants may
    use the same one, and one session may hold a subagent's loop beside the main one."""
    sessions: dict[tuple[str, str, str | None], list[Stratifiable]] = {}
    for d in decisions:
        sessions.setdefault(thread_key(d), []).append(d)
    anomalous = {s for s, ds in sessions.items() if any(d.outcome not in (None, GuardKind.OK) for d in ds)}
    position = {id(d): i for ds in sessions.values() for i, d in enumerate(ds)}
    strata: list[str | None] = []
    for d in decisions:
        if d.chosen_tool is None or d.outcome is None:
            strata.append(None)
        elif d.outcome in FAILURES:
            strata.append(KNOWN_FAILURE)
        elif d.outcome != GuardKind.OK:
            strata.append(None)
        else:
            thread, at = sessions[thread_key(d)], position[id(d)]
            previous = thread[at - 1] if at > 0 else None
            if previous is not None and previous.outcome in FAILURES and previous.chosen_tool != d.chosen_tool:
                strata.append("verified_recovery")
            elif thread_key(d) not in anomalous:
                strata.append("clean_trajectory_action")
            else:
                strata.append("verified_action")
    return strata


def _clean(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", _BLOCKS.sub("", text)).strip()


def strip_text(content: Any) -> Any:
    """A message's content (a string, or parts/blocks with `text`) without memory blocks."""
    if isinstance(content, str):
        return _clean(content)
    if isinstance(content, list):
        return [{**p, "text": _clean(p["text"])} if isinstance(p, dict) and isinstance(p.get("text"), str) else p
                for p in content]
    return content


def strip_memory(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages without `<memory>` and `<standing_rules>` blocks (production's injection)."""
    return [{**m, "content": strip_text(m["content"])} if isinstance(m.get("content"), str | list) else m
            for m in messages]


def strip_request(api: DecisionApi, request: dict[str, Any]) -> dict[str, Any]:
    """A request in `api`'s shape without memory blocks: in its turn and, where the API has one, its
    system field (Messages `system`, Responses `instructions`: where production injects them)."""
    wire = WIRES[api]
    stripped = {**request, wire.turn_field: strip_memory(request[wire.turn_field])}
    if wire.system_field is not None and wire.system_field in request:
        stripped[wire.system_field] = strip_text(request[wire.system_field])
    return stripped


def to_decision(captured: CapturedDecision, stratum: str, request: dict[str, Any],
                arguments: dict[str, Any] | None, thread: str | None = None,
                parent_call: str | None = None) -> Decision:
    """A suite decision from a stratified capture, its request (in the shape of the API it was
    captured on, which the decision records) and its chosen call's arguments (None when withheld:
    a failed action then carries its key set only), with the loop of its session it was made in
    where a record of the runtime says (`main`, or a subagent's and the call that started it)."""
    assert captured.chosen_tool is not None and captured.api in WIRES
    api = WIRES[captured.api].api
    failed = stratum == KNOWN_FAILURE
    return Decision(
        id=captured.id if captured.mode == CORPUS else f"cap-{captured.id}", stratum=stratum,
        cluster=f"{captured.workspace}/{captured.session}",
        workspace=captured.workspace, session=captured.session,
        captured_at=datetime.fromisoformat(captured.captured_at.replace("Z", "+00:00")),
        api=api, request=REQUESTS[api].model_validate(strip_request(api, request)),
        target=None if failed else Target(tool=captured.chosen_tool, arg_keys=captured.chosen_keys),
        failed_action=(FailedAction(tool=captured.chosen_tool, arguments=arguments) if arguments is not None else
                       FailedAction(tool=captured.chosen_tool, arg_keys=captured.chosen_keys)) if failed else None,
        memory=MemoryRef(workspace=captured.workspace), thread=thread, parent_call=parent_call)


def redact_decision(decision: Decision, pseudonymizer: Pseudonymizer) -> Decision:
    """The decision with detected values pseudonymised: request, failed-action arguments, session
    and cluster (ids, strata, tool names and key sets are structure and stay). The session stays a
    name: its pseudonyms are written without their angle brackets (`s-IP_99da6347`). The workspace's
    name and paths are replaced in the text (request, arguments) only: session and cluster are
    identifiers the platform's own tools join on, as the workspace is (replay/privacy/release_audit.py)."""
    data = decision.model_dump(mode="json", exclude_none=True)
    identifiers = replace(pseudonymizer, names=NO_NAMES)  # the same counts
    data["request"] = pseudonymizer.value(data["request"])
    data["cluster"] = identifiers.value(data["cluster"])
    data["session"] = PSEUDONYM.sub(lambda found: found.group(0)[1:-1], identifiers.value(data["session"]))
    if "arguments" in data.get("failed_action", {}):
        data["failed_action"]["arguments"] = pseudonymizer.value(data["failed_action"]["arguments"])
    return Decision.model_validate(data)


@dataclass
class BuildReport:
    path: Path
    strata: dict[str, int]  # decisions written, per stratum
    skipped: dict[str, int]  # captured decisions left out (no verdict, no request, duplicates), per reason
    refused: dict[str, int] = field(default_factory=dict)  # descriptors the transcripts did not prove, per reason
    refusals: list[str] = field(default_factory=list)  # one line per refused decision
    resolved: int = 0  # descriptors resolved from the transcripts
    request_verified: int = 0  # of those, proven by the request hash (the rest by message hashes)
    redactions: dict[str, int] | None = None  # pseudonyms written, per type (None: not redacted)
    workspaces: int = 0  # registered workspace names redaction and the privacy audit looked for
    unread: list[str] = field(default_factory=list)  # corpus files and calls that could not be read, with why

    def __str__(self) -> str:
        def counts(table: dict[str, int]) -> str:
            return ", ".join(f"{k} {v}" for k, v in sorted(table.items())) or "none"

        lines = [f"{self.path}: {sum(self.strata.values())} decisions ({counts(self.strata)}); left out: "
                 + counts(self.skipped)]
        if self.resolved or self.refused:
            lines.append(f"descriptors: {self.resolved} resolved ({self.request_verified} by request hash, "
                         f"{self.resolved - self.request_verified} by message hashes only); "
                         f"refused: {counts(self.refused)}")
            lines += [f"  refused: {line}" for line in self.refusals]
        if self.unread:
            lines.append(f"corpus: {len(self.unread)} session file(s) or call(s) could not be read")
            lines += [f"  unread: {line}" for line in self.unread]
        if self.redactions is not None:
            lines.append(f"redactions: {counts(self.redactions)}")
            lines.append(f"privacy check: clean (the audit of what was written, with {self.workspaces} registered "
                         "workspace name(s))")
        return "\n".join(lines)


def build_suite(db: Path, out: Path, since: str | None = None, name: str = "capture", version: str = "1", *,
                transcripts: TranscriptSource | None = None, keys: Mapping[str, bytes] | None = None,
                verify: Verify = "request", fits: Callable[[Decision], str | None] | None = None) -> BuildReport:
    """Write the suite of every stratified capture (at or after `since`) into `out`.

    `full` captures bring their request; `descriptor` captures are resolved from `transcripts`
    (left out without them). With `keys` (workspace → key), every decision is redacted with its
    workspace's key, and one whose workspace has none is refused. Refuses a frozen suite in
    `out` (new cases go into the next version) and a directory that holds anything but a
    suite; rebuilds an unfrozen one. Never writes into the transcript directory (DESIGN §9)."""
    if not db.is_file():
        raise SuiteError(f"no capture store at {db}", [])
    refuse_corpus_target(transcripts, out)
    check_target_dir(out)
    where = f"{db}" + (f" since {since}" if since else "")
    workspaces = registered_workspaces(keys, transcripts.root if transcripts is not None else None)
    return write_suite(read_decisions(db, since), out, f"captured decisions from {where}", where, name, version,
                       transcripts=transcripts, keys=keys, verify=verify, fits=fits, workspaces=workspaces)


def registered_workspaces(keys: Mapping[str, bytes] | None, corpus: Path | None) -> frozenset[str]:
    """Every workspace name the platform registered: the keys file's, and the corpus's directory names."""
    found = set(keys or ())
    if corpus is not None and corpus.is_dir():
        found |= {p.name for p in corpus.iterdir() if p.is_dir() and is_name(p.name)}
    return frozenset(found)


def refuse_corpus_target(corpus: TranscriptSource | None, out: Path) -> None:
    """A suite is never written into the corpus it is read from (DESIGN §9: the corpus is only read)."""
    if corpus is not None and corpus.holds(out):
        raise SuiteError(f"refusing to write into {out}: it is inside the transcript directory {corpus.root}, "
                         "which is only ever read; build the suite elsewhere", [])


@dataclass
class Selected:
    """The decisions a suite will hold, and its report so far: chosen before anything is written, so a build of
    several suites (a split) writes none when one of them would be empty."""

    decisions: list[Decision]
    report: BuildReport
    redactions: Counter[str]
    names: TenantNames = TenantNames()
    """The registered workspace names the privacy audit looks for in what is written."""


def write_suite(captured: Sequence[CapturedDecision], out: Path, source: str, where: str, name: str, version: str,
                *, transcripts: TranscriptSource | None = None, keys: Mapping[str, bytes] | None = None,
                verify: Verify = "request", include: Callable[[CapturedDecision], str | None] | None = None,
                parent_calls: Mapping[tuple[str, str, str | None], str] | None = None,
                fits: Callable[[Decision], str | None] | None = None,
                workspaces: frozenset[str] = frozenset()) -> BuildReport:
    """The suite of the stratified decisions among `captured` (`select_decisions`), written to `out`."""
    selected = select_decisions(captured, out, where, transcripts=transcripts, keys=keys, verify=verify,
                                include=include, parent_calls=parent_calls, fits=fits, workspaces=workspaces)
    return write_selected(selected, out, source, name, version, redacted=keys is not None)


def select_decisions(captured: Sequence[CapturedDecision], out: Path, where: str, *,
                     transcripts: TranscriptSource | None = None, keys: Mapping[str, bytes] | None = None,
                     verify: Verify = "request", include: Callable[[CapturedDecision], str | None] | None = None,
                     parent_calls: Mapping[tuple[str, str, str | None], str] | None = None,
                     fits: Callable[[Decision], str | None] | None = None,
                     workspaces: frozenset[str] = frozenset(),
                     runtime_paths: Mapping[tuple[str, str], set[str]] | None = None) -> Selected:
    """The stratified decisions among `captured` (each with its request, or a descriptor resolved from
    `transcripts`), redacted with `keys`; a SuiteError naming every reason when none is left. Redaction also
    replaces every registered workspace name (`workspaces`) and the paths the runtime wrote for the session
    (`runtime_paths` by workspace and session, a record's own, and the request's environment blocks); the
    privacy audit then runs on the decisions as they will be written, and a SuiteError in one line refuses
    them when it finds anything. Strata are read
    from all of `captured`; `include` then says why a decision is left out of this suite (a time window, the
    other side of a split), or None to keep it; `fits` says the same of a decision as it would be written (a
    prompt the target engine cannot hold: `replay.corpus.context_window`).

    Each decision says its thread where the runtime's record does: a corpus row's own (`main`, a subagent's,
    whose parent call `parent_calls` gives by `thread_key`), or the thread of the session file a descriptor
    resolved from. A gateway's own thread id (a hash of the conversation's first message) tells loops apart
    but not which is the main one, so a capture with its request and no record says none."""
    report = BuildReport(out, {}, {}, redactions=None if keys is None else {})
    skipped, refused, seen = Counter[str](), Counter[str](), set()
    redactions = Counter[str]()
    decisions = []
    for item, stratum in zip(captured, assign_strata(captured), strict=True):
        if (left_out := why_left_out(item, stratum, include)) is not None:
            skipped[left_out] += 1
            continue
        assert stratum is not None  # why_left_out leaves out a capture without one
        source = request_of(item, transcripts, verify, parent_calls, runtime_paths)
        if isinstance(source, str):
            skipped[source] += 1
            continue
        if isinstance(source, CaptureRefusal):
            refused[source.reason] += 1
            report.refusals.append(f"{item.id}: {source.reason}: {source.detail}")
            continue
        if item.request is None:
            report.resolved += 1
            report.request_verified += source.request_verified
        decision = decision_of(item, stratum, source, where)
        counts = Counter[str]()
        if keys is not None:
            if item.workspace not in keys:
                refused[RefusalReason.NO_KEY] += 1
                report.refusals.append(f"{item.id}: {RefusalReason.NO_KEY} {item.workspace!r}")
                continue
            decision, counts = redacted(decision, keys[item.workspace], workspaces, source)
        # A corpus call's state is its whole request before redaction: two tenants' copies of one session differ in
        # their pseudonyms, not in their decision states, and share its decision ids.
        state = item.request_sha256 if item.mode == CORPUS and item.request_sha256 else request_hash(decision.request)
        if state in seen or decision.id in seen:
            skipped["same decision state as an earlier capture"] += 1
            continue
        seen |= {state, decision.id}
        if fits is not None and (too_long := fits(decision)) is not None:
            skipped[too_long] += 1
            continue
        decisions.append(decision)
        redactions += counts
    if not decisions:
        reasons = {**skipped, **{f"refused: {r}": n for r, n in refused.items()}}
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items())) or "the store holds no captures"
        raise SuiteError(f"no decisions to build a suite for {out} from {where} ({why}); nothing written", [])
    report.strata, report.skipped, report.refused = (dict(Counter(d.stratum for d in decisions)), dict(skipped),
                                                     dict(refused))
    names = TenantNames(workspaces)
    if keys is not None:
        report.workspaces = len(workspaces)
        audit_decisions(decisions, out, names)
    return Selected(decisions, report, redactions, names)


def why_left_out(item: CapturedDecision, stratum: str | None,
                 include: Callable[[CapturedDecision], str | None] | None) -> str | None:
    """Why a capture is no decision of this suite, read before its request: outside the suite (`include`), no
    stratum, ids that are no names, or an API replay does not send; None to go on."""
    if include is not None and (left_out := include(item)) is not None:
        return left_out
    if stratum is None:
        return "no verdict from its outcome"
    if not (is_name(item.workspace) and is_name(item.session)):
        return "workspace or session is not a name"
    if item.api not in WIRES:
        return f"captured on the {excerpt(item.api)} API, which replay does not send"
    return None


def request_of(item: CapturedDecision, transcripts: TranscriptSource | None, verify: Verify,
               parent_calls: Mapping[tuple[str, str, str | None], str] | None,
               runtime_paths: Mapping[tuple[str, str], set[str]] | None) -> Resolved | CaptureRefusal | str:
    """A capture's request with its thread and the paths the runtime wrote for its session: its own (a `full`
    capture, a corpus row), else a descriptor's as `transcripts` prove it (a refusal says why they do not); a
    string says why it is left out. A corpus row's thread is its own, a gateway's thread id is none (see
    `select_decisions`)."""
    if item.request is not None:
        assert item.api in WIRES  # why_left_out leaves out the others
        return Resolved(item.request, item.chosen_arguments, request_verified=False, api=WIRES[item.api].api,
                        thread=item.thread if item.mode == CORPUS else None,
                        parent_call=(parent_calls or {}).get(thread_key(item)),
                        paths=frozenset((runtime_paths or {}).get((item.workspace, item.session), ())))
    if transcripts is None:
        return "descriptor only (no request stored)"
    return resolve(item, transcripts, verify)


def decision_of(item: CapturedDecision, stratum: str, source: Resolved, where: str) -> Decision:
    """The suite decision of a capture and its request; a request that is not one of its API is a SuiteError."""
    try:
        return to_decision(item, stratum, source.request, source.arguments, source.thread, source.parent_call)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # ValidationError is a ValueError
        raise SuiteError(f"{where}: decision {item.id}: its stored request is not a {item.api} request "
                         f"({excerpt(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)})", []) from None


def redacted(decision: Decision, key: bytes, workspaces: frozenset[str],
             source: Resolved) -> tuple[Decision, Counter[str]]:
    """The decision redacted with its workspace's key, every registered workspace name and the paths the runtime
    wrote for its session (its record's, the request's environment blocks) replaced too; and the pseudonyms
    written, per type."""
    pseudonymizer = Pseudonymizer(key, names=TenantNames(workspaces, source.paths | request_paths(source.request)))
    return redact_decision(decision, pseudonymizer), pseudonymizer.counts


def audit_decisions(decisions: Sequence[Decision], out: Path, names: TenantNames) -> None:
    """The privacy audit of the decisions as they will be written; a SuiteError in one line when it finds
    anything."""
    audit = PrivacyAudit(str(out))
    audit.scan(str(out / DECISIONS_JSONL), (d.model_dump_json(exclude_none=True) for d in decisions), names,
               suite=True)
    if not audit.clean:
        raise SuiteError(f"refusing to write {out}: {audit.refusal()}; nothing written", [])


def write_selected(selected: Selected, out: Path, source: str, name: str, version: str, *,
                   redacted: bool) -> BuildReport:
    """The selected decisions written to `out`: validated beside it first, so a suite that does not validate
    leaves nothing; a redacted suite's manifest is audited too (its decisions were, when selected)."""
    decisions, report = selected.decisions, selected.report
    created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    manifest = (f"name = {json.dumps(name)}\nversion = {json.dumps(version)}\ndescription = {json.dumps(source)}\n"
                f"created = {created}\n")
    if redacted:
        audit = PrivacyAudit(str(out))
        audit.scan(str(out / SUITE_TOML), manifest.splitlines(), selected.names)
        if not audit.clean:
            raise SuiteError(f"refusing to write {out}: {audit.refusal()}; nothing written", [])
    out.parent.mkdir(parents=True, exist_ok=True)
    # Written and validated beside `out` first: a suite that does not validate leaves nothing.
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.build-", dir=out.parent))
    try:
        (staging / DECISIONS_JSONL).write_text(
            "".join(d.model_dump_json(exclude_none=True) + "\n" for d in decisions), encoding="utf-8")
        (staging / SUITE_TOML).write_text(manifest, encoding="utf-8")
        problems = [SuiteProblem(p.file.replace(str(staging), str(out)), p.line, p.reason)
                    for p in validate_suite(staging)]
        if problems:
            raise SuiteError(f"the suite built for {out} does not validate; nothing written", problems)
        out.mkdir(exist_ok=True)
        for file in (DECISIONS_JSONL, SUITE_TOML):
            os.replace(staging / file, out / file)
    except OSError as exc:
        raise SuiteError(f"cannot write the suite into {out}: {exc.strerror or exc}; nothing written", []) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if redacted:
        report.redactions = dict(selected.redactions)
    return report


def check_target_dir(out: Path) -> None:
    manifest = out / SUITE_TOML
    if manifest.is_file():
        data, problem = read_toml(manifest)
        if data is None:
            raise SuiteError(f"refusing to write into {out}: {manifest} is unreadable ({problem})", [])
        if "frozen" in data:
            raise SuiteError(f"refusing to write into {out}: it is a frozen suite version, and a frozen suite is "
                             "immutable; build into a new directory with the next version", [
                                 SuiteProblem(str(manifest), None, "frozen")])
    elif out.exists() and any(out.iterdir()):
        raise SuiteError(f"refusing to write into {out}: it is not empty and holds no suite", [])
