"""What the platform knows names a tenant, replaced wherever it stands: the registered workspace names (any case,
in paths, in Claude Code's project directory names) and the runtime's paths (the environment block's working
directory, known or not), with the pseudonym provenance records for the workspace."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.privacy.redact import PSEUDONYM, Pseudonymizer, Residual, find, request_paths, residuals
from replay.privacy.tenants import TenantNames, project_slug

KEY = b"k" * 32
NAMES = TenantNames(frozenset({"acme-billing", "ws-a"}), frozenset({"/srv/tenants/acme-billing/work/loop"}))
ENVIRONMENT = "# Environment\n - Primary working directory: /home/jroe/src\n - Is a git repository: false\n"


def kinds(text: str, names: TenantNames = NAMES) -> list[tuple[str, str]]:
    return [(f.kind, text[f.start:f.end]) for f in find(text, names=names)]


@pytest.mark.parametrize(("text", "found"), [
    ("ask acme-billing about it", [("WORKSPACE", "acme-billing")]),
    ("Acme-Billing's invoices", [("WORKSPACE", "Acme-Billing")]),
    ("/data/acme-billing/x.csv and -data-acme-billing-x", [("WORKSPACE", "acme-billing")] * 2),
    ("mcp__ws-a__lookup", [("WORKSPACE", "ws-a")]),
    ("acme-billings, xacme-billing, ws-a1", []),
])
def test_a_workspace_name_is_found_between_characters_that_are_no_letters_or_digits(text, found):
    assert kinds(text) == found


def test_every_spelling_of_a_workspace_gets_the_pseudonym_provenance_records():
    p = Pseudonymizer(KEY, names=NAMES)
    assert p.text("ACME-BILLING / acme-billing") == " / ".join([p.pseudonym("WORKSPACE", "acme-billing")] * 2)
    assert Pseudonymizer(b"o" * 32, names=NAMES).text("acme-billing") != p.text("acme-billing")  # tenant-scoped


def test_a_runtime_path_goes_whole_and_a_path_under_it_keeps_its_tail():
    p = Pseudonymizer(KEY, names=NAMES)
    path = "/srv/tenants/acme-billing/work/loop"
    text = f"cd {path}/src && ls {path}2 /tmp/claude-0/{project_slug(path)}/tasks"
    out = p.text(text)
    assert out == (f"cd {p.pseudonym('PATH', path)}/src && ls /srv/tenants/{p.pseudonym('WORKSPACE', 'acme-billing')}"
                   f"/work/loop2 /tmp/claude-0/{p.pseudonym('PATH', project_slug(path))}/tasks")
    assert find(out, names=NAMES) == []


def test_the_environment_blocks_working_directory_is_a_path_known_or_not():
    """The privacy check reads no session record: the block's own line still names the path."""
    assert kinds(ENVIRONMENT, TenantNames()) == [("PATH", "/home/jroe/src")]
    assert request_paths({"system": [{"text": "x"}], "messages": [{"content": ENVIRONMENT}]}) == {"/home/jroe/src"}
    request = {"messages": [{"role": "user", "content": "open /home/jroe/src/a.py"},
                            {"role": "user", "content": ENVIRONMENT}]}
    p = Pseudonymizer(KEY, names=TenantNames().with_paths(request_paths(request)))
    assert "/home/jroe" not in json.dumps(p.value(request)) and p.counts == {"PATH": 2}


def test_a_path_of_one_character_is_no_path():
    assert kinds("a / b", TenantNames(paths=frozenset({"/"}))) == []


def test_residuals_find_a_workspace_name_left_in_a_value_or_a_key():
    document = {"note": "for acme-billing", "acme-billing": 1, "done": "<WORKSPACE_0123abcd>"}
    assert residuals(document, names=NAMES) == [Residual("$.note", "WORKSPACE"),
                                                Residual('$["acme-billing"] (key)', "WORKSPACE")]
    assert residuals(document) == []  # without the registered names, no name is known


# --- property: a registered workspace name planted anywhere in a tool result never survives ------

FILLER = st.text(alphabet=" .,:/\n0123456789-_", max_size=12)
KEYS = ("id", "note", "items", "path", "status")
SKELETON = " ".join([*KEYS, "role user content type tool_result tool_use_id t1 text srv work mcp__ lookup 's",
                     "true false null"])
"""Every letter the result holds besides the planted names: a name that is part of it cannot be told apart."""
workspace = st.from_regex(r"[a-z][a-z0-9-]{2,14}[a-z0-9]", fullmatch=True).filter(lambda name: name not in SKELETON)


def spellings(name: str) -> st.SearchStrategy[str]:
    return st.sampled_from([name, name.upper(), name.title(), f"/srv/{name}/work", project_slug(f"/srv/{name}/work"),
                            f"mcp__{name}__lookup", f"{name}'s"])


@st.composite
def tool_results(draw: st.DrawFn) -> tuple[list[str], dict[str, Any]]:
    names = draw(st.lists(workspace, min_size=1, max_size=3, unique=True))

    def leaf() -> st.SearchStrategy[Any]:
        planted = st.sampled_from(names).flatmap(spellings)
        return st.builds(lambda a, v, b: f"{a} {v} {b}", FILLER, planted, FILLER) | FILLER | st.integers()

    body = draw(st.recursive(leaf(), lambda inner: st.lists(inner, max_size=3) |
                             st.dictionaries(st.sampled_from(KEYS), inner, max_size=3), max_leaves=10))
    text = json.dumps(body) if draw(st.booleans()) else str(body)
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                           "content": [{"type": "text", "text": text}]}]}
    return names, result


@settings(max_examples=150, deadline=None)
@given(tool_results())
def test_a_registered_workspace_name_planted_anywhere_in_a_tool_result_never_survives(planted):
    names, result = planted
    registered = TenantNames(frozenset(names))
    redacted = Pseudonymizer(KEY, names=registered).value(result)
    left = PSEUDONYM.sub("", json.dumps(redacted, ensure_ascii=False)).lower()
    assert not any(name in left for name in names)
    assert residuals(redacted, names=registered) == []
