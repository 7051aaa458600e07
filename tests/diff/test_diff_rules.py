"""The diff's pure parts: breaking-change rules, ignore paths, leaf differences."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcprec.diff.paths import ANY, DESCEND, differences, join_key, parse_path, remove_paths, same
from mcprec.diff.schema_compat import (
    compare_prompts,
    compare_resources,
    compare_server,
    compare_templates,
    compare_tools,
)
from mcprec.errors import UsageError


def obj(props: dict[str, Any], required: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props, **extra}
    if required:
        schema["required"] = list(required)
    return schema


INT, STR, NUM = {"type": "integer"}, {"type": "string"}, {"type": "number"}
BASE_IN = obj({"a": INT, "b": STR}, ("a",))
BASE_OUT = obj({"result": STR, "n": INT}, ("result", "n"))


def tool(**fields: Any) -> dict[str, Any]:
    return {"name": "t", "description": "d", "inputSchema": BASE_IN, "outputSchema": BASE_OUT,
            **fields}


def kinds(changes: list[Any]) -> set[tuple[str, bool]]:
    return {(c.kind, c.breaking) for c in changes}


TOOL_CASES = [
    ("required input added", tool(inputSchema=obj({"a": INT, "b": STR, "c": INT}, ("a", "c"))),
     {("required_input_added", True)}),
    ("optional input added", tool(inputSchema=obj({"a": INT, "b": STR, "c": INT}, ("a",))),
     {("optional_input_added", False)}),
    ("input property removed", tool(inputSchema=obj({"a": INT}, ("a",))),
     {("input_property_removed", True)}),
    ("input type changed", tool(inputSchema=obj({"a": STR, "b": STR}, ("a",))),
     {("input_type_changed", True)}),
    ("input type widened", tool(inputSchema=obj({"a": NUM, "b": STR}, ("a",))),
     {("input_type_changed", False)}),
    ("input became required", tool(inputSchema=obj({"a": INT, "b": STR}, ("a", "b"))),
     {("input_became_required", True)}),
    ("input became optional", tool(inputSchema=obj({"a": INT, "b": STR})),
     {("input_became_optional", False)}),
    ("input enum value removed",
     tool(inputSchema=obj({"a": INT, "b": {"type": "string", "enum": ["x"]}}, ("a",))),
     {("input_enum_changed", True)}),
    ("input maxLength tightened",
     tool(inputSchema=obj({"a": INT, "b": {"type": "string", "maxLength": 5}}, ("a",))),
     {("input_constraint_changed", True)}),
    ("input closed to extra properties",
     tool(inputSchema=obj({"a": INT, "b": STR}, ("a",), additionalProperties=False)),
     {("input_constraint_changed", True)}),
    ("input description changed",
     tool(inputSchema=obj({"a": {"type": "integer", "description": "how many"}, "b": STR},
                          ("a",))),
     {("input_description_changed", False)}),
    ("nested input type changed via $ref",
     tool(inputSchema={**obj({"a": INT, "b": {"$ref": "#/$defs/B"}}, ("a",)),
                       "$defs": {"B": {"type": "boolean"}}}),
     {("input_type_changed", True)}),
    ("output property removed", tool(outputSchema=obj({"result": STR}, ("result",))),
     {("output_property_removed", True)}),
    ("output type changed", tool(outputSchema=obj({"result": INT, "n": INT}, ("result", "n"))),
     {("output_type_changed", True)}),
    ("output type narrowed", tool(outputSchema=obj({"result": STR, "n": {"type": "integer",
                                                                        "minimum": 0}},
                                                   ("result", "n"))),
     {("output_constraint_changed", False)}),
    ("output property added",
     tool(outputSchema=obj({"result": STR, "n": INT, "m": INT}, ("result", "n"))),
     {("output_property_added", False)}),
    ("output may be missing", tool(outputSchema=obj({"result": STR, "n": INT}, ("result",))),
     {("output_became_optional", True)}),
    ("output schema removed", {k: v for k, v in tool().items() if k != "outputSchema"},
     {("output_schema_removed", True)}),
    ("description changed", tool(description="better"), {("description_changed", False)}),
    ("title added", tool(title="T"), {("title_changed", False)}),
    ("annotations changed", tool(annotations={"readOnlyHint": True}),
     {("annotations_changed", False)}),
]


@pytest.mark.parametrize("case, after, expected", TOOL_CASES, ids=[c[0] for c in TOOL_CASES])
def test_tool_rules(case: str, after: dict[str, Any], expected: set[tuple[str, bool]]) -> None:
    """Each change to one tool is classified as breaking or compatible, and nothing else."""
    assert kinds(compare_tools({"t": tool()}, {"t": after})) == expected


def test_output_schema_added_is_compatible() -> None:
    """A tool that starts promising structured output breaks nobody."""
    before = {k: v for k, v in tool().items() if k != "outputSchema"}
    assert kinds(compare_tools({"t": before}, {"t": tool()})) == {("output_schema_added", False)}


@pytest.mark.parametrize("compare, key, a, b, expected", [
    (compare_tools, "t", {"t": tool()}, {}, {("removed", True)}),
    (compare_tools, "t", {}, {"t": tool()}, {("added", False)}),
    (compare_resources, "u", {"u": {"uri": "u", "name": "n"}}, {}, {("removed", True)}),
    (compare_resources, "u", {}, {"u": {"uri": "u", "name": "n"}}, {("added", False)}),
    (compare_resources, "u", {"u": {"uri": "u", "name": "n"}},
     {"u": {"uri": "u", "name": "n", "description": "x"}}, {("description_changed", False)}),
    (compare_templates, "x/{id}", {"x/{id}": {"uriTemplate": "x/{id}", "name": "n"}}, {},
     {("removed", True)}),
    (compare_prompts, "p", {"p": {"name": "p"}}, {}, {("removed", True)}),
], ids=["tool removed", "tool added", "resource removed", "resource added",
        "resource description", "template removed", "prompt removed"])
def test_added_and_removed(compare: Any, key: str, a: dict[str, Any], b: dict[str, Any],
                           expected: set[tuple[str, bool]]) -> None:
    """Removing a catalog item breaks clients; adding one does not."""
    assert kinds(compare(a, b)) == expected


def prompt(*args: tuple[str, bool], **fields: Any) -> dict[str, Any]:
    return {"name": "p", "arguments": [{"name": n, "required": r} for n, r in args], **fields}


@pytest.mark.parametrize("after, expected", [
    (prompt(("code", True), ("lang", True)), {("required_argument_added", True)}),
    (prompt(("code", True), ("lang", False)), {("optional_argument_added", False)}),
    (prompt(), {("argument_removed", True)}),
    (prompt(("code", False)), {("argument_became_optional", False)}),
    (prompt(("code", True), description="new"), {("description_changed", False)}),
], ids=["required argument added", "optional argument added", "argument removed",
        "argument optional", "description"])
def test_prompt_rules(after: dict[str, Any], expected: set[tuple[str, bool]]) -> None:
    """A prompt's new required argument (or a removed one) breaks callers."""
    assert kinds(compare_prompts({"p": prompt(("code", True))}, {"p": after})) == expected


