"""Every citation in the project resolves inside the repository (issue #53 item 1).

The code cites its design as `DESIGN §n` (section n of docs/design.md, a heading `## n.`), the background
documents by number (seeds `000`, `001`, `004`), their sections (`001 §10 item 7`), table (`Table 1`) and
evidence rows (`S25`, `row S16`, `E11`, `E5–E9`), and files under `docs/`. Each of those must resolve here:
a design section the design has, an id the glossary (docs/glossary.md) defines, a file the repository holds
(and, for `docs/x.md §n` or `docs/x.md:a-b`, a place that file has or names). A citation of
anything outside the repository (`../shared/…`, a `DESIGN.md` that does not exist) fails.

A bare `§n` belongs to the nearest document named before it in the same citation (`001 S25, §10 item 7` is
001's section 10; `DESIGN §9, §11` are the design's), and to the design when none is named.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"
GLOSSARY = ROOT / "docs" / "glossary.md"
THIS = Path(__file__).resolve()

CODE_DIRS = ("core", "serve", "replay", "demo", "scripts", "tests")
TEXT_GLOBS = ("configs/**/*.toml", "*.md", "docs/**/*.md", "systemd/*", "dashboards/*.json", "dashboards/*.yml")
SEEDS_ON_RECORD = ("000", "001", "004")
# Files a workspace holds for the runtime (test fixtures name them): not documents of this project.
RUNTIME_FILES = frozenset({"CLAUDE.md", "MEMORY.md"})

# What may name the document a `§` belongs to, nearest first. A seed number is `00n` standing alone:
# not part of a larger number (`1 000 000`, `1,000`, `0.005`), of an id (`rec-0007`, `action-001`) or a time.
MARKER = re.compile(
    r"(?P<design>\bDESIGN\b(?:\.md)?)"
    r"|(?P<seed>(?<![\w.,:/-])(?<!\d )00\d(?![\w])(?![.,:/-]\d)(?! \d))"
    r"|(?P<doc>(?<![\w/.-])docs/[\w.-]+(?:/[\w.-]+)*)"
    r"|(?P<programme>\btraining programme v1\b)"
    r"|(?P<external>\bRFC ?\d+\b)"
)
SECTION = re.compile(r"§\s?(?P<num>\d+(?:\.\d+)?)(?P<items>\s+items?\s+\d+(?:\s*(?:,|and)\s*\d+)*)?")
ROW = re.compile(r"(?<![\w.-])(?P<kind>[SE])(?P<num>\d+(?:\.\d+)?)(?:\s*[–-]\s*(?P=kind)(?P<end>\d+))?(?![\w])")
TABLE = re.compile(r"\bTable (\d+)\b")
LINES = re.compile(r":(?P<first>\d+)(?:-(?P<last>\d+))?")
UPPER_MD = re.compile(r"(?<![\w/.-])([A-Z][A-Z0-9_-]*\.md)\b")
LINK = re.compile(r"\]\((?P<target>[^)\s#]*\.md)?#(?P<anchor>[^)\s]+)\)")
NOQA = re.compile(r"#\s*(?:noqa|type:\s*ignore)\b[^\n]*")
# Between a marker and the `§` it owns: no bracket, no clause break, and not far.
GAP = re.compile(r"[^()\[\];\n]{0,60}")


@dataclass(frozen=True)
class Citation:
    kind: str  # design | seed | seed-section | row | table | file | locator | outside
    key: str
    where: str


def flat(text: str) -> str:
    """The text with line breaks (and a comment's `#` continuing on the next line) as single spaces, so a
    citation wrapped over two lines reads as one."""
    text = NOQA.sub("", text)
    return re.sub(r"[ \t]*\n[ \t]*(?:#+[ \t]+(?!\d+\.))?", " ", text)


def citations(text: str, where: str) -> Iterator[Citation]:
    text = flat(text)
    markers = list(MARKER.finditer(text))
    for m in markers:
        if m.lastgroup == "seed":
            yield Citation("seed", m.group(), where)
        elif m.lastgroup == "doc":
            path = m.group().rstrip(".")
            yield Citation("file", path, where)
            lines = LINES.match(text, m.end())
            if lines:
                yield Citation("locator", f"{path}:{lines.group().lstrip(':')}", where)
        elif m.lastgroup == "design" and m.group().endswith(".md"):
            yield Citation("file", m.group(), where)
    for s in SECTION.finditer(text):
        owner = None
        for m in reversed(markers):
            if m.end() <= s.start():
                if GAP.fullmatch(text, m.end(), s.start()):
                    owner = m
                break
        num = s.group("num")
        if owner is None or owner.lastgroup == "design":
            yield Citation("design", num, where)
        elif owner.lastgroup == "seed":
            items = re.findall(r"\d+", s.group("items") or "")
            keys = [f"{owner.group()} §{num} item {i}" for i in items] or [f"{owner.group()} §{num}"]
            yield from (Citation("seed-section", k, where) for k in keys)
        elif owner.lastgroup in ("doc", "programme"):
            path = "docs/training-program-v1.md" if owner.lastgroup == "programme" else owner.group()
            yield Citation("locator", f"{path} §{num}", where)
        # `external` (an RFC's section) is not ours to check.
    for r in ROW.finditer(text):
        if r.group("end"):
            first = int(r.group("num"))
            yield from (Citation("row", f"{r.group('kind')}{n}", where) for n in range(first, int(r.group("end")) + 1))
        else:
            yield Citation("row", r.group(), where)
    for t in TABLE.finditer(text):
        yield Citation("table", t.group(), where)
    for u in UPPER_MD.finditer(text):
        if u.group(1) not in RUNTIME_FILES:
            yield Citation("file", u.group(1), where)
    if "../shared" in text:
        yield Citation("outside", "../shared", where)


def design_sections(design: str) -> set[str]:
    return set(re.findall(r"^## (\d+)\.", design, re.M)) | set(re.findall(r"^### (\d+\.\d+)", design, re.M))


def glossary_terms(glossary: str) -> set[str]:
    return {" ".join(t.split()) for t in re.findall(r"^- \*\*([^*]+)\*\*", glossary, re.M)}


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", markdown, re.M)}


def problem(c: Citation, sections: set[str], terms: set[str], root: Path) -> str | None:
    if c.kind == "design":
        return None if c.key in sections else f"DESIGN §{c.key}: docs/design.md has no section `## {c.key}.`"
    if c.kind in ("seed", "seed-section", "row", "table"):
        if c.kind == "seed" and c.key not in SEEDS_ON_RECORD:
            return f"seed {c.key}: no such background document (known: {', '.join(SEEDS_ON_RECORD)})"
        return None if c.key in terms else f"{c.key}: not defined in docs/glossary.md"
    if c.kind == "outside":
        return f"{c.key}: points outside the repository (the design is docs/design.md)"
    if c.kind == "file":
        return None if (root / c.key).exists() else f"{c.key}: no such file in the repository"
    if c.kind == "locator":
        path, _, place = c.key.partition(" §") if " §" in c.key else c.key.partition(":")
        target = root / path
        if not target.is_file():
            return None  # reported as a missing file
        text = target.read_text(encoding="utf-8")
        if " §" in c.key:
            if re.search(rf"^## {re.escape(place)}\.", text, re.M) or f"§{place}" in text:
                return None
            return f"{c.key}: {path} has no section `## {place}.` and does not name §{place}"
        last = int(place.split("-")[-1])
        if len(text.splitlines()) >= last or place in text:
            return None
        return f"{c.key}: {path} has no line {last} and does not name {place}"
    raise AssertionError(c.kind)


def link_problems(text: str, where: str, source: Path, root: Path) -> Iterator[str]:
    """Markdown links with an anchor (`design.md#4-arms-paired-statistics-gates`) name a heading there."""
    for link in LINK.finditer(text):
        target = (source.parent / link.group("target")) if link.group("target") else source
        if (target.is_file() and target.resolve().is_relative_to(root)
                and link.group("anchor") not in anchors(target.read_text(encoding="utf-8"))):
            yield f"{where}: link #{link.group('anchor')} names no heading of {target.relative_to(root)}"


def problems(text: str, where: str, sections: set[str], terms: set[str], root: Path = ROOT) -> list[str]:
    out = []
    for c in citations(text, where):
        p = problem(c, sections, terms, root)
        if p:
            out.append(f"{where}: {p}")
    return out


def cited_files(root: Path = ROOT) -> list[Path]:
    files = {p for d in CODE_DIRS for p in (root / d).rglob("*.py") if "data" not in p.relative_to(root).parts}
    files |= {p for g in TEXT_GLOBS for p in root.glob(g) if p.is_file()}
    files.discard(THIS)
    return sorted(files)


@pytest.fixture(scope="module")
def documented() -> tuple[set[str], set[str]]:
    return design_sections(DESIGN.read_text(encoding="utf-8")), glossary_terms(GLOSSARY.read_text(encoding="utf-8"))


def test_the_design_has_every_section_in_order() -> None:
    numbers = re.findall(r"^## (\d+)\.", DESIGN.read_text(encoding="utf-8"), re.M)
    assert numbers == [str(n) for n in range(1, len(numbers) + 1)] and len(numbers) >= 13


def test_every_background_document_is_named_in_the_glossary(documented: tuple[set[str], set[str]]) -> None:
    assert set(SEEDS_ON_RECORD) <= documented[1]


def test_every_citation_resolves(documented: tuple[set[str], set[str]]) -> None:
    sections, terms = documented
    found: list[str] = []
    seen = 0
    for path in cited_files():
        where = str(path.relative_to(ROOT))
        text = path.read_text(encoding="utf-8", errors="replace")
        seen += sum(1 for _ in citations(text, where))
        found += problems(text, where, sections, terms)
        if path.suffix == ".md":
            found += link_problems(text, where, path, ROOT)
    assert seen > 300, f"only {seen} citations found: is the scan still reading the code?"
    assert not found, "citations that resolve nowhere in the repository:\n" + "\n".join(found)


def test_the_gate_policies_cite_a_file_that_is_here() -> None:
    for policy in sorted((ROOT / "configs" / "gates").glob("*.toml")):
        for c in citations(policy.read_text(encoding="utf-8"), policy.name):
            if c.kind == "file":
                assert (ROOT / c.key).exists(), (policy.name, c.key)


# The scanner itself, on synthetic text.

SECTIONS = {"3", "5", "9", "11"}
TERMS = {"000", "001", "004", "S25", "S16", "E5", "E6", "E7", "E11", "001 §10 item 1", "001 §10 item 7",
         "001 §4.3", "Table 1"}


def keys(text: str) -> list[tuple[str, str]]:
    return [(c.kind, c.key) for c in citations(text, "x")]


@pytest.mark.parametrize(("text", "expected"), [
    ("(001 S25, §10 item 7)", [("seed", "001"), ("seed-section", "001 §10 item 7"), ("row", "S25")]),
    ("(DESIGN §9, §11)", [("design", "9"), ("design", "11")]),
    ("(DESIGN §12; 001 §4.3 and E11)", [("seed", "001"), ("design", "12"), ("seed-section", "001 §4.3"),
                                         ("row", "E11")]),
    ("(001 §10 items 1 and 7)", [("seed", "001"), ("seed-section", "001 §10 item 1"),
                                 ("seed-section", "001 §10 item 7")]),
    ("    # wording (DESIGN\n    # §8 is silent)", [("design", "8")]),
    ("Beyond §8's example", [("design", "8")]),
    ("rows E5–E9, E13; Table 1", [("row", "E5"), ("row", "E6"), ("row", "E7"), ("row", "E8"), ("row", "E9"),
                                  ("row", "E13"), ("table", "Table 1")]),
    ("RFC 8259 §8.1", []),
    ("10 000 keys, 1,000 workspaces, 0.005, rec-0007, known_failure-100, action-001", []),
    ("import x  # noqa: E402", []),
    ('source = "001 §6; row S16 (docs/training-program-v1.md:223-233)"',
     [("seed", "001"), ("file", "docs/training-program-v1.md"), ("locator", "docs/training-program-v1.md:223-233"),
      ("seed-section", "001 §6"), ("row", "S16")]),
    ("(training programme v1 §7, S17)", [("locator", "docs/training-program-v1.md §7"), ("row", "S17")]),
    ("(docs/production.md §6)", [("file", "docs/production.md"), ("locator", "docs/production.md §6")]),
])
def test_what_the_scanner_reads(text: str, expected: list[tuple[str, str]]) -> None:
    assert keys(text) == expected


def test_a_documented_citation_passes() -> None:
    text = "(DESIGN §9, §11; 001 S25, §10 items 1 and 7; 001 §4.3, E11, rows E5–E7; 001's Table 1; 000; 004)"
    assert problems(text, "x", SECTIONS, TERMS) == []


@pytest.mark.parametrize(("text", "complaint"), [
    ("as DESIGN §99 says", "DESIGN §99: docs/design.md has no section"),
    ("the contract (§42)", "DESIGN §42"),
    ("(001 S99)", "S99: not defined"),
    ("(001 row E77)", "E77: not defined"),
    ("(001 §42 item 3)", "001 §42 item 3: not defined"),
    ("(001 §10 item 2)", "001 §10 item 2: not defined"),
    ("rows E5–E8", "E8: not defined"),
    ("Table 2 of 001", "Table 2: not defined"),
    ("seed 002 says", "seed 002: no such background document"),
    ("see docs/no-such-design.md", "docs/no-such-design.md: no such file"),
    ("design and contracts: ../shared/DESIGN.md", "../shared: points outside"),
    ("where DESIGN.md is silent", "DESIGN.md: no such file"),
    ("(docs/production.md §99)", "docs/production.md §99: docs/production.md has no section"),
    ("docs/production.md:99999-100000", "has no line 100000"),
])
def test_an_undocumented_citation_fails(text: str, complaint: str) -> None:
    found = problems(text, "x", SECTIONS, TERMS)
    assert any(complaint in p for p in found), found


def test_a_link_to_a_heading_that_is_not_there_fails(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Title\n\n## 4. Arms, paired statistics, gates\n")
    good, bad = "[x](a.md#4-arms-paired-statistics-gates)", "[x](a.md#4-arms)"
    assert list(link_problems(good, "b.md", tmp_path / "b.md", tmp_path)) == []
    assert len(list(link_problems(bad, "b.md", tmp_path / "b.md", tmp_path))) == 1
