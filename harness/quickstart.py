"""The quick-start: broker up, topics created, sample events through ``events.raw`` and back."""

from __future__ import annotations

import uuid

from kafka import KafkaConsumer, KafkaProducer
from rich.console import Console
from rich.table import Table

from harness.samples import sample_trajectory
from infra import broker
from infra.settings import load_settings
from infra.topics import create_topics
from schemas.events import EventAdapter
from schemas.topics import topic_name

__all__ = ["run_quickstart"]


def run_quickstart(trajectories: int) -> None:
    console = Console()
    settings = load_settings()
    state, started = broker.start(settings)
    console.print(f"[bold]broker[/] {'started' if started else 'already running'}: {state.describe()}")
    for name, created in create_topics(settings):
        console.print(f"[bold]topic[/]  {name} {'created' if created else 'exists'}")
    raw_topic = topic_name(settings.topic_prefix, "events.raw")

    sent = []
    producer = KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all")
    for _ in range(trajectories):
        for event in sample_trajectory(f"traj-{uuid.uuid4().hex[:8]}"):
            producer.send(raw_topic, key=event.trajectory_id.encode(),
                          value=EventAdapter.dump_json(event))
            sent.append(str(event.event_id))
    producer.flush()
    producer.close()
    console.print(f"sent {len(sent)} events to {raw_topic} (acks=all)")

    wanted = set(sent)
    table = Table("offset", "trajectory", "type", "event time")
    consumer = KafkaConsumer(raw_topic, bootstrap_servers=settings.bootstrap_servers,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=10000)
    for record in consumer:
        event = EventAdapter.validate_json(record.value)
        if str(event.event_id) in wanted:
            wanted.discard(str(event.event_id))
            table.add_row(str(record.offset), event.trajectory_id, event.type,
                          event.occurred_at.isoformat(timespec="seconds"))
        if not wanted:
            break
    consumer.close()
    console.print(table)
    if wanted:
        console.print(f"[red]{len(wanted)} events did not come back from the log[/]")
        raise SystemExit(1)
    console.print(f"[green]all {len(sent)} events read back from the log[/]")
