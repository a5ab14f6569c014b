"""A chat request as a prompt, with the tools it offers (pure over a tokenizer).

When the model's chat template renders tools (it names a probe tool it is given), the
conversation and the tools go through that template as the model was trained, and calls are
read in ``native_syntax`` (``hermes``: ``<tool_call>{"name", "arguments"}</tool_call>``, what
such templates ask for). Otherwise — ChatML templates such as SmolLM2's, the default template,
the tiny policy's transcript template — the fallback writes the tools' JSON Schemas and the
``<tool>NAME {json}</tool>`` format into the system message, writes earlier ``tool_calls``
into their assistant turns in that format, and calls are read in the ``rewardstream`` syntax.
A template that does not render system messages (the tiny policy's) is trained on its tools
and sees only the conversation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from schemas.toolcalls import format_call, write_tool_calls
from schemas.tooldefs import ToolRequest

__all__ = ["RenderedChat", "fallback_instructions", "render_chat", "renders_tools"]

_PROBE = {"type": "function", "function": {
    "name": "rewardstream_probe_tool", "description": "probe",
    "parameters": {"type": "object", "properties": {}}}}


@dataclass(frozen=True)
class RenderedChat:
    text: str
    syntax: str | None  # how calls are read from the completion; None: no calls expected


def _text(content: Any) -> str:
    """Message content as text; OpenAI content-part lists are joined."""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or () if isinstance(part, dict))


def _apply(tokenizer: Any, template: str, messages: list[dict[str, Any]],
           tools: list[dict[str, Any]] | None = None) -> str:
    return tokenizer.apply_chat_template(messages, tools=tools, chat_template=template,
                                         add_generation_prompt=True, tokenize=False)


def renders_tools(tokenizer: Any, template: str) -> bool:
    """Whether ``template`` puts the tools it is given into the prompt (a template that cannot
    render the one-message probe at all is taken to have no tools section)."""
    from jinja2 import TemplateError

    probe = [{"role": "user", "content": "hi"}]
    try:
        return "rewardstream_probe_tool" in _apply(tokenizer, template, probe, [_PROBE])
    except (TemplateError, ValueError, TypeError):
        return False


def fallback_instructions(tools: ToolRequest) -> str:
    """The system text that offers ``tools`` to a model whose template cannot."""
    example = format_call("NAME", {"argument": "value"})
    lines = [f"You can call tools. To call one, write {example} with the arguments as one "
             "JSON object, and write nothing after your calls."]
    lines.append("You may write several calls one after another." if tools.parallel
                 else "Write at most one call.")
    if tools.choice == "required":
        lines.append("You must call a tool now.")
    elif tools.function is not None:
        lines.append(f"You must call {tools.function} now.")
    schemas = [{"name": t.name, "description": t.description, "parameters": t.parameters}
               for t in tools.tools]
    lines.append("Tools (JSON Schema of their arguments): " + json.dumps(schemas))
    return "\n".join(lines)


def _native_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """A history tool call as chat templates read it: arguments as an object, not JSON text."""
    function = dict(call.get("function") or {})
    try:
        function["arguments"] = json.loads(function.get("arguments") or "{}")
    except (TypeError, json.JSONDecodeError):
        pass  # already an object, or text the model wrote: the template shows it as it is
    return {**call, "function": function}


def render_chat(tokenizer: Any, template: str, native_tools: bool,
                messages: Sequence[Mapping[str, Any]], tools: ToolRequest | None,
                native_syntax: str = "hermes") -> RenderedChat:
    """The prompt text for ``messages`` and how to read calls from its completion."""
    if tools is not None and tools.expects_calls and native_tools:
        native = [{**m, "role": m.get("role", "user"), "content": _text(m.get("content"))}
                  | ({"tool_calls": [_native_call(c) for c in m["tool_calls"]]}
                     if m.get("tool_calls") else {}) for m in messages]
        return RenderedChat(_apply(tokenizer, template, native,
                                   [t.openai() for t in tools.tools]), native_syntax)
    plain = [{"role": m.get("role", "user"),
              "content": write_tool_calls(_text(m.get("content")), m.get("tool_calls"))}
             for m in messages]
    if tools is None or not tools.expects_calls:
        return RenderedChat(_apply(tokenizer, template, plain), None)
    instructions = fallback_instructions(tools)
    if plain and plain[0]["role"] == "system":
        plain[0] = {"role": "system", "content": instructions + "\n\n" + plain[0]["content"]}
    else:
        plain.insert(0, {"role": "system", "content": instructions})
    return RenderedChat(_apply(tokenizer, template, plain), "rewardstream")
