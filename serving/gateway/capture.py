"""The text a completion's event may carry, as the org's text policy allows (pure).

The prompt is what the client sent: a completion request's ``prompt`` string (a prompt of token
ids has no text), or a chat's messages in order, one per line as ``role: content`` (content
parts joined; an assistant turn's ``tool_calls`` written after its content). The completion is
what the backend wrote: its content with its tool calls in the ``rewardstream`` syntax
(``schemas.toolcalls.write_tool_calls``). Both then go through the policy: nothing of an org that
turned capture off, redaction first, then the bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from schemas.toolcalls import write_tool_calls
from serving.gateway.stream import Kind, StreamAccumulator
from serving.textpolicy import TextPolicy

__all__ = ["captured_text", "message_text", "prompt_text"]


def message_text(content: Any) -> str:
    """A message's content as text: a string as it is, OpenAI content parts joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(part["text"] for part in content
                   if isinstance(part, dict) and isinstance(part.get("text"), str))


def _message_line(message: Mapping[str, Any]) -> str:
    text = message_text(message.get("content"))
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        text = write_tool_calls(text, [call for call in calls if isinstance(call, dict)])
    return f"{message.get('role')}: {text}"


def prompt_text(kind: Kind, body: Mapping[str, Any]) -> str | None:
    """The prompt of a validated request as text; None for a prompt of token ids."""
    if kind == "completion":
        prompt = body.get("prompt")
        return prompt if isinstance(prompt, str) else None
    return "\n".join(_message_line(m) for m in body.get("messages") or []
                     if isinstance(m, dict))


def captured_text(policy: TextPolicy, org_id: str, kind: Kind, body: Mapping[str, Any],
                  acc: StreamAccumulator) -> dict[str, Any]:
    """The ``completion.served`` text fields of one exchange (empty for an org without
    capture)."""
    if not policy.captures(org_id):
        return {}
    completion = write_tool_calls(acc.text, acc.tool_calls)
    return policy.text_fields(org_id, prompt_text(kind, body), completion)
