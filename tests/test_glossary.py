"""docs/glossary.md defines the project's own words (issue 61): every key term the README and the guide use has
an entry in its first section, and every entry there names where it is held, a path the repository has. An entry
is a line `- **term**, **other term** — …`; its terms are the bold ones before the dash."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "docs" / "glossary.md"
USERS = (ROOT / "README.md", ROOT / "docs" / "guide.md")
OWN_TERMS = "## The project's own terms"

# The words a newcomer meets in README.md and docs/guide.md in this project's own sense.
KEY_TERMS = (
    "decision", "suite", "stratum", "positive", "known failure", "joint-correct", "repeat", "cluster", "arm",
    "memory condition", "run", "run directory", "seal", "gate", "gate policy", "condition", "evidence", "verdict",
    "stage", "planted", "scenario", "episode", "world", "action log", "scenario pack", "unsupported completion",
    "critical failure", "proof", "origin", "curated set", "mix", "shortfall", "held-out", "eval boundary", "near-duplicate", "rule", "lesson",
    "lesson gate", "ablation", "leave-one-out", "rule uptake", "ledger", "dispute", "tainted", "workspace",
    "pseudonym", "corpus", "session", "thread", "capture", "descriptor", "canonical form", "adapter", "route",
    "canary", "shadow", "trial", "deferred replay", "A/A arm", "noise floor", "calibration", "false-pass rate",
    "power", "Stop-QA", "reviewer", "disposition",
)
ENTRY = re.compile(r"^- (?P<terms>\*\*[^*]+\*\*(?:,? (?:\*\*[^*]+\*\*|\([^)]*\)))*) —(?P<body>.*?)(?=^- |^#|\Z)",
                   re.MULTILINE | re.DOTALL)
PATH = re.compile(r"`((?:core|serve|replay|demo)/[\w/.]*)`")


def own_entries(text: str) -> dict[str, str]:
    """Each term of the glossary's first section, with its entry's text."""
    section = text.split(OWN_TERMS, 1)[1].split("\n## ", 1)[0]
    return {term: " ".join(m["body"].split()) for m in ENTRY.finditer(section)
            for term in re.findall(r"\*\*([^*]+)\*\*", m["terms"])}


ENTRIES = own_entries(GLOSSARY.read_text(encoding="utf-8"))


def test_every_key_term_has_an_entry() -> None:
    assert sorted(term for term in KEY_TERMS if term not in ENTRIES) == []


@pytest.mark.parametrize("term", KEY_TERMS)
def test_each_key_term_is_one_the_readme_or_the_guide_uses(term: str) -> None:
    assert any(term.lower() in path.read_text(encoding="utf-8").lower() for path in USERS)


def test_every_entry_names_where_it_is_held_and_the_repository_has_it() -> None:
    assert sorted(term for term, body in ENTRIES.items() if not PATH.search(body)) == []
    missing = {term: [p for p in PATH.findall(body) if not (ROOT / p).exists()] for term, body in ENTRIES.items()}
    assert {term: paths for term, paths in missing.items() if paths} == {}


def test_the_entry_reader_takes_each_bold_term_before_the_dash_and_nothing_after_it() -> None:
    text = (f"# G\n\n{OWN_TERMS}\n\n- **a**, **b c** — one `core/x.py`, not **d**.\n"
            "  more `demo/y.py`.\n- **e** (outcome e) — two.\n\n## Next\n\n- **f** — three.\n")
    assert own_entries(text) == {"a": "one `core/x.py`, not **d**. more `demo/y.py`.",
                                 "b c": "one `core/x.py`, not **d**. more `demo/y.py`.", "e": "two."}
