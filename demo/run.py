"""The README's main job: engine + gateway + the memory-arm replay + compare, gates, lessons, report.

001 §10 item 1 asks whether one injected rule, or the workspace's real memory, recovers what a
LoRA adapter learned, at zero training cost. The demo asks it of the embedded model on the demo
suite: base × {withheld, one rule, workspace memory}, two trained adapters × withheld, and one
`workspace-minus:<id>` ablation arm per injected rule (the causal lesson gate), and one
`rules:<id>` arm per rule with a claim (demo/rule_claims.py) outside the ablated workspace, for rule uptake.
Everything runs against the real CPU engine behind the real gateway. Re-running into the same directory resumes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.atomicwrite import write_text_atomic
from core.errors import WorkerTierError
from core.records import HELD_OUT_EXCLUDED, KNOWN_FAILURE, Decision, ResultRecord
from demo.demo_data import write_demo
from demo.instrument import instrument_beside_model, instrument_verdict, planted_calibration
from demo.memory import GENUINE_RULE_IDS, HARMFUL_RULE_IDS, ONE_RULE_TEXT, RULES
from demo.rule_claims import CLAIMS
from demo.scenario_pack import write_pack
from demo.serving import ENGINE_CONFIG, say, serving
from demo.trained_adapters import build_demo_adapters
from replay.analysis.compare import ALL_POSITIVE, Comparison, Tainted, compare, format_comparison
from replay.analysis.gates import Verdict as GateVerdict
from replay.analysis.gates import evaluate_gate, format_verdict, write_verdict
from replay.analysis.provenance import carried, record_comparison, record_gate, record_run
from replay.analysis.report import write_report
from replay.analysis.report.summary import (
    Count,
    SummaryRow,
    format_summary,
    format_uptake,
    gate_line,
    summary_rows,
    text_table,
)
from replay.calibration.results import Calibration
from replay.memory.files import load_memory, workspace_dirs
from replay.memory.ledger import Ledger
from replay.memory.lessons import (
    AblationEvidence,
    LessonVerdict,
    RuleVerdict,
    leave_one_out_verdicts,
    plan_lessons,
    record_verdicts,
    trials_from_results,
)
from replay.memory.uptake import Uptake, concerns, uptake_table
from replay.run.decisions import run_async
from replay.run.directory import ENGINE_JSON, load_results, read_engine_settings
from replay.run.run_config import RunConfig
from replay.sandbox.gate_evidence import evidence_subject, format_tables, pair_results, write_evidence
from replay.sandbox.pack import Pack, load_pack
from replay.sandbox.runner import load_sandbox_results, run_sandbox_async
from replay.suite import Suite, freeze_suite, load_suite
from serve.engine.launcher import engine_settings, load_engine_config
from serve.engine.modelbuild import cache_dir
from serve.engine.outdir import replaced_whole

REPO = Path(__file__).resolve().parent.parent
SERIOUS_GATE = REPO / "configs" / "gates" / "serious-candidate.toml"
BASELINE = "base"
ADAPTER_ARMS = ("recovery", "mix")
QUICK_PER_CELL = 1
# The full demo's held-out slice, per workspace × stratum cell, taken round-robin over the cell's clusters
# (BENCHMARKS.md, "The demo within its ten minutes"). The ablated workspace (the one holding the planted
# harmful rule) gives up to ABLATED_PER_CELL decisions of each stratum that rule acts on (it says to repeat a
# rejected call), 10 in all: the pairs the causal lesson gate judges it on, enough for the gate to reach a
# verdict (a 6/0 sign test is p = 0.031) and for the planted calibration on this slice to catch the planted
# harmful rule in 96.5% of replicates. Every other workspace gives one decision (DEMO_PER_CELL) of each
# positive stratum a gate condition reads on its own (recovery: the targeted CI; clean: non-inferiority); the
# known failures the repeat condition reads are the ablated workspace's. This keeps `make demo` within 10
# minutes on a 2-core machine; what it cost against the 31 decisions before is in BENCHMARKS.md.
ABLATED_STRATA = frozenset({"verified_recovery", KNOWN_FAILURE})
ABLATED_PER_CELL = 6
OTHER_STRATA = frozenset({"verified_recovery", "clean_trajectory_action"})
DEMO_PER_CELL = 1
# Sandbox episodes: the first scenario of three policy families, one for each task condition the
# gate judges from them: a rejected call to recover from (isolated replay completion), a phone
# number not to send out (critical failures), a failed move not to claim (unsupported completion).
# The whole pack is `worker-demo pack --out DIR` + `worker-replay sandbox run --pack DIR ...`
# (README, "The demo").
SANDBOX_PER_FAMILY = 1
SANDBOX_FAMILIES = ("recover", "pii", "claims")
# Requests in flight: the engine's max_num_seqs (configs/engine/cpu-smollm2.toml), 1.13x the
# decisions/s of 8 on the demo suite (BENCHMARKS.md).
DEMO_CONCURRENCY = 16
SANDBOX_ARMS = (BASELINE, "base+memory", *ADAPTER_ARMS)
# An A/A arm: the base again (same model, memory and decoding), so every effect is read beside what
# changes with nothing changed, the engine's noise floor at the demo's concurrency (BENCHMARKS.md).
NOISE_ARM = "base-aa"
EFFECT_ARMS = ("base+rule", "base+memory", *ADAPTER_ARMS)
MAIN_ARMS = (BASELINE, *EFFECT_ARMS, NOISE_ARM)
DETAILS = "demo.txt"
"""Every table the demo prints with `--verbose`, written beside the report on every run."""
ABLATED_WORKSPACES = frozenset(ws for ws, rules in RULES.items() if any(r.id in HARMFUL_RULE_IDS for r in rules))


def demo_data(out: Path, quick: bool) -> tuple[Suite, Path, Path]:
    """Held-out decisions of the generated demo suite (a few per stratum), memory, training split.

    Training-sanity decisions are left out of the demo: they check that an adapter moved on its
    own training distribution, which says nothing about memory, and the demo has a time budget.
    """
    data = out / "data"
    if not (data / "suite" / "suite.toml").exists():
        with replaced_whole(data) as staging:  # whole or not at all: a resumed demo takes what is there
            write_demo(staging, seed=0)
    suite = load_suite(data / "suite")
    if quick:
        return held_out_slice(suite, out / "quick-suite", quick_cell), data / "memory", data
    return held_out_slice(suite, out / "held-out-suite", demo_cell), data / "memory", data


def demo_cell(workspace: str, stratum: str) -> int:
    """How many decisions of a workspace × stratum cell the full demo replays (the comment on ABLATED_STRATA)."""
    if workspace in ABLATED_WORKSPACES:
        return ABLATED_PER_CELL if stratum in ABLATED_STRATA else 0
    return DEMO_PER_CELL if stratum in OTHER_STRATA else 0


def quick_cell(workspace: str, stratum: str) -> int:
    """`--quick`: one decision of each stratum of the ablated workspace."""
    return QUICK_PER_CELL if workspace in ABLATED_WORKSPACES else 0


def held_out_slice(suite: Suite, path: Path, room: Callable[[str, str], int]) -> Suite:
    """A frozen suite of the held-out decisions: `room(workspace, stratum)` of each cell, taken round-robin
    over the cell's clusters."""
    if not (path / "suite.toml").exists():
        cells: dict[tuple[str, str], list[Decision]] = {}
        for decision in suite.decisions:
            if decision.stratum not in HELD_OUT_EXCLUDED:
                cells.setdefault((decision.workspace, decision.stratum), []).append(decision)
        keep: set[str] = set()
        for cell, members in cells.items():
            rank: dict[str, int] = {}
            spread = []
            for position, decision in enumerate(members):
                rank[decision.cluster] = rank.get(decision.cluster, -1) + 1
                spread.append((rank[decision.cluster], position, decision.id))
            keep |= {decision_id for *_, decision_id in sorted(spread)[:room(*cell)]}
        picked = [d for d in suite.decisions if d.id in keep]
        with replaced_whole(path) as staging:  # whole or not at all: a resumed demo takes what is there
            (staging / "suite.toml").write_text(f'name = "{suite.manifest.name}-{path.name}"\n'
                                                f'version = "{suite.manifest.version}"\n'
                                                f"created = {suite.manifest.created.isoformat()}\n")
            (staging / "decisions.jsonl").write_text("".join(d.model_dump_json() + "\n" for d in picked))
            freeze_suite(staging, synthetic=True)  # a slice of the demo suite: invented values
    return load_suite(path)


