"""``rewardstream bench restore``: how long a partition holding many markers takes to restore.

A Quix application in the reward join's consumer group writes ``--markers`` markers into
partition 0's store (the join's own layout, through its changelog) and a handful into
partition 1, and commits. A reward-join worker with an empty state directory then starts:
Quix recovers each partition from its own changelog partition, and the join restores its
checkpoint and open trajectories (markers stay on disk). Reported per partition: seconds from
the worker's start to its first record there, and the join's own restore.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import replace
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import typer

__all__ = ["register"]

_CHUNK = 50_000  # markers per checkpoint of the writer


def _marker_writer(settings: Any, app_id: str, datadir: Path, markers: dict[int, int],
                   watermark_ms: int) -> None:
    from quixstreams import Application
    from quixstreams.kafka.configuration import ConnectionConfig

    from infra.kafka_io import confluent_options
    from schemas.topics import topic_name
    from streams.join import DEFAULT_RETENTION_MS, Checkpoint, Marker, Writes
    from streams.join_store import JoinStore
    from streams.quix_seam import QuixState, Sink

    app = Application(
        broker_address=ConnectionConfig.from_librdkafka_dict(
            confluent_options(settings, "bench-restore")),
        consumer_group=app_id, auto_offset_reset="earliest", commit_every=1,
        state_dir=str(datadir), loglevel=None)
    sdf = app.dataframe(app.topic(topic_name(settings.topic_prefix, "events.raw"),
                                  key_deserializer="bytes", value_deserializer="bytes"))
    sdf.register_store()
    state = QuixState.of(sdf)
    left = dict(markers)

    class Writer(Sink):
        seen: dict[int, int] = {}

        def add(self, value: Any, key: Any, timestamp: int, headers: Any, topic: str,
                partition: int, offset: int) -> None:
            self.seen[partition] = offset

        def flush(self) -> None:
            for partition, offset in self.seen.items():
                count = min(left.get(partition, 0), _CHUNK)
                store = JoinStore(state.database(partition), state.transaction(partition),
                                  DEFAULT_RETENTION_MS)
                made = {f"org-{partition}|t-{left[partition] - n}": Marker(
                    f"org-{partition}|t-{left[partition] - n}", watermark_ms,
                    frozenset(os.urandom(16) for _ in range(11))) for n in range(count)}
                store.write(Writes({}, made, set(made),
                                   Checkpoint(watermark_ms, offset)))
                left[partition] -= count
            self.seen = {}
            if not any(left.values()):
                app.stop()

    sdf.sink(Writer())
    app.run(timeout=120)


def _produce(settings: Any, per_partition: dict[int, int]) -> int:
    """Valid events to each partition; returns the largest event time sent."""
    from kafka import KafkaProducer

    from schemas.topics import topic_name
    from streams.facts import fact_from_json
    from streams.simlog import simulate_log

    values = [value for _, value in simulate_log(20, seed=1)]
    producer = KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all")
    for partition, count in per_partition.items():
        for n in range(count):
            producer.send(topic_name(settings.topic_prefix, "events.raw"),
                          value=values[n % len(values)], partition=partition)
    producer.flush()
    producer.close()
    return max(fact_from_json(value, 0).time_ms for value in values)


def restore(
    markers: int = typer.Option(1_000_000, min=1, help="Markers in partition 0."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Seconds to restore a partition of the reward join holding --markers markers, next to
    one holding ten, from their changelogs into an empty state directory.

    Example: rewardstream bench restore --markers 1000000"""
    from infra.settings import load_settings
    from infra.topics import create_topics
    from streams.spec import load_spec
    from streams.worker import WorkerConfig, build_app

    settings = replace(load_settings(), topic_prefix=f"bench-{uuid.uuid4().hex[:8]}.",
                       topic_partitions=2)
    create_topics(settings)
    app_id = f"{settings.topic_prefix}bench-restore"
    counts = {0: markers, 1: 10}
    chunks = {p: -(-n // _CHUNK) for p, n in counts.items()}
    watermark_ms = _produce(settings, chunks)
    with TemporaryDirectory() as directory:
        written = time.monotonic()
        _marker_writer(settings, app_id, Path(directory) / "writer", counts, watermark_ms)
        written_s = time.monotonic() - written
        _produce(settings, {0: 1, 1: 1})
        config = WorkerConfig(settings=settings, spec=load_spec(), app_id=app_id,
                              datadir=Path(directory) / "worker")
        app, shell = build_app(config, stop_when=lambda t: len(t.ready_s) == 2)
        started = time.monotonic()
        app.run(timeout=600)
    totals = shell.totals
    first_record_s = {str(p): round(at - started, 2) for p, at in sorted(totals.ready_s.items())}
    restore_s = {str(p): round(s, 4) for p, s in sorted(totals.restored.items())}
    if as_json:
        typer.echo(json.dumps({
            "markers": counts, "write_s": round(written_s, 1),
            "first_record_after_s": first_record_s, "join_restore_s": restore_s,
            "state": {str(p): size for p, size in sorted(totals.partitions.items())}}))
        return
    typer.echo(f"markers written (partition: count): {counts} in {written_s:.1f} s")
    for partition, after in first_record_s.items():
        typer.echo(f"  partition {partition}: first record {after:.2f} s after start "
                   f"(changelog recovery + group join); the join's own restore "
                   f"{restore_s.get(partition, 0.0):.4f} s")


def register(bench_app: typer.Typer) -> None:
    bench_app.command("restore")(restore)
