"""A policy behind an OpenAI-compatible chat endpoint with tool calling (the gateway, or a
backend directly).

The conversation goes to ``/v1/chat/completions`` in OpenAI's shape with the harness's tools
(``tools``, ``tool_choice: auto``, ``parallel_tool_calls``); the server renders it with the
model's own chat template (the tiny policy's is the transcript format it was trained on) and
returns the calls it parsed as ``tool_calls``. The gateway also judges every call itself and
records the broken ones (``broken_tool_calls`` in its reply): the agent loop answers those but
does not record them again. Against a server that sends no verdicts the loop judges and records
every call itself.

The trajectory context travels as the gateway's headers (``X-Rewardstream-Trajectory-Id``,
``-Session-Id``, ``-User``) so it can stamp the events it emits (``completion.served``, broken
calls); the loop therefore emits no ``completion.served`` for this policy. Token ids and
behaviour logprobs are read from vLLM's fields (``return_token_ids``, ``logprobs``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from harness.errors import PolicyError
from harness.instrument import TrajectoryContext
from harness.policy.base import Completion, Message
from harness.tools.builtin import tool_definitions
from harness.tools.calls import ServerVerdict
from schemas.events import finish_reason_of

if TYPE_CHECKING:
    import httpx

__all__ = ["HttpPolicy", "parse_chat_response"]


def _verdicts(body: dict[str, Any]) -> tuple[ServerVerdict, ...] | None:
    listed = body.get("broken_tool_calls")
    if listed is None:
        return None
    return tuple(ServerVerdict(v["tool"], v["error_kind"], v["reason"], v.get("tool_call_id"))
                 for v in listed)


def parse_chat_response(body: dict[str, Any], headers: dict[str, str],
                        latency_ms: float, temperature: float) -> Completion:
    try:
        choice = body["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise PolicyError("the endpoint's answer has no choices[0].message; is it an "
                          "OpenAI-compatible /v1/chat/completions endpoint?") from None
    logprobs = [entry["logprob"] for entry in (choice.get("logprobs") or {}).get("content") or []]
    checkpoint = (headers.get("x-rewardstream-checkpoint") or body.get("checkpoint_id")
                  or body.get("model") or "unknown")
    return Completion(
        text=message.get("content") or "", checkpoint_id=checkpoint,
        model=body.get("model") or checkpoint, completion_id=body.get("id") or "",
        prompt_token_ids=list(body.get("prompt_token_ids") or []),
        token_ids=list(choice.get("token_ids") or []),
        logprobs=[min(float(lp), 0.0) for lp in logprobs if lp is not None],
        latency_ms=latency_ms,
        finish_reason=finish_reason_of(choice.get("finish_reason") or None, missing="stop"),
        temperature=temperature, tool_calls=tuple(message.get("tool_calls") or ()),
        verdicts=_verdicts(body),
    )


class HttpPolicy:
    emits_completion_events = False

    def __init__(self, base_url: str, model: str, api_key: str = "", temperature: float = 1.0,
                 max_tokens: int = 96, timeout_s: float = 60.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        import httpx

        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.tools = tool_definitions()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers,
                                    timeout=timeout_s, transport=transport)

    def complete(
        self, messages: Sequence[Message], *, seed: int | None = None,
        context: TrajectoryContext | None = None,
    ) -> Completion:
        import httpx

        request = {"model": self.model, "messages": [dict(m) for m in messages],
                   "tools": self.tools, "tool_choice": "auto", "parallel_tool_calls": True,
                   "max_tokens": self.max_tokens, "temperature": self.temperature,
                   "logprobs": True, "return_token_ids": True, "seed": seed}
        headers = {}
        if context is not None:
            request["user"] = context.user
            headers = {"X-Rewardstream-Trajectory-Id": context.trajectory_id,
                       "X-Rewardstream-Session-Id": context.session_id,
                       "X-Rewardstream-User": context.user}
        started = time.perf_counter()
        try:
            response = self._client.post("/v1/chat/completions", json=request, headers=headers)
            response.raise_for_status()
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise PolicyError(f"completion request to {self._client.base_url} failed: "
                              f"{exc}") from None
        latency_ms = (time.perf_counter() - started) * 1000
        return parse_chat_response(body, dict(response.headers), latency_ms, self.temperature)

    def close(self) -> None:
        self._client.close()