def ablation_arms(suite: Suite, memory_root: Path) -> list[dict[str, Any]]:
    """One `workspace-minus:<id>` arm per rule that `workspace` injects, on that rule's workspace.

    Only the workspaces that hold a planted harmful rule are ablated: that is where the lesson
    gate can be checked (is the harmful rule caught, and are its co-injected innocent rules
    spared?), and ablating every workspace would double the demo's run time.
    """
    arms = []
    workspaces = {d.workspace for d in suite.decisions} & ABLATED_WORKSPACES
    for workspace, path in sorted(workspace_dirs(memory_root).items()):
        if workspace not in workspaces:
            continue
        for rule in load_memory(path).authorised_rules():
            assert rule.id is not None  # an authorised rule has an id by definition
            arms.append({"name": f"minus-{rule.id.removeprefix('lc:')}", "model": "worker",
                         "memory": f"workspace-minus:{rule.id}", "workspaces": [workspace]})
    return arms


def uptake_arms(suite: Suite) -> list[dict[str, Any]]:
    """One `rules:<id>` arm per claimed rule (demo/rule_claims.py), on that rule's workspace: uptake
    compares it with the base, which carries no rule. An ablated workspace gets none: its rules'
    uptake is the ablation pair (the workspace's memory with and without the rule), and a second
    pair there would cost ten requests a rule. Nor does a rule whose claim concerns no decision of
    its workspace in `suite`: its arm would measure nothing (its uptake row would say —)."""
    def concerned(workspace: str, rule_id: str) -> bool:
        return any(concerns(CLAIMS[rule_id], d) for d in suite.decisions if d.workspace == workspace)

    workspaces = {d.workspace for d in suite.decisions} - ABLATED_WORKSPACES
    return [{"name": f"only-{rule.slug}", "model": "worker", "memory": f"rules:{rule.id}", "workspaces": [workspace]}
            for workspace, rules in sorted(RULES.items()) if workspace in workspaces
            for rule in rules if rule.id in CLAIMS and concerned(workspace, rule.id)]


