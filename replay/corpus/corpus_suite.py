"""Suites from the runtime's own session files, without any capture (DESIGN §9; 001 S13, S17).

Every model call a Claude Code corpus logged (replay/corpus/claude_code.py) becomes a candidate
decision, as a `full` capture would: its request rebuilt from the request log, its answer's chosen
call, and that call's outcome read from the record itself — the `tool_result` that answered it,
classified by the same guard the gateway runs on live traffic (core/guard.py; `is_error` is the
runtime's own word that it failed). Strata, memory stripping, redaction and the privacy check are
the capture path's (replay/corpus/capture_suite.py), so a corpus suite and a capture suite of the
same sessions agree. A call whose record cannot be rebuilt, and a session file that cannot be read,
are left out and counted with their reasons; the build goes on.

`since` and `until` cut the corpus by the time of each call (S17's fresh chronological decisions:
build the candidate's confirmation suite from calls made after its training data's cut-off). The
cluster of a decision is its session; `in_test_split` splits a corpus by cluster (task-disjoint: a
session's decisions all land on one side), stably by a hash of the cluster.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from core.canonical import request_digest
from core.capture_store import CANONICAL, CORPUS, CapturedDecision, ToolResult, stored_time
from core.guard import GuardRules, classify
from core.records import Decision
from core.scoring import chosen_call
from core.toolcalls import parse_response, request_schemas
from core.wire import WIRES
from replay.corpus.capture_suite import (
    BuildReport,
    assign_strata,
    check_target_dir,
    refuse_corpus_target,
    registered_workspaces,
    select_decisions,
    write_selected,
)
from replay.corpus.claude_code import API, ClaudeCodeDir, SessionFile, logged_calls
from replay.corpus.transcripts import LoggedRequest
from replay.suite import SuiteError


@dataclass
class CorpusRead:
    """What reading a corpus left out, and why; and each subagent thread's parent call, which its rows (a
    capture's columns) have no place for."""

    refused_files: list[str] = field(default_factory=list)
    unrebuilt_calls: list[str] = field(default_factory=list)
    parent_calls: dict[tuple[str, str, str | None], str] = field(default_factory=dict)
    """(workspace, session, thread) -> the `tool_use` id of the parent's call that started the subagent."""
    paths: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    """(workspace, session) -> the paths the runtime wrote in the session's files (`cwd`): redaction replaces them."""


class ToolOutcomes:
    """Every `tool_result` of a session (all its files) by the id of the call it answers, each classified when
    it is looked up: a decision needs its first call's alone (an answer that holds no readable call, or several
    calls, leaves results no decision reads)."""

    def __init__(self, files: list[SessionFile], rules: GuardRules) -> None:
        self.uses = [b for f in files for b in f.tool_uses()]
        """Every `tool_use` block, in file order."""
        self.results = [b for f in files for b in f.tool_results()]
        """Every `tool_result` block, in file order."""
        self._names = {str(b.get("id")): str(b.get("name") or "") for b in self.uses}
        self._blocks = {str(b.get("tool_use_id")): b for b in self.results}
        self._rules = rules

    def get(self, call_id: str) -> ToolResult | None:
        """The classified result that answered the call (the last, where several did); None when none did."""
        block = self._blocks.get(call_id)
        if block is None:
            return None
        tool = self._names.get(call_id, "")
        return ToolResult(call_id, tool, classify(block.get("content"), self._rules, tool,
                                                  is_error=block.get("is_error") is True))


def session_decisions(workspace: str, session: str, files: list[SessionFile], rules: GuardRules,
                      read: CorpusRead) -> Iterator[CapturedDecision]:
    """The calls of one session as capture rows that hold their request (`mode` = corpus)."""
    return (row for row, _ in session_calls(workspace, session, files, rules, read))


