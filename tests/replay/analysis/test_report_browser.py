"""report.html as a reader sees it in headless Chromium at 1,280 px: what the tab says, a legend that
names every series inside the plot, and a page that never scrolls sideways however wide a table is."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from core.names import NAME_MAX_CHARS
from core.records import ResultRecord, ToolCall
from replay.analysis.report import report_run
from tests.replay.analysis.test_report import chromium
from tests.support.e13 import ARMS, MIXED, Q_ONLY, e13_results, with_replicate
from tests.support.runs import seal, write_sealed

LONG_ARMS = (("only_lc_" + "retry_before_escalating_" * 6)[:NAME_MAX_CHARS], "workspace-minus-lc:retry-before-escalating")
"""Two more series; the first is as long as a name gets with no break in it: its headings and tables cannot wrap."""
UNBROKEN = "/srv/exports/" + "a" * 240
"""An argument value with no break in it (a path, a URL, base64): its drill-down cell is ~2,000 px wide."""

# Appended to a copy of the page: what the reader sees, written into the DOM for --dump-dom to carry out.
PROBE = """<script>(function(){
  var page=document.documentElement, plot=document.getElementById('correctness-plot').getBoundingClientRect();
  var boxes=[].map.call(document.querySelectorAll('#correctness-plot g.legend'),function(g){
    var r=g.getBoundingClientRect();
    return {arm:g.getAttribute('data-arm'),text:g.querySelector('text').textContent,left:r.left,right:r.right,
            top:r.top,bottom:r.bottom,inside:r.left>=plot.left&&r.right<=plot.right&&r.top>=plot.top&&r.bottom<=plot.bottom};
  });
  var out=document.createElement('output');
  out.id='probe';
  out.textContent=JSON.stringify({title:document.title,scrollWidth:page.scrollWidth,clientWidth:page.clientWidth,
    series:[].map.call(document.querySelectorAll('#correctness-plot g.point'),function(g){return g.getAttribute('data-arm');}),
    legend:boxes,tables:[].map.call(document.querySelectorAll('table'),function(t){
      return {id:t.id,scrollWidth:t.scrollWidth,clientWidth:t.clientWidth};})});
  document.body.appendChild(out);
})();</script>"""


def _with_unbroken_arguments(record: ResultRecord) -> ResultRecord:
    call = ToolCall(tool="search_invoices", arguments={"path": UNBROKEN}, key_set=["path"])
    return record.model_copy(update={"parsed": record.parsed.model_copy(update={"calls": [call]})})


def test_the_page_names_the_run_every_series_and_never_scrolls_sideways(tmp_path: Path) -> None:
    records = with_replicate(e13_results(ARMS))
    records = [_with_unbroken_arguments(r) if r.arm == Q_ONLY else r for r in records]
    records += [r.model_copy(update={"arm": arm}) for arm in LONG_ARMS for r in records if r.arm == MIXED]
    run = tmp_path / "run"  # the demo's directory name: it says nothing about the run
    run.mkdir()
    write_sealed(run, records)
    arms = [{"name": a} for a in dict.fromkeys(r.arm for r in records)]
    (run / "run.json").write_text(json.dumps({"suite": {"name": "ev1", "version": "3"}, "config": {"arms": arms}}))
    seal(run)
    md, page = report_run(run)
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")

    dom = chromium("--window-size=1280,900", "--dump-dom", probed.as_uri())
    found = re.search(r'<output id="probe">(.*?)</output>', dom.stdout, re.DOTALL)
    assert dom.returncode == 0 and found is not None, dom.stderr
    seen = json.loads(html.unescape(found.group(1)))

    title = "Replay report: ev1 v3 · base vs q-only, mixed, base-aa (+2 more)"
    assert seen["title"] == title and md.read_text(encoding="utf-8").startswith(f"# {title}\n")
    series = list(dict.fromkeys(seen["series"]))
    assert series == [*ARMS, "base-aa", *LONG_ARMS]
    legend = seen["legend"]  # one entry per series, all of it inside the plot, none over another
    assert [(e["arm"], e["text"]) for e in legend] == [(arm, arm) for arm in series]
    assert all(e["inside"] for e in legend), legend
    for i, a in enumerate(legend):
        for b in legend[i + 1:]:
            apart = a["right"] <= b["left"] or b["right"] <= a["left"] or a["bottom"] <= b["top"] or b["bottom"] <= a["top"]
            assert apart, (a, b)
    wide = {t["id"] for t in seen["tables"] if t["scrollWidth"] > t["clientWidth"]}
    assert f"cmp-base-vs-{LONG_ARMS[0]}" in wide  # wider than the page: it scrolls in its own box
    assert "drill-base-vs-q-only" not in wide  # the unbroken argument wraps in its cell
    assert seen["scrollWidth"] <= seen["clientWidth"], seen