def uptake_pairs(results: Sequence[ResultRecord]) -> list[tuple[str, str, str]]:
    """(rule id, arm without it, arm with it) per claimed rule: the base against the arm that
    injects only that rule, and the ablation arm against the full memory (the pair the causal
    lesson gate judges). Arms are found by their memory condition."""
    arm_of = {r.memory: r.arm for r in results}
    pairs = []
    for rule_id in CLAIMS:
        if (only := arm_of.get(f"rules:{rule_id}")) is not None:
            pairs.append((rule_id, BASELINE, only))
        if (minus := arm_of.get(f"workspace-minus:{rule_id}")) is not None:
            pairs.append((rule_id, minus, "base+memory"))
    return pairs


def run_config(base_url: str, versions: dict[str, str], suite: Suite, memory_root: Path) -> RunConfig:
    arms = [
        {"name": BASELINE, "model": "worker", "memory": "withheld"},
        {"name": NOISE_ARM, "replicate_of": BASELINE},
        {"name": "base+rule", "model": "worker", "memory": f"rule:{ONE_RULE_TEXT}"},
        {"name": "base+memory", "model": "worker", "memory": "workspace"},
        *({"name": arm, "model": versions[arm], "memory": "withheld"} for arm in ADAPTER_ARMS),
        *ablation_arms(suite, memory_root),
        *uptake_arms(suite),
    ]
    return RunConfig.model_validate({
        "endpoint": {"base_url": f"{base_url}/v1", "api_key_env": None},
        "decoding": {"temperature": 0.0, "seed": 0, "max_tokens": 128},
        "runner": {"concurrency": DEMO_CONCURRENCY, "order": "prefix"},
        "memory": {"root": str(memory_root)},
        "arms": arms,
    })


def record_engine(run_dir: Path) -> None:
    """The run's engine.json, shown in the report: the dtype follows the CPU kind, and a run begun
    under other settings is not resumed under these (its answers would mix)."""
    settings = engine_settings(load_engine_config(ENGINE_CONFIG))
    old = read_engine_settings(run_dir)
    if old is not None and old.model_dump(exclude={"cpu_model"}) != settings.model_dump(exclude={"cpu_model"}):
        raise WorkerTierError(f"{run_dir} was replayed with {old.line()}; this machine runs {settings.line()}. "
                              "Their answers would mix: remove the directory or replay into another one.")
    run_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(run_dir / ENGINE_JSON, settings.model_dump_json(indent=2) + "\n")


