"""Stop-QA's check config (`configs/qa/checks.toml`, annotated) and the placeholders file it names: read once,
every problem a `QAError` naming the file and the line, before any run is read."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from core.guard import GuardRules
from core.patterns import check_pattern
from core.records import Strict
from core.regularfile import NotReadableError, read_regular_bytes
from core.tomlfile import ConfigError, load_toml
from replay.qa.checks import CheckRules, Placeholder
from replay.qa.errors import QAError

MAX_PLACEHOLDERS_BYTES = 1 << 20


class QAConfig(Strict):
    """configs/qa/checks.toml."""

    placeholders: str = Field(min_length=1)
    """The placeholders file: one RE2 pattern a line, `#` comments; relative to this file."""
    admissions: list[str] = Field(min_length=1)
    count_nouns: list[str] = Field(default_factory=list)
    count_qualifiers: list[str] = Field(default_factory=list)
    count_whole: list[str] = Field(default_factory=list)
    guard: GuardRules = Field(default_factory=GuardRules)
    """How tool results are read (`[capture.guard]` of the gateway config; the guard's defaults when absent)."""


def load_config(path: Path) -> tuple[CheckRules, GuardRules]:
    """The check rules and guard rules of a config file (and of the placeholders file it names)."""
    try:
        config = load_toml(path, QAConfig, "Stop-QA check config")
    except ConfigError as exc:
        raise QAError(str(exc)) from exc
    placeholders = read_placeholders(path.parent / config.placeholders)
    rules = CheckRules(placeholders, tuple(config.admissions), tuple(config.count_nouns),
                       tuple(config.count_qualifiers), tuple(config.count_whole))
    return rules, config.guard


def read_placeholders(path: Path) -> tuple[Placeholder, ...]:
    """One RE2 pattern a non-blank line (leading and trailing spaces are not part of it); `#` starts a comment
    line. A pattern RE2 cannot compile is refused with its line."""
    try:
        text = read_regular_bytes(path, MAX_PLACEHOLDERS_BYTES).decode("utf-8")
    except NotReadableError as exc:
        raise QAError(f"placeholders file {exc}") from exc
    except UnicodeDecodeError as exc:
        raise QAError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    patterns = []
    for number, line in enumerate(text.splitlines(), 1):
        pattern = line.strip()
        if not pattern or pattern.startswith("#"):
            continue
        try:
            patterns.append(Placeholder(check_pattern(pattern), f"{path.name}:{number}"))
        except ValueError as exc:
            raise QAError(f"{path}:{number}: {exc}") from exc
    if not patterns:
        raise QAError(f"{path}: no placeholder patterns")
    return tuple(patterns)
