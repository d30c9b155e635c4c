"""`worker-demo loop`: the slow loop closed on CPU, from a failure to a verdict (DESIGN §12; 001 S22).

1. **A failure, recorded by the runtime.** Two Claude Agent SDK sessions run through the gateway against the
   real engine; their MCP tool is the planted invoice world (demo/loop_world.py: INV-7 was merged into INV-8), so
   Claude Code's own session files hold real failed calls. The first session is for training, the second is
   held out: its suite is frozen before anything is trained, and curation may take nothing from it.
2. **Its correction, proven `executed`.** Each of the training session's known failures becomes a scenario on
   the same state; sandbox episodes run on the real world and its measure. The 135M worker does not find the
   correction (it looks INV-7 up again: `worker-demo loop` prints what it did), so the episodes are driven by
   the **planted explorer**, a seeded policy that walks each scenario's solution path (the calibration
   instrument's sandbox policy, labelled planted everywhere): the action is the explorer's, its execution and
   the measure that proves it are real.
3. **Curated** with the shipped S1.1 policy, shrunk to what exists (`shortfall = "shrink"`), the explorer
   named among the policy's worker models (planted: it stands in for a worker that found the correction).
4. **Trained** (a LoRA adapter on CPU), registered at the gateway, and **judged**: the held-out suite replayed
   with the base and the candidate, `serious-candidate.toml` evaluated (a rejection with its reasons is as
   good an outcome as a pass: the sandbox conditions and the confirmation run are `not_run` here).

5. **Quantised and judged again** (S22): the candidate merged into its base and both quantised to `w8a8-int8`
   (the CPU stand-in for production's NVFP4), each served by an engine of its own (an int8 engine serves no LoRA)
   behind a gateway with the same forced route; the held-out suite replayed with the same arms and decoding, and
   production-candidate's `quantisation_survives` judged from the two runs (its other conditions need a live trial
   and are `not_run`). The report puts the quantised arms beside the high-precision ones and compares each arm
   with itself, so a drop is blamed on quantisation, not on the training.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from core.chatrow import chat_messages
from core.errors import WorkerTierError
from core.guard import GuardRules
from core.process import free_port
from demo.agent import WORKSPACE, agent_session
from demo.loop_world import LOOP_WORLD, PLANTED, TOOL, scenario_for, write_loop_pack
from demo.serving import admin, fresh_out, register_adapters, say, serving, started
from replay.analysis.compare import ALL_POSITIVE, Comparison, compare
from replay.analysis.gates import evaluate_gate, write_verdict
from replay.analysis.provenance import carried, record_comparison, record_gate, record_run
from replay.analysis.report import report_run
from replay.analysis.report.summary import gate_line
from replay.analysis.stages import stage_arm, staged
from replay.calibration.episodes import EpisodeScripts, PackArmBehaviour, PlantedEpisodes
from replay.calibration.planted import ArmBehaviour, PlantedSpec, serve_planted
from replay.corpus.claude_code import ClaudeCodeDir
from replay.corpus.corpus_suite import CorpusRead, build_corpus_suites
from replay.curation.build import curate, open_inputs
from replay.curation.classes import DecisionClass
from replay.curation.curation_policy import CurationPolicy, load_policy
from replay.curation.pool import read_pool
from replay.memory.ledger import Ledger
from replay.run.decisions import run
from replay.run.directory import load_results
from replay.run.run_config import RunConfig
from replay.sandbox.pack import load_pack
from replay.sandbox.runner import load_sandbox_results, run_sandbox
from replay.sandbox.scenario import Scenario
from replay.sandbox.world import Episode
from replay.suite import freeze_suite, load_suite
from serve.engine.adapters import merge_adapter
from serve.engine.launcher import EngineProcess, load_engine_config
from serve.engine.modelbuild import check_model_dir, default_model_dir
from serve.engine.quantize import default_out, quantize_model
from serve.engine.train import MARKER, curated_examples, train_adapter

REPO = Path(__file__).resolve().parents[1]
EXPLORER = "planted-explorer"
POLICY = REPO / "configs" / "curation" / "s1.1.toml"
GATE = REPO / "configs" / "gates" / "serious-candidate.toml"
PRODUCTION_GATE = REPO / "configs" / "gates" / "production-candidate.toml"
QUANTISED_ENGINE = REPO / "configs" / "engine" / "cpu-smollm2-quantized.toml"
SCHEME = "w8a8-int8"
STAGE = "quantised"
CORRECTED = {"id": "INV-8"}
ROUTE = "candidate"
"""The gateway route the trained candidate is production of; like `worker`, a forced tool route (demo/agent.py)."""


@dataclass(frozen=True)
class Sessions:
    train: str
    held_out: str
    calls: list[str]
    """Every id the worker looked up, in order, over both sessions."""


def record_sessions(gateway_url: str, out: Path) -> Sessions:
    """Two Agent SDK sessions on the planted invoice world; Claude Code writes them under `out/corpus`."""
    runs, calls = [], []
    for _ in range(2):
        episode = Episode.start(LOOP_WORLD, PLANTED, [TOOL], datetime(2026, 12, 1, tzinfo=UTC), 0)
        runs.append(asyncio.run(agent_session(gateway_url, out / "home", out / "corpus", world=episode)))
        calls += [str(args.get("id")) for args in runs[-1].executed]
    if not all(r.session for r in runs):
        raise WorkerTierError("an Agent SDK session did not start")
    return Sessions(runs[0].session, runs[1].session, calls)


def keys_file(out: Path) -> Path:
    path = out / "keys.toml"
    path.write_text(f'[keys]\n"{WORKSPACE}" = "{secrets.token_hex(32)}"\n')
    path.chmod(0o600)
    return path


def held_out_suite(corpus: Path, out: Path, keys: Path, session: str) -> Path:
    """The held-out session's decisions as a frozen suite (before anything is trained)."""
    from replay.corpus.resolve import load_keys

    held = out / "held-out-suite"
    build_corpus_suites(ClaudeCodeDir(corpus), {held: lambda cluster: cluster == f"{WORKSPACE}/{session}"},
                        keys=load_keys(keys), name="loop-held-out")
    freeze_suite(held)
    return held


