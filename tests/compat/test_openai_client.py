"""The official ``openai`` client as a hand-written two-tool agent: plain and streamed turns,
content parts, role tool replies, stop sequences and null parameters, under one trace."""

from __future__ import annotations

import openai
import pytest

from tests.support.compat_agent_model import ANSWER, TASK, TOOLS, run_tool
from tests.support.compat_expectations import check_run
from tests.support.compat_stack import CompatStack
from tests.support.service_keys import GATEWAY_KEY

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900)]


def _streamed_calls(stream: openai.Stream) -> tuple[list[dict[str, str]], str | None]:
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in stream:
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                call["id"] = delta.id or call["id"]
                call["name"] += (delta.function and delta.function.name) or ""
                call["arguments"] += (delta.function and delta.function.arguments) or ""
    return list(calls.values()), finish


def test_a_hand_written_agent_on_the_openai_client(compat_stack: CompatStack) -> None:
    with compat_stack.tracing.run("openai") as run:
        client = openai.OpenAI(base_url=compat_stack.gateway_url, api_key=GATEWAY_KEY,
                               max_retries=0, http_client=run.wire.client())
        messages: list = [{"role": "user", "content": [{"type": "text", "text": TASK}]}]
        common = {"model": "rewardstream", "tools": TOOLS, "max_tokens": 60, "temperature": 0,
                  "stop": ["\n<|"], "frequency_penalty": None, "presence_penalty": None,
                  "n": None}
        first = client.chat.completions.create(messages=messages, **common)
        [call] = first.choices[0].message.tool_calls or []
        messages += [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id,
                      "content": run_tool(call.function.name, call.function.arguments)}]
        calls, finish = _streamed_calls(client.chat.completions.create(
            messages=messages, stream=True, stream_options={"include_usage": True}, **common))
        assert finish == "tool_calls" and [c["name"] for c in calls] == ["get_time"]
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]}]
        messages += [{"role": "tool", "tool_call_id": c["id"],
                      "content": run_tool(c["name"], c["arguments"])} for c in calls]
        last = client.chat.completions.create(messages=messages, **common)
    assert last.choices[0].message.content == ANSWER
    check_run(compat_stack, run, "openai", finishes=["tool_calls", "tool_calls", "stop"],
              calls=["get_weather", "get_time"])
