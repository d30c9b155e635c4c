"""Reviewer replay (`worker-replay qa review`): the recorded Claude Code sessions' finished runs judged by the real
engine (CPU vLLM, SmolLM2-135M) behind the gateway, killed with SIGKILL partway and resumed with one verdict line
a run; the lines are what `qa agree` reads. The small model answers what it answers: the test holds the
structure and the outcomes, never a verdict. Without an engine: a torn last line is cut on resume, an
endpoint that is down is a clear error that writes nothing, and one that fails partway (the named fault
injector) stops the run with the lines written kept."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from core.evidence import ReviewVerdict
from replay.cli import main
from replay.qa.answer import ReviewOutcome
from replay.qa.labels import read_labels
from replay.qa.review import reviewed
from replay.qa.verdicts import VERDICTS, ReviewerVerdictLine
from serve.engine.launcher import EngineProcess
from tests.replay.qa.corpus import RETRIES, append_answer, text
from tests.support.curation import LOOKUP, copy_workspace, session_path
from tests.support.fault_upstream import FaultUpstream
from tests.support.gateway_harness import RunningGateway, write_config

WORKSPACES = ("ws-a", "ws-b", "ws-c")


def labelled_corpus(tmp_path: Path) -> tuple[Path, Path]:
    """Three copies of the recorded workspace, each session ending in a planted final answer (six finished runs),
    labelled by `qa labels`, half with a person's disposition."""
    root = tmp_path / "corpus"
    dispositions = []
    for index, workspace in enumerate(WORKSPACES):
        copy_workspace(root, workspace)
        for session in (LOOKUP, RETRIES):
            append_answer(session_path(root, workspace, session), session, text(f"INV-7 is paid ({index})."))
        dispositions.append({"workspace": workspace, "session": LOOKUP, "disposition": ("pass", "fail")[index % 2]})
    path = tmp_path / "dispositions.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in dispositions))
    reviews = tmp_path / "reviews.jsonl"
    assert main(["qa", "labels", str(root), "--dispositions", str(path), "--out", str(reviews)]) == 0
    return root, reviews


def review_command(corpus: Path, reviews: Path, endpoint: str, out: Path, max_tokens: int = 128) -> list[str]:
    return [sys.executable, "-m", "replay", "qa", "review", str(corpus), "--labels", str(reviews),
            "--endpoint", endpoint, "--model", "worker-base", "--max-tokens", str(max_tokens),
            "--concurrency", "1", "--out", str(out)]


def verdict_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.engine
def test_qa_review_killed_partway_resumes_with_one_verdict_a_run(engine: EngineProcess, tmp_path: Path) -> None:
    corpus, reviews = labelled_corpus(tmp_path)
    runs = read_labels(reviews)
    assert len(runs) == 6
    out = tmp_path / "review"
    config = write_config(tmp_path / "gw", [engine.base_url], tmp_path / "adapters")
    (tmp_path / "adapters").mkdir()
    with RunningGateway(config) as gateway:
        command = review_command(corpus, reviews, f"{gateway.url}/v1", out)
        first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while not verdict_lines(out / VERDICTS) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.wait()
        killed_at = len(verdict_lines(out / VERDICTS))
        assert 0 < killed_at < 6, "the kill should land mid-run"

        resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        assert f"{6 - killed_at} verdict(s) written (" in resumed.stdout
        assert f"{killed_at} already there" in resumed.stdout

        changed = subprocess.run(review_command(corpus, reviews, f"{gateway.url}/v1", out, max_tokens=32),
                                 capture_output=True, text=True, timeout=120)
        assert changed.returncode == 2 and "config.max_tokens: 128 -> 32" in changed.stderr
        assert "Traceback" not in changed.stderr

    lines = [ReviewerVerdictLine.model_validate_json(line) for line in verdict_lines(out / VERDICTS)]
    assert Counter((line.workspace, line.session) for line in lines) == {(r.workspace, r.session): 1 for r in runs}
    finals = {(r.workspace, r.session): r.final_record for r in runs}
    for line in lines:
        assert line.reviewer == "qwen" and line.final_record == finals[line.workspace, line.session]
        assert line.outcome in set(ReviewOutcome)
        if line.outcome is ReviewOutcome.OK:
            assert line.verdict is line.answered and line.error is None
        else:
            assert line.verdict is ReviewVerdict.ESCALATE and line.error
    run_json = json.loads((out / "run.json").read_text())
    assert run_json["config"]["model"] == "worker-base" and "worker-base" in run_json["models"]

    agreed = subprocess.run([sys.executable, "-m", "replay", "qa", "agree", "--labels", str(reviews),
                             "--verdicts", str(out), "--json"], capture_output=True, text=True, timeout=120)
    assert agreed.returncode == 0, agreed.stderr
    report = json.loads(agreed.stdout)
    [row] = [r for r in report["rows"] if r["reviewer"] == "qwen" and r["workspace"] is None]
    assert (row["reviewed"], row["labelled"], report["unmatched_verdicts"]) == (6, 3, 0)


