"""The run report: numbers and structure of report.html (stdlib html.parser), report.md, plot.svg."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

from core.keyset import key_set
from core.records import Decision, EngineSettings, ResultRecord
from replay.analysis.compare import compare
from replay.analysis.gates import evaluate_gate, write_verdict
from replay.analysis.report import report_run, write_report
from replay.memory.lessons import AblationEvidence, LessonVerdict, LiftEvidence, RuleVerdict
from replay.memory.uptake import RuleClaim, Uptake
from replay.run.directory import ResultsError, RunError, read_engine_settings
from replay.stats import paired_comparison, wilson_interval
from tests.support.e13 import (
    ARMS,
    BASE,
    MIXED,
    Q_ONLY,
    TARGET_ARGUMENTS,
    TOOLS,
    e13_results,
    positive_record,
    with_replicate,
)
from tests.support.runs import seal, write_sealed

ROOT = Path(__file__).resolve().parents[3]
SERIOUS = ROOT / "configs" / "gates" / "serious-candidate.toml"
VOID = {"meta", "br", "input", "link", "img", "hr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)
    text: list[str] = field(default_factory=list)

    def all_text(self) -> str:
        return "".join(self.text) + "".join(c.all_text() for c in self.children)

    def iter(self):
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(self, tag: str, **attrs: str) -> list[Node]:
        wanted = {k.replace("_", "-"): v for k, v in attrs.items()}
        return [n for n in self.iter() if n.tag == tag and all(n.attrs.get(k) == v for k, v in wanted.items())]

    def by_id(self, element_id: str) -> Node:
        (node,) = [n for n in self.iter() if n.attrs.get("id") == element_id]
        return node


class TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].text.append(data)


def parse(path: Path) -> Node:
    builder = TreeBuilder()
    builder.feed(path.read_text(encoding="utf-8"))
    builder.close()
    return builder.root


def cell(row: Node, name: str) -> Node:
    (node,) = [td for td in row.children if td.tag == "td" and td.attrs.get("data-field") == name]
    return node


LESSONS = [
    RuleVerdict("lc:retry", "ws-a", LessonVerdict.HOLD, "leave-one-out", "lift within the margins",
                LiftEvidence(carried=6, absent=6, carried_mean=0.5, absent_mean=0.5, lift=0.0)),
    RuleVerdict("lc:flaky", "ws-a", LessonVerdict.EVICT, "ablation", "eval-gate:harmful",
                AblationEvidence("worker", paired_comparison([(True, False)] * 6))),
]
UPTAKE = [Uptake(RuleClaim("lc:flaky", repeat_rejected=True), "base", "only-flaky", already=1, moved_to=3,
                 moved_elsewhere=1, away=0, unchanged=2)]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[ResultRecord]]:
    run = tmp_path_factory.mktemp("run")
    records = e13_results(ARMS, rules={"verified_recovery-033": ["lc:disputed"]})
    write_sealed(run, records)
    info = {"suite": {"name": "ev1", "version": "1"}, "endpoint": "http://127.0.0.1:8000/v1"}
    (run / "run.json").write_text(json.dumps(info))
    seal(run)
    engine = EngineSettings(dtype="bfloat16", settings="dtype bfloat16, 1 core(s) reserved for vLLM's front end",
                            cpu_model="AMD EPYC", cpu_flags=["avx2", "avx512f", "avx512_bf16"])
    (run / "engine.json").write_text(engine.model_dump_json())
    tainted = {"lc:disputed"}
    comparisons = [compare(records, BASE, Q_ONLY, tainted=tainted), compare(records, BASE, MIXED, tainted=tainted)]
    verdict = evaluate_gate(SERIOUS, run, BASE, Q_ONLY, tainted=tainted)
    md, html_path = write_report(run, comparisons, [verdict], records, tainted=tainted, lessons=LESSONS, uptake=UPTAKE)
    assert (md, html_path) == (run / "report.md", run / "report.html")
    return run, records


def test_comparison_table_carries_the_e13_numbers(report) -> None:
    run, _ = report
    table = parse(run / "report.html").by_id("cmp-base-vs-q-only")
    assert [table.attrs[f"data-{k}"] for k in ("baseline", "candidate", "decisions")] == ["base", "q-only", "484"]
    assert table.attrs["data-comparisons-made"] == "13"
    rows = {(r.attrs["data-kind"], r.attrs.get("data-measure", r.attrs.get("data-level")), r.attrs["data-scope"]): r
            for r in table.find_all("tr") if "data-kind" in r.attrs}
    recovery = rows[("correctness", "joint", "verified_recovery")]
    assert [cell(recovery, f).attrs["data-value"] for f in ("baseline", "candidate")] == ["31", "38"]
    assert [cell(recovery, "discordant").attrs[f"data-{k}"] for k in ("wins", "losses")] == ["7", "0"]
    assert float(cell(recovery, "p").attrs["data-value"]) == 0.015625
    assert float(cell(recovery, "ci").attrs["data-low"]) > 0
    everything = rows[("correctness", "joint", "all_positive")]
    assert float(cell(everything, "points").attrs["data-value"]) == pytest.approx(100 * 3 / 264)
    assert cell(everything, "discordant").all_text() == "+14 / −11"
    exact = rows[("repeat", "exact", "known_failure")]
    assert [cell(exact, f).attrs["data-value"] for f in ("baseline", "candidate")] == ["32", "24"]
    assert [cell(exact, "discordant").attrs[f"data-{k}"] for k in ("fixes", "regressions")] == ["9", "1"]
    assert float(cell(exact, "points").attrs["data-relative-reduction"]) == pytest.approx(0.25)
    clean = rows[("correctness", "joint", "clean_trajectory_action")]
    assert cell(clean, "points").all_text() == "−5.48"


def test_tainted_rows_are_marked(report) -> None:
    run, _ = report
    table = parse(run / "report.html").by_id("cmp-base-vs-q-only")
    tainted = {r.attrs["data-scope"] for r in table.find_all("tr", data_tainted="true")}
    assert tainted == {"verified_recovery", "all_positive"}
    marked = table.find_all("tr", data_scope="verified_recovery", data_measure="joint")[0]
    assert "†" in marked.all_text() and marked.attrs["class"] == "tainted"
    drill = parse(run / "report.html").by_id("drill-base-vs-q-only")
    assert [r.attrs["data-decision"] for r in drill.find_all("tr", data_tainted="true")] == ["verified_recovery-033"]


def test_gate_verdict_table(report) -> None:
    run, _ = report
    table = parse(run / "report.html").by_id("gate-serious-candidate-q-only")
    assert table.attrs["data-passed"] == "false"
    rows = [r for r in table.find_all("tr") if "data-condition" in r.attrs]
    statuses = {r.attrs["data-condition"]: r.attrs["data-status"] for r in rows}
    assert statuses == {
        "paired-gain": "fail", "repeat-reduction": "pass", "targeted-ci": "pass", "critical-failures": "not_run",
        "clean-non-inferiority": "fail", "unsupported-completion": "not_run", "isolated-replay-completion": "not_run",
        "overhead": "not_run", "confirmation-run": "not_run",
    }


def test_inline_plot_has_a_point_per_arm_and_stratum_with_wilson_intervals(report) -> None:
    run, _ = report
    svg = parse(run / "report.html").by_id("correctness-plot")
    points = {(g.attrs["data-arm"], g.attrs["data-scope"]): g for g in svg.find_all("g", **{"class": "point"})}
    scopes = ["verified_recovery", "clean_trajectory_action", "verified_action", "all_positive", "training_sanity"]
    assert set(points) == {(arm, scope) for arm in ARMS for scope in scopes}
    recovery = points[(Q_ONLY, "verified_recovery")]
    assert (recovery.attrs["data-correct"], recovery.attrs["data-n"]) == ("38", "73")
    low, high = wilson_interval(38, 73)
    assert float(recovery.attrs["data-low"]) == pytest.approx(low, abs=1e-6)
    assert float(recovery.attrs["data-high"]) == pytest.approx(high, abs=1e-6)
    everything = points[(BASE, "all_positive")]
    assert (everything.attrs["data-correct"], everything.attrs["data-n"]) == ("138", "264")


def test_standalone_plot_svg_is_valid_xml(report) -> None:
    run, _ = report
    root = ET.parse(run / "plot.svg").getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert len(root.findall(".//{http://www.w3.org/2000/svg}circle")) >= 15


def test_drilldown_lists_every_decision_with_its_outcome(report) -> None:
    run, _ = report
    drill = parse(run / "report.html").by_id("drill-base-vs-q-only")
    assert sum(len(drill.find_all("tr", data_outcome=o)) for o in ("win", "loss", "same")) == 484
    # joint wins 7 + 3 + 4 + 5 (training sanity) and 9 repeat fixes; losses 0 + 7 + 4 + 1 and 1 regression
    assert len(drill.find_all("tr", data_outcome="win")) == 28
    assert len(drill.find_all("tr", data_outcome="loss")) == 13
    loss = drill.find_all("tr", data_decision="clean_trajectory_action-042")[0]
    assert loss.attrs["data-outcome"] == "loss"
    assert "only base: filter, filter.date, filter.date.from" in cell(loss, "keys").all_text()
    assert "ok: " in cell(loss, "baseline-answer").all_text()
    filters = [i.attrs["value"] for i in parse(run / "report.html").find_all("input", name="drill-filter")]
    assert filters == ["all", "win", "loss"]


def test_html_is_self_contained(report) -> None:
    run, _ = report
    doc = parse(run / "report.html")
    assert not doc.find_all("link") and not doc.find_all("img")
    for node in doc.iter():
        for name in ("src", "href"):
            assert name not in node.attrs, f"{node.tag} has {name}"
    scripts = doc.find_all("script")
    assert scripts and all("src" not in s.attrs for s in scripts)
    assert doc.find_all("style")
    assert "http://www.w3.org/2000/svg" in (run / "report.html").read_text()  # the only URL: the SVG namespace


def test_run_summary_from_run_json(report) -> None:
    run, _ = report
    summary = parse(run / "report.html").by_id("run-summary")
    keys = {r.attrs["data-key"]: r.all_text() for r in summary.find_all("tr")}
    assert "ev1" in keys["suite"] and keys["endpoint"] == "endpointhttp://127.0.0.1:8000/v1"
    assert "base, q-only, mixed" in keys["arms"]
    assert keys["engine settings"] == ("engine settingsdtype bfloat16, 1 core(s) reserved for vLLM's front end; "
                                       "CPU AMD EPYC (avx2, avx512f, avx512_bf16)")


@pytest.mark.parametrize("body", ['{"dtype": "float32"}', "[1]", "{", '{"dtype": "x", "settings": "y", "z": 1}'])
def test_an_engine_json_that_is_not_one_is_an_error_naming_it(tmp_path: Path, body: str) -> None:
    (tmp_path / "engine.json").write_text(body)
    with pytest.raises(RunError, match="engine.json"):
        read_engine_settings(tmp_path)


def test_markdown_report(report) -> None:
    run, _ = report
    text = (run / "report.md").read_text()
    assert "| verified_recovery, joint (73) † | 31 | 38 | +7 / −0, p = 0.0156 |" in text
    assert "| known_failure, exact repeats (160) | 32 (20%) | 24 (15%) | 9 fixes / 1 regression, p = 0.0215 |" in text
    assert "**REJECTED**" in text and "| repeat-reduction: " in text
    assert "![Joint correctness per stratum and arm](plot.svg)" in text
    assert "13 paired tests" in text


def test_the_answer_comes_first(report) -> None:
    run, _ = report
    html_text, md = (run / "report.html").read_text(), (run / "report.md").read_text()
    html_order = [html_text.index(f'<section id="{s}"') for s in ("answer", "summary", "comparisons", "gates", "drilldown")]
    assert html_order == sorted(html_order)
    md_order = [md.index(h) for h in ("## Answer", "### Gates", "### Lesson verdicts", "### Rule uptake", "## Run",
                                      "## Paired comparisons", "## Gate verdicts")]
    assert md_order == sorted(md_order)
    answer = md[md.index("## Answer"):md.index("## Run")]
    table_end = answer.index("| mixed |")
    assert answer[table_end:].splitlines()[2] == "![Joint correctness per stratum and arm](plot.svg)"
    line = ("q-only against base (serious-candidate v1): REJECT (failed: paired-gain, clean-non-inferiority; not run: "
            "critical-failures, unsupported-completion, isolated-replay-completion, overhead, confirmation-run; "
            "disputed rule(s): lc:disputed)")
    assert f"- {line}" in answer


def test_answer_section_carries_the_summary_gates_lessons_and_uptake(report) -> None:
    run, _ = report
    doc = parse(run / "report.html")
    answer = doc.by_id("answer")
    summary = answer.by_id("answer-summary")
    rows = {r.attrs["data-arm"]: r for r in summary.find_all("tr") if "data-arm" in r.attrs}
    assert list(rows) == list(ARMS)
    # 001's numbers (tests/support/e13.py): joint correct over the 264 held-out positives, tool correct, exact repeats
    assert [(cell(rows[a], "positives").attrs["data-hits"], cell(rows[a], "positives").attrs["data-n"])
            for a in ARMS] == [("138", "264"), ("141", "264"), ("139", "264")]
    assert cell(rows[Q_ONLY], "verified_recovery").all_text() == "38/73"
    assert cell(rows[Q_ONLY], "tool-correct").all_text() == "204/264"
    assert [cell(rows[a], "exact-repeats").all_text() for a in (BASE, Q_ONLY)] == ["32/160", "24/160"]
    assert cell(rows[BASE], "changed").all_text() == "—"
    assert answer.by_id("correctness-plot").tag == "svg"
    (gate,) = answer.by_id("gate-lines").find_all("li")
    assert (gate.attrs["data-candidate"], gate.attrs["data-passed"]) == (Q_ONLY, "false")
    assert "REJECT (failed: paired-gain, clean-non-inferiority;" in gate.all_text()
    lessons = [[td.all_text() for td in tr.find_all("td")] for tr in answer.by_id("lesson-verdicts").find_all("tr")[1:]]
    assert [row[:4] for row in lessons] == [["ws-a", "lc:flaky", "causal (ablation)", "evict"],
                                            ["ws-a", "lc:retry", "leave-one-out", "hold"]]
    (uptake,) = answer.by_id("rule-uptake").find_all("tr", data_rule="lc:flaky")
    assert (uptake.attrs["data-without"], uptake.attrs["data-with"]) == ("base", "only-flaky")
    assert cell(uptake, "moved-to").attrs["data-value"] == "3" and cell(uptake, "n").attrs["data-value"] == "7"
    assert cell(uptake, "uptake").all_text() == "3/6"
    md = (run / "report.md").read_text()
    assert "| lc:flaky | repeat the rejected call | base → only-flaky | 7 | 3 | 1 | 0 | 1 | 2 | 3/6 |" in md
    assert "| base | 138/264 | 31/73 |" in md


def test_report_run_compares_the_first_arm_with_the_others_and_reads_verdicts(tmp_path: Path) -> None:
    records = e13_results(ARMS)
    write_sealed(tmp_path, records)
    write_verdict(tmp_path, evaluate_gate(SERIOUS, tmp_path, BASE, MIXED))
    _, html_path = report_run(tmp_path)
    doc = parse(html_path)
    tables = doc.find_all("table", **{"class": "comparison"})
    assert {t.attrs["id"] for t in tables} == {"cmp-base-vs-q-only", "cmp-base-vs-mixed"}
    assert doc.by_id("gate-serious-candidate-mixed").attrs["data-passed"] == "false"
    assert not doc.find_all("table", id="lesson-verdicts") and not doc.find_all("table", id="rule-uptake")
    markdown = html_path.with_suffix(".md").read_text()
    assert "### Gates" in markdown and "Lesson verdicts" not in markdown and "Rule uptake" not in markdown


def test_report_run_on_an_empty_run_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "results.jsonl").write_text("")
    seal(tmp_path)
    with pytest.raises(ResultsError, match="no results to report on"):
        report_run(tmp_path)


def test_names_are_escaped_and_the_suite_adds_requests_and_target_keys(tmp_path: Path) -> None:
    arm = '<script>alert("x")</script>'
    records = [positive_record(a, "verified_action", f"d-{i}", i, joint, True) for i in range(2)
               for a, joint in ((BASE, True), (arm, i == 0))]
    decisions = [
        Decision.model_validate({
            "id": f"d-{i}", "stratum": "verified_action", "cluster": "c", "workspace": "ws-a", "session": "s",
            "captured_at": "2026-08-02T10:11:12Z",
            "request": {"messages": [{"role": "user", "content": f"find invoices <{i}>"}], "tools": []},
            "target": {"tool": TOOLS[i], "arg_keys": sorted(key_set(TARGET_ARGUMENTS))},
        })
        for i in range(2)
    ]
    _, html_path = write_report(tmp_path, [compare(records, BASE, arm)], [], records, decisions=decisions)
    text = html_path.read_text()
    assert "<script>alert" not in text and "&lt;script&gt;alert" in text
    doc = parse(html_path)
    (row,) = doc.find_all("tr", data_decision="d-1")
    assert "last user turn: find invoices <1>" in cell(row, "request").all_text()
    assert "vs target: missing filter, filter.date, filter.date.from" in cell(row, "keys").all_text()


def chromium(*args: str) -> subprocess.CompletedProcess:
    """Debian's headless Chromium, offline: no sandbox (root), no background network."""
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail("Debian's chromium is not installed: scripts/setup.sh --test-tools installs it")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--virtual-time-budget=5000"]
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([binary, *flags, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=120)


def test_report_renders_in_a_browser_with_its_numbers_and_filters(report, tmp_path: Path) -> None:
    run, _ = report
    page = (run / "report.html").as_uri()
    shot = tmp_path / "report.png"
    rendered = chromium("--window-size=1400,1800", f"--screenshot={shot}", page)
    assert rendered.returncode == 0, rendered.stderr
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000

    dom = TreeBuilder()
    dom.feed(chromium("--dump-dom", page + "#filter=win").stdout)
    table = dom.root.by_id("cmp-base-vs-q-only")
    recovery = next(r for r in table.find_all("tr") if r.attrs.get("data-scope") == "verified_recovery"
                    and r.attrs.get("data-measure") == "joint")
    assert [cell(recovery, f).all_text() for f in ("baseline", "candidate", "discordant")] == ["31", "38", "+7 / −0"]
    drill = dom.root.by_id("drill-base-vs-q-only")
    rows = [r for r in drill.find_all("tr") if "data-outcome" in r.attrs]
    wins = [r for r in rows if r.attrs["data-outcome"] == "win"]
    assert wins and all("hidden" not in r.attrs for r in wins)
    assert all("hidden" in r.attrs for r in rows if r.attrs["data-outcome"] != "win")
    assert dom.root.by_id("drill-base-vs-q-only-count").all_text() == f"showing {len(wins)} of {len(rows)}"


# Each payload, if it ever ran, would mark the document; the mark is spelled only at run time.
MARK = "PWN" + "ED"
RUN_IT = "document.documentElement.setAttribute('data-x','PWN'+'ED')"
HOSTILE = (f'x"><script>{RUN_IT}</script><x y="', f"<img src=x onerror=\"{RUN_IT}\">",
           f"'><svg onload=\"{RUN_IT}\"></svg>")


def test_hostile_values_never_run_as_script_in_the_report_or_the_plot(tmp_path: Path) -> None:
    """Arm names, strata, decision ids and run.json values come from files; rendered in a real
    browser, none of them may run: every attribute and text node that carries data is escaped."""
    base, cand = "base", HOSTILE[0]
    records = [positive_record(arm, stratum, f"{HOSTILE[2]}{s}-{i}", i, joint=(arm == cand) == (i % 2 == 0), tool=True)
               for arm in (base, cand) for s, stratum in enumerate(HOSTILE) for i in range(4)]
    run = tmp_path / "run"
    run.mkdir()
    write_sealed(run, records)
    (run / "run.json").write_text(json.dumps({HOSTILE[1]: HOSTILE[0], "suite": {"name": HOSTILE[1]}}))
    seal(run)
    md, page = write_report(run, [compare(records, base, cand)], [], records)
    for path in (page, run / "plot.svg"):
        dom = chromium("--dump-dom", path.as_uri())
        assert dom.returncode == 0 and "</svg>" in dom.stdout and HOSTILE[0] in parse_text(dom.stdout), dom.stderr
        assert MARK not in dom.stdout, path
    markdown = md.read_text(encoding="utf-8")
    assert "<script>" not in markdown and "<img" not in markdown and "<svg" not in markdown


def parse_text(markup: str) -> str:
    builder = TreeBuilder()
    builder.feed(markup)
    return builder.root.all_text() + " ".join(v for n in builder.root.iter() for v in n.attrs.values())


def _summary_of(html_path: Path) -> tuple[str, dict[str, str]]:
    """The answer table's last header and each arm's `changed` cell."""
    summary = parse(html_path).by_id("answer-summary")
    header = [th.all_text() for th in summary.find_all("th") if th.attrs == {}][:8][-1]
    rows = {r.attrs["data-arm"]: cell(r, "changed").all_text() for r in summary.find_all("tr") if "data-arm" in r.attrs}
    return header, rows


def test_the_summary_names_the_comparisons_baseline_not_the_first_arm_in_the_results(tmp_path: Path) -> None:
    """Results written mixed-first (the runner's prefix order) still count changed calls against the baseline
    the comparisons use, in the HTML and the Markdown."""
    records = e13_results((MIXED, BASE, Q_ONLY))
    write_sealed(tmp_path, records)
    comparisons = [compare(records, BASE, Q_ONLY), compare(records, BASE, MIXED)]
    _, html_path = write_report(tmp_path, comparisons, [], records)
    header, changed = _summary_of(html_path)
    assert header == "calls changed vs base"
    assert list(changed) == [BASE, MIXED, Q_ONLY] and changed[BASE] == "—"
    assert changed[MIXED] != "—" and changed[Q_ONLY] != "—"
    md = html_path.with_suffix(".md").read_text()
    assert "| calls changed vs base |" in md and "| base | 138/264 |" in md and md.index("| base |") < md.index(
        "| mixed |")


def test_a_named_baseline_is_the_reference_of_the_summary_and_the_default_comparisons(tmp_path: Path) -> None:
    records = e13_results((MIXED, BASE, Q_ONLY))
    write_sealed(tmp_path, records)
    _, html_path = report_run(tmp_path, baseline=Q_ONLY)
    tables = parse(html_path).find_all("table", **{"class": "comparison"})
    assert [t.attrs["id"] for t in tables] == ["cmp-q-only-vs-mixed", "cmp-q-only-vs-base"]
    header, changed = _summary_of(html_path)
    assert header == "calls changed vs q-only" and changed[Q_ONLY] == "—"
    with pytest.raises(ResultsError, match="no results for arm 'nope'"):
        report_run(tmp_path, baseline="nope")


def test_without_pairs_the_run_configs_first_arm_is_the_baseline(tmp_path: Path) -> None:
    records = e13_results((MIXED, BASE, Q_ONLY))
    write_sealed(tmp_path, records)
    arms = [{"name": name} for name in (BASE, Q_ONLY, MIXED)]
    (tmp_path / "run.json").write_text(json.dumps({"config": {"arms": arms}}))
    seal(tmp_path)
    _, html_path = report_run(tmp_path)
    tables = parse(html_path).find_all("table", **{"class": "comparison"})
    assert [t.attrs["id"] for t in tables] == ["cmp-base-vs-q-only", "cmp-base-vs-mixed"]
    assert _summary_of(html_path)[0] == "calls changed vs base"


def test_every_comparison_says_what_the_suite_detects_with_80_percent_power(report) -> None:
    """Beside each comparison: the minimum detectable effect over all positives at its own discordance
    (E13: q-only 25 of 264 discordant, mixed 33 of 264), computed by `power.minimum_detectable_effect`."""
    from replay.stats import minimum_detectable_effect

    run, _ = report
    doc, md = parse(run / "report.html"), (run / "report.md").read_text()
    for candidate, discordant in ((Q_ONLY, 25), (MIXED, 33)):
        mde = minimum_detectable_effect(264, discordant / 264, 0.05, 0.8)
        assert mde is not None
        note = doc.by_id(f"mde-cmp-base-vs-{candidate}")
        assert float(note.attrs["data-mde"]) == pytest.approx(mde)
        line = f"This suite detects ≥ {mde:+.2f} points with 80% power"
        assert note.all_text().startswith(line) and line in md
    assert "(all positives, joint: 264 decisions, 25 discordant; exact sign test, α = 0.05)" in md


def test_every_comparison_shows_the_noise_floor_beside_its_pairs(tmp_path: Path) -> None:
    records = with_replicate(e13_results(ARMS))
    write_sealed(tmp_path, records)
    md_path, html_path = report_run(tmp_path)
    doc = parse(html_path)
    for table_id in ("cmp-base-vs-q-only", "cmp-base-vs-mixed"):
        (row,) = [r for r in doc.by_id(table_id).find_all("tr", data_scope="all_positive")
                  if r.attrs.get("data-measure") == "joint"]
        noise = cell(row, "noise")
        assert (noise.attrs["data-value"], noise.attrs["data-n"], noise.all_text()) == ("15", "264", "15 of 264")
    assert doc.by_id("cmp-base-vs-base-aa").find_all("td", data_field="noise") == []  # the A/A table itself
    markdown = md_path.read_text()
    assert markdown.count("Noise floor: 15 of 264 decisions change with nothing changed") == 2
    assert "| A/A discordant |" in markdown
