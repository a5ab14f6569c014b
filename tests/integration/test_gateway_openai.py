"""The official openai client, over HTTP, against a uvicorn-served gateway on the torch engine:
chat and streamed completions name their checkpoint, and the completion.served events on the
real broker carry behaviour logprobs equal to a teacher-forced recomputation. With tools, a
model trained to write calls (tests/support/tool_model.py) gets them back as tool_calls,
plain and streamed, and the gateway writes its broken calls to the broker itself."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from infra.kafka_io import read_topic
from infra.models import build_random_adapter, load_policy, teacher_forced_logprobs
from infra.settings import Settings
from schemas.events import CompletionServed, ToolCalled, parse_event
from serving.engine.cli import build_engine_app
from serving.gateway.app import GatewayConfig, create_gateway_app
from serving.gateway.backend import BackendClient
from serving.gateway.sinks import KafkaEventSink
from serving.local_server import serve_in_thread
from tests.support.gateway_checkpoints import promote
from tests.support.service_keys import GATEWAY_KEY, gateway_auth, pseudonym
from tests.support.tool_model import TOOLS

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
TOLERANCE = 1e-4  # float32 on CPU: KV-cached steps vs one full pass agree to ~1e-6


@pytest.fixture
def gateway_url(kafka: Settings, tiny_model_dir: Path, tmp_path: Path) -> Iterator[str]:
    adapter = build_random_adapter(tiny_model_dir, tmp_path / "c1", seed=1)
    promote(kafka, 1, "c1", adapter)
    config = GatewayConfig(follow=kafka, catch_up_timeout_s=30.0)
    sink = KafkaEventSink(kafka)
    with serve_in_thread(build_engine_app(tiny_model_dir)) as engine:
        app = create_gateway_app(config, BackendClient(engine.url), sink, gateway_auth())
        with serve_in_thread(app) as gateway:
            yield gateway.url


def _raw_events(settings: Settings, expected: int) -> list[tuple[bytes, object]]:
    """The first ``expected`` records of events.raw, waiting up to 15 s for them."""
    deadline = time.monotonic() + 15
    while True:
        got = [(r.key, parse_event(r.value)) for r in read_topic(settings, "events.raw")]
        if len(got) >= expected or time.monotonic() > deadline:
            return got[:expected]
        time.sleep(0.2)


def test_the_gateway_is_live_and_ready_once_the_registry_is_replayed(gateway_url: str) -> None:
    assert httpx.get(f"{gateway_url}/livez").json() == {"status": "ok"}
    ready = httpx.get(f"{gateway_url}/readyz")
    assert ready.status_code == 200 and ready.json()["checkpoints"] == "following"


def _served_events(settings: Settings, expected: int) -> list[tuple[bytes, CompletionServed]]:
    got = _raw_events(settings, expected)
    assert all(isinstance(event, CompletionServed) for _, event in got)
    return got  # type: ignore[return-value]


def test_openai_client_gets_chat_and_streamed_completions_with_the_checkpoint(
    kafka: Settings, gateway_url: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    # The replay of the checkpoints topic finished during startup, not by timing out.
    assert httpx.get(f"{gateway_url}/readyz").json()["checkpoints"] == "following"
    client = openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=GATEWAY_KEY, max_retries=0)
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
    # the key's org, and the users pseudonymised as ingest does
    assert (chat_event.session_id, chat_event.user) == ("sess-1", pseudonym("org-test", "alice"))
    assert (completion_event.session_id, completion_event.user) == \
        ("traj-2", pseudonym("org-test", "bob"))
    assert chat_event.org_id == completion_event.org_id == "org-test"
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


def test_every_refusal_is_openais_invalid_request_naming_the_parameter(
        kafka: Settings, gateway_url: str) -> None:
    client = openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=GATEWAY_KEY, max_retries=0)
    ask = {"model": "rewardstream", "messages": [{"role": "user", "content": "hi"}],
           "max_tokens": 4}
    refusals = [  # the engine's (through the gateway, its status and param kept), the gateway's
        ({"response_format": {"type": "json_object"}}, "response_format", "unsupported_value"),
        ({"reasoning_effort": "low"}, "reasoning_effort", "unsupported_parameter"),
        ({"stop": ["ok", ""]}, "stop.1", "invalid_value"),
        ({"extra_body": {"frobnicate": 1}}, "frobnicate", "unsupported_parameter"),
        ({"n": 2}, "n", "invalid_value"),
        ({"extra_body": {"metadata": {"trajectory_id": "t\x00"}}}, "metadata.trajectory_id",
         "invalid_value"),
    ]
    for extra, param, code in refusals:
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(**ask, **extra)
        error = info.value
        assert (error.type, error.param, error.code) == ("invalid_request_error", param, code)
    # null is every parameter's default, as OpenAI takes it; stop, penalties and bias work
    reply = client.chat.completions.create(
        **ask, n=None, frequency_penalty=None, presence_penalty=None, temperature=None,
        stop=None, logit_bias=None, seed=None)
    assert reply.choices[0].finish_reason in ("stop", "length")
    shaped = client.chat.completions.with_raw_response.create(
        **ask, stop=["\n\n"], presence_penalty=0.5, frequency_penalty=0.5,
        logit_bias={"5": -100})
    warning = shaped.headers["x-rewardstream-sampling-warning"]
    assert "presence_penalty=0.5" in warning and "logit_bias on 1 tokens" in warning


@pytest.fixture
def tool_gateway_url(kafka: Settings, tool_model_dir: Path) -> Iterator[str]:
    sink = KafkaEventSink(kafka)
    with serve_in_thread(build_engine_app(tool_model_dir)) as engine:
        with serve_in_thread(create_gateway_app(GatewayConfig(), BackendClient(engine.url),
                                                sink, gateway_auth())) as gateway:
            yield gateway.url


def _ask(client: openai.OpenAI, request: str, trajectory: str, **extra):
    return client.chat.completions.create(
        model="rewardstream", messages=[{"role": "user", "content": request}], tools=TOOLS,
        max_tokens=40, seed=0, extra_headers={"X-Rewardstream-Trajectory-Id": trajectory},
        **extra)


def _streamed(stream) -> tuple[list, dict[int, dict], str | None, dict]:
    """The chunks, the calls reassembled from their deltas, the finish reason and the
    gateway's verdict, as a client reads a stream."""
    chunks, calls, finish, extra = [], {}, None, {}
    for chunk in stream:
        chunks.append(chunk)
        extra |= chunk.model_extra
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = delta.id or call["id"]
                call["name"] += (delta.function and delta.function.name) or ""
                call["arguments"] += (delta.function and delta.function.arguments) or ""
    return chunks, calls, finish, extra


