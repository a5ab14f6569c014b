"""The OTLP mapping (spans → events) and the answers built from it: pure, no server."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.events import parse_event
from schemas.ids import is_uuid7, uuid7_time_ms
from serving.ingest import otlp_mapping
from serving.ingest.config import load_ingest_config
from serving.ingest.keys import ApiKey, hash_key, pseudonymise
from serving.ingest.otlp_answer import export_response, prejudged, relabel, span_outcomes
from serving.ingest.otlp_mapping import RequestMapping, map_request
from serving.ingest.service import IngestOutcome
from serving.ingest.verdicts import Accepted, Rejected, judge_event, response_status
from tests.support.otlp_spans import RESOURCE, export, span, tool_span, unix_ns

KEY = ApiKey("k", hash_key("secret"), "org-a", frozenset({"*"}))
PSEUDONYM = partial(pseudonymise, b"0123456789abcdef")
NOW = datetime.now(UTC)
TRACE = bytes.fromhex("5b8efff798038103d269b633813fc60c")
ROOT = bytes.fromhex("eee19b7ec3c1b174")


def _map(*spans: Any, resource: dict[str, Any] = RESOURCE, org: str = "org-a",
         attribute: str | None = None, default_user: str | None = None) -> RequestMapping:
    return map_request(export(spans, resource), org, attribute, NOW, default_user)


def _events(mapping: RequestMapping) -> list[dict[str, Any]]:
    return [json.loads(event.raw) for event in mapping.events]


def _judge(mapping: RequestMapping) -> IngestOutcome:
    """What ingest makes of the mapped events (verdicts only, no log)."""
    verdicts = [judge_event(i, e.raw, KEY, NOW, PSEUDONYM) for i, e in enumerate(mapping.events)]
    accepted = [v for v in verdicts if isinstance(v, Accepted)]
    rejected = [relabel(mapping, v) for v in verdicts if isinstance(v, Rejected)]
    rejected += prejudged(mapping)
    return IngestOutcome(response_status(len(accepted), rejected),
                         [str(a.event_id) for a in accepted], [], rejected)


def _agent_run() -> list[Any]:
    end = unix_ns(NOW)
    return [
        span("chat ckpt", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                           "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30},
             trace_id=TRACE, parent=ROOT, end_ns=end - 900_000_000),
        tool_span("read_file", trace_id=TRACE, parent=ROOT, end_ns=end - 500_000_000,
                  duration_ms=12.5, values={"gen_ai.tool.call.id": "call-1"}),
        tool_span("edit_file", trace_id=TRACE, parent=ROOT, end_ns=end - 100_000_000,
                  error=True, values={"error.type": "bad_arguments"}),
        span("invoke_agent coder", {"gen_ai.operation.name": "invoke_agent"}, trace_id=TRACE,
             span_id=ROOT, end_ns=end, duration_ms=2000),
    ]


def test_tool_spans_become_tool_calls_and_the_root_ends_the_trajectory() -> None:
    mapping = _map(*_agent_run())
    read, edit, ended = _events(mapping)
    assert [read["type"], edit["type"], ended["type"]] == \
        ["tool.called", "tool.called", "trajectory.ended"]
    assert read["payload"] == {"call_id": "call-1", "tool": "read_file", "valid": True,
                               "duration_ms": 12.5}
    assert edit["payload"]["valid"] is False and edit["payload"]["error_kind"] == "bad_arguments"
    assert edit["payload"]["call_id"] == mapping.spans[2].span_id  # no call id: the span's
    assert ended["payload"] == {"outcome": "completed", "turns": 0}
    for event in (read, edit, ended):
        assert event["trajectory_id"] == TRACE.hex() and event["session_id"] == "session-1"
        assert event["user"] == "user-42" and event["checkpoint_id"] == "ckpt-7"
    assert datetime.fromisoformat(ended["occurred_at"]) == NOW  # the span's end, to the µs
    assert mapping.ignored == {"model_call": 1}
    outcome = _judge(mapping)
    assert outcome.status == 200 and len(outcome.accepted) == 3
    assert span_outcomes(mapping, outcome) == {"events": 3, "ignored_model_call": 1}


def test_no_span_makes_a_completion_whatever_it_claims() -> None:
    @settings(max_examples=200, deadline=None)
    @given(operation=st.sampled_from(["chat", "text_completion", "generate_content",
                                      "completion.served", "execute_tool", "invoke_agent", ""])
           | st.text(max_size=20),
           root=st.booleans(), extra=st.dictionaries(
               st.sampled_from(["gen_ai.response.model", "gen_ai.usage.output_tokens", "type",
                                "rewardstream.trajectory.outcome", "gen_ai.tool.name"]),
               st.text(max_size=10) | st.integers(-(2**63), 2**63 - 1)))
    def check(operation: str, root: bool, extra: dict[str, Any]) -> None:
        values = {"gen_ai.operation.name": operation, **extra}
        mapping = _map(span("s", values, trace_id=TRACE, parent=b"" if root else ROOT))
        assert {e["type"] for e in _events(mapping)} <= {"tool.called", "trajectory.ended"}

    check()


def test_failures_make_invalid_calls_with_the_platform_error_kind() -> None:
    def kind(**kwargs: Any) -> Any:
        [event] = _events(_map(tool_span("run", trace_id=TRACE, parent=ROOT, **kwargs)))
        return event["payload"]["valid"], event["payload"].get("error_kind")

    assert kind(error=True) == (False, "tool_error")
    assert kind(values={"error.type": "TimeoutError"}) == (False, "timeout")
    assert kind(error=True, values={"error.type": "unknown_tool"}) == (False, "unknown_tool")
    assert kind(events=[("exception", {"exception.type": "ValueError"})]) == (False, "tool_error")
    assert kind(events=[("exception", {"exception.type": "asyncio.TimeoutError"})]) == \
        (False, "timeout")
    assert kind(events=[("log", {"message": "fine"})]) == (True, None)


def test_roots_end_trajectories_only_when_they_are_genai() -> None:
    def types(values: dict[str, Any], **kwargs: Any) -> list[str]:
        return [e["type"] for e in _events(_map(span("s", values, trace_id=TRACE, **kwargs)))]

    agent = {"gen_ai.operation.name": "invoke_agent"}
    assert types(agent) == ["trajectory.ended"]
    # An agent calls its model many times: a model call ends nothing, root or not, in either
    # generation of the conventions.
    assert types({"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"}) == []
    assert types({"gen_ai.system": "openai"}) == []
    assert types({"gen_ai.operation.name": "execute_tool"}) == ["tool.called"]
    assert types(agent, parent=ROOT) == []  # a local child
    assert types(agent, parent=ROOT, flags=0x300) == ["trajectory.ended"]  # its parent is remote
    assert types({"http.route": "/api"}) == []  # an HTTP server's root is no trajectory
    failed = _events(_map(span("s", agent, trace_id=TRACE, error=True)))
    assert failed[0]["payload"]["outcome"] == "error"
    marked = _events(_map(span("s", {"rewardstream.trajectory.outcome": "aborted",
                                     "rewardstream.trajectory.turns": 3,
                                     "rewardstream.trajectory.task_family": "fix"},
                               trace_id=TRACE, parent=ROOT)))
    assert marked[0]["payload"] == {"outcome": "aborted", "turns": 3, "task_family": "fix"}
    ignored = _map(span("a", {"gen_ai.operation.name": "retrieval"}, trace_id=TRACE,
                        parent=ROOT), span("b", {}, trace_id=TRACE, parent=ROOT))
    assert ignored.ignored == {"operation_not_mapped": 1, "not_genai": 1}


def test_a_configured_attribute_is_the_trajectory_and_roots_do_not_end_it() -> None:
    conversation = "gen_ai.conversation.id"
    tool = tool_span("grep", trace_id=TRACE, parent=ROOT, values={conversation: "conv-9"})
    root = span("invoke_agent", {"gen_ai.operation.name": "invoke_agent"}, trace_id=TRACE)
    [event] = _events(_map(tool, root, attribute=conversation))
    assert event["trajectory_id"] == "conv-9" and event["session_id"] == "session-1"
    from_resource = _events(_map(tool_span("grep", trace_id=TRACE, parent=ROOT),
                                 resource={**RESOURCE, conversation: "conv-r"},
                                 attribute=conversation))
    assert from_resource[0]["trajectory_id"] == "conv-r"
    missing = _map(tool_span("grep", trace_id=TRACE, parent=ROOT), attribute=conversation)
    [rejection] = _judge(missing).rejected
    assert rejection.kind == "schema_violation" and rejection.field == conversation
    assert rejection.reason.startswith(f"{conversation}: Field required (the event's "
                                       "trajectory_id)")


def test_the_trajectory_attribute_is_configured_from_the_environment() -> None:
    env = {"REWARDSTREAM_INGEST_KEYS": "[]", "REWARDSTREAM_INGEST_PSEUDONYM_SECRET": "s" * 16}
    assert load_ingest_config(env).otlp_trajectory_attribute is None
    configured = load_ingest_config(
        {**env, "REWARDSTREAM_INGEST_OTLP_TRAJECTORY_ATTRIBUTE": " gen_ai.conversation.id "})
    assert configured.otlp_trajectory_attribute == "gen_ai.conversation.id"


def test_event_ids_are_uuid7_of_the_span_end_and_the_same_in_every_export() -> None:
    spans = _agent_run()
    first = _events(_map(*spans))
    again = map_request(export(spans), "org-a", None, NOW + timedelta(minutes=5))
    other_org = _events(_map(*spans, org="org-b"))
    ids = [e["event_id"] for e in first]
    assert ids == [json.loads(e.raw)["event_id"] for e in again.events]
    assert not set(ids) & {e["event_id"] for e in other_org}
    assert len(set(ids)) == 3
    for event, source in zip(first, [spans[1], spans[2], spans[3]], strict=True):
        event_id = parse_event(json.dumps(event)).event_id
        assert is_uuid7(event_id)
        assert uuid7_time_ms(event_id) == source.end_time_unix_nano // 10**6


def test_rejections_name_the_span_attribute_to_fix() -> None:
    long_name = tool_span("x" * 65, trace_id=TRACE, parent=ROOT)
    no_user = {k: v for k, v in RESOURCE.items() if k != "user.id"}
    mapping = _map(long_name)
    [rejection] = _judge(mapping).rejected
    assert rejection.field == "gen_ai.tool.name" and "(the event's payload.tool)" in \
        rejection.reason and "at most 64 characters" in rejection.reason
    [anonymous] = _judge(_map(tool_span("ls", trace_id=TRACE, parent=ROOT),
                              resource=no_user)).rejected
    assert anonymous.field == "user.id"
    backwards = tool_span("ls", trace_id=TRACE, parent=ROOT, duration_ms=-5)
    [negative] = _judge(_map(backwards)).rejected
    assert negative.field == "startTimeUnixNano"
    stale = tool_span("ls", trace_id=TRACE, parent=ROOT, end_ns=unix_ns(NOW - timedelta(days=40)))
    [old] = _judge(_map(stale)).rejected
    assert (old.kind, old.field) == ("time_out_of_window", "endTimeUnixNano")


def test_spans_with_unusable_ids_or_times_are_rejected_with_their_bytes() -> None:
    bad = [tool_span("ls", trace_id=b"\x00" * 16, parent=ROOT),
           tool_span("ls", trace_id=TRACE, parent=ROOT, span_id=b"\x01\x02"),
           tool_span("ls", trace_id=TRACE, parent=ROOT, end_ns=0)]
    mapping = _map(*bad, tool_span("ok", trace_id=TRACE, parent=ROOT))
    assert [p.field for p in mapping.problems] == ["traceId", "spanId", "endTimeUnixNano"]
    assert mapping.problems[0].original == bad[0].SerializeToString()
    outcome = _judge(mapping)
    assert outcome.status == 207 and len(outcome.accepted) == 1
    answer = export_response(mapping, outcome)
    assert answer.partial_success.rejected_spans == 3
    message = answer.partial_success.error_message
    assert message.startswith("3 of 4 spans rejected") and "traceId: must be 16 bytes" in message


def test_the_answer_warns_of_spans_that_made_no_event_and_is_empty_otherwise() -> None:
    chat = span("chat", {"gen_ai.operation.name": "chat"}, trace_id=TRACE, parent=ROOT)
    mapping = _map(chat, tool_span("ls", trace_id=TRACE, parent=ROOT))
    answer = export_response(mapping, _judge(mapping))
    assert answer.partial_success.rejected_spans == 0
    assert "1 model calls (completion.served comes only from the gateway" in \
        answer.partial_success.error_message
    only_tools = _map(tool_span("ls", trace_id=TRACE, parent=ROOT))
    assert not export_response(only_tools, _judge(only_tools)).HasField("partial_success")


def test_many_rejections_are_summarised_within_a_bounded_message() -> None:
    spans = [tool_span("x" * 100_000, trace_id=TRACE, parent=ROOT, span_id=os.urandom(8))
             for _ in range(40)]
    mapping = _map(*spans)
    answer = export_response(mapping, _judge(mapping))
    assert answer.partial_success.rejected_spans == 40
    assert len(answer.partial_success.error_message) <= 4000
    assert "; and 35 more" in answer.partial_success.error_message


def test_a_span_the_mapping_fails_on_costs_that_span_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(span: Any, attrs: Any) -> Any:
        raise KeyError("a bug")

    monkeypatch.setattr(otlp_mapping, "tool_called", broken)
    failing = tool_span("ls", trace_id=TRACE, parent=ROOT)
    mapping = _map(failing, span("agent", {"gen_ai.operation.name": "invoke_agent"},
                                 trace_id=TRACE, span_id=ROOT))
    [problem] = mapping.problems
    assert (problem.span, problem.kind, problem.original) == \
        (0, "unprocessable", failing.SerializeToString())
    assert [e["type"] for e in _events(mapping)] == ["trajectory.ended"]


def _chat(messages: list[dict[str, Any]] | None, **values: Any) -> Any:
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                  "gen_ai.response.id": "chatcmpl-01a23be1fc4b7616ab55b1a99e99ed70", **values}
    if messages is not None:
        attributes["gen_ai.output.messages"] = json.dumps(messages)
    return span("chat m", attributes, trace_id=TRACE, parent=ROOT)


def _call(name: str, arguments: Any, call_id: str = "call_1") -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}


READ = {"type": "function", "name": "read_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}


def test_tool_call_parts_of_model_spans_are_judged_as_the_gateway_judges_them() -> None:
    reply = [{"role": "assistant", "finish_reason": "tool_calls", "parts": [
        {"type": "text", "content": "Looking."}, _call("read_file", {"path": "a.py"}),
        _call("read_file", {"file": "a.py"}, "call_2"), _call("rm_rf", {}, "call_3"),
        _call("read_file", "{not json", "call_4")]}]
    defined = _events(_map(_chat(reply, **{"gen_ai.tool.definitions": json.dumps([READ])})))
    cid = "chatcmpl-01a23be1fc4b7616ab55b1a99e99ed70"
    assert [(e["type"], e["payload"]["call_id"], e["payload"]["valid"],
             e["payload"].get("error_kind")) for e in defined] == [
        ("tool.called", f"{cid}-t0", True, None),
        ("tool.called", f"{cid}-t1", False, "bad_arguments"),
        ("tool.called", f"{cid}-t2", False, "unknown_tool"),
        ("tool.called", f"{cid}-t3", False, "malformed_call")]
    # Without the tools' definitions only the arguments' form can be judged.
    undefined = _events(_map(_chat(reply)))
    assert [e["payload"]["valid"] for e in undefined] == [True, True, True, False]
    markup = _events(_map(_chat([{"role": "assistant", "parts": [
        {"type": "text", "content": '<tool>read_file {"path": x}</tool>'}]}],
        **{"gen_ai.tool.definitions": json.dumps([READ])})))
    assert [(e["payload"]["call_id"], e["payload"]["error_kind"]) for e in markup] == [
        (f"{cid}-m0", "malformed_call")]


def test_a_call_the_gateway_judged_and_a_span_reports_is_one_event() -> None:
    from schemas.ids import call_event_id
    from schemas.tooldefs import parse_tool_request
    from serving.gateway.toolcheck import judge_calls

    cid = "chatcmpl-01a23be1fc4b7616ab55b1a99e99ed70"
    bad = _call("read_file", {"file": "a.py"})
    [event] = _events(_map(_chat([{"role": "assistant", "parts": [bad]}],
                                 **{"gen_ai.tool.definitions": json.dumps([READ])})))
    tools = parse_tool_request({"tools": [{"type": "function", "function": {
        k: READ[k] for k in ("name", "parameters")}}]})
    [verdict] = judge_calls(tools, "", [{"id": "call_1", "function": {
        "name": "read_file", "arguments": '{"file": "a.py"}'}}], cid)
    assert event["payload"]["call_id"] == verdict.call_id
    # The gateway writes its verdict under the same id (serving.gateway.served).
    assert event["event_id"] == str(call_event_id("org-a", verdict.call_id, cid, 0))


def test_a_span_with_more_calls_than_a_completion_makes_or_hostile_json_costs_itself() -> None:
    many = _chat([{"role": "assistant", "parts": [_call("ls", {}, f"c{i}")
                                                  for i in range(129)]}])
    deep = _chat(None, **{"gen_ai.output.messages": "[" * 100_000})
    mapping = _map(many, deep, tool_span("ok", trace_id=TRACE, parent=ROOT))
    [problem] = mapping.problems
    assert (problem.span, problem.field) == (0, "gen_ai.output.messages")
    assert "129 tool calls" in problem.reason
    assert [e["payload"]["tool"] for e in _events(mapping)] == ["ok"]
    assert mapping.ignored == {"model_call": 1}  # unreadable messages: no calls


def test_model_spans_without_calls_or_content_make_nothing_and_are_counted() -> None:
    mapping = _map(_chat(None), _chat([{"role": "assistant", "parts": [
        {"type": "text", "content": "Done."}]}]), _chat([{"parts": "nonsense"}]),
        span("legacy", {"gen_ai.system": "openai"}, trace_id=TRACE, parent=ROOT))
    assert mapping.events == [] and mapping.ignored == {"model_call": 4}


def test_a_span_without_user_takes_enduser_then_the_keys_default_or_is_refused() -> None:
    no_user = {k: v for k, v in RESOURCE.items() if k != "user.id"}
    tool = tool_span("ls", trace_id=TRACE, parent=ROOT)
    assert _events(_map(tool, resource=no_user | {"enduser.id": "e-1"}))[0]["user"] == "e-1"
    defaulted = _map(tool, resource=no_user, default_user="editor-bot")
    assert _events(defaulted)[0]["user"] == "editor-bot"
    assert _judge(defaulted).status == 200
    refused = _map(tool, resource=no_user)
    [problem] = refused.problems
    assert (problem.kind, problem.field) == ("schema_violation", "user.id")
    assert "no default_user" in problem.reason and "set user.id on the resource" in \
        problem.reason
