"""An agent run instrumented with OpenTelemetry calls the gateway under one trace; an editor's
SDK, given that trace's traceparent, sends the edits it made. No custom id anywhere: the log
holds one trajectory, and the reward join (the offline replay, which equals the streaming
join) makes one reward record of it, with the completions, the calls and the edits in it."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from rewardstream_telemetry import Telemetry, Trajectory
from streams.spec import load_spec
from tests.support.compat_agent_model import ANSWER, TASK, TOOLS, run_tool
from tests.support.compat_agent_runs import AGENT_USER
from tests.support.compat_stack import CompatStack
from tests.support.ingest_support import TEST_KEY
from tests.support.service_keys import GATEWAY_KEY
from tests.support.streams_log import replay_topic

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900)]


def test_an_agents_trace_and_an_editors_edits_are_one_trajectory_and_one_reward(
        compat_stack: CompatStack, tmp_path: Path) -> None:
    spec = load_spec()
    with compat_stack.tracing.run("coder") as run:
        client = openai.OpenAI(base_url=compat_stack.gateway_url, api_key=GATEWAY_KEY,
                               max_retries=0, http_client=run.wire.client())
        messages: list = [{"role": "user", "content": TASK}]
        replies = []
        while True:
            reply = client.chat.completions.create(model="rewardstream", messages=messages,
                                                   tools=TOOLS, max_tokens=60, temperature=0)
            replies.append(reply)
            message = reply.choices[0].message
            if not message.tool_calls:
                break
            messages.append(message.model_dump(exclude_none=True))
            messages += [{"role": "tool", "tool_call_id": call.id,
                          "content": run_tool(call.function.name, call.function.arguments)}
                         for call in message.tool_calls]
        # The editor knows only the trace: the agent's request carried it.
        editor = Trajectory.from_traceparent(run.traceparent, user=AGENT_USER,
                                             checkpoint_id=reply.model_extra["checkpoint_id"])
        with Telemetry(compat_stack.ingest_url, TEST_KEY, queue_dir=tmp_path / "queue") as tel:
            tel.edit_proposed(editor, edit_id="e1", path="weather.py", lines_added=3)
            tel.edit_decided(editor, edit_id="e1", decision="accepted")
            for term in spec.kept:
                tel.edit_persistence(editor, edit_id="e1", horizon_s=term.horizon_s,
                                     surviving_fraction=1.0)
    assert reply.choices[0].message.content == ANSWER
    edits = 2 + len(spec.kept)
    events = compat_stack.events(run.trajectory_id, len(replies) + 2 + 1 + edits)
    assert {e["trajectory_id"] for e in events} == {run.trajectory_id}
    assert len(events) == len(replies) + 2 + 1 + edits  # completions, calls, end, edits

    records = [r for r in replay_topic(compat_stack.settings, spec).records
               if r.trajectory_id == run.trajectory_id]
    [record] = records  # one trajectory, one record
    assert record.finalized_by == "complete" and record.org_id == "org-test"
    assert [s.completion_id for s in record.samples] == [r.id for r in replies]
    assert record.signals["completions"] == len(replies) == 3
    assert (record.signals["tool_calls"], record.signals["broken_tool_calls"]) == (2.0, 0.0)
    assert (record.signals["edits_accepted"], record.signals["kept_fraction"]) == (1.0, 1.0)
    assert record.components["accepted_edits"] == spec.weights.accepted_edit