async def replay_beside_sandbox(suite: Suite, config: RunConfig, run_dir: Path, pack: Pack,
                                sandbox_dir: Path) -> tuple[tuple[int, int], tuple[int, int]]:
    """The replay and the sandbox episodes at once, sharing the engine's DEMO_CONCURRENCY sequences; returns
    each one's (done now, done before).

    Run one after the other, the sandbox's last minute was its longest episodes alone (an adapter looping to
    its step limit, a turn at a time) on an engine with sequences to spare; beside the replay, those
    sequences answer replay requests instead (BENCHMARKS.md, "The demo within its ten minutes on AVX2")."""
    slots = asyncio.Semaphore(DEMO_CONCURRENCY)
    return await asyncio.gather(
        run_async(suite, config, run_dir, label="[demo] replay", slots=slots),
        run_sandbox_async(pack, sandbox_config(config), sandbox_dir, endpoint_kind="gateway", slots=slots))


def sandbox_config(config: RunConfig) -> RunConfig:
    """The run's config for the sandbox slice: its SANDBOX_ARMS only."""
    return config.model_copy(update={"arms": [a for a in config.arms if a.name in SANDBOX_ARMS]})


def lesson_summary(causal: Sequence[RuleVerdict], loo: Sequence[RuleVerdict]) -> str:
    """Each ablated rule's truth (demo/memory.py) beside what the causal gate and leave-one-out
    made of the same results, then the score: was the planted rule caught, were genuine ones spared?"""
    by_rule = {(v.workspace, v.rule_id): v for v in loo}
    roles = {(ws, r.id): r.role for ws, rules in RULES.items() for r in rules}
    rows = [("rule", "truth", "causal (ablation)", "leave-one-out")]
    for v in causal:
        if v.method != "ablation":
            continue
        other = by_rule.get((v.workspace, v.rule_id))
        rows.append((v.rule_id, roles.get((v.workspace, v.rule_id), "?"), _verdict_cell(v),
                     _verdict_cell(other) if other else "not judged"))
    caught, innocent = map(sorted, _causal_evictions(causal))
    loo_innocent = sorted({v.rule_id for v in [*causal, *loo] if v.method == "leave-one-out"
                           and v.verdict is LessonVerdict.EVICT} & GENUINE_RULE_IDS)
    lines = ["  " + line.rstrip() for line in text_table(rows, left=4)]
    lines.append(f"  causal: harmful rule(s) evicted: {', '.join(caught) or 'none'} of "
                 f"{', '.join(sorted(HARMFUL_RULE_IDS))}; genuine rules evicted: {', '.join(innocent) or 'none'}")
    lines.append(f"  leave-one-out on the same results: genuine rules evicted: {', '.join(loo_innocent) or 'none'} "
                 f"(rule:<hash> is the one-rule arm: {ONE_RULE_TEXT!r})")
    return "\n".join(lines)


def _causal_evictions(verdicts: Sequence[RuleVerdict]) -> tuple[set[str], set[str]]:
    """(the planted harmful rules, the genuine rules) that the causal gate evicted."""
    evicted = {v.rule_id for v in verdicts if v.method == "ablation" and v.verdict is LessonVerdict.EVICT}
    return evicted & HARMFUL_RULE_IDS, evicted & GENUINE_RULE_IDS


def measured_lines(rows: Sequence[SummaryRow], lessons: Sequence[RuleVerdict]) -> str:
    """What the run measured, in a user's words: how the base model chose, what memory changed,
    and what the causal gate evicted (the tables above hold the detail)."""
    by_arm = {row.arm: row for row in rows}
    base, memory = by_arm[BASELINE], by_arm["base+memory"]
    changed = "not measured" if memory.changed is None else f"{memory.changed} ({_share(memory.changed)})"
    return "\n".join([
        "What this run measured:",
        f"  the base model chose the right tool on {base.tool_correct} positive decisions "
        f"({_share(base.tool_correct)}), the right tool and keys on {base.positives} ({_share(base.positives)})",
        f"  memory changed the chosen call on {changed}",
        f"  {lesson_line(lessons)}",
    ])


def _share(count: Count) -> str:
    return f"{100 * count.hits / count.n:.0f}%" if count.n else "—"