def test_openai_client_gets_tool_calls_plain_and_streamed(tool_gateway_url: str) -> None:
    client = openai.OpenAI(base_url=f"{tool_gateway_url}/v1", api_key=GATEWAY_KEY, max_retries=0)
    reply = _ask(client, "Read calc.py.", "traj-t1")
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls
    assert (call.type, call.function.name) == ("function", "read_file")
    assert json.loads(call.function.arguments) == {"path": "calc.py"}
    assert call.id.startswith("call_") and reply.model_extra["broken_tool_calls"] == []

    chunks, calls, finish, extra = _streamed(_ask(client, "Look around.", "traj-t2",
                                                  stream=True))
    assert finish == "tool_calls" and extra["broken_tool_calls"] == []
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == [
        ("lint", {}), ("read_file", {"path": "src/app/calc.py"})]
    assert all(c["id"].startswith("call_") for c in calls.values())
    deltas = [d for c in chunks for ch in c.choices for d in ch.delta.tool_calls or []]
    opening = [d for d in deltas if d.id]  # first delta of each call: index, id and name
    assert [(d.index, d.function.name) for d in opening] == [(0, "lint"), (1, "read_file")]
    assert sum(1 for d in deltas if d.index == 1) > 2  # arguments arrive in fragments
    assert not any(ch.delta.content for c in chunks for ch in c.choices)

    plain = _ask(client, "Say done.", "traj-t3")
    assert plain.choices[0].message.content == "Done."
    assert plain.choices[0].finish_reason == "stop" and not plain.choices[0].message.tool_calls
    with pytest.raises(openai.BadRequestError, match=r"tools\[0\] must be"):
        client.chat.completions.create(model="rewardstream", tools=[{"type": "retrieval"}],
                                       messages=[{"role": "user", "content": "x"}])


def test_broken_calls_reach_the_client_as_written_and_the_log_from_the_gateway(
        kafka: Settings, tool_gateway_url: str, tool_model_dir: Path) -> None:
    client = openai.OpenAI(base_url=f"{tool_gateway_url}/v1", api_key=GATEWAY_KEY, max_retries=0)
    broken = _ask(client, "Break it.", "traj-b1")
    assert broken.choices[0].message.content == '<tool>read_file {"path": calc.py}</tool>'
    assert broken.choices[0].finish_reason == "stop" and not broken.choices[0].message.tool_calls
    [verdict] = broken.model_extra["broken_tool_calls"]
    assert (verdict["error_kind"], verdict["tool"]) == ("malformed_call", "read_file")

    _, calls, finish, extra = _streamed(_ask(client, "Open calc.py.", "traj-b2", stream=True))
    assert finish == "tool_calls" and json.loads(calls[0]["arguments"]) == {"file": "calc.py"}
    [bad] = extra["broken_tool_calls"]  # passed on as the model wrote it, judged by schema
    assert (bad["error_kind"], bad["tool_call_id"]) == ("bad_arguments", calls[0]["id"])

    events = _raw_events(kafka, 4)  # two completion.served, two tool.called
    served = {key: e for key, e in events if isinstance(e, CompletionServed)}
    recorded = {key: e for key, e in events if isinstance(e, ToolCalled)}
    assert set(served) == set(recorded) == {b"traj-b1", b"traj-b2"}
    assert served[b"traj-b1"].payload.completion_id == broken.id
    # The log keeps each reply's own finish reason: a parsed call is "tool_calls".
    assert [served[key].payload.finish_reason for key in (b"traj-b1", b"traj-b2")] == [
        "stop", "tool_calls"]
    for key, kind in ((b"traj-b1", "malformed_call"), (b"traj-b2", "bad_arguments")):
        event, completion = recorded[key], served[key]
        assert (event.payload.valid, event.payload.error_kind) == (False, kind)
        assert event.payload.call_id.startswith(completion.payload.completion_id)
        assert (event.checkpoint_id, event.arm) == (completion.checkpoint_id, completion.arm)
    # The whole completion, call text included, is logged with its behaviour logprobs.
    model, tokenizer = load_policy(tool_model_dir)
    payload = served[b"traj-b1"].payload
    expected = teacher_forced_logprobs(model, payload.prompt_token_ids,
                                       payload.completion_token_ids)
    assert max(abs(a - b) for a, b in zip(payload.behaviour_logprobs, expected,
                                          strict=True)) < TOLERANCE
    assert tokenizer.decode(payload.completion_token_ids, skip_special_tokens=True) == \
        '<tool>read_file {"path": calc.py}</tool>'
