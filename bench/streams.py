"""``rewardstream bench streams``: events/s through the reward join vs bare consumer loops.

All read the same freshly produced ``events.raw`` topic (a simulated log) in the same run: the
bare loop only fetches records (aiokafka ``getmany``); a bare Quix Streams application only
iterates them (the engine's own ceiling); the reward join reads, folds, finalises, sends
records and late events, writes its RocksDB state and changelog, and commits. Each rate runs
from the first record processed to the last (start-up, rebalance and recovery excluded).

With ``--workers N`` the join runs as N worker processes in one consumer group; each reports
its own rate, and the group's rate is all events over the span from the first worker's first
record to the last worker's last. On a 2-core machine N > 1 shows the join staying correct
under rebalances far more than it shows speed.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import time
import uuid
from dataclasses import replace
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import typer

__all__ = ["register"]

IDLE_STOP_S = 5.0  # a worker of a group stops after this long without records


async def _bare_loop(settings: Any, topic: str, expected: int) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from infra.kafka_auth import python_client_options

    consumer = AIOKafkaConsumer(**python_client_options(settings),
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


def _quix_bare(settings: Any, topic: str, datadir: Path, expected: int) -> float:
    """A Quix application that only iterates the topic: the engine's own ceiling."""
    from quixstreams import Application
    from quixstreams.kafka.configuration import ConnectionConfig

    from infra.kafka_io import confluent_options

    app = Application(
        broker_address=ConnectionConfig.from_librdkafka_dict(
            confluent_options(settings, "bench-bare")),
        consumer_group=f"{settings.topic_prefix}bench-bare", auto_offset_reset="earliest",
        state_dir=str(datadir / "bare"), loglevel=None)
    seen = {"events": 0, "first_s": 0.0, "last_s": 0.0}

    def count(_: Any) -> None:
        now = time.monotonic()
        if not seen["events"]:
            seen["first_s"] = now
        seen["events"] += 1
        seen["last_s"] = now
        if seen["events"] >= expected:
            app.stop()

    sdf = app.dataframe(app.topic(topic, key_deserializer="bytes", value_deserializer="bytes"))
    sdf.update(count)
    app.run(timeout=60)
    return seen["events"] / (seen["last_s"] - seen["first_s"])


def _join_config(settings: Any, datadir: Path) -> Any:
    from streams.spec import load_spec
    from streams.worker import WorkerConfig

    return WorkerConfig(settings=settings, spec=load_spec(), datadir=datadir,
                        app_id=f"{settings.topic_prefix}bench-join")


def _reward_join(settings: Any, datadir: Path, expected: int) -> dict[str, Any]:
    from streams.worker import build_app

    app, shell = build_app(_join_config(settings, datadir),
                           stop_when=lambda totals: totals.events >= expected)
    app.run(timeout=120)
    return _worker_result(shell.totals)


def _worker_result(totals: Any) -> dict[str, Any]:
    span_s = (totals.last_event_s or 0.0) - (totals.first_event_s or 0.0)
    return {"events": totals.events, "records": totals.records,
            "events_per_s": round(totals.events / span_s) if span_s > 0 else 0,
            "first_s": totals.first_event_s, "last_s": totals.last_event_s,
            "state": {str(p): size for p, size in sorted(totals.partitions.items())},
            "restore_s": {str(p): round(s, 3) for p, s in sorted(totals.restored.items())}}


def _group_member(settings: Any, datadir: Path, results: Any) -> None:
    """One worker of a group (a process of its own), until the topic goes quiet."""
    from streams.worker import build_app, collect_garbage_rarely

    app, shell = build_app(_join_config(settings, datadir))
    collect_garbage_rarely()
    app.run(timeout=IDLE_STOP_S)
    results.put(_worker_result(shell.totals))


def _group(settings: Any, datadir: Path, workers: int) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    members = [context.Process(target=_group_member,
                               args=(settings, datadir / f"worker-{n}", results))
               for n in range(workers)]
    for member in members:
        member.start()
    each = [results.get(timeout=600) for _ in members]
    for member in members:
        member.join(timeout=60)
    first = min(w["first_s"] for w in each if w["first_s"] is not None)
    last = max(w["last_s"] for w in each if w["last_s"] is not None)
    events = sum(w["events"] for w in each)
    state = {p: size for w in each for p, size in w["state"].items()}
    return {"events": events, "records": sum(w["records"] for w in each),
            "events_per_s": round(events / (last - first)), "state": state,
            "per_worker_events_per_s": [w["events_per_s"] for w in each],
            "per_worker_events": [w["events"] for w in each]}


