"""With text capture off for an org, none of its text reaches any topic, file or export: the
gateway, ingest (dead letter included), the reward worker and its state, the archive and the
exports all run, and every one of them is searched. Another org's text, captured and redacted,
is found where it should be, so the search itself is proven to see text."""

from __future__ import annotations

import json
import re
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest

from infra.kafka_io import make_consumer
from infra.settings import Settings
from infra.topics import admin_client
from schemas.events import (
    CompletionServed,
    CompletionServedPayload,
    Event,
    EventAdapter,
    TrajectoryEnded,
    TrajectoryEndedPayload,
)
from schemas.ids import uuid7
from serving.engine.cli import build_engine_app
from serving.gateway.app import GatewayConfig, create_gateway_app
from serving.gateway.backend import BackendClient
from serving.gateway.sinks import KafkaEventSink
from serving.ingest.keys import ApiKey, KeyRing, hash_key
from serving.local_server import serve_in_thread
from serving.textpolicy import REDACTED, OrgText, TextPolicy
from streams.archive import archive_topic
from streams.export import run_export
from streams.spec import load_spec
from tests.support.ingest_support import ingest_config, running_server
from tests.support.service_keys import gateway_auth, gateway_key
from tests.support.streams_log import run_in_process

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

QUIET, OPEN = "quiet-org", "open-org"
POLICY = TextPolicy(patterns=(re.compile(r"redactme\w+"),), orgs={QUIET: OrgText(capture=False)})


def _events(org: str, mark: str) -> list[Event]:
    """What a client of ``org`` sends: a completion.served with text, through ingest, and the
    end of both its trajectories (the gateway's and this one)."""
    now = datetime.now(UTC)
    common = {"session_id": "s1", "user": "u1", "checkpoint_id": "base", "occurred_at": now,
              "sent_at": now}
    served = CompletionServed(event_id=uuid7(), trajectory_id=f"{org}-ingest", **common,
                              payload=CompletionServedPayload(
        completion_id=f"{org}-ingest-c0", model="m", prompt_token_ids=[1, 2],
        completion_token_ids=[3], behaviour_logprobs=[-0.5], ttft_ms=1.0, latency_ms=2.0,
        prompt_text=f"{mark} asked by a client", completion_text=f"{mark} answered redactme42"))
    return [served, *[TrajectoryEnded(event_id=uuid7(), trajectory_id=trajectory, **common,
                                      payload=TrajectoryEndedPayload(outcome="completed",
                                                                     turns=1))
                      for trajectory in (f"{org}-gateway", f"{org}-ingest")]]


def _refused(org: str, mark: str) -> bytes:
    """A completion.served with text that ingest refuses (a negative latency): dead-lettered."""
    event = json.loads(EventAdapter.dump_json(_events(org, mark)[0]))
    event["payload"]["latency_ms"] = -1.0
    return json.dumps(event).encode()


def _topic_bytes(settings: Settings) -> dict[str, bytes]:
    """Every record (key, value, headers) of every topic of this test, by topic."""
    admin = admin_client(settings)
    try:
        names = sorted(t for t in admin.list_topics() if settings.topic_prefix in t)
    finally:
        admin.close()
    from kafka import TopicPartition

    consumer = make_consumer(settings, "text-search")
    found: dict[str, bytes] = {}
    try:
        for name in names:
            partitions = [TopicPartition(name, p)
                          for p in sorted(consumer.partitions_for_topic(name) or ())]
            consumer.assign(partitions)
            consumer.seek_to_beginning(*partitions)
            ends = consumer.end_offsets(partitions)
            chunks: list[bytes] = []
            while any(consumer.position(tp) < end for tp, end in ends.items()):
                for records in consumer.poll(timeout_ms=500).values():
                    for r in records:
                        chunks += [r.key or b"", r.value or b""]
                        chunks += [value for _, value in r.headers or []]
            found[name] = b"\n".join(chunks)
    finally:
        consumer.close()
    return found


