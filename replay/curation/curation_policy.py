"""A curation policy (`configs/curation/*.toml`): what a training set holds, decided before it is built.

E11's mix for the S1.1 pilot is the shipped one (`configs/curation/s1.1.toml`). The shares are of the set's
size and must sum to 100; each class is filled from its own pool only (a shortfall fails the build, or shrinks
every class alike so the mix is kept, as `shortfall` says — it never pads one class with another). Origin is
decided by the model name the record gives for the answer: the worker's own patterns, or Claude's; a name
matching neither, or no name at all, is unknown origin, refused like Claude (absence excludes, never assumes).
"""

from __future__ import annotations

import fnmatch
import hashlib
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from core.records import Strict
from core.tomlfile import MAX_TOML_BYTES, parse_toml, read_regular
from replay.curation.classes import ACTIONS, DecisionClass, MixClass, Origin


class CurationPolicy(Strict):
    name: str
    version: str = "1"
    description: str = ""
    size: int = Field(gt=0)
    """Examples asked for in all."""
    seed: int = 0
    shares: dict[MixClass, float]
    """Percent of `size` per class; they sum to 100."""
    max_per_cluster: int | None = Field(default=None, gt=0)
    """At most this many examples of one cluster (session): one long task does not fill a class."""
    max_tool_share: float | None = Field(default=None, gt=0, le=1)
    """No tool the target of more than this share of the set's calls (its examples but `negative`'s answers),
    int(share × calls), at least 1: S18 found five tools taking 84% of actions ("coverage, not volume")."""
    worker_models: list[str] = Field(min_length=1)
    """Model names (fnmatch patterns) that are the worker's own: only their answers are targets."""
    claude_models: list[str] = Field(default_factory=lambda: ["claude-*", "anthropic/*"])
    approved_shadow_sources: list[str] = Field(default_factory=list)
    """Shadow corpora (by directory name) approved for training; any other shadow leg is refused."""
    shortfall: Literal["fail", "shrink"] = "fail"
    suites_dir: str | None = None
    """The registry of frozen suites every build excludes (DESIGN §12, the eval boundary); unset: the directory
    $WORKER_REPLAY_SUITES names, else `suites`."""
    near_duplicate_ngram: int = Field(default=8, gt=0)
    """Token n-gram length of the near-duplicate rule (Tülu 3's 8)."""
    near_duplicate_threshold: float = Field(default=0.5, ge=0, le=1)
    """A candidate covering more than this share of a suite decision's n-grams is that decision's near-copy (1: no
    candidate is, the rule is off; session and request-hash exclusion still hold)."""
    clean_from: list[DecisionClass] = Field(default_factory=lambda: [DecisionClass.CLEAN])
    """Which of the worker's successful actions fill `clean`: a clean trajectory's only (E11), or also actions
    the guard verified in a session with a failure (`verified_action`) and its own recoveries (`recovery`)."""

    @field_validator("clean_from")
    @classmethod
    def _actions(cls, classes: list[DecisionClass]) -> list[DecisionClass]:
        wrong = [c.value for c in classes if c not in ACTIONS]
        if wrong:
            raise ValueError(f"clean_from takes successful actions ({', '.join(c.value for c in ACTIONS)}), "
                             f"not {', '.join(wrong)}")
        return classes

    @field_validator("shares")
    @classmethod
    def _hundred(cls, shares: dict[MixClass, float]) -> dict[MixClass, float]:
        if any(share < 0 for share in shares.values()):
            raise ValueError("a share is negative")
        total = sum(shares.values())
        if abs(total - 100) > 1e-9:
            raise ValueError(f"the shares sum to {total:g}, not 100")
        return shares

    def origin(self, model: str | None) -> Origin:
        """Whose answer a recorded model name says it was; a name that matches both is Claude's (refused)."""
        if model is None:
            return Origin.UNKNOWN
        if any(fnmatch.fnmatchcase(model, p) for p in self.claude_models):
            return Origin.CLAUDE
        if any(fnmatch.fnmatchcase(model, p) for p in self.worker_models):
            return Origin.WORKER
        return Origin.UNKNOWN

    def asked(self) -> dict[MixClass, int]:
        """Examples asked per class: the shares of `size`, rounded so they sum to `size` (largest remainder)."""
        exact = {c: self.size * s / 100 for c, s in self.shares.items()}
        counts = {c: int(v) for c, v in exact.items()}
        for c in sorted(exact, key=lambda c: (counts[c] - exact[c], list(MixClass).index(c)))[:self.size
                                                                                            - sum(counts.values())]:
            counts[c] += 1
        return counts


def load_policy(path: Path) -> tuple[CurationPolicy, str]:
    """The policy and the sha256 of its bytes (the manifest names the exact file the set was built under)."""
    data = read_regular(path, MAX_TOML_BYTES)
    return parse_toml(data, path, CurationPolicy, "curation policy"), hashlib.sha256(data).hexdigest()
