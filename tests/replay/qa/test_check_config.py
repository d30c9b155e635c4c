"""The shipped check config and placeholders file, and every way a config can be refused (one `QAError` naming
the file and line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.qa.check_config import load_config, read_placeholders
from replay.qa.checks import first_match, without_code
from replay.qa.errors import QAError

CONFIGS = Path(__file__).resolve().parents[3] / "configs" / "qa"
RULES, GUARD = load_config(CONFIGS / "checks.toml")


def matched(text: str) -> list[str]:
    return [p.where for p in RULES.placeholders if first_match(p.pattern, without_code(text))]


@pytest.mark.parametrize("text", [
    "Hi {{name}}", "Hi {{ customer.email }}", "Hi ${name}", "Dear {CUSTOMER_NAME}", "[TODO]", "[TODO: sign]",
    "[tbd]", "[FIXME]", "[PLACEHOLDER]", "[Insert date here]", "[your name]", "<PLACEHOLDER>", "<TODO>",
    "<YOUR_API_KEY>", "<INSERT NAME>", "Lorem ipsum dolor sit amet",
])
def test_every_documented_placeholder_is_found(text: str) -> None:
    assert len(matched(text)) == 1


@pytest.mark.parametrize("text", [
    "see the [todo list](https://example.com)", "a List<String>", "{x}", 'JSON {"a": 1}', "<b>bold</b>",
    "as cited [1]", "run `echo ${HOME}`", "```sh\necho ${HOME} {{x}}\n```", "{Customer}", "TODO: nothing",
])
def test_look_alikes_and_code_are_not_placeholders(text: str) -> None:
    assert matched(text) == []


def test_the_shipped_config_reads_and_keeps_the_guard_defaults() -> None:
    assert "could not" in RULES.admissions and "item" in RULES.count_nouns and "top" in RULES.count_qualifiers
    assert "matching" in RULES.count_whole
    assert GUARD.expect_json


def config(tmp_path: Path, body: str, patterns: str | bytes | None = "\\{\\{\\w+\\}\\}\n") -> Path:
    path = tmp_path / "checks.toml"
    path.write_text(body)
    if isinstance(patterns, bytes):
        (tmp_path / "p.txt").write_bytes(patterns)
    elif patterns is not None:
        (tmp_path / "p.txt").write_text(patterns)
    return path


@pytest.mark.parametrize(("body", "patterns", "message"), [
    ('placeholders = "p.txt"\nadmissions = ["failed"]\ntypo = 1\n', "x\n", "checks.toml:3: typo: Extra inputs"),
    ('placeholders = "p.txt"\nadmissions = []\n', "x\n", "checks.toml:2: admissions: List should have at least 1"),
    ('placeholders = "p.txt"\nadmissions = ["failed"]\n', None, "p.txt: cannot be read"),
    ('placeholders = "p.txt"\nadmissions = ["failed"]\n', b"caf\xe9\n", "p.txt: not UTF-8 text (byte 3)"),
    ('placeholders = "p.txt"\nadmissions = ["failed"]\n', "# only a comment\n\n", "p.txt: no placeholder patterns"),
    ('placeholders = "p.txt"\nadmissions = ["failed"]\n', "ok\n(?=x)\n", "p.txt:2: pattern does not compile"),
    ('placeholders = "."\nadmissions = ["failed"]\n', None, "not a regular file (a directory)"),
])
def test_a_bad_config_is_one_error_naming_where(tmp_path: Path, body: str, patterns: str | bytes | None,
                                               message: str) -> None:
    with pytest.raises(QAError) as err:
        load_config(config(tmp_path, body, patterns))
    assert message in str(err.value)


def test_patterns_keep_their_lines(tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    path.write_text("# c\n\n  \\[TODO\\]  \nlorem\n")
    assert [(p.pattern, p.where) for p in read_placeholders(path)] == [("\\[TODO\\]", "p.txt:3"), ("lorem", "p.txt:4")]
