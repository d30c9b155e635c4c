"""One corpus suite from `build_corpus_suites`, the call most corpus and curation tests make."""

from __future__ import annotations

from pathlib import Path

from replay.corpus.capture_suite import BuildReport
from replay.corpus.claude_code import ClaudeCodeDir
from replay.corpus.corpus_suite import build_corpus_suites


def build_corpus_suite(corpus: ClaudeCodeDir, out: Path, *, keys: dict[str, bytes], since: str | None = None,
                       until: str | None = None) -> BuildReport:
    """The suite of every stratified call of the corpus (in [since, until)), redacted, written into `out`."""
    return build_corpus_suites(corpus, {out: None}, keys=keys, since=since, until=until)[0]
