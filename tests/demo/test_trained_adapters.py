"""The demo's trained adapters are built once and rebuilt only for the arm whose data changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import demo.trained_adapters as adapters_mod
from core.records import Answer, TrainingExample
from demo.trained_adapters import build_demo_adapters
from serve.engine.train import MARKER, TrainReport
from tests.serve.engine.test_train import example


def test_build_demo_trains_once_and_again_only_when_the_data_or_the_base_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[tuple[str, int]] = []

    def fake_train(model_dir: Path, examples: list[TrainingExample], out_dir: Path, **kw: Any) -> TrainReport:
        calls.append((kw["label"], len(examples)))
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "adapter_config.json").write_text("{}")
        return TrainReport(examples=len(examples), skipped_too_long=0, answer_tokens=1, steps=1, epochs=1,
                           batch_size=1, seed=kw["seed"], rank=16, alpha=32, lr=1e-3, max_len=8, threads=1,
                           seconds=0.0, cpu_seconds=0.0, epoch_losses=[1.0], step_losses=[1.0])

    monkeypatch.setattr(adapters_mod, "train_adapter", fake_train)
    monkeypatch.setattr(adapters_mod, "DEMO_EXAMPLES", 12)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}')
    (model / "model.safetensors").write_bytes(b"base weights")
    demo = tmp_path / "demo"
    demo.mkdir()
    strata = ["verified_recovery", "clean_trajectory_action", "verified_action"] * 8
    pool = [example(i, s) for i, s in enumerate(strata)]
    (demo / "train.jsonl").write_text("".join(e.model_dump_json() + "\n" for e in pool))
    cache = tmp_path / "cache"
    (cache / "adapters/.demo-mix-s0-killed").mkdir(parents=True)

    built = build_demo_adapters(demo, cache, model_dir=model)
    assert built == {"recovery": cache / "adapters/demo-recovery-s0", "mix": cache / "adapters/demo-mix-s0"}
    assert [label for label, _ in calls] == ["demo-recovery-s0", "demo-mix-s0"]
    marker = json.loads((built["recovery"] / MARKER).read_text())
    assert marker["strata"] == {"verified_recovery": 8}
    assert set(json.loads((built["mix"] / MARKER).read_text())["strata"].values()) == {4}

    capsys.readouterr()
    assert build_demo_adapters(demo, cache, model_dir=model) == built
    assert len(calls) == 2, "a second build with the same data trains nothing"
    assert capsys.readouterr().err == "", "and says nothing: a cached demo's first screen is what it found"

    changed = [e.model_copy(update={"answer": Answer(tool="finalize_invoice", arguments={"invoice_id": "X"})})
               if e.stratum == "clean_trajectory_action" else e for e in pool]
    (demo / "train.jsonl").write_text("".join(e.model_dump_json() + "\n" for e in changed))
    build_demo_adapters(demo, cache, model_dir=model)
    assert [label for label, _ in calls[2:]] == ["demo-mix-s0"], "only the arm whose examples changed"
    (model / "model.safetensors").write_bytes(b"a rebuilt base")
    build_demo_adapters(demo, cache, model_dir=model)
    assert [label for label, _ in calls[3:]] == ["demo-recovery-s0", "demo-mix-s0"], "a new base retrains both"
    assert not list((cache / "adapters").glob(".*")), "no staging directory left behind"


@pytest.mark.parametrize("config", [b"{not json", b"\xff", b"[]", b"{}"])
def test_a_base_without_a_models_config_is_an_error_naming_it(tmp_path: Path, config: bytes) -> None:
    from core.errors import WorkerTierError

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_bytes(config)
    with pytest.raises(WorkerTierError, match="config.json: not a model's config"):
        build_demo_adapters(tmp_path / "demo", tmp_path / "cache", model_dir=model)


def test_the_adapters_train_on_the_embedded_model_by_default(tmp_path: Path) -> None:
    """The engine serves the untuned embedded model, so the adapters must train on it (the gateway
    refuses adapters whose adapter_config.json names another base)."""
    from core.errors import WorkerTierError
    from serve.engine.modelbuild import MODEL_NAME

    with pytest.raises(WorkerTierError, match=f"models/{MODEL_NAME}.*worker-serve model build"):
        build_demo_adapters(tmp_path / "demo", tmp_path / "cache")


def test_worker_demo_adapters_says_where_both_are_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """`make demo`'s set-up runs it on every call: one line, not one per adapter."""
    from demo.cli import main

    built = {"recovery": Path("/c/adapters/demo-recovery-s0"), "mix": Path("/c/adapters/demo-mix-s0")}
    monkeypatch.setattr(adapters_mod, "build_demo_adapters", lambda *a, **k: built)
    assert main(["adapters", "--demo-dir", "/d", "--cache-dir", "/c"]) == 0
    assert capsys.readouterr().out == ("demo adapters: recovery /c/adapters/demo-recovery-s0, "
                                       "mix /c/adapters/demo-mix-s0\n")
