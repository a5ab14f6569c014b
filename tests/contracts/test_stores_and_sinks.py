"""One contract per store or sink, run against every backend (each backend a subclass).

A registry store keeps what is published and reads back the registry fold of it, in order,
across instances; an event sink delivers every event it took, as the event, once."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from infra.kafka_io import read_topic
from infra.settings import Settings
from schemas.checkpoints import CheckpointEvent, Registry, promotion, rollback
from schemas.events import EventAdapter, ToolCalled, ToolCalledPayload, parse_event
from schemas.ids import uuid7
from serving.gateway.sinks import KafkaEventSink, MemoryEventSink
from trainer.registry_io import JsonlRegistryStore, KafkaRegistryStore, RegistryStore

pytestmark = pytest.mark.slow

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _created(sequence: int, checkpoint_id: str) -> CheckpointEvent:
    return CheckpointEvent(event_id=f"e{sequence}", sequence=sequence, occurred_at=NOW,
                           kind="created", status="candidate", checkpoint_id=checkpoint_id,
                           model="m", path=f"/ckpt/{checkpoint_id}")


class RegistryStoreContract:
    """Subclasses provide ``store`` (a fresh, empty one) and ``reopen`` (another instance)."""

    @pytest.fixture
    def store(self) -> RegistryStore:
        raise NotImplementedError

    def reopen(self, store: RegistryStore) -> RegistryStore:
        raise NotImplementedError

    def test_an_empty_store_reads_as_an_empty_registry(self, store: RegistryStore) -> None:
        assert store.read() == Registry()

    def test_published_events_read_back_as_their_fold_in_another_instance(
            self, store: RegistryStore) -> None:
        store.publish([_created(1, "c1")])
        registry = store.read()
        events = [promotion(registry, "c1", NOW, "ops", {"reason": "r"})]
        store.publish(events)
        store.publish(rollback(Registry([*registry.events, *events]), "c1", NOW, "ops", "bad"))
        again = self.reopen(store).read()
        assert again == store.read()
        assert [e.kind for e in again.history] == ["created", "promoted", "rolled_back"]
        assert again.production() is None and again.get("c1").status == "rolled_back"


class TestJsonlRegistryStore(RegistryStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> RegistryStore:
        return JsonlRegistryStore(tmp_path / "registry.jsonl")

    def reopen(self, store: RegistryStore) -> RegistryStore:
        assert isinstance(store, JsonlRegistryStore)
        return JsonlRegistryStore(store.path)


@pytest.mark.kafka
class TestKafkaRegistryStore(RegistryStoreContract):
    @pytest.fixture
    def store(self, kafka: Settings) -> RegistryStore:
        return KafkaRegistryStore(kafka)

    def reopen(self, store: RegistryStore) -> RegistryStore:
        assert isinstance(store, KafkaRegistryStore)
        return KafkaRegistryStore(store.settings)


def _tool_call(n: int) -> ToolCalled:
    return ToolCalled(event_id=uuid7(), trajectory_id=f"t{n}", session_id="s", user="u",
                      org_id="acme", checkpoint_id="c", occurred_at=NOW, sent_at=NOW,
                      received_at=NOW, event_time=NOW, clock_skew_ms=0,
                      payload=ToolCalledPayload(call_id=f"k{n}", tool="lint", valid=True))


class EventSinkContract:
    """Subclasses provide ``sink`` and ``delivered`` (the events it delivered, in order)."""

    @pytest.fixture
    def sink(self) -> Any:
        raise NotImplementedError

    def delivered(self, sink: Any) -> list[Any]:
        raise NotImplementedError

    def test_every_event_taken_is_delivered_once_as_itself(self, sink: Any) -> None:
        sent = [_tool_call(n) for n in range(5)]
        for event in sent:
            sink.emit(event)
        sink.close()
        got = self.delivered(sink)
        assert [e.event_id for e in got] == [e.event_id for e in sent]
        assert [EventAdapter.dump_json(e) for e in got] == [EventAdapter.dump_json(e)
                                                            for e in sent]


class TestMemoryEventSink(EventSinkContract):
    @pytest.fixture
    def sink(self) -> Any:
        return MemoryEventSink()

    def delivered(self, sink: Any) -> list[Any]:
        return sink.events


@pytest.mark.kafka
class TestKafkaEventSink(EventSinkContract):
    @pytest.fixture
    def sink(self, kafka: Settings) -> Any:
        self.settings = kafka  # where delivered() reads back from
        return KafkaEventSink(kafka)

    def delivered(self, sink: Any) -> list[Any]:
        deadline = time.monotonic() + 15
        while True:
            got = [parse_event(r.value) for r in read_topic(self.settings, "events.raw")]
            if len(got) >= 5 or time.monotonic() > deadline:
                return got
            time.sleep(0.2)
