"""A real contaminated candidate on the CPU engine (issue 60 case 5): a set curated from the recorded corpus without
the eval boundary, a LoRA trained on it by `worker-serve adapter train`, registered at the gateway, the suite it
came from replayed through the gateway: `run` shows the candidate's decisions as contaminated, and `gate` leaves
them all out, so it cannot pass on them."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.cli import main as replay_main
from replay.curation.build import SUITES_ENV
from serve.cli import main as serve_main
from tests.replay.analysis.test_training_lineage import GAIN_POLICY, SESSION_DECISIONS, curated_set
from tests.replay.curation.test_eval_boundary import register_suite
from tests.support.curation import copy_workspace
from tests.support.gateway_harness import RunningGateway, write_config

pytestmark = pytest.mark.engine


def test_a_candidate_trained_on_its_suite_is_shown_contaminated_and_not_judged_on_it(
        engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(SUITES_ENV, str(tmp_path / "registry"))
    suite = register_suite(tmp_path / "registry")
    corpus, adapters = tmp_path / "corpus", tmp_path / "adapters"
    copy_workspace(corpus, "ws-r")
    curated = curated_set(tmp_path, corpus)
    assert serve_main(["adapter", "train", "--data", str(curated), "--seed", "0", "--rank", "4",
                       str(adapters / "cand-v1")]) == 0
    config, policy, run_dir = tmp_path / "run.toml", tmp_path / "gain.toml", tmp_path / "run"
    policy.write_text(GAIN_POLICY)
    with RunningGateway(write_config(tmp_path / "gw", [engine.base_url], adapters)) as gw:
        gw.ok("POST", "/adapters", {"name": "cand-v1", "path": "cand-v1"})
        gw.ok("POST", "/adapters/cand-v1/load")
        config.write_text(f'[endpoint]\nbase_url = "{gw.url}/v1"\n[decoding]\ntemperature = 0.0\nseed = 0\n'
                          'max_tokens = 48\n[[arms]]\nname = "base"\nmodel = "worker-base"\nmemory = "withheld"\n'
                          '[[arms]]\nname = "cand"\nmodel = "cand-v1"\nmemory = "withheld"\n')
        capsys.readouterr()
        assert replay_main(["run", "--suite", str(suite), "--config", str(config), "--out", str(run_dir)]) == 0
    screen = capsys.readouterr().out
    assert (f"contamination: arm 'cand' (trained on the curated set {curated}): 3 of 3 suite decisions its "
            "training data reaches (session 3, request 1, near-duplicate 3)") in screen
    assert "contamination: arm 'base': no lineage (the base model" in screen
    assert replay_main(["gate", str(run_dir), "--policy", str(policy), "--baseline", "base",
                        "--candidate", "cand"]) == 1
    verdict = capsys.readouterr().out
    assert "[not run] paired-gain" in verdict and "3 decision(s) the candidate's training data reaches" in verdict
    assert ", ".join(SESSION_DECISIONS) in verdict