def test_a_torn_last_verdict_line_is_cut_and_its_run_left_to_do(tmp_path: Path) -> None:
    line = ReviewerVerdictLine(workspace="ws", session="a", reviewer="qwen", verdict=ReviewVerdict.PASS,
                               final_record="f", outcome=ReviewOutcome.OK, answered=ReviewVerdict.PASS, evidence=[])
    (tmp_path / VERDICTS).write_text(line.model_dump_json() + "\n" + '{"workspace": "ws", "session": "b", "rev')
    assert reviewed(tmp_path / VERDICTS) == {("ws", "a")}
    assert (tmp_path / VERDICTS).read_text() == line.model_dump_json() + "\n"


def test_an_unusable_answer_must_count_as_escalate() -> None:
    with pytest.raises(ValueError, match="counts as escalate"):
        ReviewerVerdictLine(workspace="ws", session="a", reviewer="qwen", verdict=ReviewVerdict.PASS,
                            outcome=ReviewOutcome.UNSUPPORTED, answered=ReviewVerdict.PASS)


def test_an_endpoint_that_is_down_is_one_error_and_nothing_is_written(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    corpus, reviews = labelled_corpus(tmp_path)
    out = tmp_path / "review"
    assert main(["qa", "review", str(corpus), "--labels", str(reviews), "--endpoint", "http://127.0.0.1:9/v1",
                 "--model", "worker-base", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot reach the endpoint http://127.0.0.1:9/v1") and "Traceback" not in err
    assert not (out / "run.json").exists() and not (out / VERDICTS).exists()


def test_an_endpoint_failing_partway_stops_the_run_and_keeps_what_was_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus, reviews = labelled_corpus(tmp_path)
    out = tmp_path / "review"
    with FaultUpstream() as upstream:  # its answer calls the offered tool with {"id": "1"}: no verdict
        args = ["qa", "review", str(corpus), "--labels", str(reviews), "--endpoint", f"{upstream.url}/v1",
                "--model", "worker-base", "--concurrency", "1", "--out", str(out)]
        assert main([*args, "--limit", "2"]) == 0
        assert "2 verdict(s) written (bad_verdict 2), 0 already there" in capsys.readouterr().out
        upstream.behaviour["worker-base"] = "fail"
        assert main(args) == 2
        err = capsys.readouterr().err
        assert "did not answer (HTTP 500" in err and "2 before are kept" in err and "run the same command" in err
        assert len(verdict_lines(out / VERDICTS)) == 2
        upstream.behaviour["worker-base"] = "ok"
        assert main(args) == 0  # --limit is no part of the run: the rest is judged now
        assert "4 verdict(s) written (bad_verdict 4), 2 already there" in capsys.readouterr().out
    lines = [ReviewerVerdictLine.model_validate_json(line) for line in verdict_lines(out / VERDICTS)]
    assert len({(line.workspace, line.session) for line in lines}) == 6 == len(lines)
    assert {(line.outcome, line.verdict) for line in lines} == {(ReviewOutcome.BAD_VERDICT, ReviewVerdict.ESCALATE)}


@pytest.mark.parametrize(("flags", "error"), [
    (["--limit", "0"], "--limit 0: give at least 1 run"),
    (["--endpoint", "http://example.com/v1"], "is not loopback"),
])
def test_a_review_that_cannot_start_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str],
                                            error: str) -> None:
    corpus, reviews = labelled_corpus(tmp_path)
    args = ["qa", "review", str(corpus), "--labels", str(reviews), "--endpoint", "http://127.0.0.1:9/v1",
            "--model", "m", "--out", str(tmp_path / "out"), *flags]
    assert main(args) == 2
    assert error in capsys.readouterr().err