def session_calls(workspace: str, session: str, files: list[SessionFile], rules: GuardRules, read: CorpusRead,
                  hashed: bool = True) -> Iterator[tuple[CapturedDecision, LoggedRequest]]:
    """Each answered call of one session: its capture row (`mode` = corpus) and the logged call it came from.
    Without `hashed` the row's `request_sha256` is left empty (hashing every request is most of the cost; a
    reader that needs few hashes computes them itself)."""
    wire = WIRES[API]
    outcomes = ToolOutcomes(files, rules)
    for f in files:
        calls = logged_calls(f)
        read.unrebuilt_calls += [c.problem for c in f.calls if c.problem]
        if f.parent_call is not None:
            read.parent_calls[workspace, session, f.thread] = f.parent_call
        read.paths.setdefault((workspace, session), set()).update(f.paths)
        for number, logged in enumerate(calls):
            if logged.answer is None or logged.captured_at is None:
                continue
            body = logged.body
            tools = wire.tools(body.get("tools"))
            names = sorted({t["function"]["name"] for t in tools})
            parsed = parse_response(logged.answer, frozenset(names) or None, schemas=request_schemas(tools))
            call = chosen_call(parsed)
            raw_calls = logged.answer.get("tool_calls") or []
            call_id = raw_calls[0].get("id") if raw_calls and isinstance(raw_calls[0], Mapping) else None
            result = outcomes.get(str(call_id)) if call_id is not None else None
            yield CapturedDecision(
                id=f"{session}.{f.thread}.{number}", captured_at=logged.captured_at, mode=CORPUS,
                workspace=workspace, session=session, route="", adapter="", kind=CORPUS,
                request_sha256=request_digest(API, body) if hashed else "", message_hashes=[], roles=[],
                tools_offered=names,
                tool_choice=wire.choice(body.get("tool_choice")), parse_outcome=parsed.outcome.value,
                chosen_tool=call.tool if call else None, chosen_keys=list(call.key_set) if call else [],
                call_id=call_id if isinstance(call_id, str) else None, calls=len(parsed.calls), duration_s=0.0,
                outcome=result.kind if result else None,
                request={k: body[k] for k in wire.request_fields if k in body},
                chosen_arguments=call.arguments if call else None, api=API, hashing=CANONICAL,
                thread=f.thread), logged


def corpus_decisions(corpus: ClaudeCodeDir, rules: GuardRules, read: CorpusRead) -> list[CapturedDecision]:
    """Every call of the corpus, as capture rows, in session order."""
    return [row for workspace, session, files in corpus.read_sessions(read.refused_files)
            for row in session_decisions(workspace, session, files, rules, read)]


def in_window(since: str | None, until: str | None) -> Callable[[CapturedDecision], bool]:
    """Whether a call was made in [since, until) (ISO times; a bad one is a TimeError)."""
    low, high = (stored_time(since) if since else None), (stored_time(until) if until else None)

    def inside(row: CapturedDecision) -> bool:
        at = stored_time(row.captured_at)
        return (low is None or at >= low) and (high is None or at < high)
    return inside


def build_corpus_suites(corpus: ClaudeCodeDir, outs: Mapping[Path, Callable[[str], bool] | None], *,
                        keys: Mapping[str, bytes], since: str | None = None, until: str | None = None,
                        name: str = "corpus", version: str = "1",
                        rules: GuardRules | None = None,
                        fits: Callable[[Decision], str | None] | None = None,
                        split: tuple[float, str] | None = None) -> list[BuildReport]:
    """One suite per entry of `outs`, each of the calls whose cluster its filter takes (None: every cluster),
    from one read of the corpus. `split` (the test fraction and seed the filters were made with,
    `in_test_split`): the filters split the corpus, so each is given a cluster's split group (`split_groups`)
    instead of the cluster, identical decision states never fall on two sides, and a split that leaves a side
    empty is refused with the seeds that would not."""
    for out in outs:
        refuse_corpus_target(corpus, out)
        check_target_dir(out)
    read = CorpusRead()
    workspaces = registered_workspaces(keys, corpus.root)
    window = in_window(since, until)
    rows = corpus_decisions(corpus, rules or GuardRules(), read)
    where = f"{corpus.root}" + "".join(f" {word} {value}" for word, value in (("since", since), ("until", until))
                                       if value)
    sides = split_groups(rows) if split is not None else {cluster_of(row): cluster_of(row) for row in rows}
    selections = []
    for out, takes in outs.items():
        def include(row: CapturedDecision, takes: Callable[[str], bool] | None = takes) -> str | None:
            if not window(row):
                return "outside the time window"
            return None if takes is None or takes(sides[cluster_of(row)]) else "in the other split (by session)"
        try:
            selections.append(select_decisions(rows, out, where, keys=keys, include=include,
                                               parent_calls=read.parent_calls, fits=fits, workspaces=workspaces,
                                               runtime_paths=read.paths))
        except SuiteError:
            if split is not None:  # an empty side: the groups of the decisions in the window say which seeds split
                one_sided(sorted({sides[cluster_of(row)] for row, stratum in zip(rows, assign_strata(rows), strict=True)
                                  if stratum is not None and window(row)}), *split)
            raise
    reports = []
    for out, selected in zip(outs, selections, strict=True):  # every split chosen before any is written
        report = write_selected(selected, out, f"calls of the Claude Code corpus {where}", name, version,
                                redacted=True)
        report.unread = read.refused_files + read.unrebuilt_calls
        reports.append(report)
    return reports


