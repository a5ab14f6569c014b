"""Good records and the poison of each platform topic, for the poisoned-topic tests.

Good records come from the generators the other tests use (the monitors' simulation, the seed
registry); the poison of a topic is every generic kind plus values out of its model's range.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from infra.settings import Settings
from infra.topics import create_topics
from schemas.alerts import Alert, AlertEvent, alert_event_key, alert_fingerprint
from schemas.checkpoints import CheckpointEvent
from schemas.events import EventAdapter, ToolCalled, ToolCalledPayload
from schemas.ids import uuid7
from schemas.metrics import MetricWindow, metric_key
from schemas.rewards import RewardRecord, reward_record_key
from streams.monitors.simulate import PROFILES, Segment, simulate
from tests.support.topic_poison import NON_FINITE, Entry, Poison, out_of_range, poison_kinds

__all__ = [
    "AT",
    "alert_events",
    "alert_poison",
    "checkpoint_poison",
    "clean_twin",
    "entries",
    "event_poison",
    "next_checkpoint_event",
    "reward_poison",
    "reward_records",
    "stored_event",
    "window_poison",
]

AT = datetime(2026, 3, 1, tzinfo=UTC)


def reward_records(count: int) -> list[RewardRecord]:
    return list(simulate([Segment({"a": ("c0", PROFILES["healthy"])}, count)], seed=3, start=AT))


def next_checkpoint_event(events: list[CheckpointEvent]) -> CheckpointEvent:
    """c2, a candidate child of the last checkpoint of ``events``, after them."""
    last = events[-1]
    return last.model_copy(update={
        "event_id": "ev-after-poison", "sequence": last.sequence + 1, "checkpoint_id": "c2",
        "kind": "created", "status": "candidate", "parent_id": last.checkpoint_id,
        "occurred_at": last.occurred_at + timedelta(minutes=1), "path": "/ckpt/c2"})


def clean_twin(settings: Settings) -> Settings:
    """A second deployment on the same broker, for a run on the same input without poison."""
    twin = replace(settings, topic_prefix=settings.topic_prefix + "clean.")
    create_topics(twin)
    return twin


def entries(records: list[RewardRecord] | list[MetricWindow] | list[AlertEvent]
            | list[CheckpointEvent]) -> list[Entry]:
    """Records keyed as their producers key them."""
    out = []
    for record in records:
        if isinstance(record, RewardRecord):
            key = reward_record_key(record.org_id, record.trajectory_id, record.spec_version)
        elif isinstance(record, MetricWindow):
            key = metric_key(record.checkpoint_id, record.arm)
        elif isinstance(record, AlertEvent):
            key = alert_event_key(record)
        else:
            key = record.checkpoint_id.encode()
        out.append(Entry(key, record.model_dump_json().encode()))
    return out


def stored_event(at: datetime, checkpoint_id: str = "c0") -> bytes:
    """A tool call of arm a, as ingest stores it."""
    return EventAdapter.dump_json(ToolCalled(
        event_id=uuid7(int(at.timestamp() * 1000)), trajectory_id="t", session_id="s", user="u",
        org_id="acme", checkpoint_id=checkpoint_id, arm="a", occurred_at=at, sent_at=at,
        received_at=at, event_time=at, clock_skew_ms=0,
        payload=ToolCalledPayload(call_id="k", tool="lint", valid=True)))


def _alert(detector: str, at: datetime) -> Alert:
    labels = {"alertname": detector, "checkpoint": "c1", "arm": "default", "org": "*",
              "severity": "warning"}
    return Alert(detector=detector, fingerprint=alert_fingerprint(detector, labels),
                 title=detector.replace("_", " "), severity="warning", summary="rate fell",
                 evidence={"baseline": 0.6, "now": 0.3}, runbook="look at the edits",
                 labels=labels, window_end=at)


def alert_events(detectors: tuple[str, ...], at: datetime) -> list[AlertEvent]:
    """Each detector's alert fired; the first one acknowledged and resolved after."""
    alerts = [_alert(d, at) for d in detectors]
    events = [AlertEvent(event_id=str(uuid7()), kind="fired", occurred_at=at, actor="detector",
                         fingerprint=a.fingerprint, alert=a) for a in alerts]
    first = alerts[0].fingerprint
    for kind, actor, minutes in (("acknowledged", "ana", 1), ("resolved", "bob", 2)):
        events.append(AlertEvent(event_id=str(uuid7()), kind=kind, actor=actor,
                                 occurred_at=at + timedelta(minutes=minutes), fingerprint=first))
    return events


def reward_poison(good: RewardRecord) -> list[Poison]:
    return poison_kinds(
        "trajectory_id: Field required",
        out_of_range("non-finite total", good, "total", NON_FINITE),
        # Finite, but its square overflows the monitors' window statistics to inf.
        out_of_range("total that squares to inf", good, "total", 1e308),
        out_of_range("wrong outcome", good, "outcome", "exploded"),
        out_of_range("negative count", good, "signals.tool_calls", -3.0),
        out_of_range("non-finite logprob", good, "samples.0.behaviour_logprobs.0", NON_FINITE),
        out_of_range("negative token id", good, "samples.0.completion_token_ids.0", -1),
    )


def window_poison(good: MetricWindow) -> list[Poison]:
    return poison_kinds(
        "scope: Field required",
        out_of_range("non-finite weight", good, "stats.edit_rate.n", NON_FINITE),
        out_of_range("wrong scope", good, "scope", "sideways"),
        out_of_range("negative trajectory count", good, "trajectories", -5),
        out_of_range("negative weight", good, "stats.edit_rate.n", -40.0),
        out_of_range("negative histogram count", good, "latency_histogram.0", -1),
        out_of_range("rate above 1", good, "stats.edit_rate", {"n": 10, "sum": 1e6, "sumsq": 1e12},
                     reason="stats.edit_rate: a rate of 1e+06 in 10 is outside 0..1"),
        # NaN-producing: finite fields whose mean overflows to inf.
        out_of_range("mean that overflows", good, "stats.log_latency",
                     {"n": 1e-300, "sum": 1e300, "sumsq": 1e300},
                     reason="stats.log_latency: its mean (sum 1e+300 over n 1e-300) is not finite"),
    )


def alert_poison(fired: AlertEvent) -> list[Poison]:
    return poison_kinds(
        "event_id: Field required",
        out_of_range("wrong kind", fired, "kind", "exploded"),
        out_of_range("wrong severity", fired, "alert.severity", "apocalyptic"),
        out_of_range("time without a zone", fired, "occurred_at", "2026-01-01T00:00:00"),
        out_of_range("fired without its alert", fired, "alert", None,
                     reason="(record): Value error, a 'fired' event needs alert"),
    )


def checkpoint_poison(good: CheckpointEvent) -> list[Poison]:
    return poison_kinds(
        "event_id: Field required",
        out_of_range("non-finite sequence", good, "sequence", NON_FINITE),
        out_of_range("negative sequence", good, "sequence", -1),
        out_of_range("wrong status", good, "status", "zombie"),
        out_of_range("time without a zone", good, "occurred_at", "2026-01-01T00:00:00"),
    )


def event_poison(good: bytes) -> list[Poison]:
    event = EventAdapter.validate_json(good)
    return poison_kinds(
        "type: Unable to extract tag",
        out_of_range("non-finite duration", event, "payload.duration_ms", NON_FINITE),
        out_of_range("wrong error kind", event, "payload.error_kind", "exploded"),
        out_of_range("negative count", event, "payload.parallel_group", -1),
        out_of_range("event time out of range", event, "event_time", "9999-01-01T00:00:00Z"),
    )
