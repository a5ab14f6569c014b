"""smolagents' ToolCallingAgent (``tool_choice: required``, observations as user messages,
the answer through ``final_answer``) and CodeAgent (code blocks cut by the ``</code>`` stop
sequence, run in its own interpreter), with stop sequences on every request, under one trace
each."""

from __future__ import annotations

from typing import Any

import pytest
from smolagents import CodeAgent, OpenAIServerModel, ToolCallingAgent, tool

from tests.support.compat_agent_model import (
    CODE_ANSWER,
    CODE_TASK,
    FINAL_ANSWER,
    TASK,
    get_time,
    get_weather,
)
from tests.support.compat_expectations import check_run
from tests.support.compat_stack import CompatStack
from tests.support.service_keys import GATEWAY_KEY

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900)]

AGENTS = {  # agent: (task, its answer, its stop sequences, finish reasons, tools called)
    ToolCallingAgent: (TASK, FINAL_ANSWER, ["Observation:", "Calling tools:"],
                       ["tool_calls"] * 3, ["get_weather", "get_time", "final_answer"]),
    # Each code block ends at the stop sequence: written up to it, never with it.
    CodeAgent: (CODE_TASK, CODE_ANSWER, ["Observation:", "Calling tools:", "</code>"],
                ["stop", "stop"], []),
}


@pytest.mark.parametrize("agent_class", list(AGENTS), ids=lambda cls: cls.__name__)
def test_a_smolagents_agent(compat_stack: CompatStack, agent_class: Any) -> None:
    task, answer, stops, finishes, calls = AGENTS[agent_class]
    with compat_stack.tracing.run(f"smolagents-{agent_class.__name__}") as run:
        model = OpenAIServerModel(model_id="rewardstream", api_base=compat_stack.gateway_url,
                                  api_key=GATEWAY_KEY, temperature=0, client_kwargs={
                                      "max_retries": 0, "http_client": run.wire.client()})
        agent = agent_class(tools=[tool(get_weather), tool(get_time)], model=model,
                            max_steps=4, verbosity_level=0)
        assert agent.run(task) == answer
    assert all(body["stop"] == stops for body in run.wire.bodies)
    check_run(compat_stack, run, f"smolagents {agent_class.__name__}", finishes, calls)