def split_groups(rows: Iterable[CapturedDecision]) -> dict[str, str]:
    """Each cluster's split group: clusters that share an identical decision state (a canonical request hash) are
    one group, named by its least cluster, so a split puts them on one side: a session copied into another
    workspace, or two sessions that reach the same state, can never be trained on and tested on at once."""
    parent: dict[str, str] = {}

    def root(cluster: str) -> str:
        while parent.setdefault(cluster, cluster) != cluster:
            parent[cluster] = parent[parent[cluster]]
            cluster = parent[cluster]
        return cluster

    first: dict[str, str] = {}
    for row in rows:
        cluster = cluster_of(row)
        root(cluster)
        if row.request_sha256:
            other = first.setdefault(row.request_sha256, cluster)
            low, high = sorted((root(cluster), root(other)))
            parent[high] = low
    return {cluster: root(cluster) for cluster in parent}


SEEDS_TRIED = 100
"""How many split seeds ("0", "1", …) a one-sided split's refusal tries, to suggest some that split."""


def one_sided(groups: Sequence[str], fraction: float, seed: str) -> None:
    """Refuse a split that puts every split group on one side (a suite would be empty), naming the seeds (and,
    with none, that the corpus is too small) that put some on each."""
    test = in_test_split(fraction, seed)
    sides = {test(group) for group in groups}
    if len(sides) != 1:
        return
    side = "test" if sides == {True} else "train"
    where = (f"--test-fraction {fraction:g} with --split-seed {seed!r} puts all {len(groups)} split group(s) "
             "(sessions, those sharing a decision state joined) on the " + side + " side, so the other would be empty")
    if len(groups) < 2:
        raise SuiteError(f"{where}; one group cannot be split: build one suite without --test-fraction "
                         "(or split on time with --since/--until); nothing written", [])
    seeds = [s for s in map(str, range(SEEDS_TRIED)) if len({in_test_split(fraction, s)(g) for g in groups}) == 2]
    fix = (f"--split-seed {', '.join(seeds[:5])} give both sides" if seeds else
           f"no --split-seed of 0–{SEEDS_TRIED - 1} gives both sides; try a --test-fraction nearer 0.5")
    raise SuiteError(f"{where}; {fix}; nothing written", [])


def cluster_of(row: CapturedDecision) -> str:
    """A decision's cluster: its session (decisions of one task are not independent)."""
    return f"{row.workspace}/{row.session}"


def in_test_split(fraction: float, seed: str = "") -> Callable[[str], bool]:
    """Whether a cluster (a split group's name, `split_groups`) falls in the test split: a hash of the seed and
    the name below `fraction` (stable across runs and corpus growth, so a session never moves from one side to the
    other, unless a later session reaches one of its decision states and joins its group)."""
    if not 0 < fraction < 1:
        raise SuiteError(f"the test fraction must be between 0 and 1, not {fraction}", [])

    def takes(cluster: str) -> bool:
        return int(hashlib.sha256(f"{seed}:{cluster}".encode()).hexdigest()[:8], 16) < fraction * 2**32
    return takes
