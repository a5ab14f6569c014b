"""The shared tool-call syntaxes and the tools a request offers: strict parsing, field-named
errors, and JSON Schema checks of arguments."""

from __future__ import annotations

import pytest

from schemas.toolcalls import (
    MalformedCall,
    WrittenCall,
    format_call,
    split_calls,
    split_hermes_calls,
    write_tool_calls,
    writes_calls,
)
from schemas.tooldefs import ToolRequestError, parse_tool_request

READ = {"type": "function", "function": {
    "name": "read_file", "description": "Read a file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"], "additionalProperties": False}}}
LINT = {"type": "function", "function": {"name": "lint"}}


def test_calls_keep_their_arguments_exactly_as_written() -> None:
    text = 'Let me look.\n<tool>read_file {"path":  "a.py"}</tool> <tool>lint {}</tool>'
    split = split_calls(text)
    assert split.prose == "Let me look." and split.well_formed
    assert split.calls == (
        WrittenCall("read_file", '{"path":  "a.py"}', '<tool>read_file {"path":  "a.py"}</tool>'),
        WrittenCall("lint", "{}", "<tool>lint {}</tool>"))
    assert split.calls[0].args == {"path": "a.py"}
    assert split_calls(format_call("lint", {"path": "b"})).calls[0].arguments == '{"path": "b"}'


def test_a_reply_has_no_calls_and_any_marker_means_an_attempted_call() -> None:
    assert split_calls("  Done.  ").prose == "Done." and split_calls("Done.").calls == ()
    assert not writes_calls("a < b") and writes_calls("oops </tool>")
    [broken] = split_calls('read_file {"path": "a"}</tool>').calls
    assert isinstance(broken, MalformedCall) and "must start with <tool>" in broken.reason
    good, after = split_calls('<tool>lint {}</tool> and more').calls
    assert isinstance(good, WrittenCall) and "text after a call" in after.reason
    assert not split_calls('<tool>lint {}</tool> and more').well_formed


def test_hermes_calls_are_read_into_the_same_shape() -> None:
    text = ('<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>\n'
            '<tool_call>{"name": "lint"}</tool_call>')
    split = split_hermes_calls(text)
    assert split.well_formed and [c.name for c in split.calls] == ["read_file", "lint"]
    assert split.calls[0].args == {"path": "a.py"} and split.calls[1].arguments == "{}"
    [broken] = split_hermes_calls('<tool_call>{"name": "x", "arguments": [1]}</tool_call>').calls
    assert isinstance(broken, MalformedCall) and broken.tool == "x"
    [unclosed] = split_hermes_calls('<tool_call>{"name": "x"}').calls
    assert "without </tool_call>" in unclosed.reason


def test_tool_calls_are_written_back_as_text_for_templates_without_tools() -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "lint", "arguments": "{}"}},
             {"function": {"name": "read_file", "arguments": {"path": "a"}}}]
    assert write_tool_calls("", calls) == '<tool>lint {}</tool><tool>read_file {"path": "a"}</tool>'
    assert write_tool_calls("Done.", None) == "Done."


def test_a_request_offers_tools_with_a_choice_and_checks_calls_by_schema() -> None:
    assert parse_tool_request({"messages": []}) is None
    tools = parse_tool_request({"tools": [READ, LINT]})
    assert tools is not None and tools.choice == "auto" and tools.parallel
    assert tools.expects_calls and not tools.requires_call
    assert tools.check("read_file", '{"path": "a"}') is None
    assert tools.check("delete", "{}").kind == "unknown_tool"
    assert tools.check("read_file", '{"path": ').kind == "malformed_call"
    assert tools.check("read_file", "[1]").kind == "malformed_call"
    problem = tools.check("read_file", '{"path": 3}')
    assert problem.kind == "bad_arguments" and problem.reason == \
        'read_file: path: 3 is not of type "string"'
    named = parse_tool_request({"tools": [READ, LINT], "parallel_tool_calls": False,
                                "tool_choice": {"type": "function", "function": {"name": "lint"}}})
    assert named.requires_call and named.function == "lint" and not named.parallel
    assert named.check("read_file", '{"path": "a"}').kind == "unknown_tool"
    assert not parse_tool_request({"tools": [READ], "tool_choice": "none"}).expects_calls


@pytest.mark.parametrize(("body", "field"), [
    ({"tools": {"read_file": {}}}, "tools must be a list"),
    ({"tools": [{"type": "retrieval"}]}, "tools[0] must be"),
    ({"tools": [LINT, {"type": "function", "function": {}}]}, "tools[1].function must be"),
    ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools[0].function: tool"),
    ({"tools": [{"type": "function", "function": {"name": "x", "parameters": {"type": 3}}}]},
     "tools[0].function: parameters of x are not a valid JSON Schema"),
    ({"tools": [{"type": "function", "function": {
        "name": "x", "parameters": {"$ref": "http://127.0.0.1:9/schema.json"}}}]},
     "is not fetched"),
    ({"tools": [LINT, LINT]}, "names must be unique"),
    ({"tools": [LINT], "tool_choice": "always"}, "tool_choice must be"),
    ({"tools": [LINT], "tool_choice": {"type": "function", "function": {"name": "x"}}},
     "tool_choice names 'x'"),
    ({"tool_choice": "required"}, "needs tools"),
    ({"tools": [LINT], "parallel_tool_calls": "yes"}, "parallel_tool_calls must be"),
])
def test_malformed_tool_fields_are_refused_naming_the_field(body: dict, field: str) -> None:
    with pytest.raises(ToolRequestError) as error:
        parse_tool_request(body)
    assert field in str(error.value)


def test_a_choice_of_forms_is_explained_by_its_description() -> None:
    forms = {"type": "object", "description": "either a or b",
             "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}
    tools = parse_tool_request({"tools": [{"type": "function", "function": {
        "name": "f", "parameters": forms}}]})
    assert tools.check("f", "{}").reason == "f: either a or b"
    assert tools.check("f", '{"a": 1}') is None
