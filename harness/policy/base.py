"""The policy interface the agent loop talks to, and the transcript format it renders.

A transcript is short and line-oriented so that a tiny model can learn it::

    Task: total(a, b) in calc.py should return a + b.
    A: <tool>read_file {"path": "calc.py"}</tool>
    O: def total(a, b): ...
    A: <tool>edit_file {"path": "calc.py", "search": "a - b", "replace": "a + b"}</tool>
    O: edited calc.py: +1 -1
    A: Done.

``A:`` lines are the policy's completions, ``O:`` the tools' observations, ``U:`` the user's
replies. Every backend (in-process, the gateway over HTTP, vLLM) is given the same rendered
prompt, so what a model was trained on is exactly what it is served.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from harness.instrument import TrajectoryContext

__all__ = ["Completion", "Message", "Policy", "render_prompt"]

Role = Literal["user", "assistant", "tool"]
Message = Mapping[str, str]  # {"role": Role, "content": str}

_PREFIX = {"assistant": "A: ", "tool": "O: ", "user": "U: "}
MAX_PROMPT_CHARS = 1400
MAX_MESSAGE_CHARS = 400


@dataclass(frozen=True)
class Completion:
    text: str
    checkpoint_id: str
    model: str = "unknown"
    completion_id: str = ""
    prompt_token_ids: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # behaviour logprobs, one per token
    latency_ms: float = 0.0
    ttft_ms: float = 0.0
    finish_reason: Literal["stop", "length", "abort", "error"] = "stop"
    temperature: float = 1.0


class Policy(Protocol):
    # Whether the agent loop should emit completion.served itself: True for in-process models,
    # False when a gateway emits it (HTTP) or there is no model (scripted policies).
    emits_completion_events: bool

    def complete(
        self, messages: Sequence[Message], *, seed: int | None = None,
        context: TrajectoryContext | None = None,
    ) -> Completion: ...


def _line(message: Message) -> str:
    content = message["content"]
    if len(content) > MAX_MESSAGE_CHARS:
        content = content[:MAX_MESSAGE_CHARS] + " ..."
    return _PREFIX[message["role"]] + content


def render_prompt(messages: Sequence[Message]) -> str:
    """The prompt for the next completion: the task, the latest turns that fit, then ``A: ``."""
    head = f"Task: {messages[0]['content']}\n"
    lines: list[str] = []
    budget = MAX_PROMPT_CHARS - len(head)
    for message in reversed(messages[1:]):
        line = _line(message) + "\n"
        if len(line) > budget:
            break
        lines.append(line)
        budget -= len(line)
    return head + "".join(reversed(lines)) + "A: "
