"""`worker-demo agent` without the Agent SDK installed (a venv `make demo` set up) says what to install."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from demo.cli import main


def test_the_agent_demo_names_the_extra_it_needs_before_starting_anything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "claude_agent_sdk" else find_spec(name, *a))
    out = tmp_path / "agent"
    assert main(["agent", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Claude Agent SDK" in err and "[cpu,dev]" in err
    assert not out.exists(), "nothing was started or written"
