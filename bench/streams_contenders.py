"""The contenders of ``rewardstream bench streams``, each reading the same ``events.raw`` topic
from the beginning and taking :class:`~bench.streams_figures.Samples` as it goes.

* the floor: a bare confluent-kafka consumer loop (``consume`` in batches of up to 10,000) that
  decodes every event with orjson and puts one RocksDB key per event (rocksdict): the least a
  stateful consumer of this log does on the same client library the join uses;
* the bare aiokafka loop: only fetches records (``getmany``), the previous reference;
* a bare Quix Streams application that only iterates the records: the engine's own ceiling;
* the reward join: reads, folds, finalises, sends records and late events, writes its RocksDB
  state and changelog, and commits (:func:`streams.worker.build_app`), in this process; with
  several workers, each a process of its own that takes its own samples.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from pathlib import Path
from typing import Any

from bench.streams_figures import Sample, Samples

__all__ = ["aiokafka_loop", "floor_loop", "group", "quix_bare", "reward_join"]

BATCH = 10_000  # records a bare loop asks for at a time
SAMPLE_EVERY = 4096  # records between two samples of the floor and the Quix app (and the join)
IDLE_STOP_S = 5.0  # a worker of a group stops after this long without records


def floor_loop(settings: Any, topic: str, datadir: Path, expected: int,
               samples: Samples) -> None:
    import orjson
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    from rocksdict import Options, Rdict

    from infra.kafka_io import confluent_options

    consumer = Consumer({**confluent_options(settings, "bench-floor"),
                         "group.id": f"{settings.topic_prefix}bench-floor",
                         "enable.auto.commit": False,
                         "max.partition.fetch.bytes": 16 * 1024 * 1024,
                         "fetch.max.bytes": 64 * 1024 * 1024})
    database = Rdict(str(datadir / "floor"), Options(raw_mode=True))
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)
                         for p in range(settings.topic_partitions)])
        seen = 0
        while seen < expected:
            for message in consumer.consume(num_messages=BATCH, timeout=1.0):
                if message.error() is not None:
                    raise RuntimeError(f"floor consumer: {message.error()}")
                event = orjson.loads(message.value())
                database[message.key() + b"/" + event["event_id"].encode()] = \
                    message.offset().to_bytes(8, "big")
                seen += 1
                if seen % SAMPLE_EVERY == 0:
                    samples.take(seen)
            samples.take(seen)
    finally:
        consumer.close()
        database.close()


async def _aiokafka_loop(settings: Any, topic: str, expected: int, samples: Samples) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from infra.kafka_auth import python_client_options

    consumer = AIOKafkaConsumer(**python_client_options(settings),
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(settings.topic_partitions)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        seen = 0
        while seen < expected:
            batch = await consumer.getmany(timeout_ms=1000, max_records=BATCH)
            seen += sum(len(records) for records in batch.values())
            samples.take(seen)
    finally:
        await consumer.stop()


def aiokafka_loop(settings: Any, topic: str, expected: int, samples: Samples) -> None:
    asyncio.run(_aiokafka_loop(settings, topic, expected, samples))


def quix_bare(settings: Any, topic: str, datadir: Path, expected: int,
              samples: Samples) -> None:
    from quixstreams import Application
    from quixstreams.kafka.configuration import ConnectionConfig

    from infra.kafka_io import confluent_options

    app = Application(
        broker_address=ConnectionConfig.from_librdkafka_dict(
            confluent_options(settings, "bench-bare")),
        consumer_group=f"{settings.topic_prefix}bench-bare", auto_offset_reset="earliest",
        state_dir=str(datadir / "bare"), loglevel=None)
    seen = [0]

    def count(_: Any) -> None:
        seen[0] += 1
        if seen[0] % SAMPLE_EVERY == 0 or seen[0] >= expected:
            samples.take(seen[0])
            if seen[0] >= expected:
                app.stop()

    sdf = app.dataframe(app.topic(topic, key_deserializer="bytes", value_deserializer="bytes"))
    sdf.update(count)
    app.run(timeout=120)


def _join_config(settings: Any, datadir: Path) -> Any:
    from streams.spec import load_spec
    from streams.worker import WorkerConfig

    return WorkerConfig(settings=settings, spec=load_spec(), datadir=datadir,
                        app_id=f"{settings.topic_prefix}bench-join")


def _worker_result(totals: Any) -> dict[str, Any]:
    return {"events": totals.events, "records": totals.records,
            "state": {str(p): size for p, size in sorted(totals.partitions.items())},
            "restore_s": {str(p): round(s, 3) for p, s in sorted(totals.restored.items())}}


def reward_join(settings: Any, datadir: Path, expected: int, samples: Samples) -> dict[str, Any]:
    """The join in this process; the shell asks ``stop_when`` every 4,096 records and at each
    checkpoint, which is where the samples are taken."""
    from streams.worker import build_app

    def stop_when(totals: Any) -> bool:
        samples.take(totals.events)
        return bool(totals.events >= expected)

    app, shell = build_app(_join_config(settings, datadir), stop_when=stop_when)
    app.run(timeout=300)
    return _worker_result(shell.totals)


def _group_member(settings: Any, datadir: Path, results: Any) -> None:
    """One worker of a group (a process of its own), until the topic goes quiet."""
    from streams.worker import build_app, collect_garbage_rarely

    samples = Samples()

    def sample(totals: Any) -> bool:
        samples.take(totals.events)
        return False

    app, shell = build_app(_join_config(settings, datadir), stop_when=sample)
    collect_garbage_rarely()
    app.run(timeout=IDLE_STOP_S)
    results.put({**_worker_result(shell.totals),
                 "samples": [(s.events, s.wall_s, s.cpu_s) for s in samples.taken]})


def group(settings: Any, datadir: Path, workers: int) -> tuple[dict[str, Any], list[Samples]]:
    """The join as ``workers`` processes in one consumer group: what they did and each one's
    samples (monotonic time is the machine's, so the members' samples share one clock)."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    members = [context.Process(target=_group_member,
                               args=(settings, datadir / f"worker-{n}", results))
               for n in range(workers)]
    for member in members:
        member.start()
    each = [results.get(timeout=900) for _ in members]
    for member in members:
        member.join(timeout=60)
    samples = [Samples([Sample(*taken) for taken in w["samples"]]) for w in each]
    state = {p: size for w in each for p, size in w["state"].items()}
    return ({"events": sum(w["events"] for w in each),
             "records": sum(w["records"] for w in each), "state": state,
             "per_worker_events": [w["events"] for w in each]}, samples)
