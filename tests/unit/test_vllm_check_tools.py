"""The GPU check's tool-calling verdicts, on replies and events shaped as vLLM and the gateway
send them (the check itself needs a GPU; its dry run on the torch engine is
``python -m tests.gpu.vllm_check --engine``)."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas.events import CompletionServed, CompletionServedPayload, ToolCalled, ToolCalledPayload
from schemas.ids import uuid7
from tests.gpu.vllm_check_tools import BROKEN, SOUND, judge_tool_replies, read_reply

CALL = {"id": "call_1", "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "calc.py"}'}}
MALFORMED = [{"call_id": "c-m0", "tool": "unknown", "error_kind": "malformed_call",
              "reason": "not JSON", "tool_call_id": None}]


def _whole(message: dict, finish: str, verdicts: list, tokens: int) -> dict:
    return {"choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"completion_tokens": tokens}, "broken_tool_calls": verdicts}


def _stream_chunks(tokens: int) -> list[dict]:
    deltas = [{"role": "assistant", "content": ""},
              {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": "read_file", "arguments": ""}}]},
              {"tool_calls": [{"index": 0, "function": {"arguments": '{"path": '}}]},
              {"tool_calls": [{"index": 0, "function": {"arguments": '"calc.py"}'}}]}]
    chunks = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
                   "broken_tool_calls": []})
    return chunks + [{"choices": [], "usage": {"completion_tokens": tokens}}]


def _events(tokens: dict[str, int], broken: list[str]) -> list:
    now = datetime.now(UTC)
    envelope = {"session_id": "s", "user": "u", "checkpoint_id": "base", "occurred_at": now,
                "sent_at": now}
    events: list = [CompletionServed(
        event_id=uuid7(), trajectory_id=trajectory, **envelope,
        payload=CompletionServedPayload(
            completion_id="c", model="m", prompt_token_ids=[1], completion_token_ids=[2] * n,
            behaviour_logprobs=[-0.1] * n, ttft_ms=1.0, latency_ms=2.0))
        for trajectory, n in tokens.items()]
    return events + [ToolCalled(event_id=uuid7(), trajectory_id=trajectory, **envelope,
                                payload=ToolCalledPayload(call_id="c-m0", tool="unknown",
                                                          valid=False,
                                                          error_kind="malformed_call"))
                     for trajectory in broken]


def _replies(streamed_tokens: int = 9) -> list:
    text = '<tool_call>{"name": "read_file", "arguments": {"path": calc.py}}</tool_call>'
    return [
        read_reply(SOUND, False, "t0", [_whole({"content": None, "tool_calls": [CALL]},
                                               "tool_calls", [], 9)]),
        read_reply(SOUND, True, "t1", _stream_chunks(streamed_tokens)),
        read_reply(BROKEN, False, "t2", [_whole({"content": text}, "stop", MALFORMED, 9)]),
    ]


def test_whole_and_streamed_replies_read_into_the_same_calls() -> None:
    whole, streamed, broken = _replies()
    assert whole.calls == streamed.calls == [("read_file", '{"path": "calc.py"}')]
    assert (streamed.finish_reason, streamed.completion_tokens) == ("tool_calls", 9)
    assert broken.calls == [] and broken.verdicts == MALFORMED and "calc.py" in broken.content


def test_every_check_passes_on_replies_and_events_as_they_should_be() -> None:
    lines = judge_tool_replies(_replies(), _events({"t0": 9, "t1": 9, "t2": 9}, ["t2"]))
    assert [ok for ok, _ in lines] == [True] * 4
    assert "came back as content" in lines[1][1]


def test_a_missing_record_and_dropped_tokens_fail() -> None:
    lines = judge_tool_replies(_replies(streamed_tokens=11), _events(
        {"t0": 9, "t1": 9, "t2": 9}, []))
    assert [ok for ok, _ in lines] == [True, True, False, False]
    wrong = judge_tool_replies(_replies()[1:], _events({"t1": 9, "t2": 9}, ["t1", "t2"]))
    assert wrong[2][0] is False  # a sound call recorded as broken
    unjudged = read_reply(BROKEN, False, "t2", [_whole({"content": "x"}, "stop", [], 9)])
    assert judge_tool_replies([unjudged], _events({"t2": 9}, ["t2"]))[1][0] is False

