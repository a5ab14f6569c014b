"""A policy behind an OpenAI-compatible completions endpoint (the gateway, or vLLM directly).

The prompt is rendered here (``render_prompt``) and sent to ``/v1/completions``, so the server
needs no chat template. The trajectory context travels as the gateway's headers
(``X-Rewardstream-Trajectory-Id``, ``-Session-Id``, ``-User``) so it can stamp the ``completion.served``
event it emits; the loop therefore emits none for this policy. Token ids and behaviour
logprobs are read from vLLM's fields (``return_token_ids``, ``logprobs``) when present.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from harness.errors import PolicyError
from harness.instrument import TrajectoryContext
from harness.policy.base import Completion, Message, render_prompt

__all__ = ["HttpPolicy", "parse_completion_response"]


def parse_completion_response(body: dict[str, Any], headers: dict[str, str],
                              latency_ms: float, temperature: float) -> Completion:
    try:
        choice = body["choices"][0]
        text = choice["text"]
    except (KeyError, IndexError, TypeError):
        raise PolicyError("the endpoint's answer has no choices[0].text; is it an "
                          "OpenAI-compatible /v1/completions endpoint?") from None
    logprobs = (choice.get("logprobs") or {}).get("token_logprobs") or []
    checkpoint = (headers.get("x-rewardstream-checkpoint") or body.get("checkpoint_id")
                  or body.get("model") or "unknown")
    return Completion(
        text=text, checkpoint_id=checkpoint, model=body.get("model") or checkpoint,
        completion_id=body.get("id") or "", prompt_token_ids=list(
            choice.get("prompt_token_ids") or body.get("prompt_token_ids") or []),
        token_ids=list(choice.get("token_ids") or []),
        logprobs=[min(float(lp), 0.0) for lp in logprobs if lp is not None],
        latency_ms=latency_ms, finish_reason=choice.get("finish_reason") or "stop",
        temperature=temperature,
    )


class HttpPolicy:
    emits_completion_events = False

    def __init__(self, base_url: str, model: str, api_key: str = "", temperature: float = 1.0,
                 max_tokens: int = 96, timeout_s: float = 60.0, transport=None) -> None:
        import httpx

        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers,
                                    timeout=timeout_s, transport=transport)

    def complete(
        self, messages: Sequence[Message], *, seed: int | None = None,
        context: TrajectoryContext | None = None,
    ) -> Completion:
        import httpx

        request = {"model": self.model, "prompt": render_prompt(messages),
                   "max_tokens": self.max_tokens, "temperature": self.temperature,
                   "logprobs": 1, "return_token_ids": True, "seed": seed}
        headers = {}
        if context is not None:
            request["user"] = context.user
            headers = {"X-Rewardstream-Trajectory-Id": context.trajectory_id,
                       "X-Rewardstream-Session-Id": context.session_id,
                       "X-Rewardstream-User": context.user}
        started = time.perf_counter()
        try:
            response = self._client.post("/v1/completions", json=request, headers=headers)
            response.raise_for_status()
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise PolicyError(f"completion request to {self._client.base_url} failed: "
                              f"{exc}") from None
        latency_ms = (time.perf_counter() - started) * 1000
        return parse_completion_response(body, dict(response.headers), latency_ms,
                                         self.temperature)

    def close(self) -> None:
        self._client.close()
