"""`worker-serve` errors a user can cause: one `error:` line, exit 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import assert_one_error_line, run_cli


@pytest.mark.parametrize("args, needles", [
    (["engine", "--config", "no-engine.toml", "--dry-run"], ["no-engine.toml"]),
    (["gateway", "--config", "no-gateway.toml"], ["no-gateway.toml"]),
    (["evidence", "--config", "no-gateway.toml", "--out", "ev"], ["no-gateway.toml"]),
    (["adapter", "make-random", "--seed", "1", "--model", "no-model", "out"], ["no model at no-model"]),
])
def test_user_errors_print_one_error_line_and_exit_2(args, needles, tmp_path: Path):
    assert_one_error_line(run_cli("serve", *args, cwd=tmp_path), *needles)


def test_a_bad_training_file_names_its_line(tmp_path: Path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}')  # a model's config; the data is what is bad
    (tmp_path / "train.jsonl").write_text("not json\n")
    result = run_cli("serve", "adapter", "train", "--data", "train.jsonl", "--select", "mix", "--seed", "1",
                     "--model", str(model), "out", cwd=tmp_path)
    assert_one_error_line(result, "train.jsonl:1")