def noise_floor_line(rows: Sequence[SummaryRow], comparisons: Sequence[Comparison]) -> str:
    """The A/A arm's changes beside each effect arm's: what the memory and adapter arms change against
    base, read against what changes with nothing changed."""
    by_arm = {row.arm: row for row in rows}
    twin = by_arm.get(NOISE_ARM)
    noise = next((c.noise for c in comparisons if c.noise is not None), None)
    if twin is None or twin.changed is None or noise is None:
        return "Noise floor: not measured (no replicate of base in this run)."
    aa = noise.row("joint", ALL_POSITIVE)
    joint = "no positives" if aa is None else f"joint correctness on {aa.discordant} of {aa.stats.n} positives"
    effects = ", ".join(f"{row.arm} {row.changed}" for arm in EFFECT_ARMS
                        if (row := by_arm.get(arm)) is not None and row.changed is not None)
    return (f"Noise floor ({NOISE_ARM} replicates {BASELINE}, nothing changed): {twin.changed} chosen calls and "
            f"{joint} change. Calls changed vs {BASELINE} beside it: {effects}.")


def _verdict_cell(verdict: RuleVerdict) -> str:
    evidence = verdict.evidence
    if isinstance(evidence, AblationEvidence):
        c = evidence.comparison
        return f"{verdict.verdict.value} ({c.wins} wins / {c.losses} losses, p={c.p_value:.3g})"
    lift = "never absent" if evidence.lift is None else f"lift {evidence.lift:+.2f}"
    return f"{verdict.verdict.value} ({lift}, {evidence.carried} trials)"


def sandbox_pack(out: Path) -> Pack:
    path = out / "sandbox-pack"
    if not (path / "pack.toml").exists():
        write_pack(path, seed=0, per_family=SANDBOX_PER_FAMILY, families=SANDBOX_FAMILIES)
    return load_pack(path)


def sandbox_evidence(sandbox_dir: Path, candidate: str) -> tuple[dict[str, Path], str]:
    """The sandbox run's evidence files for one candidate's gate, and its paired tables as text."""
    pairs = pair_results(load_sandbox_results(sandbox_dir), BASELINE, candidate)
    return (write_evidence(pairs, sandbox_dir / "evidence" / candidate, evidence_subject(sandbox_dir, pairs)),
            format_tables(pairs))


def demo_report(
    run_dir: Path, results: Sequence[ResultRecord], comparisons: Sequence[Comparison], verdicts: Sequence[GateVerdict],
    decisions: Sequence[Decision] = (), lessons: Sequence[RuleVerdict] | None = None,
    uptake: Sequence[Uptake] | None = None, tainted: Tainted = (),
) -> tuple[Path, list[SummaryRow]]:
    """Write the report on the main arms and return the summary rows the console prints: both count
    changed calls against BASELINE, whatever order the runner wrote the results in."""
    main = [r for r in results if r.arm in MAIN_ARMS]
    _, html = write_report(run_dir, comparisons, verdicts, main, decisions=decisions, tainted=tainted, lessons=lessons,
                           uptake=uptake, baseline=BASELINE)
    return html, summary_rows(main, MAIN_ARMS, reference=BASELINE)


@dataclass(frozen=True)
class Analysis:
    """What the demo found: every table as text (`--verbose` prints it, `details` holds it) and the few lines
    a reader needs first."""

    html: Path
    details: str
    summary: str


