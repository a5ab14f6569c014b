"""Per-completion samples on the real broker: the rows a trainer reads from the worker's
`rewards` equal the rows of the offline replay; the consumer API filters by org and commits
only when told, so what was not committed comes again (at-least-once)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from infra.kafka_io import make_producer, send
from infra.settings import Settings
from schemas.rewards import reward_record_key
from schemas.samples import SampleRow, sample_rows
from schemas.topics import topic_name
from streams.simlog import SimConfig, simulate_log
from streams.spec import load_spec
from tests.support.streams_log import produce, replay_topic, run_in_process
from trainer.consumer import RewardConsumer, Selection, Staleness
from trainer.synthetic import synthetic_records

pytestmark = pytest.mark.kafka
SPEC = load_spec()


def _order(rows: list[SampleRow]) -> list[SampleRow]:
    return sorted(rows, key=lambda r: (r.org_id or "", r.trajectory_id, r.turn or 0))


def _read_all(consumer: RewardConsumer, expected: int, timeout_s: float = 60) -> list[SampleRow]:
    rows: list[SampleRow] = []
    deadline = time.monotonic() + timeout_s
    while len(rows) < expected and time.monotonic() < deadline:
        rows += [s.row for s in consumer.next_batch(500, timeout_s=1.0).samples]
    return rows


@pytest.mark.slow
def test_the_samples_a_trainer_reads_from_the_stream_equal_the_replays(
        kafka: Settings, tmp_path: Path) -> None:
    produce(kafka, simulate_log(150, seed=23, config=SimConfig(texts=True,
                                                               mean_start_gap_s=45.0)))
    replayed = replay_topic(kafka, SPEC)
    expected = [row for record in replayed.records for row in sample_rows(record)]
    run_in_process(kafka, tmp_path, len(replayed.records), timeout_s=180)
    consumer = RewardConsumer(kafka, "samples-reader")
    try:
        streamed = _read_all(consumer, len(expected))
    finally:
        consumer.close()
    assert len(expected) > 100 and _order(streamed) == _order(expected)
    assert any(row.prompt and row.completion for row in streamed)


class _Tokenizer:
    bos_token_id = 1

    def __call__(self, text: str) -> object:
        return type("Encoded", (), {"input_ids": [ord(c) % 50 + 2 for c in text[:6]]})()


def test_the_consumer_takes_one_org_and_commits_only_when_the_step_is_durable(
        kafka: Settings) -> None:
    now = datetime.now(UTC)
    records = [r.model_copy(update={
        "org_id": "acme" if i % 3 else "beta",
        "samples": [r.samples[0].model_copy(update={"served_at": now})]})
        for i, r in enumerate(synthetic_records(_Tokenizer(), 12))]
    producer = make_producer(kafka, "test")
    for record in records:
        send(producer, kafka, "rewards",
             reward_record_key(record.org_id, record.trajectory_id, record.spec_version),
             record.model_dump_json().encode())
    producer.close()
    rewards = topic_name(kafka.topic_prefix, "rewards")
    selection = Selection(frozenset({"acme"}), staleness=Staleness(max_hours=1.0))

    first = RewardConsumer(kafka, "my-trainer", selection)
    try:
        durable = first.next_batch(6, timeout_s=5.0)
        assert {s.row.org_id for s in durable.samples} == {"acme"}
        assert durable.counts == {"records": 6, "skipped_other_org": 2, "samples_kept": 4}
        first.commit(durable.positions)  # its step is durable
        lost = first.next_batch(6, timeout_s=5.0)  # this step never became durable
        assert [r.offset for r in lost.records] == list(range(6, 12))
    finally:
        first.close()
    committed = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, group_id="my-trainer",
                              enable_auto_commit=False)
    try:
        assert committed.committed(TopicPartition(rewards, 0)) == 6
    finally:
        committed.close()
    second = RewardConsumer(kafka, "my-trainer", selection)
    try:  # a restart gets everything after the last commit again
        again = second.next_batch(6, timeout_s=5.0)
        assert [r.offset for r in again.records] == list(range(6, 12))
        assert [s.row for s in again.samples] == [s.row for s in lost.samples]
    finally:
        second.close()
