"""A secured broker enforces the principals table, and the services still work through it.

A private broker (`kafka start --secure`: SASL/SCRAM, StandardAuthorizer, no ACL means no
access) on free ports with its own data directory; the shared broker is never touched. Topics
and principals are made as admin, exactly as an operator makes them.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError
from kafka.errors import TopicAuthorizationFailedError

from harness.samples import sample_trajectory
from infra import broker
from infra.broker_security import ADMIN
from infra.credentials import credentials_dir, principal_settings
from infra.errors import BrokerError
from infra.kafka_auth import python_client_options
from infra.kafka_io import make_producer, read_topic, send
from infra.principals import PRINCIPALS
from infra.principals_admin import create_principals
from infra.settings import Settings
from infra.topics import create_topics
from schemas.events import EventAdapter
from schemas.metrics import MetricWindow
from streams.monitors.simulate import PROFILES, Segment, simulate
from streams.spec import DEFAULT_SPEC_PATH
from tests.support.ingest_support import running_server
from tests.support.join_workers import start_worker, stop_workers
from tests.support.monitors_seed import metrics_worker
from tests.support.private_kafka import private_broker_settings
from tests.support.waits import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, kafka_settings: Settings,
            ) -> Iterator[Settings]:
    """A secured private broker with the platform's topics (prefix ``acl.``) and principals."""
    settings = private_broker_settings(tmp_path_factory.mktemp("secured-kafka"), 1,
                                       topic_prefix="acl.")
    started = time.monotonic()
    broker.start(settings, secure=True)
    print(f"\nsecured broker: formatted and started in {time.monotonic() - started:.1f} s")
    try:
        admin = principal_settings(settings, ADMIN)
        create_topics(admin)
        create_principals(admin, credentials_dir(settings))
        yield settings
    finally:
        broker.stop(settings)


def _may_write(settings: Settings, principal: str, topic: str) -> bool:
    producer = make_producer(principal_settings(settings, principal), "acl-test")
    try:
        send(producer, settings, topic, b"acl-test", b"{}")
        return True
    except TopicAuthorizationFailedError:
        return False
    finally:
        producer.close()


@pytest.mark.parametrize(("topic", "writers"), [
    ("checkpoints", {"trainer", "console", "monitors"}),  # monitors: auto-protect rollbacks
    ("events.raw", {"ingest", "gateway"}),
    ("rewards", {"reward-worker"}),
])
def test_only_the_tables_writers_may_write(secured: Settings, topic: str,
                                           writers: set[str]) -> None:
    allowed = {p.name for p in PRINCIPALS if _may_write(secured, p.name, topic)}
    assert allowed == writers
    assert allowed == {p.name for p in PRINCIPALS if topic in p.writes}


def test_a_principal_reads_only_what_its_row_grants(secured: Settings) -> None:
    ingest = principal_settings(secured, "ingest")
    marker = uuid.uuid4().hex.encode()
    producer = make_producer(ingest, "acl-test")
    send(producer, ingest, "events.raw", b"acl-test", marker)
    producer.close()
    assert marker in {r.value for r in read_topic(ingest, "events.raw")}
    with pytest.raises(BrokerError, match="may not read it"):
        list(read_topic(ingest, "rewards"))


def test_a_wrong_password_or_no_credentials_get_nothing(secured: Settings) -> None:
    ingest = principal_settings(secured, "ingest")

    async def connect(options: dict[str, object]) -> None:
        producer = AIOKafkaProducer(**options, request_timeout_ms=5000)
        try:
            await producer.start()
        finally:
            await producer.stop()

    wrong = python_client_options(ingest) | {"sasl_plain_password": "not-the-password"}
    with pytest.raises(KafkaConnectionError):
        asyncio.run(connect(wrong))
    asyncio.run(connect(python_client_options(ingest)))  # the right one connects


def _values(settings: Settings, topic: str) -> list[dict[str, object]]:
    """The JSON objects on ``topic`` (read to its end before any is parsed)."""
    return [json.loads(r.value) for r in list(read_topic(settings, topic))
            if r.value.startswith(b"{")]


@contextmanager
def _reward_worker(settings: Settings, datadir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`rewardstream worker` as a process configured by its environment,
    with the default spec's 600 s horizon only: the sample trajectory reports persistence at
    600 s, so it is complete as soon as its events are read."""
    spec = datadir.with_suffix(".toml")
    default = DEFAULT_SPEC_PATH.read_text()
    spec.write_text(default.replace("[[kept]]\nhorizon_s = 3600\nweight = 1.0\n", ""))
    assert spec.read_text() != default
    worker = start_worker(settings, datadir, datadir.with_suffix(".log"), "--spec", str(spec))
    try:
        yield worker
    finally:
        stop_workers([worker])


def test_services_work_as_their_principals(secured: Settings, tmp_path: Path) -> None:
    trajectory = f"acl-{uuid.uuid4().hex}"
    events = [EventAdapter.dump_json(e) for e in sample_trajectory(trajectory)]
    with running_server(principal_settings(secured, "ingest")) as server:
        answer = server.post(b"\n".join(events))
    assert answer.status_code == 200
    assert len(answer.json()["accepted"]) == len(events)
    # Other tests of this module leave records of theirs ("{}") on the topics: they are skipped.
    stored = _values(principal_settings(secured, "archiver"), "events.raw")
    assert {envelope.get("event_id") for envelope in stored} >= set(answer.json()["accepted"])

    trainer = principal_settings(secured, "trainer")
    worker = principal_settings(secured, "reward-worker")
    with _reward_worker(worker, tmp_path / "worker") as process:
        def joined() -> list[dict[str, object]]:
            assert process.poll() is None, "the reward worker exited"
            return [r for r in _values(trainer, "rewards") if r.get("trajectory_id") == trajectory]

        assert wait_for(joined, 90, "the reward record of the ingested trajectory")

    # Later rewards move the monitors' watermark past the joined record's window (~150 s).
    producer = make_producer(worker, "acl-test")
    records = list(simulate([Segment({"a": ("c0", PROFILES["healthy"])}, 300)], seed=5,
                            start=datetime.now(UTC)))
    for record in records:
        send(producer, worker, "rewards", record.trajectory_id.encode(),
             record.model_dump_json().encode())
    producer.close()

    console = principal_settings(secured, "console")

    def reward_windows() -> list[MetricWindow]:
        windows = [MetricWindow.model_validate_json(r.value)
                   for r in list(read_topic(console, "metrics"))]
        return [w for w in windows if w.scope == "rewards"]

    with metrics_worker(principal_settings(secured, "monitors"), tmp_path):
        def joined_window() -> list[MetricWindow]:
            windows = reward_windows()
            return windows if ("ckpt-0", "control") in {(w.checkpoint_id, w.arm)
                                                        for w in windows} else []

        windows = wait_for(joined_window, 90, "the joined record's window on metrics")
    assert {(w.checkpoint_id, w.arm) for w in windows} <= {("ckpt-0", "control"), ("c0", "a")}
