"""A broken tool call that the client never reports still reaches the reward: the gateway
records it itself, and the reward-join worker on the real broker folds it into the
trajectory's record as an explicit negative."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import openai
import pytest

from infra.settings import Settings
from schemas.events import (
    EventAdapter,
    TrajectoryEnded,
    TrajectoryEndedPayload,
    with_ingest_fields,
)
from schemas.ids import uuid7
from serving.engine.cli import build_engine_app
from serving.gateway.app import GatewayConfig, create_gateway_app
from serving.gateway.backend import BackendClient
from serving.gateway.sinks import KafkaEventSink
from serving.local_server import serve_in_thread
from streams.spec import load_spec
from tests.support.service_keys import GATEWAY_KEY, gateway_auth, pseudonym
from tests.support.streams_log import produce, run_in_process
from tests.support.tool_model import TOOLS

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_a_broken_call_the_client_drops_is_still_a_negative_reward(
        kafka: Settings, tool_model_dir: Path, tmp_path: Path) -> None:
    sink = KafkaEventSink(kafka)
    with serve_in_thread(build_engine_app(tool_model_dir)) as engine:
        app = create_gateway_app(GatewayConfig(), BackendClient(engine.url), sink,
                                 gateway_auth())
        with serve_in_thread(app) as gateway:
            client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=GATEWAY_KEY,
                                   max_retries=0)
            reply = client.chat.completions.create(
                model="rewardstream", messages=[{"role": "user", "content": "Break it."}],
                tools=TOOLS, max_tokens=40, seed=0, user="alice",
                extra_headers={"X-Rewardstream-Trajectory-Id": "traj-dropped",
                               "X-Rewardstream-Session-Id": "sess-1"})
    assert reply.model_extra["broken_tool_calls"][0]["error_kind"] == "malformed_call"
    # The client drops the broken call: all it ever reports is the end of the trajectory.
    now = datetime.now(UTC)
    end = TrajectoryEnded(
        event_id=uuid7(), trajectory_id="traj-dropped", session_id="sess-1", user="alice",
        checkpoint_id=reply.model_extra["checkpoint_id"], occurred_at=now, sent_at=now,
        payload=TrajectoryEndedPayload(outcome="completed", turns=1))
    # as ingest stores it: the org of the client's key (the gateway key's), the same pseudonym
    stored = with_ingest_fields(end, org_id="org-test", user=pseudonym("org-test", "alice"),
                                received_at=now, event_time=now, clock_skew_ms=0,
                                producer="ingest:client")
    produce(kafka, [(b"traj-dropped", EventAdapter.dump_json(stored))])

    spec = load_spec()
    [record] = run_in_process(kafka, tmp_path, expected=1, timeout_s=120, spec=spec).values()
    assert record.trajectory_id == "traj-dropped" and record.finalized_by == "complete"
    assert record.signals["broken_tool_calls"] == 1.0 and record.signals["tool_calls"] == 1.0
    assert record.components["broken_tool_calls"] == spec.weights.broken_tool_call < 0
    assert [s.completion_id for s in record.samples] == [reply.id]
