"""The gateway's own verdict on a completion's tool calls, and the events it writes for them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schemas.ids import uuid7
from schemas.tooldefs import parse_tool_request
from serving.gateway.errors import GatewayError
from serving.gateway.metadata import RequestMetadata
from serving.gateway.registry import Target
from serving.gateway.served import broken_call_events
from serving.gateway.stream import ClientView, StreamAccumulator, assemble_response
from serving.gateway.toolcheck import judge_calls, offered_tools

READ = {"type": "function", "function": {
    "name": "read_file", "parameters": {"type": "object", "required": ["path"],
                                        "properties": {"path": {"type": "string"}}}}}
LINT = {"type": "function", "function": {"name": "lint"}}
TOOLS = parse_tool_request({"tools": [READ, LINT]})


def _call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_sound_calls_and_plain_replies_are_not_broken() -> None:
    assert judge_calls(TOOLS, "", [_call("a", "read_file", '{"path": "x"}'),
                                   _call("b", "lint", "")], "cmpl-1") == []
    assert judge_calls(TOOLS, "The tests pass.", [], "cmpl-1") == []
    assert judge_calls(None, "<tool>oops", [], "cmpl-1") == []
    none = parse_tool_request({"tools": [READ], "tool_choice": "none"})
    assert judge_calls(none, "<tool>oops", [], "cmpl-1") == []


def test_each_broken_tool_call_is_judged_with_its_kind_and_an_id_from_the_completion() -> None:
    calls = [_call("a", "delete", "{}"), _call("b", "read_file", '{"path": 3}'),
             _call("c", "read_file", '{"path": '), _call("d", "lint", "{}")]
    verdicts = judge_calls(TOOLS, "", calls, "chatcmpl-9")
    assert [(v.call_id, v.tool_call_id, v.tool, v.error_kind) for v in verdicts] == [
        ("chatcmpl-9-t0", "a", "delete", "unknown_tool"),
        ("chatcmpl-9-t1", "b", "read_file", "bad_arguments"),
        ("chatcmpl-9-t2", "c", "read_file", "malformed_call")]
    assert "not of type" in verdicts[1].reason


@pytest.mark.parametrize(("content", "reasons"), [
    ('<tool>read_file {"path": x}</tool>', ["not valid JSON"]),
    ('<tool>read_file {"path": "x"}<tool>lint {}</tool>', ["inside another call"]),
    ('<tool>lint {}</tool> then <tool>lint</tool>', ["text after a call"]),
    ('<tool_call>{"name": "lint", "arguments": 1}</tool_call>', ["must be a JSON object"]),
    ('<tool>lint {}</tool>', ["not returned as tool_calls"]),
])
def test_call_markup_left_in_the_content_is_a_malformed_call(content: str,
                                                             reasons: list[str]) -> None:
    verdicts = judge_calls(TOOLS, content, [], "cmpl-2")
    assert [v.error_kind for v in verdicts] == ["malformed_call"] * len(reasons)
    assert all(r in v.reason for r, v in zip(reasons, verdicts, strict=True))
    assert verdicts[0].call_id == "cmpl-2-m0" and verdicts[0].tool_call_id is None


def test_a_required_call_that_is_not_made_is_broken() -> None:
    named = parse_tool_request({"tools": [READ, LINT], "tool_choice": {
        "type": "function", "function": {"name": "lint"}}})
    [missing] = judge_calls(named, "Done.", [], "cmpl-3")
    assert (missing.tool, missing.error_kind) == ("lint", "malformed_call")
    [other] = judge_calls(named, "", [_call("a", "read_file", '{"path": "x"}')], "cmpl-3")
    assert other.error_kind == "unknown_tool"


def test_broken_calls_become_invalid_tool_called_events_of_the_completion() -> None:
    completion_id = f"chatcmpl-{uuid7().hex}"  # as the gateway names completions
    [verdict] = judge_calls(TOOLS, "<tool>" + "x" * 80, [], completion_id)
    meta = RequestMetadata("traj-1", "sess-1", "alice")
    [event] = broken_call_events(meta=meta, arm="candidate", target=Target("ckpt-2", "ckpt-2"),
                                 broken=[verdict], now=datetime.now(UTC), org_id="acme",
                                 completion_id=completion_id)
    assert (event.type, event.trajectory_id, event.session_id, event.user) == (
        "tool.called", "traj-1", "sess-1", "alice")
    # Stamped as ingest stamps what it stores, so the reward join reads it like any event.
    assert event.org_id == "acme" and event.event_time == event.received_at == event.occurred_at
    assert (event.checkpoint_id, event.arm) == ("ckpt-2", "candidate")
    payload = event.payload
    assert (payload.call_id, payload.valid, payload.error_kind) == (
        f"{completion_id}-m0", False, "malformed_call")
    # The call's own id: the same call reported again (by a client's span) is the same event.
    again = broken_call_events(meta=meta, arm="candidate", target=Target("ckpt-2", "ckpt-2"),
                               broken=[verdict], now=datetime.now(UTC), org_id="acme",
                               completion_id=completion_id)
    assert again[0].event_id == event.event_id


def test_tools_are_refused_where_they_cannot_be_served() -> None:
    with pytest.raises(GatewayError, match="chat/completions only"):
        offered_tools("completion", {"tools": [LINT]})
    with pytest.raises(GatewayError, match=r"tools\[0\]\.function must be"):
        offered_tools("chat", {"tools": [{"type": "function", "function": {"name": 3}}]})
    assert offered_tools("chat", {"tools": [LINT]}).tools[0].name == "lint"


def test_tool_call_deltas_assemble_into_the_reply_message() -> None:
    acc = StreamAccumulator("chat")
    for delta in ({"content": "\n"},
                  {"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                   "function": {"name": "read_file", "arguments": ""}}]},
                  {"tool_calls": [{"index": 0, "function": {"arguments": '{"path": '}}]},
                  {"tool_calls": [{"index": 0, "function": {"arguments": '"a"}'}}]},
                  {"tool_calls": [{"index": 1, "id": "c2", "type": "function",
                                   "function": {"name": "lint", "arguments": "{}"}}]}):
        acc.add({"choices": [{"index": 0, "delta": delta}]})
    acc.add({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    message = assemble_response(acc, ClientView("chat"), {}, 0)["choices"][0]["message"]
    assert message["content"] is None and acc.finish_reason == "tool_calls"
    assert message["tool_calls"] == [_call("c1", "read_file", '{"path": "a"}'),
                                     _call("c2", "lint", "{}")]