def known_failure_scenarios(corpus: Path, session: str) -> list[Scenario]:
    """Each known failure of the training session as a scenario on the same state."""
    return [scenario_for(d.row.id, d.row.workspace, chat_messages(d.row.request or {}), d.row.chosen_arguments or {},
                         CORRECTED)
            for found in read_pool(ClaudeCodeDir(corpus), GuardRules(), CorpusRead()) for d in found
            if d.row.session == session and d.decision_class is DecisionClass.KNOWN_FAILURE]


def prove(scenarios: list[Scenario], out: Path) -> Path:
    """Sandbox episodes of the planted explorer on every scenario, through the real sandbox runner."""
    pack = load_pack(write_loop_pack(out / "pack", scenarios))
    episodes = PlantedEpisodes(EpisodeScripts(pack), (PackArmBehaviour(model=EXPLORER, complete=1.0),), 0)
    spec = PlantedSpec(arms=[ArmBehaviour(model=EXPLORER, right=1.0)])
    with serve_planted(spec, [], episodes) as endpoint:
        config = RunConfig.model_validate({"endpoint": {"base_url": endpoint.base_url, "api_key_env": None},
                                           "arms": [{"name": "explorer", "model": EXPLORER}]})
        run_sandbox(pack, config, out / "sandbox")
    return out / "sandbox"


def loop_policy(out: Path) -> Path:
    """The shipped S1.1 policy, shrunk to what exists and naming the planted explorer among the worker's models:
    changed on the parsed policy and written back as TOML, read back to check it says what was meant. Its
    near-duplicate rule is off, and the screen says so: the loop's two Agent SDK sessions run one task, so the
    rule refuses every correction the training session holds (the held-out session repeats its states). Session
    and request-hash exclusion still hold; the verdict is on the same task, as the screen's line says. Its
    per-tool cap is off too: every correction calls the ledger's one lookup, and the cap, a share of the set's
    calls, would cut the set to one example."""
    shipped, _ = load_policy(POLICY)
    policy = shipped.model_copy(update={"shortfall": "shrink", "worker_models": [EXPLORER, *shipped.worker_models],
                                        "near_duplicate_threshold": 1.0, "max_tool_share": None})
    path = out / "policy.toml"
    path.write_text(f"# worker-demo loop: {POLICY.relative_to(REPO)} with shortfall = \"shrink\", the planted "
                    "explorer as a worker model, and the near-duplicate rule off: the loop's two sessions are one "
                    "task, so every correction is a near-copy of a held-out decision; no per-tool cap: every "
                    "correction calls the one lookup\n" + policy_toml(policy),
                    encoding="utf-8")
    if load_policy(path)[0] != policy:
        raise WorkerTierError(f"{path}: the loop's curation policy does not read back as written")
    return path


def policy_toml(policy: CurationPolicy) -> str:
    """A curation policy as TOML: its fields in order (None ones left out), `shares` as a table."""
    data = policy.model_dump(mode="json", exclude_none=True)

    def value(v: object) -> str:
        return json.dumps(v, ensure_ascii=False)

    lines = [f"{key} = {value(v)}" for key, v in data.items() if not isinstance(v, dict)]
    for key, table in ((k, v) for k, v in data.items() if isinstance(v, dict)):
        lines += ["", f"[{key}]", *(f"{name} = {value(v)}" for name, v in table.items())]
    return "\n".join(lines) + "\n"