def _file_bytes(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory``; Parquet files decoded (their pages are compressed)."""
    found = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == ".parquet":
            data = json.dumps(pq.read_table(path).to_pylist(), default=str,
                              ensure_ascii=False).encode()
        found[str(path.relative_to(directory))] = data
    return found


def test_no_text_of_an_org_without_capture_reaches_any_topic_file_or_export(
        kafka: Settings, tiny_model_dir: Path, tmp_path: Path) -> None:
    mark = uuid.uuid4().hex[:12]
    marks = {QUIET: f"quietmark{mark}", OPEN: f"openmark{mark}"}
    keys = {QUIET: "rsk_quiet-gateway-key", OPEN: "rsk_open-gateway-key"}
    auth = gateway_auth(*(gateway_key(key, org) for org, key in keys.items()))
    config = GatewayConfig(text_policy=POLICY)
    with serve_in_thread(build_engine_app(tiny_model_dir)) as engine:
        app = create_gateway_app(config, BackendClient(engine.url),
                                 KafkaEventSink(kafka, tmp_path / "spool"), auth)
        with serve_in_thread(app) as gateway:
            for org, key in keys.items():
                answer = httpx.post(f"{gateway.url}/v1/chat/completions", timeout=120, headers={
                    "Authorization": f"Bearer {key}"}, json={
                    "model": "rewardstream", "max_tokens": 6, "messages": [
                        {"role": "user", "content": f"{marks[org]} redactme7 fix add"}],
                    "metadata": {"trajectory_id": f"{org}-gateway", "user": "u1"}})
                assert answer.status_code == 200, answer.text
    ingest_keys = KeyRing([ApiKey(f"{org}-client", hash_key(f"rsk_{org}-ingest-key"), org,
                                  frozenset({"*", "completion.served"}), 1e6, 1e6)
                           for org in (QUIET, OPEN)])
    with running_server(kafka, ingest_config(keys=ingest_keys, text_policy=POLICY)) as ingest:
        for org in (QUIET, OPEN):
            body = b"\n".join([*(EventAdapter.dump_json(e) for e in _events(org, marks[org])),
                               _refused(org, marks[org])])
            answered = ingest.post(body, key=f"rsk_{org}-ingest-key")
            assert answered.status_code == 207 and len(answered.json()["rejected"]) == 1
    run_in_process(kafka, tmp_path, expected=4, timeout_s=180)
    archive_topic(kafka, tmp_path / "archive", flush_interval_s=0.1, stop_at_end=True)
    for org in (QUIET, OPEN):
        for view, file_format in (("samples", "jsonl"), ("samples", "parquet"),
                                  ("binary", "jsonl")):
            run_export(kafka, org_id=org, out_dir=tmp_path / "exports" / org / view / file_format,
                       start=None, stop=None, spec=load_spec(), view=view,
                       file_format=file_format, retention_ms=7 * 86_400_000)
    time.sleep(0.5)  # the worker's store files settle

    places = {f"topic {name}": data for name, data in _topic_bytes(kafka).items()}
    places |= {f"file {name}": data for name, data in _file_bytes(tmp_path).items()}
    assert len(places) > 15 and any("changelog" in place for place in places)
    quiet = marks[QUIET].encode()
    assert not [place for place, data in places.items() if quiet in data]
    assert not [place for place, data in places.items() if b"redactme" in data]
    opened = {place for place, data in places.items() if marks[OPEN].encode() in data}
    for expected in ("events.raw", "events.deadletter", "rewards", "archive/org=open-org",
                     "exports/open-org/samples/jsonl", "exports/open-org/samples/parquet"):
        assert any(expected in place for place in opened), (expected, sorted(opened))
    assert any(REDACTED.encode() in places[place] for place in opened)
    samples = (tmp_path / "exports" / QUIET / "samples" / "jsonl" / "train.jsonl").read_text()
    rows = [json.loads(line) for line in samples.splitlines()]
    assert len(rows) == 2 and all(r["prompt"] is None and r["completion"] is None for r in rows)
