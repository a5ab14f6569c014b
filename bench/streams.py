"""``rewardstream bench streams``: events/s through the reward join vs a bare consumer loop.

All read the same freshly produced ``events.raw`` topic (a simulated log) in the same run: the
bare loop only fetches records (aiokafka ``getmany``); a bare faust agent only iterates them (the
framework's ceiling); the reward join parses, folds, finalises, sends records and late events,
writes its table and commits. Start-up is excluded from all three.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import replace
from pathlib import Path
from tempfile import TemporaryDirectory

import typer

__all__ = ["register"]


async def _bare_loop(settings, topic: str, expected: int) -> float:  # type: ignore[no-untyped-def]
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap_servers,
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(settings.topic_partitions)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        seen, started = 0, None
        while seen < expected:
            batch = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            if started is None and batch:
                started = time.monotonic()
            seen += sum(len(records) for records in batch.values())
        return seen / (time.monotonic() - (started or time.monotonic()))
    finally:
        await consumer.stop()


async def _faust_bare(settings, topic: str, datadir: Path, expected: int) -> float:  # type: ignore[no-untyped-def]
    """A faust agent that only iterates the same topic: the framework's own ceiling (fetching
    as much per round trip as the reward join does)."""
    import faust

    from streams.worker import WorkerConfig

    app = faust.App(f"{settings.topic_prefix}bench-bare", broker=f"kafka://{settings.bootstrap_servers}",
                    store="memory://", datadir=str(datadir), web_enabled=False,
                    topic_partitions=settings.topic_partitions, consumer_auto_offset_reset="earliest",
                    consumer_max_fetch_size=WorkerConfig.fetch_max_bytes_per_partition)
    seen = {"events": 0, "first_s": 0.0, "last_s": 0.0}

    @app.agent(app.topic(topic, key_serializer="raw", value_serializer="raw"))
    async def count(stream):  # type: ignore[no-untyped-def]
        async for _ in stream.events():
            if not seen["events"]:
                seen["first_s"] = time.monotonic()
            seen["events"] += 1
            seen["last_s"] = time.monotonic()

    await app.start()
    try:
        while seen["events"] < expected:
            await asyncio.sleep(0.05)
    finally:
        await app.stop()
    return seen["events"] / (seen["last_s"] - seen["first_s"])


async def _reward_join(settings, datadir: Path, expected: int, store: str) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    from streams.spec import load_spec
    from streams.worker import WorkerConfig, build_app

    config = WorkerConfig(settings=settings, spec=load_spec(), datadir=datadir, store=store,
                          app_id=f"{settings.topic_prefix}bench-join")
    app, totals = build_app(config)
    await app.start()
    try:
        while totals.events < expected:
            await asyncio.sleep(0.05)
    finally:
        await app.stop()
    elapsed_s = (totals.last_batch_s or 0.0) - (totals.first_batch_s or 0.0)
    return totals.events / elapsed_s, totals.records


def streams(
    trajectories: int = typer.Option(3000, min=10, help="Simulated trajectories (~11 events each)."),
    store: str = typer.Option("rocksdb://", help="Table store of the reward join."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Events/s through the reward join, a bare aiokafka loop and a bare faust agent on the
    same topic, and the ratios (goal: the join at 30% of the bare loop or better).

    Example: rewardstream bench streams --trajectories 5000 --json"""
    from infra.settings import load_settings
    from infra.topics import create_topics
    from schemas.topics import topic_name
    from streams.simlog import simulate_log

    settings = replace(load_settings(), topic_prefix=f"bench-{uuid.uuid4().hex[:8]}.")
    create_topics(settings)
    log = simulate_log(trajectories, seed=0)
    topic = topic_name(settings.topic_prefix, "events.raw")
    _produce(settings, topic, log)
    bare = asyncio.run(_bare_loop(settings, topic, len(log)))
    with TemporaryDirectory() as datadir:
        faust_bare = asyncio.run(_faust_bare(settings, topic, Path(datadir), len(log)))
        join, records = asyncio.run(_reward_join(settings, Path(datadir), len(log), store))
    result = {"events": len(log), "records": records, "store": store,
              "bare_loop_events_per_s": round(bare), "faust_bare_events_per_s": round(faust_bare),
              "reward_join_events_per_s": round(join), "ratio": round(join / bare, 4),
              "ratio_to_faust_bare": round(join / faust_bare, 4)}
    if as_json:
        typer.echo(json.dumps(result))
    else:
        typer.echo(f"{len(log)} events ({records} reward records), topic prefix "
                   f"{settings.topic_prefix}\n"
                   f"  bare aiokafka loop : {bare:10,.0f} events/s\n"
                   f"  bare faust agent   : {faust_bare:10,.0f} events/s\n"
                   f"  reward join        : {join:10,.0f} events/s\n"
                   f"  ratio              : {join / bare:10.1%}  of the bare loop (goal >= 30%), "
                   f"{join / faust_bare:.1%} of the bare faust agent")


def _produce(settings, topic: str, log: list[tuple[bytes, bytes]]) -> None:  # type: ignore[no-untyped-def]
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all",
                             linger_ms=20, batch_size=512 * 1024)
    for key, value in log:
        producer.send(topic, key=key, value=value)
    producer.flush()
    producer.close()


def register(bench_app: typer.Typer) -> None:
    bench_app.command("streams")(streams)
