"""The torch engine's tool calling without a model: prompts rendered by the model's template
with the tools or by the documented fallback, and calls read back whole and as stream deltas
that reassemble (through the gateway's accumulator) into the whole reply."""

from __future__ import annotations

import json

import pytest

from harness.policy.base import TRANSCRIPT_TEMPLATE, render_prompt
from harness.policy.tiny import build_tokenizer
from schemas.tooldefs import parse_tool_request
from serving.engine.chat import render_chat, renders_tools
from serving.engine.protocol import DEFAULT_CHAT_TEMPLATE
from serving.engine.toolstream import ARGUMENT_FRAGMENT_CHARS, ToolCallReader, tool_call_deltas
from serving.gateway.stream import StreamAccumulator
from tests.gpu.vllm_check_tools import TOOL_TEMPLATE

READ = {"type": "function", "function": {
    "name": "read_file", "parameters": {"type": "object",
                                        "properties": {"path": {"type": "string"}}}}}
HISTORY = [
    {"role": "user", "content": "Fix calc.py."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "read_file", "arguments": '{"path": "calc.py"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "def add(a, b): return a - b"},
]
@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(["def add(a, b): return a + b", "<tool>lint {}</tool>"] * 4, 300)


def test_a_template_with_a_tools_section_renders_the_tools_and_native_calls(tokenizer) -> None:
    assert renders_tools(tokenizer, TOOL_TEMPLATE)
    tools = parse_tool_request({"tools": [READ]})
    rendered = render_chat(tokenizer, TOOL_TEMPLATE, True, HISTORY, tools)
    assert rendered.syntax == "hermes"
    assert rendered.text.startswith("<|system|>\nTools: read_file\n")
    # Earlier calls reach the template with their arguments as an object, as templates expect.
    assert '<tool_call>{"name": "read_file", "arguments": {"path": "calc.py"}}' in rendered.text


def test_without_a_tools_section_the_fallback_offers_the_tool_format(tokenizer) -> None:
    assert not renders_tools(tokenizer, DEFAULT_CHAT_TEMPLATE)
    tools = parse_tool_request({"tools": [READ], "tool_choice": "required",
                                "parallel_tool_calls": False})
    history = [{"role": "system", "content": "Be brief."}, *HISTORY]
    rendered = render_chat(tokenizer, DEFAULT_CHAT_TEMPLATE, False, history, tools)
    assert rendered.syntax == "rewardstream"
    system = rendered.text.split("<|user|>")[0]
    assert '<tool>NAME {"argument": "value"}</tool>' in system
    assert "Write at most one call." in system and "You must call a tool now." in system
    assert json.dumps(READ["function"]["parameters"]) in system
    assert system.rstrip().endswith("Be brief.") and system.count("<|system|>") == 1
    assert '<|assistant|>\n<tool>read_file {"path": "calc.py"}</tool>\n' in rendered.text
    plain = render_chat(tokenizer, DEFAULT_CHAT_TEMPLATE, False, HISTORY,
                        parse_tool_request({"tools": [READ], "tool_choice": "none"}))
    assert plain.syntax is None and "<|system|>" not in plain.text


def test_the_tiny_policy_template_is_served_exactly_the_prompt_it_was_trained_on(
        tokenizer) -> None:
    assert not renders_tools(tokenizer, TRANSCRIPT_TEMPLATE)
    tools = parse_tool_request({"tools": [READ]})
    rendered = render_chat(tokenizer, TRANSCRIPT_TEMPLATE, False, HISTORY, tools)
    assert rendered.text == render_prompt(HISTORY) == (
        'Task: Fix calc.py.\nA: <tool>read_file {"path": "calc.py"}</tool>\n'
        "O: def add(a, b): return a - b\nA: ")


def _stream(text: str, pieces: int) -> tuple[list[dict], StreamAccumulator]:
    """Feed ``text`` in ``pieces`` as tokens would arrive; the deltas and their reassembly."""
    reader, deltas, size = ToolCallReader("rewardstream"), [], max(1, len(text) // pieces)
    for end in range(size, len(text) + size, size):
        deltas.append({"content": reader.content_delta(text[:end])})
    parsed = reader.finish(text)
    deltas += ([{"content": parsed.content}] if parsed.content else [])
    deltas += tool_call_deltas(parsed.tool_calls)
    acc = StreamAccumulator("chat")
    for delta in deltas:
        acc.add({"choices": [{"index": 0, "delta": delta}]})
    acc.add({"choices": [{"index": 0, "delta": {}, "finish_reason":
                          parsed.finish_reason("stop")}]})
    return deltas, acc


@pytest.mark.parametrize("pieces", [1, 7, 200])
def test_streamed_calls_reassemble_into_the_whole_reply(pieces: int) -> None:
    text = 'Looking. <tool>read_file {"path": "src/very/long/name.py"}</tool><tool>lint {}</tool>'
    whole = ToolCallReader("rewardstream").finish(text)
    assert whole.content == "Looking. " and whole.finish_reason("stop") == "tool_calls"
    deltas, acc = _stream(text, pieces)
    assert acc.text == "Looking. " and acc.finish_reason == "tool_calls"
    assert [c["function"] for c in acc.tool_calls] == [c["function"] for c in whole.tool_calls]
    assert all(c["id"].startswith("call_") and c["type"] == "function" for c in acc.tool_calls)
    assert not any("<" in d.get("content", "") for d in deltas)  # call text never leaks
    opening = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert opening[0]["function"] == {"name": "read_file", "arguments": ""} and "id" in opening[0]
    assert all(len(d["function"]["arguments"]) <= ARGUMENT_FRAGMENT_CHARS for d in opening[1:])


def test_a_call_that_does_not_parse_goes_out_as_content() -> None:
    text = '<tool>read_file {"path": calc.py}</tool>'
    deltas, acc = _stream(text, 5)
    assert acc.text == text and acc.tool_calls == [] and acc.finish_reason == "stop"
    assert deltas[-1] == {"content": text}  # held back until generation ended, then sent
    reader = ToolCallReader("rewardstream")
    assert reader.content_delta("Sure <to") == "Sure " and reader.content_delta("Sure <b>") == "<b>"
