"""What the platform itself knows names a tenant, found by value rather than by shape (DESIGN §9). Pure.

* WORKSPACE: every registered workspace name (the keys file's, the corpus's directory names), in any case,
  wherever it stands between characters that are not letters or digits: `acme-billing` in
  `/srv/acme-billing/work`, in `-srv-acme-billing-work` and in `Acme-Billing's invoices`, not in
  `acme-billings`. A workspace whose name is a common word costs that word wherever it stands: the rule
  fails closed.
* PATH: the paths the runtime wrote for a session (its working directory, home and config directory, as its
  records say: `cwd` fields, the environment block's `Primary working directory: …`), and the project
  directory name Claude Code makes of each (`/tmp/x/y` → `-tmp-x-y`), where a path ends (before `/`, a space,
  a quote…). The environment block's working directory is found in any text, known or not, so the privacy
  check finds one that was never replaced.

The pseudonym of a workspace name is taken over the registered spelling, so every spelling in text gets the
one pseudonym `provenance.jsonl` records for the workspace.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

Span = tuple[int, int]

_ENVIRONMENT = re.compile(r"(?m)^[ \t]*(?:-[ \t]*)?Primary working directory:[ \t]*(\S[^\n]{0,4095}?)[ \t]*$")
_SLUG = re.compile(r"[^A-Za-z0-9]")


def environment_paths(text: str) -> Iterator[Span]:
    """The working directory of each environment block Claude Code writes into its system reminders."""
    for m in _ENVIRONMENT.finditer(text):
        yield m.span(1)


def project_slug(path: str) -> str:
    """The directory name Claude Code keeps a working directory's sessions under (`projects/<slug>/`)."""
    return _SLUG.sub("-", path)


@dataclass(frozen=True)
class TenantNames:
    """The registered workspace names and the runtime's paths of one session, each matched as a whole."""

    workspaces: frozenset[str] = frozenset()
    paths: frozenset[str] = frozenset()
    _spelled: dict[str, str] = field(init=False, repr=False, compare=False)
    _workspace: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _path: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = sorted(self.workspaces, key=lambda n: (-len(n), n))
        object.__setattr__(self, "_spelled", {n.lower(): n for n in reversed(names)})
        object.__setattr__(self, "_workspace", re.compile(
            r"(?<![A-Za-z0-9])(?:" + "|".join(map(re.escape, names)) + r")(?![A-Za-z0-9])", re.IGNORECASE)
            if names else None)
        # a path of one character (`/`) would be every slash; Claude Code's slug of each path is one too
        literals = {p.rstrip("/") for p in self.paths if len(p.rstrip("/")) > 1}
        literals |= {project_slug(p) for p in literals}
        ordered = sorted(literals, key=lambda p: (-len(p), p))
        object.__setattr__(self, "_path", re.compile(
            r"(?<![\w.-])(?:" + "|".join(map(re.escape, ordered)) + r")(?![\w.-])") if ordered else None)

    def with_paths(self, paths: Iterable[str]) -> TenantNames:
        return TenantNames(self.workspaces, self.paths | frozenset(paths))

    def spelled(self, found: str) -> str:
        """The registered spelling of a workspace name found in text."""
        return self._spelled[found.lower()]

    def workspace_names(self, text: str) -> Iterator[Span]:
        if self._workspace is not None:
            for m in self._workspace.finditer(text):
                yield m.span()

    def runtime_paths(self, text: str) -> Iterator[Span]:
        if self._path is not None:
            for m in self._path.finditer(text):
                yield m.span()
        yield from environment_paths(text)


NO_NAMES = TenantNames()
