"""The official openai client, over HTTP, against a uvicorn-served gateway on the torch engine:
chat and streamed completions name their checkpoint, and the completion.served events on the
real broker carry behaviour logprobs equal to a teacher-forced recomputation."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import openai
import pytest
from kafka import KafkaConsumer, KafkaProducer

from infra.settings import Settings
from schemas.checkpoints import CheckpointEvent
from schemas.events import CompletionServed, parse_event
from schemas.topics import topic_name
from serving.engine.cli import build_engine_app
from serving.gateway.app import GatewayConfig, create_gateway_app
from serving.gateway.backend import BackendClient
from serving.gateway.sinks import KafkaEventSink
from serving.local_server import serve_in_thread
from serving.testing import build_random_adapter, teacher_forced_logprobs
from trainer.modeling import load_policy

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
TOLERANCE = 1e-4  # float32 on CPU: KV-cached steps vs one full pass agree to ~1e-6


def promote(settings: Settings, sequence: int, checkpoint_id: str, path: Path,
            status: str = "production") -> None:
    event = CheckpointEvent(
        event_id=f"e{sequence}", sequence=sequence, occurred_at=datetime.now(UTC),
        kind="promoted" if status == "production" else "rolled_back", status=status,
        checkpoint_id=checkpoint_id, model="tiny", path=str(path), adapter=True,
    )
    producer = KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all")
    producer.send(topic_name(settings.topic_prefix, "checkpoints"), key=checkpoint_id.encode(),
                  value=event.model_dump_json().encode())
    producer.flush()
    producer.close()


@pytest.fixture
def gateway_url(kafka: Settings, tiny_model_dir: Path, tmp_path: Path) -> Iterator[str]:
    adapter = build_random_adapter(tiny_model_dir, tmp_path / "c1", seed=1)
    promote(kafka, 1, "c1", adapter)
    config = GatewayConfig(follow=kafka, catch_up_timeout_s=30.0)
    sink = KafkaEventSink(kafka.bootstrap_servers, kafka.topic_prefix)
    with serve_in_thread(build_engine_app(tiny_model_dir)) as engine:
        app = create_gateway_app(config, BackendClient(engine.url), sink)
        with serve_in_thread(app) as gateway:
            yield gateway.url


def _served_events(settings: Settings, expected: int) -> list[tuple[bytes, CompletionServed]]:
    consumer = KafkaConsumer(topic_name(settings.topic_prefix, "events.raw"),
                             bootstrap_servers=settings.bootstrap_servers,
                             auto_offset_reset="earliest", consumer_timeout_ms=15000)
    got = []
    for record in consumer:
        event = parse_event(record.value)
        assert isinstance(event, CompletionServed)
        got.append((record.key, event))
        if len(got) == expected:
            break
    consumer.close()
    return got


def test_openai_client_gets_chat_and_streamed_completions_with_the_checkpoint(
    kafka: Settings, gateway_url: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    # The replay of the checkpoints topic finished during startup, not by timing out.
    assert httpx.get(f"{gateway_url}/health").json()["checkpoints"] == "following"
    client = openai.OpenAI(base_url=f"{gateway_url}/v1", api_key="unused", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="rewardstream", messages=[{"role": "user", "content": "fix the test"}],
        max_tokens=8, temperature=0.8, user="alice",
        extra_headers={"X-Rewardstream-Trajectory-Id": "traj-1",
                       "X-Rewardstream-Session-Id": "sess-1"},
    )
    assert raw.headers["x-rewardstream-checkpoint"] == "c1"
    assert "temperature=0.8" in raw.headers["x-rewardstream-sampling-warning"]
    chat = raw.parse()
    assert chat.model_extra["checkpoint_id"] == "c1" and chat.model_extra["arm"] == "production"
    assert isinstance(chat.choices[0].message.content, str)
    assert 1 <= chat.usage.completion_tokens <= 8

    stream = client.completions.create(
        model="rewardstream", prompt="def add(a, b):", max_tokens=12, stream=True,
        extra_body={"metadata": {"trajectory_id": "traj-2", "user": "bob"}, "ignore_eos": True},
    )
    chunks = [chunk for chunk in stream if chunk.choices]
    assert len(chunks) == 12 and chunks[-1].choices[0].finish_reason == "length"
    assert {chunk.model_extra["checkpoint_id"] for chunk in chunks} == {"c1"}

    model, _ = load_policy(tmp_path / "c1")
    events = dict(_served_events(kafka, 2))
    chat_event, completion_event = events[b"traj-1"], events[b"traj-2"]
    assert (chat_event.session_id, chat_event.user) == ("sess-1", "alice")
    assert (completion_event.session_id, completion_event.user) == ("traj-2", "bob")
    for event, temperature in ((chat_event, 0.8), (completion_event, 1.0)):
        payload = event.payload
        assert event.checkpoint_id == "c1" and payload.model == "c1"
        assert payload.sampling.temperature == temperature and payload.sampling.top_p == 1.0
        assert 0 < payload.ttft_ms <= payload.latency_ms
        expected = teacher_forced_logprobs(model, payload.prompt_token_ids,
                                           payload.completion_token_ids, temperature)
        errors = [abs(a - b) for a, b in zip(payload.behaviour_logprobs, expected, strict=True)]
        assert max(errors) < TOLERANCE
    assert completion_event.payload.finish_reason == "length"
    assert len(completion_event.payload.completion_token_ids) == 12