def train(curated: Path, adapters: Path) -> tuple[Path, str]:
    """A LoRA adapter on the curated set (one epoch, as E11's pilot), with the data named in its record."""
    import torch

    examples, data = curated_examples(curated)
    out = adapters / f"loop-cand-{data['train_sha256'][:8]}"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the engine shares the cores: two training threads would wait on it at every barrier
    try:
        report = train_adapter(check_model_dir(default_model_dir()), examples, out, seed=0, epochs=1, on_step=None,
                               label=out.name)
    finally:
        torch.set_num_threads(threads)
    (out / MARKER).write_text(json.dumps({"data": data, "report": report.model_dump()}, indent=2) + "\n",
                              encoding="utf-8")
    return out, report.summary()


DECODING = {"temperature": 0.0, "seed": 0, "max_tokens": 64}
FORCED = 'forced_tool_routes = ["worker"]\n'


def replay_config(gateway_url: str) -> RunConfig:
    """Both arms through forced routes, as the sessions ran: `worker` (the base) and `ROUTE` (the candidate)."""
    return RunConfig.model_validate({
        "endpoint": {"base_url": f"{gateway_url}/v1", "api_key_env": None}, "decoding": DECODING,
        "arms": [{"name": "base", "model": "worker"}, {"name": "cand", "model": ROUTE}]})


def quantise(adapter: Path, out: Path) -> dict[str, Path]:
    """Each arm's checkpoint: the base's (cached beside the embedded model, as `worker-serve model quantize` writes
    it) and the candidate merged into its base, then quantised the same way."""
    base = check_model_dir(default_model_dir())
    merged = merge_adapter(base, adapter, out / "merged", quiet=True)
    return {"base": quantize_model(base, default_out(base, SCHEME), SCHEME).out_dir,
            "cand": quantize_model(merged, out / STAGE, SCHEME).out_dir}


@contextmanager
def quantised_gateways(checkpoints: dict[str, Path], out: Path) -> Iterator[dict[str, str]]:
    """Per arm, an engine on its checkpoint (started together: their start-ups overlap) and a gateway in front with
    the `worker` route forced, as the high-precision run's; yields arm → gateway URL."""
    engines = {}
    for arm, checkpoint in checkpoints.items():
        logs = out / f"{STAGE}-{arm}" / "logs"
        logs.mkdir(parents=True)
        engines[arm] = EngineProcess(load_engine_config(QUANTISED_ENGINE, port=free_port()).on_model(checkpoint),
                                     log_path=logs / "engine.log")
    with ExitStack() as stack:
        stack.enter_context(started({f"{STAGE} engine of arm {arm}": engine for arm, engine in engines.items()}))
        yield {arm: stack.enter_context(serving(out / f"{STAGE}-{arm}", {}, gateway_keys=FORCED,
                                                engine_url=engine.base_url))[0] for arm, engine in engines.items()}


def quantised_config(gateways: dict[str, str]) -> RunConfig:
    """The high-precision run's arms and decoding, each arm on its own quantised build (an arm's own base_url)."""
    return RunConfig.model_validate({
        "endpoint": {"base_url": f"{gateways['base']}/v1", "api_key_env": None}, "decoding": DECODING,
        "arms": [{"name": "base", "model": "worker"},
                 {"name": "cand", "model": "worker", "base_url": f"{gateways['cand']}/v1"}]})


def judge_quantised(high: Path, low: Path, ledger: Ledger) -> str:
    """production-candidate judged with the quantised run as its evidence (recorded in `ledger`); the line of
    `quantisation_survives` (the other conditions need a live trial: not_run) and what quantisation changed per
    arm."""
    verdict = evaluate_gate(PRODUCTION_GATE, high, "base", "cand", evidence={STAGE: low}, disputes=ledger.disputes())
    record_gate(ledger, high, verdict, write_verdict(high, verdict))
    [survives] = [c for c in verdict.conditions if c.id == "quantisation-survives"]
    if "points" in survives.evidence:
        high_points, low_points = (_points(survives.evidence.get(key)) for key in ("high_precision_points", "points"))
        judged = f"gain in points: high precision {high_points}, {STAGE} {low_points}"
    else:
        judged = survives.reason
    return (f"{survives.id} {survives.status.value.upper()} ({judged}); across quantisation: "
            f"{stage_shifts(high, low)}")


