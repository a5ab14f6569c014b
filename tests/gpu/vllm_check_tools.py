"""The GPU check's tool-calling part (``python -m tests.gpu.vllm_check``).

The check's base model is a tiny model trained to answer two requests with hermes-syntax calls
(one sound, one whose arguments are not JSON) under a chat template that renders tools; vLLM
serves it with ``--enable-auto-tool-choice --tool-call-parser hermes`` (the torch engine, in
the dry run, with its native-template path and hermes parser). Through the gateway, on the
base model's arm, each request is sent whole and streamed. The check wants the sound call back
as ``tool_calls`` (reassembled from stream deltas as a client does), the broken one reported in
``broken_tool_calls`` and recorded as ``tool.called`` ``valid: false`` by the gateway, and every
completion logged with as many token ids as the backend says it generated (vLLM versions that
skip chunks their tool parser holds back would lose tokens from ``completion.served``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from serving.gateway.stream import StreamAccumulator
from tests.support.service_keys import GATEWAY_HEADERS

__all__ = ["ADDED_TOKENS", "BROKEN", "REPLIES", "SOUND", "TOOLS", "TOOL_TEMPLATE",
           "VLLM_TOOL_FLAGS", "ToolReply", "judge_tool_replies", "read_reply",
           "send_tool_requests"]

SOUND, BROKEN = "Read calc.py.", "Break it."
REPLIES = {
    SOUND: '<tool_call>{"name": "read_file", "arguments": {"path": "calc.py"}}</tool_call>',
    BROKEN: '<tool_call>{"name": "read_file", "arguments": {"path": calc.py}}</tool_call>',
}
TOOLS = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}}]
ADDED_TOKENS = ("<tool_call>", "</tool_call>")  # vLLM's hermes parser looks them up
VLLM_TOOL_FLAGS = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")
# Renders tools (their names) and earlier calls the way Hermes-style templates do.
TOOL_TEMPLATE = (
    "{% if tools %}<|system|>\nTools:{% for t in tools %} {{ t['function']['name'] }}"
    "{% endfor %}{{ '\\n' }}{% endif %}"
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] or '' }}"
    "{% for c in m['tool_calls'] or [] %}<tool_call>"
    "{{ {'name': c['function']['name'], 'arguments': c['function']['arguments']} | tojson }}"
    "</tool_call>{% endfor %}{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


@dataclass(frozen=True)
class ToolReply:
    ask: str
    stream: bool
    trajectory_id: str
    calls: list[tuple[str, str]]  # (name, arguments text)
    content: str
    finish_reason: str | None
    verdicts: list[dict[str, Any]]
    completion_tokens: int | None  # as the backend counted them (usage)


def read_reply(ask: str, stream: bool, trajectory_id: str,
               chunks: Iterable[dict[str, Any]]) -> ToolReply:
    """A reply from its stream chunks, or from the one whole response (``stream`` False)."""
    acc, verdicts = StreamAccumulator("chat"), []
    for chunk in chunks:
        verdicts = chunk.get("broken_tool_calls", verdicts)
        if not stream:  # a whole reply: read its message as one delta
            choice = chunk["choices"][0]
            chunk = chunk | {"choices": [{"delta": choice["message"],
                                          "finish_reason": choice["finish_reason"]}]}
        acc.add(chunk)
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in acc.tool_calls]
    tokens = (acc.usage or {}).get("completion_tokens")
    return ToolReply(ask, stream, trajectory_id, calls, acc.text, acc.finish_reason, verdicts,
                     tokens)


def send_tool_requests(gateway: str, user: str) -> list[ToolReply]:
    """Both requests, whole and streamed, through the gateway as ``user``."""
    import httpx

    from serving.sse import parse_sse_lines

    replies = []
    for n, (ask, stream) in enumerate((a, s) for a in REPLIES for s in (False, True)):
        trajectory = f"tools-{n}"
        body = {"model": "rewardstream", "messages": [{"role": "user", "content": ask}],
                "tools": TOOLS, "max_tokens": 48, "seed": 0, "user": user, "stream": stream,
                "stream_options": {"include_usage": True} if stream else None}
        headers = {"X-Rewardstream-Trajectory-Id": trajectory} | GATEWAY_HEADERS
        url = f"{gateway}/v1/chat/completions"
        if stream:
            with httpx.stream("POST", url, json=body, headers=headers, timeout=120) as r:
                r.raise_for_status()
                chunks = list(parse_sse_lines(r.iter_lines()))
        else:
            r = httpx.post(url, json=body, headers=headers, timeout=120)
            r.raise_for_status()
            chunks = [r.json()]
        replies.append(read_reply(ask, stream, trajectory, chunks))
    return replies


def judge_tool_replies(replies: list[ToolReply], events: list[Any]) -> list[tuple[bool, str]]:
    """PASS/FAIL lines: calls parsed, the broken one judged and recorded, tokens all logged."""
    sound = [r for r in replies if r.ask == SOUND]
    broken = [r for r in replies if r.ask == BROKEN]
    parsed = all(r.finish_reason == "tool_calls" and not r.verdicts and
                 [(n, json.loads(a)) for n, a in r.calls] == [("read_file", {"path": "calc.py"})]
                 for r in sound)
    # How vLLM's streaming parser hands over a call whose JSON breaks differs by version: as
    # content, or as a tool call with unparseable or partial arguments; each is a broken call.
    judged = all(r.verdicts for r in broken)
    kinds = sorted({v["error_kind"] for r in broken for v in r.verdicts})
    recorded = {e.trajectory_id: e.payload for e in events if e.type == "tool.called"}
    logged = all(r.trajectory_id in recorded and not recorded[r.trajectory_id].valid
                 for r in broken) and not any(r.trajectory_id in recorded for r in sound)
    served = {e.trajectory_id: e.payload for e in events if e.type == "completion.served"}
    counted = [r for r in replies if r.completion_tokens is not None]
    complete = all(r.trajectory_id in served and
                   len(served[r.trajectory_id].completion_token_ids) == r.completion_tokens
                   for r in counted)
    shapes = sorted({"as content" if not r.calls else "as a tool call" for r in broken})
    return [
        (bool(sound) and parsed, f"tools: {len(sound)} replies (whole, streamed) carry the "
                                 "read_file call as tool_calls"),
        (bool(broken) and judged, f"tools: the broken call came back {' and '.join(shapes)} "
                                  f"and is listed in broken_tool_calls ({', '.join(kinds)})"),
        (logged, "tools: the gateway recorded the broken call as tool.called valid=false"),
        (bool(counted) and complete, f"tools: {len(counted)} completions logged with every "
                                     "token the backend generated"),
    ]
