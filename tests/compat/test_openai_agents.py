"""The OpenAI Agents SDK on Chat Completions (streamed run), two function tools, under one
trace."""

from __future__ import annotations

import asyncio

import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from tests.support.compat_agent_model import ANSWER, TASK, get_time, get_weather
from tests.support.compat_expectations import check_run
from tests.support.compat_stack import CompatStack
from tests.support.service_keys import GATEWAY_KEY

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900)]


def test_an_openai_agents_sdk_agent(compat_stack: CompatStack) -> None:
    set_tracing_disabled(True)  # its own tracing goes to OpenAI; OpenTelemetry is ours

    async def run_agent(client: AsyncOpenAI) -> str:
        agent = Agent(name="weather", instructions="Answer with the tools.",
                      tools=[function_tool(get_weather), function_tool(get_time)],
                      model_settings=ModelSettings(temperature=0),
                      model=OpenAIChatCompletionsModel(model="rewardstream",
                                                       openai_client=client))
        result = Runner.run_streamed(agent, TASK, max_turns=4)
        async for _ in result.stream_events():
            pass
        return str(result.final_output)

    with compat_stack.tracing.run("openai-agents") as run:
        client = AsyncOpenAI(base_url=compat_stack.gateway_url, api_key=GATEWAY_KEY,
                             max_retries=0, http_client=run.wire.async_client())
        answer = asyncio.run(run_agent(client))
    assert answer == ANSWER
    check_run(compat_stack, run, "openai-agents",
              finishes=["tool_calls", "tool_calls", "stop"], calls=["get_weather", "get_time"])
