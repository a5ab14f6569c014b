"""LangChain's ``ChatOpenAI.bind_tools`` in a tool loop (the last turn streamed), under one
trace."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from tests.support.compat_agent_model import ANSWER, TASK, get_time, get_weather
from tests.support.compat_expectations import check_run
from tests.support.compat_stack import CompatStack
from tests.support.service_keys import GATEWAY_KEY

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900)]


def test_a_langchain_tool_loop(compat_stack: CompatStack) -> None:
    tools = {t.name: t for t in (tool(get_weather), tool(get_time))}
    with compat_stack.tracing.run("langchain") as run:
        llm = ChatOpenAI(model="rewardstream", base_url=compat_stack.gateway_url, temperature=0,
                         api_key=GATEWAY_KEY, max_retries=0, http_client=run.wire.client())
        agent = llm.bind_tools(list(tools.values()))
        messages: list[BaseMessage] = [HumanMessage(TASK)]
        reply = agent.invoke(messages)
        while isinstance(reply, AIMessage) and reply.tool_calls:
            messages.append(reply)
            messages += [ToolMessage(tools[c["name"]].invoke(c["args"]), tool_call_id=c["id"])
                         for c in reply.tool_calls]
            reply = agent.invoke(messages)
        streamed = "".join(str(chunk.content) for chunk in llm.stream(messages))
    assert reply.content == ANSWER and streamed == ANSWER
    check_run(compat_stack, run, "langchain-openai",
              finishes=["tool_calls", "tool_calls", "stop", "stop"],
              calls=["get_weather", "get_time"])