def _run(trajectories: int, partitions: int, workers: int) -> dict[str, Any]:
    """One run on a fresh topic: every contender's rate and the ratios."""
    from infra.settings import load_settings
    from infra.topics import create_topics
    from schemas.topics import topic_name
    from streams.simlog import simulate_log
    from streams.worker import collect_garbage_rarely

    settings = replace(load_settings(), topic_prefix=f"bench-{uuid.uuid4().hex[:8]}.",
                       topic_partitions=partitions)
    create_topics(settings)
    log = simulate_log(trajectories, seed=0)
    topic = topic_name(settings.topic_prefix, "events.raw")
    _produce(settings, topic, log)
    collect_garbage_rarely()  # as the worker command does, for every contender alike
    bare = asyncio.run(_bare_loop(settings, topic, len(log)))
    with TemporaryDirectory() as directory:
        datadir = Path(directory)
        quix_bare = _quix_bare(settings, topic, datadir, len(log))
        join = (_reward_join(settings, datadir, len(log)) if workers == 1
                else _group(settings, datadir, workers))
    rate = join["events_per_s"]
    return {"events": len(log), "partitions": partitions, "workers": workers,
            "records": join["records"], "topic_prefix": settings.topic_prefix,
            "load_avg_1m": round(os.getloadavg()[0], 2), "bare_loop_events_per_s": round(bare),
            "quix_bare_events_per_s": round(quix_bare), "reward_join_events_per_s": rate,
            "ratio": round(rate / bare, 4), "ratio_to_quix_bare": round(rate / quix_bare, 4),
            "per_worker_events_per_s": join.get("per_worker_events_per_s", [rate]),
            "state_per_partition": join["state"]}


def _echo_run(result: dict[str, Any]) -> None:
    bare, quix_bare = result["bare_loop_events_per_s"], result["quix_bare_events_per_s"]
    rate = result["reward_join_events_per_s"]
    typer.echo(f"{result['events']} events on {result['partitions']} partitions "
               f"({result['records']} reward records), topic prefix {result['topic_prefix']}, "
               f"load average {result['load_avg_1m']}\n"
               f"  bare aiokafka loop : {bare:10,.0f} events/s\n"
               f"  bare Quix app      : {quix_bare:10,.0f} events/s\n"
               f"  reward join        : {rate:10,.0f} events/s with {result['workers']} "
               f"worker(s) {result['per_worker_events_per_s']}\n"
               f"  ratio              : {rate / bare:10.1%}  of the bare loop (goal >= 10%, "
               f"stretch 30%), {rate / quix_bare:.1%} of the bare Quix app")
    for partition, size in sorted(result["state_per_partition"].items()):
        typer.echo(f"  state of partition {partition}: {size}")


def streams(
    trajectories: int = typer.Option(3000, min=10,
                                     help="Simulated trajectories (~11 events each)."),
    partitions: int = typer.Option(3, min=1, help="Partitions of the topic."),
    workers: int = typer.Option(1, min=1, help="Reward-join worker processes in the group."),
    runs: int = typer.Option(1, min=1, help="Runs, each on a fresh topic; each is reported."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Events/s through the reward join, a bare aiokafka loop and a bare Quix Streams
    application on the same topic, and the ratios (goal: the join at 10% of the bare loop or
    better; 30% stretch). With ``--runs N`` the JSON object holds every run (``runs``) and the
    ratio's min and max.

    Example: rewardstream bench streams --trajectories 5000 --workers 2 --runs 3 --json"""
    results = [_run(trajectories, partitions, workers) for _ in range(runs)]
    ratios = [result["ratio"] for result in results]
    if as_json:
        summary = {"runs": results, "ratio": {"min": min(ratios), "max": max(ratios)}}
        typer.echo(json.dumps(results[0] if runs == 1 else summary))
        return
    for result in results:
        _echo_run(result)
    if runs > 1:
        typer.echo(f"ratio over {runs} runs: {min(ratios):.1%} .. {max(ratios):.1%}")


def _produce(settings: Any, topic: str, log: list[tuple[bytes, bytes]]) -> None:
    from infra.kafka_io import make_producer

    producer = make_producer(settings, "bench-streams", linger_ms=20, batch_size=512 * 1024)
    for key, value in log:
        producer.send(topic, key=key, value=value)
    producer.flush()
    producer.close()


def register(bench_app: typer.Typer) -> None:
    bench_app.command("streams")(streams)
