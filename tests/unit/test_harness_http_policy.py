"""The HTTP policy speaks OpenAI chat with the harness's tools and reads vLLM's token fields and
the gateway's broken-call verdicts; the agent loop does not record a call twice."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from harness.agent import run_trajectory
from harness.errors import PolicyError
from harness.instrument import TrajectoryContext
from harness.policy.http import HttpPolicy
from harness.tasks import sample_tasks
from harness.tools.builtin import TOOL_SPECS

MESSAGES = [{"role": "user", "content": "Rename cnt to count in util.py."}]
LINT_CALL = {"id": "call_1", "type": "function", "function": {"name": "lint", "arguments": "{}"}}


def _answer(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    assert request.url.path == "/v1/chat/completions"
    assert body["messages"] == MESSAGES and body["logprobs"] is True
    assert {t["function"]["name"] for t in body["tools"]} == set(TOOL_SPECS)
    assert body["tool_choice"] == "auto" and body["return_token_ids"] is True
    assert request.headers["X-Rewardstream-Trajectory-Id"] == "traj-9"
    return httpx.Response(200, headers={"X-Rewardstream-Checkpoint": "ckpt-3"}, json={
        "id": "chatcmpl-1", "model": "policy@ckpt-3", "prompt_token_ids": [5, 6],
        "broken_tool_calls": [],
        "choices": [{"message": {"role": "assistant", "content": None,
                                 "tool_calls": [LINT_CALL]},
                     "finish_reason": "tool_calls", "token_ids": [7, 2],
                     "logprobs": {"content": [{"logprob": -0.25}, {"logprob": -0.5}]}}]})


def test_chat_completions_carry_checkpoint_calls_tokens_and_behaviour_logprobs() -> None:
    policy = HttpPolicy("http://gateway", "policy", transport=httpx.MockTransport(_answer))
    completion = policy.complete(MESSAGES, seed=1,
                                 context=TrajectoryContext("traj-9", "sess", "user-1"))
    assert (completion.text, completion.checkpoint_id, completion.completion_id) == (
        "", "ckpt-3", "chatcmpl-1")
    assert completion.tool_calls == (LINT_CALL,) and completion.verdicts == ()
    assert completion.prompt_token_ids == [5, 6] and completion.token_ids == [7, 2]
    assert completion.logprobs == [-0.25, -0.5] and completion.finish_reason == "tool_calls"
    assert policy.emits_completion_events is False  # the gateway emits completion.served


@pytest.mark.parametrize("response", [httpx.Response(503), httpx.Response(200, json={"x": 1})])
def test_endpoint_failures_are_policy_errors(response: httpx.Response) -> None:
    policy = HttpPolicy("http://gateway", "policy",
                        transport=httpx.MockTransport(lambda request: response))
    with pytest.raises(PolicyError):
        policy.complete(MESSAGES)


def _scripted_gateway(replies: list[dict]) -> httpx.MockTransport:
    """Answers each turn with the next reply; later requests must carry the tool results."""
    seen: list[dict] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        turn = len(seen) - 1
        message, verdicts = replies[min(turn, len(replies) - 1)]
        return httpx.Response(200, json={
            "id": f"chatcmpl-{turn}", "model": "m", "prompt_token_ids": [1],
            "choices": [{"message": message, "finish_reason": "stop", "token_ids": [2],
                         "logprobs": {"content": [{"logprob": -0.1}]}}]}
            | ({} if verdicts is None else {"broken_tool_calls": verdicts}))

    transport = httpx.MockTransport(answer)
    transport.seen = seen  # type: ignore[attr-defined]
    return transport


def _episode(replies: list, tmp_path: Path) -> tuple[list, list[dict]]:
    transport = _scripted_gateway(replies)
    policy = HttpPolicy("http://gateway", "m", transport=transport)
    events: list = []
    run_trajectory(sample_tasks(1, held_out=True)[0], policy, events.append,
                   context=TrajectoryContext("traj-1", "sess-1", "u"))
    return [e.payload for e in events if e.type == "tool.called"], transport.seen


def test_calls_the_gateway_recorded_are_answered_but_not_recorded_again(tmp_path: Path) -> None:
    unknown = {"id": "call_9", "type": "function",
               "function": {"name": "delete", "arguments": "{}"}}
    replies = [
        ({"content": '<tool>lint {"path": }</tool>'},
         [{"call_id": "chatcmpl-0-m0", "tool": "lint", "error_kind": "malformed_call",
           "reason": "arguments are not valid JSON", "tool_call_id": None}]),
        ({"content": None, "tool_calls": [LINT_CALL, unknown]},
         [{"call_id": "chatcmpl-1-t1", "tool": "delete", "error_kind": "unknown_tool",
           "reason": "no tool 'delete' is offered", "tool_call_id": "call_9"}]),
        ({"content": "Done."}, []),
    ]
    recorded, seen = _episode(replies, tmp_path)
    assert [(p.tool, p.valid) for p in recorded] == [("lint", True)]  # only the executed call
    third = seen[2]["messages"]
    assert third[1] == {"role": "assistant", "content": '<tool>lint {"path": }</tool>'}
    assert third[2]["role"] == "tool" and "arguments are not valid JSON" in third[2]["content"]
    assert third[3]["tool_calls"] == [LINT_CALL, unknown]
    assert [m.get("tool_call_id") for m in third[4:]] == ["call_1", "call_9"]
    assert third[5]["content"].startswith("error (unknown_tool)")


def test_without_verdicts_the_loop_judges_and_records_every_call(tmp_path: Path) -> None:
    bad = {"id": "call_2", "type": "function",
           "function": {"name": "read_file", "arguments": '{"file": "x"}'}}
    replies = [({"content": None, "tool_calls": [bad]}, None),
               ({"content": "<tool>lint</tool>"}, None), ({"content": "Done."}, None)]
    recorded, _ = _episode(replies, tmp_path)
    assert [(p.tool, p.valid, p.error_kind) for p in recorded] == [
        ("read_file", False, "bad_arguments"), ("lint", False, "malformed_call")]
