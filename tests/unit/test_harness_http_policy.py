"""The HTTP policy speaks OpenAI-compatible /v1/completions and reads vLLM's token fields."""

from __future__ import annotations

import json

import httpx
import pytest

from harness.errors import PolicyError
from harness.instrument import TrajectoryContext
from harness.policy.base import render_prompt
from harness.policy.http import HttpPolicy

MESSAGES = [{"role": "user", "content": "Rename cnt to count in util.py."}]


def _answer(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    assert body["prompt"] == render_prompt(MESSAGES) and body["logprobs"] == 1
    assert request.headers["X-Rewardstream-Trajectory-Id"] == "traj-9"
    return httpx.Response(200, headers={"X-Rewardstream-Checkpoint": "ckpt-3"}, json={
        "id": "cmpl-1", "model": "policy@ckpt-3",
        "choices": [{"text": "Done.", "finish_reason": "stop", "prompt_token_ids": [5, 6],
                     "token_ids": [7, 2], "logprobs": {"token_logprobs": [-0.25, -0.5]}}]})


def test_completions_carry_checkpoint_tokens_and_behaviour_logprobs() -> None:
    policy = HttpPolicy("http://gateway", "policy", transport=httpx.MockTransport(_answer))
    completion = policy.complete(MESSAGES, seed=1,
                                 context=TrajectoryContext("traj-9", "sess", "user-1"))
    assert (completion.text, completion.checkpoint_id, completion.completion_id) == (
        "Done.", "ckpt-3", "cmpl-1")
    assert completion.prompt_token_ids == [5, 6] and completion.token_ids == [7, 2]
    assert completion.logprobs == [-0.25, -0.5]
    assert policy.emits_completion_events is False  # the gateway emits completion.served


@pytest.mark.parametrize("response", [httpx.Response(503), httpx.Response(200, json={"x": 1})])
def test_endpoint_failures_are_policy_errors(response: httpx.Response) -> None:
    policy = HttpPolicy("http://gateway", "policy",
                        transport=httpx.MockTransport(lambda request: response))
    with pytest.raises(PolicyError):
        policy.complete(MESSAGES)