def analyse(run_dir: Path, suite: Suite, memory_root: Path, ledger: Ledger, sandbox_dir: Path | None = None,
            calibration: Calibration | None = None) -> Analysis:
    """Compare, gate, judge the lessons and rule uptake, set `calibration` (planted) beside what the model did,
    and write the report. The run, its comparisons, gate and lesson verdicts go into `ledger` as any user's do, and
    its disputed rules keep a gate from passing."""
    results = load_results(run_dir)
    run_id = record_run(ledger, run_dir)
    disputes = ledger.disputes()
    tainted = [d.ref for d in disputes]
    comparisons = [compare(results, BASELINE, arm, tainted=tainted) for arm in EFFECT_ARMS]
    for comparison in comparisons:
        record_comparison(ledger, run_id, comparison, carried(results, (BASELINE, comparison.candidate)))
    tables = [f"{format_comparison(c)}\n" for c in comparisons]
    verdicts = []
    for arm in (*ADAPTER_ARMS, "base+memory"):
        evidence: dict[str, Path] = {}
        if sandbox_dir is not None:
            evidence, sandbox_tables = sandbox_evidence(sandbox_dir, arm)
            tables.append(f"{sandbox_tables}\n")
        verdict = evaluate_gate(SERIOUS_GATE, run_dir, BASELINE, arm, evidence=evidence, disputes=disputes)
        record_gate(ledger, run_dir, verdict, write_verdict(run_dir, verdict))
        verdicts.append(verdict)
        tables.append(f"{format_verdict(verdict)}\n")
    plan = plan_lessons(results, workspace_dirs(memory_root), datetime.now(UTC).date())
    record_verdicts(ledger, run_id, plan.verdicts)
    tables.append("Lesson gate (causal where an ablation arm exists: workspace vs workspace-minus:<id>; "
                  "else leave-one-out):")
    tables += ["  " + lesson.summary() for lesson in plan.verdicts]
    ablated = {(v.workspace, v.rule_id) for v in plan.verdicts if v.method == "ablation"}
    loo = [v for v in leave_one_out_verdicts(trials_from_results(results)) if (v.workspace, v.rule_id) in ablated]
    tables += ["", "The ablated rules: what the causal gate and leave-one-out made of the same results:",
               lesson_summary(plan.verdicts, loo)]
    for workspace, diff in plan.diffs.items():
        (run_dir / f"lessons-{workspace}.diff").write_text(diff)
    uptake = uptake_table(CLAIMS, uptake_pairs(results), results, suite.decisions)
    tables += ["", "Rule uptake (demo/rule_claims.py says what each rule asks for):", format_uptake(uptake)]
    html, rows = demo_report(run_dir, results, comparisons, verdicts, suite.decisions, [*plan.verdicts, *loo], uptake,
                             tainted)
    head = [format_summary(rows), noise_floor_line(rows, comparisons)]
    tables += ["", *head, "", measured_lines(rows, plan.verdicts)]
    if calibration is not None:
        measured = {v.rule_id: _verdict_cell(v) for v in plan.verdicts if v.method == "ablation"}
        tables += ["", instrument_beside_model(calibration, verdicts, measured)]
    summary = [*head, "Gates:"]
    summary += [f"  {gate_line(v)}" for v in verdicts]
    summary.append(lesson_line(plan.verdicts))
    if calibration is not None:
        summary += ["The instrument on planted effects (planted: a seeded policy, never a model):",
                    *instrument_verdict(calibration)]
    return Analysis(html, "\n".join(tables), "\n".join(summary))


def lesson_line(lessons: Sequence[RuleVerdict]) -> str:
    caught, innocent = _causal_evictions(lessons)
    return (f"Causal lesson gate: evicted the planted harmful rule(s): {', '.join(sorted(caught)) or 'none'} of "
            f"{', '.join(sorted(HARMFUL_RULE_IDS))}; genuine rules evicted: {', '.join(sorted(innocent)) or 'none'}")


def run_demo(out: Path, ledger: Path, quick: bool = False, verbose: bool = False) -> int:
    """The demo, its progress on stderr; on stdout what ran and what it found in a screen (`verbose`: every table
    first), with where the report and the tables are. What it judged goes into the `ledger` file."""
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    suite, memory_root, data = demo_data(out, quick)
    adapters = build_demo_adapters(data, cache_dir(), verbose=verbose)
    run_dir = out / "run"
    record_engine(run_dir)
    say(f"{len(suite.decisions)} held-out decisions ({suite.path}); starting the engine and the gateway")
    with serving(out, adapters) as (gateway_url, versions):
        config = run_config(gateway_url, versions, suite, memory_root)
        pack = sandbox_pack(out)
        (sent, already), (ran, resumed) = asyncio.run(replay_beside_sandbox(suite, config, run_dir, pack,
                                                                            out / "sandbox"))
    calibration = planted_calibration(suite, memory_root, out / "calibration", pack)
    with Ledger(ledger) as opened:
        found = analyse(run_dir, suite, memory_root, opened, out / "sandbox", calibration)
    details = run_dir / DETAILS
    details.write_text(found.details + "\n", encoding="utf-8")
    if verbose:
        print(found.details + "\n")
    minutes, seconds = divmod(round(time.monotonic() - started), 60)
    print(f"Ran in {minutes} min {seconds} s: {sent + already} answers of the 135M model through the gateway "
          f"({len(suite.decisions)} held-out decisions, {len(config.arms)} arms; "
          f"{len(suite.decisions) * len(MAIN_ARMS)} in the {len(MAIN_ARMS)} below), {ran + resumed} sandbox episodes "
          "and a planted calibration." + (f" Resumed from {out}: {already} answers, {resumed} episodes."
                                          if already or resumed else ""))
    print(found.summary)
    print(f"\nreport: {found.html} (report.md beside it); every table: {details}"
          + ("" if verbose else " or `worker-demo run --verbose`"))
    return 0
