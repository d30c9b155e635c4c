"""docs/runbook.md runs as written: its shell blocks, in order and in one shell, against a gateway in front of the
named fault injector (tests/support/fault_upstream.py) and the work the runbook's recovery commands are for, killed
with SIGKILL here first: a replay run and a reviewer replay mid-run, a curation mid-write. Only the block that needs
the production host's systemd units is skipped (marked on the page). A recovery command on the page that stops
working, or stops finishing what was killed, fails this test."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from core.curated import read_curated
from replay.qa.labels import read_labels
from replay.qa.verdicts import VERDICTS, ReviewerVerdictLine
from replay.run.directory import RESULTS, load_results, read_seal
from serve.gateway.metrics import GatewayMetrics
from tests.replay.qa.test_review import WORKSPACES, labelled_corpus
from tests.support.chaos import (
    CANDIDATE,
    CURATION_POLICY,
    ENV,
    frozen_suite,
    kill_curate_build_mid_write,
    killed,
    lines,
    run_config,
)
from tests.support.curation import keys_file, policy_file
from tests.support.docblocks import shell_blocks
from tests.support.fault_upstream import FaultUpstream
from tests.support.gateway_harness import RunningGateway, wait_for, write_config

ROOT = Path(__file__).resolve().parents[1]
RUNBOOK = ROOT / "docs" / "runbook.md"


def runbook_blocks() -> list[tuple[str, bool]]:
    return shell_blocks(RUNBOOK, "<!-- runbook-test: skipped")


def test_only_the_systemd_block_is_skipped() -> None:
    skipped = [block for block, skip in runbook_blocks() if skip]
    assert [block.split()[0] for block in skipped] == ["systemctl"]
    assert len(runbook_blocks()) - len(skipped) == 4


def test_every_metric_the_runbook_names_is_one_the_gateway_exports() -> None:
    """An operator greps /metrics for these names: a renamed metric must not leave the runbook pointing at nothing."""
    metrics = GatewayMetrics(nvml=False)
    exported = {family.name for family in metrics.registry.collect()}  # counters without `_total`
    named = set(re.findall(r"\bworker_[a-z_]+", RUNBOOK.read_text(encoding="utf-8")))
    assert {"worker_gateway_upstream_healthy", "worker_capture_errors_total"} <= named
    assert {name for name in named if name.removesuffix("_total") not in exported} == set()


def kill_mid_run(command: list[str], upstream: FaultUpstream, results: Path, answered: int) -> None:
    """Run `command` until `answered` lines are written and the next request hangs, then SIGKILL it."""
    wait_for(lambda: upstream.in_flight == 0, "the last killed client's request to be dropped")
    upstream.hang_after = upstream.completions + answered
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, env=ENV)
    try:
        wait_for(lambda: upstream.in_flight >= 1 and len(lines(results)) == answered, "a request that hangs")
    finally:
        killed(proc)


def test_the_runbook_recovers_a_killed_run_review_and_curation(tmp_path: Path) -> None:
    corpus, labels = labelled_corpus(tmp_path)
    keys, policy = keys_file(tmp_path, list(WORKSPACES)), policy_file(tmp_path, CURATION_POLICY)  # for that corpus
    suite, out_run, out_review = frozen_suite(tmp_path / "suite", 3), tmp_path / "run", tmp_path / "review"
    out_set = tmp_path / "sets" / "set"
    with FaultUpstream() as upstream:
        upstream.adapters[CANDIDATE] = f"/adapters/{CANDIDATE}"
        (tmp_path / "adapters").mkdir()
        with RunningGateway(write_config(tmp_path / "gw", [upstream.url], tmp_path / "adapters")) as gateway:
            config = run_config(tmp_path / "run.toml", upstream.url)
            kill_mid_run([sys.executable, "-m", "replay", "run", "--suite", str(suite), "--config", str(config),
                          "--out", str(out_run)], upstream, out_run / RESULTS, 2)
            kill_mid_run([sys.executable, "-m", "replay", "qa", "review", str(corpus), "--labels", str(labels),
                          "--endpoint", f"{gateway.url}/v1", "--model", "worker", "--out", str(out_review)],
                         upstream, out_review / VERDICTS, 2)
            kill_curate_build_mid_write(["curate", "build", str(corpus), "--keys", str(keys), "--policy",
                                         str(policy), "--out", str(out_set)])
            upstream.hang_after = None
            upstream.release()
            env = {**ENV, "WORKER_GATEWAY_URL": gateway.url, "SUITE": str(suite), "RUN_CONFIG": str(config),
                   "RUN": str(out_run), "CORPUS": str(corpus), "LABELS": str(labels), "REVIEW": str(out_review),
                   "KEYS": str(keys), "POLICY": str(policy), "SET": str(out_set),
                   "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
            script = "\n".join(f"echo '### runbook block {n}' >&2\n{block}"
                               for n, (block, skip) in enumerate(runbook_blocks(), 1) if not skip)
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{done.stderr[-4000:]}\n--- stdout ---\n{done.stdout[-4000:]}"
    assert 'worker_gateway_upstream_healthy{upstream="engine-0"} 1.0' in done.stdout

    assert Counter((r.arm, r.decision_id) for r in load_results(out_run)) == {
        (arm, f"d-{i}"): 1 for arm in ("base", "cand") for i in range(3)}
    assert (out_run / "report.html").is_file()
    runs = {(r.workspace, r.session) for r in read_labels(labels)}
    verdicts = [ReviewerVerdictLine.model_validate_json(line) for line in lines(out_review / VERDICTS)]
    assert Counter((v.workspace, v.session) for v in verdicts) == dict.fromkeys(runs, 1)
    seal = read_seal(out_review)
    assert seal is not None and seal.state == "sealed"
    manifest, _, rows = read_curated(out_set)
    assert manifest.examples == len(rows) > 0
    assert [p.name for p in out_set.parent.iterdir()] == ["set"]  # the killed build's leftover is gone
