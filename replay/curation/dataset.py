"""The files a curated set is (DESIGN §12): `train.jsonl` (what a trainer reads), `provenance.jsonl` (where
each example came from and what proved it) and `manifest.json` (what was asked, what was got, what was refused
and why, and the exact inputs). Written to a new directory in one rename, so a failed build leaves nothing.

Nothing here holds a time or a random draw: the same inputs and seed give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from core.attestation import file_sha256
from core.curated import (
    MANIFEST_JSON,
    PROVENANCE_JSONL,
    TRAIN_JSONL,
    ChatTrainingRow,
    CorpusSnapshot,
    CurationManifest,
)
from core.records import Strict
from replay.corpus.claude_code import ClaudeCodeDir
from replay.curation.classes import DecisionClass, MixClass
from replay.curation.errors import CurationError
from replay.curation.proofs import Proof


class Provenance(Strict):
    """One line of `provenance.jsonl`: the example on that line of `train.jsonl`."""

    example: int
    """Its line in train.jsonl (1-based)."""
    decision: str
    """The corpus decision whose state is the prompt."""
    workspace: str
    """The workspace's pseudonym (its own key), never its name."""
    corpus: str
    mix_class: MixClass
    decision_class: DecisionClass
    origin_model: str
    """The model that made the target (the worker's own, by the policy)."""
    proof: Proof | None = None
    request_sha256: str | None = None
    """The canonical request hash of its prompt as a suite of the same decision holds it (memory stripped,
    redacted): what `gate` compares a suite's decisions with (sets built before it lack it)."""
    captured_at: str | None = None
    """When the corpus recorded its decision (the manifest's `data_until` is the newest)."""


def snapshot(corpus: ClaudeCodeDir) -> CorpusSnapshot:
    """The corpus's session files by path and size, read with lstat (nothing is opened or followed)."""
    entries = []
    for path in sorted(corpus.root.rglob("*.jsonl")):
        info = os.lstat(path)
        if stat.S_ISREG(info.st_mode):
            entries.append(f"{path.relative_to(corpus.root)}\t{info.st_size}\n")
    return CorpusSnapshot(root=str(corpus.root), files=len(entries),
                          files_sha256=hashlib.sha256("".join(entries).encode()).hexdigest())


def _ignored(tree: Path, path: Path) -> bool:
    """Whether the git work tree `tree` ignores `path` (False where git cannot say: refused, as before)."""
    try:
        return subprocess.run(["git", "-C", str(tree), "check-ignore", "-q", "--", str(path)], capture_output=True,
                              timeout=30, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _line(model: Strict) -> str:
    return json.dumps(model.model_dump(mode="json", exclude_none=True), ensure_ascii=False, sort_keys=True) + "\n"


def check_out(out: Path, corpora: Sequence[ClaudeCodeDir]) -> None:
    """Refuse an output the set must not go to: inside a git work tree where git would track it (training data
    never enters git; a path the tree ignores, like a checkout's `runs/`, is not tracked), inside a corpus (only
    ever read), or a directory that already holds something."""
    resolved = out.resolve()
    for parent in (resolved, *resolved.parents):
        if (parent / ".git").exists() and not _ignored(parent, resolved):
            raise CurationError(f"refusing to write into {out}: it is inside the git work tree {parent}, which "
                                "does not ignore it; a training set is built from production records and never "
                                "enters git (write it elsewhere, or under a path the tree ignores)")
    for corpus in corpora:
        if corpus.holds(out):
            raise CurationError(f"refusing to write into {out}: it is inside the corpus {corpus.root}, which is "
                                "only ever read")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CurationError(f"refusing to write into {out}: it exists and is not an empty directory")


def set_lines(rows: Sequence[ChatTrainingRow], provenance: Sequence[Provenance],
              manifest: CurationManifest) -> dict[str, str]:
    """The three files' text, by name (the manifest's `train_sha256` is the one `train.jsonl`'s text hashes to):
    what is written, and what the privacy audit reads before it is."""
    train, sources = "".join(_line(r) for r in rows), "".join(_line(p) for p in provenance)
    manifest = manifest.model_copy(update={"train_sha256": hashlib.sha256(train.encode()).hexdigest(),
                                           "provenance_sha256": hashlib.sha256(sources.encode()).hexdigest()})
    return {TRAIN_JSONL: train, PROVENANCE_JSONL: sources,
            MANIFEST_JSON: json.dumps(manifest.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"}


def write_set(out: Path, rows: Sequence[ChatTrainingRow], provenance: Sequence[Provenance],
              manifest: CurationManifest) -> CurationManifest:
    """Write the three files into a new directory beside `out`, then rename it into place: a failed write (a
    full disk) leaves nothing, and is a `CurationError` naming `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for name, text in set_lines(rows, provenance, manifest).items():
            (staging / name).write_text(text, encoding="utf-8")
        manifest = manifest.model_copy(update={"train_sha256": file_sha256(staging / TRAIN_JSONL),
                                               "provenance_sha256": file_sha256(staging / PROVENANCE_JSONL)})
        if out.exists():
            out.rmdir()
        os.replace(staging, out)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, OSError):
            raise CurationError(f"cannot write the set into {out}: {exc.strerror or exc}; nothing written") from exc
        raise
    return manifest
