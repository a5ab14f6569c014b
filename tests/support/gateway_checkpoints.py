"""Checkpoints for the gateway's follower: a promotion (or roll-back) written to the registry's
`checkpoints` topic, as the registry writes it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from kafka import KafkaProducer

from infra.settings import Settings
from schemas.checkpoints import CheckpointEvent
from schemas.topics import topic_name

__all__ = ["promote"]


def promote(settings: Settings, sequence: int, checkpoint_id: str, path: Path,
            status: str = "production") -> None:
    """Put ``checkpoint_id`` (the adapter at ``path`` on model ``tiny``) in ``status``:
    promoted to production, or rolled back to any other status."""
    event = CheckpointEvent(
        event_id=f"e{sequence}", sequence=sequence, occurred_at=datetime.now(UTC),
        kind="promoted" if status == "production" else "rolled_back", status=status,
        checkpoint_id=checkpoint_id, model="tiny", path=str(path), adapter=True,
    )
    producer = KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all")
    producer.send(topic_name(settings.topic_prefix, "checkpoints"), key=checkpoint_id.encode(),
                  value=event.model_dump_json().encode())
    producer.flush()
    producer.close()
