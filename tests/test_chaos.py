"""Chaos (issue 62): each long-lived or writing process is killed with SIGKILL mid-work, as a crash or the OOM
killer would, then restarted or resumed exactly as docs/runbook.md tells an operator to. Nothing may be lost that
was committed, nothing duplicated, nothing half-written that a later step accepts. Real processes on loopback; the
upstream is the named fault injector (tests/support/fault_upstream.py), whose `hang_after` makes each kill land
mid-run at a known point: these tests prove the plumbing, not the model. The real engine's versions of the run and
review kills are tests/replay/run/test_decisions_live.py and tests/replay/qa/test_review.py."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from core.curated import CuratedSetError, read_curated
from replay.qa.labels import read_labels
from replay.qa.verdicts import VERDICTS, ReviewerVerdictLine
from replay.run.directory import RESULTS, read_seal
from tests.replay.qa.test_review import labelled_corpus, review_command
from tests.support.chaos import (
    CANDIDATE,
    ENV,
    curation_inputs,
    frozen_suite,
    kill_curate_build_mid_write,
    killed,
    lines,
    run_config,
)
from tests.support.fault_upstream import FaultUpstream
from tests.support.gateway_harness import GatewayProcess, wait_for, write_config


@pytest.fixture
def fault() -> Iterator[FaultUpstream]:
    with FaultUpstream() as upstream:
        upstream.adapters[CANDIDATE] = f"/adapters/{CANDIDATE}"
        yield upstream


def integrity(path: Path) -> str:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])


def column(path: Path, query: str) -> list[str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return [row[0] for row in db.execute(query)]


# --- the gateway ---------------------------------------------------------------------------------------------------


class Traffic:
    """Chat requests one after another, each with its own X-Request-Id, until stopped or the gateway is gone;
    `answered` holds the ids that got a 200."""

    def __init__(self, port: int) -> None:
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
        self.answered: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._send, daemon=True)

    def _send(self) -> None:
        while not self.stop.is_set():
            request_id = uuid.uuid4().hex
            try:
                response = self.client.post("/v1/chat/completions", headers={
                    "X-Request-Id": request_id, "X-Session-Id": f"s-{request_id[:4]}"}, json={
                    "model": "worker", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
            except httpx.TransportError:  # the gateway was killed under it
                return
            if response.status_code == 200:
                self.answered.append(request_id)

    def __enter__(self) -> Traffic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(60)
        self.client.close()


def test_a_gateway_killed_mid_traffic_three_times_loses_no_committed_row_and_duplicates_none(
        tmp_path: Path, fault: FaultUpstream) -> None:
    """What a kill may cost is what was not yet written (the capture queue, the last second of the request log);
    every row committed before it is there after the restart, once, in stores that pass SQLite's own check, and a
    capture is only ever of a request its client got a 200 for."""
    config = write_config(tmp_path / "gw", [fault.url], tmp_path / "adapters",
                          extra='[capture]\nmode = "descriptor"\nsample_rate = 1.0\n')
    capture, state = tmp_path / "gw" / "capture.sqlite", tmp_path / "gw" / "state.sqlite"
    gw = GatewayProcess(config, tmp_path / "gateway.log")
    answered: list[str] = []
    committed: set[str] = set()
    try:
        for _ in range(3):
            gw.start()
            with Traffic(gw.client.base_url.port or 0) as traffic:
                wait_for(lambda: len(set(column(capture, "SELECT id FROM decisions")) - committed) >= 20,
                         "captures under traffic")
                committed.update(column(capture, "SELECT id FROM decisions"))
                gw.kill()  # mid-traffic: requests are in flight
            answered += traffic.answered
        gw.start()
        with Traffic(gw.client.base_url.port or 0) as last:
            wait_for(lambda: len(last.answered) >= 10, "traffic after the restarts")
        assert gw.proc is not None
        gw.proc.terminate()  # a clean stop writes everything that is queued
        assert gw.proc.wait(60) == 0
        answered += last.answered
    finally:
        gw.kill()

    assert integrity(capture) == integrity(state) == "ok"
    captured = column(capture, "SELECT request_id FROM decisions")
    assert committed <= set(column(capture, "SELECT id FROM decisions"))
    assert len(captured) == len(set(captured)) and set(captured) <= set(answered)
    logged = column(state, "SELECT request_id FROM requests")
    assert len(logged) == len(set(logged))
    assert set(last.answered) <= set(captured) and set(last.answered) <= set(logged)


# --- worker-replay run ---------------------------------------------------------------------------------------------


def test_a_replay_run_killed_mid_run_resumes_to_one_result_per_arm_and_decision_and_is_sealed(
        tmp_path: Path, fault: FaultUpstream) -> None:
    suite = frozen_suite(tmp_path / "suite", 4)
    config = run_config(tmp_path / "run.toml", fault.url)
    out = tmp_path / "run"
    command = [sys.executable, "-m", "replay", "run", "--suite", str(suite), "--config", str(config),
               "--out", str(out)]
    fault.hang_after = 3
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, env=ENV)
    try:
        wait_for(lambda: fault.in_flight == 1 and len(lines(out / RESULTS)) == 3, "the fourth request")
    finally:
        killed(first)
    seal = read_seal(out)
    assert seal is None or seal.state != "sealed"
    compare = [sys.executable, "-m", "replay", "compare", str(out), "--baseline", "base", "--candidate", "cand"]
    refused = subprocess.run(compare, capture_output=True, text=True, timeout=120, env=ENV)
    assert refused.returncode == 2 and "its run did not finish" in refused.stderr, refused.stderr

    fault.hang_after = None
    fault.release()
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=120, env=ENV)
    assert resumed.returncode == 0, resumed.stderr
    assert "5 result(s) written, 3 already there" in resumed.stdout
    rows = [json.loads(line) for line in lines(out / RESULTS)]
    assert Counter((r["arm"], r["decision_id"]) for r in rows) == {
        (arm, f"d-{i}"): 1 for arm in ("base", "cand") for i in range(4)}
    seal = read_seal(out)
    assert seal is not None and (seal.state, seal.lines) == ("sealed", 8)
    assert subprocess.run(compare, capture_output=True, text=True, timeout=120, env=ENV).returncode == 0


# --- worker-replay curate build ------------------------------------------------------------------------------------

def test_a_curate_build_killed_mid_write_leaves_nothing_a_reader_accepts_and_the_next_build_succeeds(
        tmp_path: Path) -> None:
    corpus, keys, policy = curation_inputs(tmp_path)
    out = tmp_path / "sets" / "set"
    args = ["curate", "build", str(corpus), "--keys", str(keys), "--policy", str(policy), "--out", str(out)]
    kill_curate_build_mid_write(args)
    assert not out.exists()
    [partial] = (tmp_path / "sets").iterdir()  # the build's staging directory, never renamed into place
    assert (partial / "train.jsonl").is_file() and not (partial / "manifest.json").exists()
    for directory in (out, partial):
        with pytest.raises(CuratedSetError, match="not a curated set"):
            read_curated(directory)

    again = subprocess.run([sys.executable, "-m", "replay", *args], capture_output=True, text=True, timeout=120,
                           env=ENV)
    assert again.returncode == 0, again.stderr
    manifest, _, rows = read_curated(out)
    assert manifest.examples == len(rows) > 0


# --- worker-replay qa review ---------------------------------------------------------------------------------------


def test_a_qa_review_killed_mid_work_resumes_with_one_verdict_a_run(tmp_path: Path, fault: FaultUpstream) -> None:
    corpus, reviews = labelled_corpus(tmp_path)
    runs = {(r.workspace, r.session) for r in read_labels(reviews)}
    out = tmp_path / "review"
    command = review_command(corpus, reviews, f"{fault.url}/v1", out)
    fault.hang_after = 2
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, env=ENV)
    try:
        wait_for(lambda: fault.in_flight == 1 and len(lines(out / VERDICTS)) == 2, "the third review")
    finally:
        killed(first)
    seal = read_seal(out)
    assert seal is None or seal.state != "sealed"

    fault.hang_after = None
    fault.release()
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=120, env=ENV)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(runs) - 2} verdict(s) written (" in resumed.stdout and "2 already there" in resumed.stdout
    verdicts = [ReviewerVerdictLine.model_validate_json(line) for line in lines(out / VERDICTS)]
    assert Counter((v.workspace, v.session) for v in verdicts) == dict.fromkeys(runs, 1)
    seal = read_seal(out)
    assert seal is not None and (seal.state, seal.lines) == ("sealed", len(runs))
