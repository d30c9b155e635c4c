"""dashboards/memory.json and dashboards/memory-rules.yml, proven against a real Prometheus (Debian's) that
scrapes the counters the real `worker-replay memory stats --textfile` writes for a generated fleet.

The file is served as node_exporter's textfile collector serves it: read again at every scrape, so a
later run of the command is what the next scrape sees. Between two runs one workspace's provenance log
records a rule added, so the churn panel must show it. Stop-QA's coverage rides in the same file (a modes
file and a reviews.jsonl for the fleet), and its panels must show the command's own shares. Every panel's PromQL must parse, read only
what the textfile holds and return data; the fleet's stat must equal the command's own `--json` totals,
and the per-root table the command's own table, row by row and column by column.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from core.evidence import Disposition, ReviewVerdict
from replay.memory.counters import HEADINGS
from replay.qa.coverage import FleetCoverage
from replay.qa.labels import LabelledRun, Mode
from replay.qa.qa_files import write_jsonl
from tests.ops.prometheus_process import RunningPrometheus
from tests.ops.promql import metric_names
from tests.replay.memory.test_counters import PLANS, write_workspace
from tests.support.gateway_harness import wait_for

REPO = Path(__file__).resolve().parents[2]
BOARD = REPO / "dashboards" / "memory.json"
RULES = REPO / "dashboards" / "memory-rules.yml"
WORKER_REPLAY = Path(sys.executable).parent / "worker-replay"
FLEET_STAT = "The fleet (S25's counters)"
LARGEST = "largest rules file"  # the table's column beyond S25's


class TextfileCollector:
    """node_exporter's textfile collector reduced to what Prometheus sees of it: `/metrics` answers the
    file's current text, read at each scrape."""

    def __init__(self, path: Path) -> None:
        textfile = path

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                body = textfile.read_bytes() if self.path == "/metrics" else b""
                self.send_response(200 if body else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> TextfileCollector:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def count(roots: list[Path], textfile: Path, qa: list[str]) -> FleetCoverage:
    """The real command, as the timer runs it; what its `--json` says."""
    done = subprocess.run([str(WORKER_REPLAY), "memory", "stats", *map(str, roots), *qa, "--textfile",
                           str(textfile), "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return FleetCoverage.model_validate_json(done.stdout)


def add_rule(workspace: Path) -> None:
    """The nightly task integrates a rule: a provenance entry dated today."""
    log = workspace / "memory" / "reference" / "corrections-log.md"
    today = datetime.now(UTC).date().isoformat()
    log.write_text(f"## lc:new-rule\n**History:** {today} added\n\n" + log.read_text())


def coverage_files(work: Path, workspaces: list[str]) -> list[str]:
    """Every third workspace in a shadow mode; three runs each, every other one reviewed, every third disposed."""
    modes = {name: list(Mode)[1 + n % 3] for n, name in enumerate(workspaces) if n % 3 == 0}
    (work / "modes.json").write_text(json.dumps(modes))
    runs = [LabelledRun(workspace=name, session=f"s{k}", final_record=f"f{k}",
                        reviewer={Mode.SHADOW_QWEN: ReviewVerdict.PASS} if k % 2 else {},
                        disposition=Disposition.FAIL if k % 3 == 0 else None)
            for n, name in enumerate(workspaces) for k in range(3 * n, 3 * n + 3)]
    write_jsonl(work / "reviews.jsonl", runs)
    return ["--qa-modes", str(work / "modes.json"), "--reviews", str(work / "reviews.jsonl")]


def panels() -> list[dict]:
    return json.loads(BOARD.read_text())["panels"]


class Stack:
    def __init__(self, prometheus: RunningPrometheus, fleet: FleetCoverage, textfile: Path) -> None:
        self.prometheus, self.fleet, self.textfile = prometheus, fleet, textfile
        self.exported = frozenset(s.name for f in text_string_to_metric_families(textfile.read_text())
                                  for s in f.samples)


def scraped_twice(prometheus: RunningPrometheus) -> None:
    """Two scrapes after now: rate() and increase() need the second."""
    for _ in range(2):
        moment = time.time()
        wait_for(lambda since=moment: prometheus.targets_scraped_since(since), "a scrape of the textfile", 30, 0.2)


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("memory-dashboard")
    roots = []
    for r in range(3):
        root = work / f"host-{'ABC'[r]}"
        for w in range(12):
            write_workspace(root / f"ws-{r}-{w:02d}", PLANS[(r + w) % len(PLANS)])
        roots.append(root)
    textfile = work / "collector" / "worker_memory.prom"
    textfile.parent.mkdir()
    qa = coverage_files(work, [w.name for root in roots for w in sorted(root.iterdir())])
    count(roots, textfile, qa)
    with TextfileCollector(textfile) as collector, RunningPrometheus(
            work / "prometheus", {"node": collector.target}, [RULES]) as prometheus:
        scraped_twice(prometheus)
        add_rule(roots[0] / "ws-0-00")
        fleet = count(roots, textfile, qa)
        scraped_twice(prometheus)
        yield Stack(prometheus, fleet, textfile)


def test_every_panel_parses_reads_the_textfile_and_shows_data(stack):
    found = []
    for panel in panels():
        for target in panel["targets"]:
            where = f"{panel['title']} / {target['refId']}"
            if unknown := metric_names(target["expr"]) - stack.exported:
                found.append(f"{where}: names metrics the textfile does not hold: {sorted(unknown)}")
            result = stack.prometheus.query(target["expr"])
            if not any(math.isfinite(float(sample["value"][1])) for sample in result):
                found.append(f"{where}: no data: {target['expr']}")
    assert found == []


def test_the_fleet_stat_is_the_commands_own_count(stack):
    (fleet,) = [p for p in panels() if p["title"] == FLEET_STAT]
    shown = {t["legendFormat"]: float(stack.prometheus.query(t["expr"])[0]["value"][1]) for t in fleet["targets"]}
    totals = stack.fleet.totals
    assert shown["rules with ids"] == totals["rules_with_ids"] and shown["Pending"] == totals["pending"]
    assert [shown[t["legendFormat"]] for t in fleet["targets"]] == [
        totals[t["expr"].removeprefix("sum(worker_memory_").removesuffix(")")] for t in fleet["targets"]]


def test_the_per_root_table_is_the_commands_own_table(stack):
    """Grafana names a table query's column `Value #<refId>`; the organize step renames it to the heading
    `memory stats` prints, so each cell is found by the CLI's own column."""
    (table,) = [p for p in panels() if p["type"] == "table"]
    (organize,) = [t["options"] for t in table["transformations"] if t["id"] == "organize"]
    key_of = {heading: key for key, heading in HEADINGS.items()} | {LARGEST: "largest_rules_file"}
    shown: dict[str, dict[str, float]] = {}
    for target in table["targets"]:
        key = key_of[organize["renameByName"][f"Value #{target['refId']}"]]
        for sample in stack.prometheus.query(target["expr"]):
            shown.setdefault(sample["metric"]["root"], {})[key] = float(sample["value"][1])
    assert sorted(organize["renameByName"].values()) == sorted(key_of)  # every column of S25's table, once
    assert shown == {r.root: {**r.totals, "largest_rules_file": r.largest_rules_file} for r in stack.fleet.roots}
    # the largest rules file turns orange at the cap and red over it: the cap the textfile exports
    (override,) = [o for o in table["fieldConfig"]["overrides"] if o["matcher"]["options"] == LARGEST]
    (steps,) = [p["value"]["steps"] for p in override["properties"] if p["id"] == "thresholds"]
    (cap,) = stack.prometheus.query("worker_memory_rule_cap")
    assert [s["value"] for s in steps[1:]] == [float(cap["value"][1]), float(cap["value"][1]) + 1]


def test_the_stop_qa_panels_show_the_commands_own_coverage(stack):
    qa = stack.fleet.qa
    assert qa.runs == 3 * sum(qa.modes.values())
    (share,) = [p for p in panels() if p["title"] == "Stop-QA coverage (S26)"]
    shown = {t["legendFormat"]: float(stack.prometheus.query(t["expr"])[0]["value"][1]) for t in share["targets"]}
    workspaces = sum(qa.modes.values())
    assert shown == {"workspaces with a mode set": (workspaces - qa.modes[Mode.OFF]) / workspaces,
                     "runs with a reviewer verdict": qa.reviewed / qa.runs,
                     "runs with a person's disposition": qa.disposed / qa.runs}
    (modes,) = [p for p in panels() if p["title"] == "Workspaces per Stop-QA mode"]
    (target,) = modes["targets"]
    assert {s["metric"]["mode"]: float(s["value"][1]) for s in stack.prometheus.query(target["expr"])} == {
        mode.value: n for mode, n in qa.modes.items()}


def test_the_churn_panel_shows_the_rule_added_between_two_runs(stack):
    (churn,) = [p for p in panels() if p["title"] == "Rule churn per week"]
    shown = {t["legendFormat"]: float(stack.prometheus.query(t["expr"])[0]["value"][1]) for t in churn["targets"]}
    assert shown["added"] > 0 and shown["merged"] == shown["retired"] == 0


def test_the_alert_rules_evaluate_and_the_rules_file_over_the_cap_is_caught(stack):
    rules = [r for g in stack.prometheus.api("rules")["groups"] for r in g["rules"]]
    assert [(r["name"], r["health"]) for r in rules] == [("WorkerMemoryStatsStale", "ok"),
                                                         ("WorkerMemoryRulesOverCap", "ok")]
    for rule in rules:
        assert metric_names(rule["query"]) <= stack.exported, rule["name"]
    states = {r["name"]: r["state"] for r in rules}
    assert states == {"WorkerMemoryStatsStale": "inactive", "WorkerMemoryRulesOverCap": "pending"}  # 61 > 60
    over = stack.prometheus.query("worker_memory_binding_rules > scalar(max(worker_memory_rule_cap))")
    assert {float(s["value"][1]) for s in over} == {61.0}


def test_promtool_accepts_the_textfile_prometheus_scraped_and_the_alert_rules(stack):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: `make test` installs Prometheus (scripts/setup.sh --test-tools)")
    metrics = subprocess.run([promtool, "check", "metrics"], input=stack.textfile.read_text(), capture_output=True,
                             text=True, timeout=60)
    assert metrics.returncode == 0, metrics.stdout + metrics.stderr
    rules = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert rules.returncode == 0 and "SUCCESS: 2 rules found" in rules.stdout, rules.stdout + rules.stderr


def test_the_dashboard_renders_from_real_data_as_png(stack, tmp_path):
    rendered = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "render_dashboard.py"), str(BOARD), "--prometheus",
         stack.prometheus.url, "--out", str(tmp_path), "--step", "1",
         "--minutes", f"{(time.time() - stack.prometheus.started) / 60 + 0.1:.2f}", "--require-data"],
        capture_output=True, text=True, timeout=300)
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    assert rendered.stdout.count(" series\n") == len(panels())
    png = (tmp_path / "memory.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 30_000
    # the per-root table is drawn as Grafana shows it: S25's headings, a row per root, the cap's colour
    texts = re.findall(r'<text [^>]*fill="([^"]+)"[^>]*>([^<]*)</text>', (tmp_path / "memory.svg").read_text())
    shown = [text for _, text in texts]
    assert all(heading in shown for heading in [*HEADINGS.values(), LARGEST])
    assert sorted(text[-6:] for text in shown if text.endswith(("host-A", "host-B", "host-C"))) == sorted(
        Path(root.root).name for root in stack.fleet.roots), "a row per root, its path cut to the column"
    over = [root.largest_rules_file for root in stack.fleet.roots if root.largest_rules_file > 60]
    assert over and all(("#f2495c", f"{n}") in texts for n in over), "red over the cap"