SERVER: dict[str, Any] = {"protocolVersion": "2025-06-18", "serverInfo": {"name": "s", "version": "1"},
          "capabilities": {"tools": {"listChanged": True}, "logging": {}}, "instructions": "i"}


@pytest.mark.parametrize("after, expected", [
    ({**SERVER, "capabilities": {"tools": {"listChanged": True}}},
     {("capability_removed", True)}),
    ({**SERVER, "capabilities": {"tools": {"listChanged": False}, "logging": {}}},
     {("capability_removed", True)}),
    ({**SERVER, "capabilities": {**SERVER["capabilities"], "completions": {}}},
     {("capability_added", False)}),
    ({**SERVER, "serverInfo": {"name": "s", "version": "2"}}, {("server_info_changed", False)}),
    ({**SERVER, "protocolVersion": "2025-11-25"}, {("protocol_version_changed", False)}),
    ({**SERVER, "instructions": "j"}, {("instructions_changed", False)}),
], ids=["capability removed", "listChanged lost", "capability added", "version",
        "protocol version", "instructions"])
def test_server_rules(after: dict[str, Any], expected: set[tuple[str, bool]]) -> None:
    """A capability lost breaks clients; versions, instructions and new capabilities do not."""
    assert kinds(compare_server(SERVER, after)) == expected


def test_same_catalogs_have_no_changes() -> None:
    """Equal items in another key order are not a change."""
    reordered = {k: tool()[k] for k in reversed(list(tool()))}
    assert compare_tools({"t": tool()}, {"t": reordered}) == []


# --- paths ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, parsed", [
    ("$.result.content[*].text", ("result", "content", ANY, "text")),
    ("result.structuredContent.timestamp", ("result", "structuredContent", "timestamp")),
    ("$..timestamp", (DESCEND, "timestamp")),
    ("$.result._meta['io.x/key']", ("result", "_meta", "io.x/key")),
    ('$["a.b"][0]', ("a.b", 0)),
    ("$.*.x", (ANY, "x")),
])
def test_parse_path(text: str, parsed: tuple[Any, ...]) -> None:
    """JSONPath-style paths: dots, indexes, wildcards, recursive descent, quoted keys."""
    assert parse_path(text) == parsed


@pytest.mark.parametrize("text", ["", "$", "a.", "a..", "$...x", "a]", "a[x]", "a[0", "a b[0"])
def test_bad_paths(text: str) -> None:
    """Malformed paths raise UsageError (exit 2 in the CLI) with an example."""
    with pytest.raises(UsageError, match="cannot parse JSON path"):
        parse_path(text)


def test_remove_paths_into_json_strings_and_any_depth() -> None:
    """A path goes on into a string holding JSON; `..` removes at every depth."""
    value = {"r": {"t": '{"ts": 1, "v": 2}', "ts": 3, "x": [{"ts": 4}]}}
    out = remove_paths(value, (parse_path("$..ts"),))
    assert same(out, {"r": {"t": '{"v": 2}', "x": [{}]}}) is False  # a string is not JSON text
    assert differences(out, {"r": {"t": '{"v":2}', "x": [{}]}}) == []


keys = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=10,
)


@given(st.lists(keys, min_size=1, max_size=4))
def test_reported_paths_parse_back(parts: list[str]) -> None:
    """Every path the report prints can be pasted into --ignore."""
    path = "$"
    for k in parts:
        path = join_key(path, k)
    assert parse_path(path) == tuple(parts)


@given(json_values, json_values)
def test_differences_are_empty_exactly_for_equal_values(a: Any, b: Any) -> None:
    """No difference reported iff the values are the same JSON (strings without JSON in them)."""
    assert (differences(a, b) == []) == same(a, b) or _has_json_text(a) or _has_json_text(b)
    assert differences(a, a) == []


def _has_json_text(value: Any) -> bool:
    if isinstance(value, str):
        return value.lstrip()[:1] in ("{", "[")
    if isinstance(value, dict):
        return any(_has_json_text(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_json_text(v) for v in value)
    return False