def stage_shifts(high: Path, low: Path) -> str:
    """Per arm against itself across quantisation: the positive decisions it lost and gained (joint correctness)
    and its exact repeats of the failed call, where the held-out session has such decisions."""
    results = load_results(high) + staged(load_results(low), STAGE)
    shifts = []
    for arm in ("cand", "base"):
        comparison = compare(results, arm, stage_arm(arm, STAGE))
        parts = []
        with suppress(KeyError):
            row = comparison.row("joint", ALL_POSITIVE).stats
            parts.append(f"lost {row.losses}, gained {row.wins} of {row.n} positive")
        with suppress(KeyError):
            repeats = comparison.repeat("exact").stats
            parts.append(f"exact repeats {repeats.baseline_repeats}/{repeats.n} -> {repeats.candidate_repeats}/"
                         f"{repeats.n}")
        shifts.append(f"{arm} {', '.join(parts) or 'nothing comparable'}")
    return "; ".join(shifts)


def _points(value: object) -> str:
    return f"{value:+.1f}" if isinstance(value, float | int) else "n/a"


def run_loop(out: Path, ledger: Path, engine_url: str | None = None) -> int:
    """The loop into `out`; its runs, comparison and gate verdicts go into the `ledger` file as any user's do."""
    fresh_out(out, "the loop")
    (out / "home").mkdir(parents=True)
    token, keys = secrets.token_hex(16), keys_file(out)
    with serving(out, {}, gateway_keys=f'routes = ["worker", "{ROUTE}"]\nforced_tool_routes = ["worker", "{ROUTE}"]\n',
                 engine_url=engine_url,
                 adapter_root=out / "adapters", token=token) as (gateway_url, _):
        sessions = record_sessions(gateway_url, out)
        say(f"2 Agent SDK sessions on the planted ledger; the worker looked up {', '.join(sessions.calls)}")
        held = held_out_suite(out / "corpus", out, keys, sessions.held_out)
        scenarios = known_failure_scenarios(out / "corpus", sessions.train)
        sandbox = prove(scenarios, out)
        proven = sum(r.scores.task_completed for r in load_sandbox_results(sandbox))
        say(f"sandbox: {proven} of {len(scenarios)} known failures corrected ({TOOL} INV-8) by the planted "
            "explorer, executed in the real world")
        manifest = curate(open_inputs([out / "corpus"], [], keys, loop_policy(out), [held], [sandbox]), out / "set")
        got = ", ".join(f"{c} {n.got}/{n.asked}" for c, n in manifest.classes.items())
        say(f"curated {manifest.examples} examples ({got}); refused: {dict(manifest.refusals) or 'none'}; "
            "near-duplicate rule off (the held-out session repeats the training session's task), no tool cap "
            "(every correction calls the one lookup)")
        adapter, summary = train(out / "set", out / "adapters")
        say(f"trained {adapter.name}: {summary}")
        version = register_adapters(gateway_url, token, {"cand": adapter})["cand"]
        status, body = admin(gateway_url, token, "POST", f"/admin/routes/{ROUTE}/production", {"version": version})
        if status != 200:
            raise WorkerTierError(f"making {version} production of route {ROUTE} failed: HTTP {status} {body}")
        run(load_suite(held), replay_config(gateway_url), out / "run", label="[loop] replay")
    with Ledger(ledger) as opened:
        results, disputes = load_results(out / "run"), opened.disputes()
        comparison = compare(results, "base", "cand", tainted=[d.ref for d in disputes])
        record_comparison(opened, record_run(opened, out / "run"), comparison, carried(results, ("base", "cand")))
        verdict = evaluate_gate(GATE, out / "run", "base", "cand", disputes=disputes)
        record_gate(opened, out / "run", verdict, write_verdict(out / "run", verdict))
    print(f"held-out suite ({comparison.decisions} decisions): {repeat_line(comparison)}")
    print(f"gate {gate_line(verdict)}")
    checkpoints = quantise(adapter, out)
    with quantised_gateways(checkpoints, out) as gateways:
        run(load_suite(held), quantised_config(gateways), out / f"run-{STAGE}", label=f"[loop] {STAGE} replay")
    with Ledger(ledger) as opened:
        print(judge_quantised(out / "run", out / f"run-{STAGE}", opened))
        md, _ = report_run(out / "run", stages={STAGE: out / f"run-{STAGE}"},
                           tainted=[d.ref for d in opened.disputes()], ledger=opened)
    print(f"report: {md} (high precision and {STAGE} side by side)")
    print(f"everything: {out} (corpus, held-out-suite, pack, sandbox, set, adapters, run, merged, {STAGE}, "
          f"run-{STAGE})")
    return 0


def repeat_line(comparison: Comparison) -> str:
    """How often each arm looked the merged invoice up again on the held-out known failures."""
    try:
        row = comparison.repeat("exact").stats
    except KeyError:
        return "no known failure held out"
    return (f"exact repeats of the failed call: base {row.baseline_repeats}/{row.n}, cand {row.candidate_repeats}/"
            f"{row.n} (fixes {row.fixes}, regressions {row.regressions}, p = {row.p_value:.3g})")
