"""An empty memory tree for a corpus recorded without one (`worker-replay memory init`).

A run's `workspace` arm needs each decision's workspace directory under the `[memory] root`: a missing one is
refused, since injecting nothing for a mistyped path would silently look like `withheld` (files.py). A
workspace that never had memory is told apart from a mistyped path by writing its directory on purpose: the
files the contract names (`memory check` passes them), with no rule and no essential text, so `workspace`
injects nothing there and sends what `withheld` sends. A workspace that already has a directory is left as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from replay.memory.files import ESSENTIAL_FILES, LC_FILE, MemoryLoadError, workspace_dir

EMPTY_FILES = {
    LC_FILE: "# Learned corrections\n\n## Rules\n\n## Pending\n",
    **dict.fromkeys(ESSENTIAL_FILES, ""),
}
"""Each file of an empty workspace and its text: the rules file's two binding sections, no rule, and empty
essentials (an essential with no text is not injected). No corrections log: with no rule it has nothing to record,
and a log no index lists would be reported as an unlisted memory file."""


@dataclass(frozen=True)
class Scaffolded:
    """What `init_memory` did: the workspaces it wrote, and those it left as they were."""

    made: tuple[str, ...]
    kept: tuple[str, ...]


def init_memory(root: Path, workspaces: Iterable[str]) -> Scaffolded:
    """An empty memory directory under `root` for each workspace without one; `MemoryLoadError` when `root` is
    not a directory or a name is no workspace's (nothing is written then)."""
    if root.exists() and not root.is_dir():
        raise MemoryLoadError(f"{root}: not a directory, so it cannot be a memory root")
    names = sorted(set(workspaces))
    if not names:
        raise MemoryLoadError(f"{root}: no workspace to make memory for (give WORKSPACE names or a --corpus)")
    paths = {name: workspace_dir(root, name) for name in names}  # every name checked before anything is written
    made = [name for name, path in paths.items() if not path.exists()]
    for name in made:
        for relative, text in EMPTY_FILES.items():
            target = paths[name] / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    return Scaffolded(tuple(made), tuple(name for name in names if name not in made))
