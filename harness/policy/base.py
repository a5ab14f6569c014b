"""The policy interface the agent loop talks to, and the transcript format it renders.

A transcript is short and line-oriented so that a tiny model can learn it::

    Task: total(a, b) in calc.py should return a + b.
    A: <tool>read_file {"path": "calc.py"}</tool>
    O: def total(a, b): ...
    A: <tool>edit_file {"path": "calc.py", "search": "a - b", "replace": "a + b"}</tool>
    O: edited calc.py: +1 -1
    A: Done.

``A:`` lines are the policy's completions, ``O:`` the tools' observations (one line per
completion, a call's observations joined by ``---``), ``U:`` the user's replies.

The format is one Jinja chat template, :data:`TRANSCRIPT_TEMPLATE`: :func:`render_prompt`
renders it for in-process policies and SFT, and the tiny policy's tokenizer carries it as its
chat template, so a server that renders chats with the model's own template (the torch engine,
vLLM) builds exactly the prompt the policy was trained on. Messages are OpenAI-shaped: an
assistant turn may carry ``tool_calls`` (written back as ``<tool>NAME {json}</tool>`` text)
and each call's observation is its own ``tool`` message; ``system`` messages are not rendered
(the policy was trained on one fixed tool set).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, Protocol

from harness.instrument import TrajectoryContext
from harness.tools.calls import ServerVerdict
from schemas.events import FinishReason
from schemas.toolcalls import write_tool_calls

__all__ = ["TRANSCRIPT_TEMPLATE", "Completion", "Message", "Policy", "render_prompt",
           "text_messages"]

Role = Literal["user", "assistant", "tool", "system"]
Message = Mapping[str, Any]  # {"role", "content"[, "tool_calls"][, "tool_call_id"]}

# The prompt: the task, then the latest turns that fit in 1400 characters, each cut at 400
# characters, then "A: ". Consecutive tool messages are one observation line.
TRANSCRIPT_TEMPLATE = """\
{%- set prefix = {'user': 'U: ', 'assistant': 'A: ', 'tool': 'O: '} -%}
{%- set ns = namespace(head='', roles=[], texts=[], lines=[], budget=0, full=false) -%}
{%- for message in messages if message['role'] != 'system' -%}
  {%- set text = message['content'] or '' -%}
  {%- if loop.first -%}
    {%- set ns.head = 'Task: ' ~ text ~ '\\n' -%}
  {%- elif message['role'] == 'tool' and ns.roles and ns.roles[-1] == 'tool' -%}
    {%- set ns.texts = ns.texts[:-1] + [ns.texts[-1] ~ '\\n---\\n' ~ text] -%}
  {%- else -%}
    {%- set ns.roles = ns.roles + [message['role']] -%}
    {%- set ns.texts = ns.texts + [text] -%}
  {%- endif -%}
{%- endfor -%}
{%- set ns.budget = 1400 - ns.head | length -%}
{%- for i in range(ns.texts | length - 1, -1, -1) if not ns.full -%}
  {%- set text = ns.texts[i] -%}
  {%- if text | length > 400 -%}{%- set text = text[:400] ~ ' ...' -%}{%- endif -%}
  {%- set line = prefix[ns.roles[i]] ~ text ~ '\\n' -%}
  {%- if line | length > ns.budget -%}
    {%- set ns.full = true -%}
  {%- else -%}
    {%- set ns.lines = [line] + ns.lines -%}
    {%- set ns.budget = ns.budget - line | length -%}
  {%- endif -%}
{%- endfor -%}
{{- ns.head ~ ns.lines | join('') -}}
{%- if add_generation_prompt -%}{{- 'A: ' -}}{%- endif -%}"""


@dataclass(frozen=True)
class Completion:
    text: str  # the text the model wrote, or with tool_calls the message content (prose)
    checkpoint_id: str
    model: str = "unknown"
    completion_id: str = ""
    prompt_token_ids: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # behaviour logprobs, one per token
    latency_ms: float = 0.0
    ttft_ms: float = 0.0
    finish_reason: FinishReason = "stop"
    temperature: float = 1.0
    tool_calls: tuple[Mapping[str, Any], ...] = ()  # OpenAI tool calls the endpoint parsed
    # The gateway's broken-call verdicts (it recorded those calls); None: nobody judged them.
    verdicts: tuple[ServerVerdict, ...] | None = None


class Policy(Protocol):
    # Whether the agent loop should emit completion.served itself: True for in-process models,
    # False when a gateway emits it (HTTP) or there is no model (scripted policies).
    emits_completion_events: bool

    def complete(
        self, messages: Sequence[Message], *, seed: int | None = None,
        context: TrajectoryContext | None = None,
    ) -> Completion: ...


def text_messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    """The messages with tool calls written into the text, as templates without tools read."""
    return [{"role": m["role"], "content": write_tool_calls(m.get("content") or "",
                                                            m.get("tool_calls"))}
            for m in messages]


@lru_cache(maxsize=1)
def _template() -> Any:
    # The environment transformers renders chat templates in, so both agree to the character.
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    return env.from_string(TRANSCRIPT_TEMPLATE)


def render_prompt(messages: Sequence[Message]) -> str:
    """The prompt for the next completion: the task, the latest turns that fit, then ``A: ``."""
    return _template().render(messages=text_messages(messages), add_generation_prompt=True)
