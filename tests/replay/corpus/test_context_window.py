"""`suite build --context-of URL`: prompts the target engine cannot hold are left out when the suite is built,
counted by the engine itself, instead of failing (or being cut short) during a run (the recorded Claude Code sessions of
tests/replay/corpus/data/claude-code; the real engine; the named fault injector for an engine that breaks)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from replay.cli import main as replay_main
from replay.suite import load_suite
from tests.support.fault_upstream import FaultUpstream
from tests.support.live import free_port

CORPUS = Path(__file__).parent / "data" / "claude-code"
LONGEST = re.compile(r"context: prompts counted by the engine at \S+ \((\S+)\): (\d+) tokens, (\d+) kept for the "
                     r"answer; the longest prompt kept is (\d+) tokens")


def build(tmp_path: Path, out: str, url: str, *extra: str) -> int:
    keys = tmp_path / "keys.toml"
    keys.write_text('[keys]\n"ws-agent" = "' + "ab" * 32 + '"\n')
    keys.chmod(0o600)
    return replay_main(["suite", "build", "--from-corpus", str(CORPUS), "--keys", str(keys), "--out",
                        str(tmp_path / out), "--context-of", url, *extra])


def prompt_tokens(engine_url: str, model: str, request: dict[str, object]) -> int:
    """The prompt's tokens as the engine reports them when it answers the request (one token of answer)."""
    answer = httpx.post(f"{engine_url}/v1/messages", json={**request, "model": model, "max_tokens": 1}, timeout=120)
    assert answer.status_code == 200, answer.text
    tokens: int = answer.json()["usage"]["input_tokens"]
    return tokens


@pytest.mark.engine
def test_the_engine_counts_and_the_build_leaves_out_what_it_would_refuse(engine, tmp_path, capsys):
    assert build(tmp_path, "all", engine.base_url) == 0
    out = capsys.readouterr().out
    model, window, answer, longest = LONGEST.search(out).groups()  # type: ignore[union-attr]
    every = load_suite(tmp_path / "all").decisions
    assert int(answer) == 256 and len(every) == 3 and 0 < int(longest) <= int(window) - 256

    # Keep one token more room than the longest prompt leaves: it is left out, and only the prompts as long
    room = int(window) - int(longest) + 1
    assert build(tmp_path, "fitting", engine.base_url, "--answer-tokens", str(room)) == 0
    report = capsys.readouterr().out
    kept = {d.id for d in load_suite(tmp_path / "fitting").decisions}
    assert f"prompt over {int(longest) - 1} tokens (the engine's context of {window} less {room} for the answer)" \
           in report
    assert 0 < len(kept) < len(every)
    # The count is the one the engine meets when it answers: kept exactly when the answer has that room
    for decision in every:
        tokens = prompt_tokens(engine.base_url, model, decision.request.model_dump(exclude_none=True))
        assert (tokens + room <= int(window)) == (decision.id in kept), (decision.id, tokens)


def test_an_engine_that_is_down_or_is_not_vllm_is_a_clear_error_and_writes_nothing(tmp_path, capsys):
    assert build(tmp_path, "down", f"http://127.0.0.1:{free_port()}") == 2
    assert "cannot count prompts on the engine at" in capsys.readouterr().err
    fault = FaultUpstream().start()  # the named fault injector: its model list says no context, as a gateway's
    try:
        assert build(tmp_path, "unsaid", fault.url) == 2
        assert "names no model with its max_model_len" in capsys.readouterr().err
    finally:
        fault.stop()
    assert not (tmp_path / "down").exists() and not (tmp_path / "unsaid").exists()


def test_no_room_for_the_answer_is_refused_before_anything_is_read(tmp_path, capsys):
    assert build(tmp_path, "none", f"http://127.0.0.1:{free_port()}", "--answer-tokens", "0") == 2
    assert "--answer-tokens must be at least 1" in capsys.readouterr().err
