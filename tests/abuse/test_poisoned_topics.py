"""Consumers of the log against poisoned topics on the real broker: the trainer, its registry,
the gateway's registry follower, alert delivery and the demo's readers (the monitors are in
test_poisoned_monitor_topics.py).

Good records and poison (bytes that are not JSON or not UTF-8, JSON of another kind, values out
of the topic's range, empty values and tombstones, JSON nested 100,000 deep) are written straight
to a consumer's input topics. Each test then checks that the consumer (1) made of the good
records exactly what it makes of them alone, (2) quarantined each poison record once under its
name, with a reason naming the field or the problem, and (3) still takes a good record written
after the poison. The reward join and the archiver have their own poison tests
(tests/integration/test_streams_worker.py, test_streams_archive.py).

The gateway's follower and the trainer's registry replay the checkpoints topic from its start
on every start or read, so they quarantine the same records again, under the same keys.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi import FastAPI, Request
from transformers import AutoTokenizer

from harness.demo.topics_io import AlertFollower, RewardReader
from infra.settings import Settings
from schemas.checkpoints import CheckpointEvent, Registry, fold
from serving.gateway.follower import follow_checkpoints
from serving.local_server import serve_in_thread
from streams.monitors.delivery import Deliverer, DeliveryTargets
from tests.support.monitors_seed import registry_events
from tests.support.poisoned_logs import (
    AT,
    alert_events,
    alert_poison,
    checkpoint_poison,
    clean_twin,
    entries,
    next_checkpoint_event,
    reward_poison,
    reward_records,
)
from tests.support.topic_poison import assert_quarantined, interleave, write
from tests.support.waits import wait_for
from trainer.advantages import EmaBaseline
from trainer.config import load_config
from trainer.consumer import Lineage, RewardConsumer, Selection, Staleness
from trainer.cycle import TrainingCycle
from trainer.prepare import prepare_batch
from trainer.registry_io import JsonlRegistryStore, KafkaRegistryStore
from trainer.source import ConsumedRecord
from trainer.synthetic import synthetic_records

pytestmark = [pytest.mark.abuse, pytest.mark.kafka]


def test_trainer_registry_replays_past_poison(kafka: Settings) -> None:
    events = registry_events()
    written = write(kafka, "checkpoints", interleave(entries(events), checkpoint_poison(events[0])))
    store = KafkaRegistryStore(kafka)
    assert store.read() == fold(events)
    assert store.read() == fold(events)  # each read replays the topic: same keys again
    found = assert_quarantined(kafka, "trainer-registry", written, repeats=True)
    assert len(found) == 2 * len({q.key for q in found})
    after = next_checkpoint_event(events)
    store.publish([after])
    assert store.read() == fold([*events, after])


def test_gateway_follower_routes_past_poison(kafka: Settings) -> None:
    events = registry_events()
    written = write(kafka, "checkpoints", interleave(entries(events), checkpoint_poison(events[0])))
    after = next_checkpoint_event(events)
    registries: list[dict[str, CheckpointEvent]] = []

    async def follow() -> None:
        async def on_registry(registry: Registry) -> None:
            registries.append(registry.latest)

        caught_up = asyncio.Event()
        task = asyncio.create_task(follow_checkpoints(kafka, on_registry, caught_up))
        try:
            await asyncio.wait_for(caught_up.wait(), 30)
            assert registries[-1] == fold(events).latest
            await asyncio.to_thread(assert_quarantined, kafka, "gateway", written)
            await asyncio.to_thread(write, kafka, "checkpoints", entries([after]))
            for _ in range(150):
                if registries[-1] == fold([*events, after]).latest:
                    break
                await asyncio.sleep(0.1)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(follow())
    assert registries[-1] == fold([*events, after]).latest


def test_trainer_trains_past_poison(kafka: Settings, tiny_model_dir: Path,
                                    tmp_path: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    records = synthetic_records(tokenizer, 12, seed=5)
    # Valid on the topic, but no embedding in this model: counted, never trained on.
    sample = records[1].samples[0]
    unknown = records[1].model_copy(update={"trajectory_id": "unknown-token", "samples": [
        sample.model_copy(update={"completion_token_ids": [len(tokenizer) + 5,
                                                           *sample.completion_token_ids[1:]]})]})
    first = [*records[:8], unknown]
    written = write(kafka, "rewards", interleave(entries(first), reward_poison(records[0])))
    source = RewardConsumer(kafka, "rewardstream-trainer")
    cycle = TrainingCycle(load_config(None, model_dir=tiny_model_dir, out_dir=tmp_path / "out",
                                      batch_records=8),
                          JsonlRegistryStore(tmp_path / "registry.jsonl"))
    cycle.start()
    cycle.begin()
    try:
        batch = source.next_batch(len(written), 5.0).records
        assert cycle.update(batch) is not None
        assert_quarantined(kafka, "trainer", written)
        write(kafka, "rewards", entries(records[8:]))
        later = source.next_batch(4, 5.0).records
        assert cycle.update(later) is not None
    finally:
        source.close()
    # Poison keeps its place (so positions move past it) with no record.
    assert [(c.offset, c.record is None) for c in batch] == [(w.offset, w.poison is not None)
                                                             for w in written]
    assert [c.record for c in batch + later if c.record is not None] == [*first, *records[8:]]

    def prepared(consumed: list[ConsumedRecord]):
        return prepare_batch(consumed, EmaBaseline(), selection=Selection(
                                 staleness=Staleness(1)), lineage=Lineage(0, lambda _: 0),
                             max_seq_len=4096, vocab_size=len(tokenizer), whiten=True)

    poisoned = prepared(batch)
    assert poisoned.samples == prepared([c for c in batch if c.record in records]).samples
    assert poisoned.counts["records_unparseable"] == len(written) - len(first)
    assert poisoned.counts["samples_dropped_token_out_of_vocab"] == 1


def test_demo_readers_read_past_poison(kafka: Settings) -> None:
    records = reward_records(25)
    alerts = alert_events(("edit_rate_collapse", "clarification_spike", "broken_calls"), AT)
    written = write(kafka, "rewards", interleave(entries(records[:20]), reward_poison(records[0])))
    written += write(kafka, "alerts", interleave(entries(alerts[:-1]), alert_poison(alerts[0])))
    follower = AlertFollower(kafka, lambda event: None)
    reader = RewardReader(kafka)
    try:
        first = reader.collect({r.trajectory_id for r in records[:20]}, 20.0)
        assert [c.record for c in first] == records[:20]
        assert_quarantined(kafka, "demo", written)
        write(kafka, "rewards", entries(records[20:]))
        write(kafka, "alerts", entries(alerts[-1:]))
        later = reader.collect({r.trajectory_id for r in records[20:]}, 20.0)
        assert [c.record for c in later] == records[20:]
        wait_for(lambda: len(follower.events) == len(alerts), 20, "the alert after the poison")
    finally:
        reader.close()
        follower.stop()
    assert follower.events == alerts



class _Webhook:
    """A webhook receiver on a loopback port that keeps what it is sent."""

    def __init__(self) -> None:
        self.received: list[dict] = []
        app = FastAPI()

        @app.post("/hook")
        async def hook(request: Request) -> dict:
            self.received.append(await request.json())
            return {}

        self.server = serve_in_thread(app)
        self.url = f"{self.server.url}/hook"


def _deliver(settings: Settings, until: Callable[[_Webhook], object],
             between: Callable[[], object] = lambda: None) -> list[dict]:
    """Run alert delivery to a webhook until ``until`` holds, calling ``between`` first."""
    webhook = _Webhook()
    deliverer = Deliverer(settings, DeliveryTargets(webhook_urls=(webhook.url,)))
    stop = threading.Event()
    thread = threading.Thread(target=deliverer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        between()
        wait_for(lambda: until(webhook), 30, "the webhooks")
        assert thread.is_alive()
    finally:
        stop.set()
        thread.join(10)
        webhook.server.stop()
    return webhook.received


def test_alert_delivery_notifies_past_poison(kafka: Settings) -> None:
    alerts = alert_events(("edit_rate_collapse", "clarification_spike", "broken_calls"), AT)
    first, last = alerts[:2] + alerts[3:], alerts[2:3]  # the third alert fires after the poison
    clean = clean_twin(kafka)
    write(clean, "alerts", entries(first + last))
    expected = _deliver(clean, lambda hook: len(hook.received) == 4)
    written = write(kafka, "alerts", interleave(entries(first), alert_poison(alerts[0])))

    def after_poison() -> None:
        assert_quarantined(kafka, "alert-delivery", written)
        write(kafka, "alerts", entries(last))

    delivered = _deliver(kafka, lambda hook: len(hook.received) == 4, after_poison)
    def order(body: dict) -> tuple[str, str]:
        return body["status"], body["alerts"][0]["fingerprint"]

    assert sorted(delivered, key=order) == sorted(expected, key=order)
