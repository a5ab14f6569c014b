"""Seeded alerts and the trajectories behind them, for the console's drill-down and browser
tests and its screenshots.

The alerts are the detectors' own: simulated reward traffic of ``acme`` (a healthy ``c0``, then
``c1`` breaking tool calls) run through the monitors' windows and detectors offline raises a
broken-call spike for acme and for the fleet in the same window; the same traffic as ``evil``'s
raises evil's; ``teamx-agent-7``, a model served outside the platform (not in the registry),
raises a latency regression. The registry holds c0 and c1 (the platform serves them).

Behind acme's alert, in its window, acme has three trajectories of c1 (plus one of c0 and one
that ended just before the window, which are not behind it); ``evil`` has a copy of acme's
first: the same trajectory id and event ids, its own model name. Their events go to
``events.raw`` as ingest writes them (keyed by trajectory, the org in a header, appended at
their event time); their reward records are the reward join's of those events.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from infra.kafka_io import make_producer, send
from infra.settings import Settings
from schemas.alert_lifecycle import AlertState
from schemas.alerts import AlertEvent, alert_event_key
from schemas.events import (
    CompletionServed,
    CompletionServedPayload,
    EditDecided,
    EditDecidedPayload,
    EditPersistence,
    EditPersistencePayload,
    EditProposed,
    EditProposedPayload,
    Event,
    FollowupSent,
    FollowupSentPayload,
    ToolCalled,
    ToolCalledPayload,
    TrajectoryEnded,
    TrajectoryEndedPayload,
    dump_event,
)
from schemas.ids import uuid7
from schemas.metrics import MetricWindow, metric_key
from schemas.rewards import RewardRecord, reward_record_key
from schemas.topics import ORG_HEADER, topic_name
from streams.monitors.config import MonitorConfig
from streams.monitors.lifecycle import plan
from streams.monitors.offline import run_offline, windows_from_rewards
from streams.monitors.simulate import PROFILES, Segment, simulate
from streams.replay import replay_rows
from streams.spec import load_spec
from tests.support.monitors_seed import publish_registry

__all__ = ["SERVED_ELSEWHERE", "Seeded", "seed_console"]

SERVED_ELSEWHERE = "teamx-agent-7"
_N = 1500  # trajectories per segment: the detectors need a few hundred of the drift


@dataclass(frozen=True)
class Seeded:
    alerts: dict[tuple[str, str, str], AlertEvent]  # (detector, checkpoint, org) -> fired
    since: datetime  # acme's broken-call alert's window (event time)
    until: datetime
    behind: list[str]  # acme's trajectories behind it
    not_behind: list[str]  # acme's trajectories near it that are not
    copied: str  # the trajectory evil copied

    def fingerprint(self, detector: str, org: str, checkpoint: str = "c1") -> str:
        return self.alerts[(detector, checkpoint, org)].fingerprint or ""


def _event(model: type[Any], org: str, trajectory: str, checkpoint: str, at: datetime,
           payload: Any) -> Event:
    producer = "gateway" if model is CompletionServed else "ingest:sdk"
    return model(event_id=uuid7(), trajectory_id=trajectory, session_id=f"s-{trajectory}",
                 org_id=org, producer=producer, user=f"{org}-user-1", checkpoint_id=checkpoint,
                 arm="default", occurred_at=at, sent_at=at, received_at=at, event_time=at,
                 clock_skew_ms=0, payload=payload)


def trajectory_events(org: str, trajectory: str, checkpoint: str, ended: datetime,
                      broken: bool = True) -> list[Event]:
    """Two turns: completions, tool calls (one broken), an accepted edit kept half at an hour,
    a clarifying question, a follow-up, the end; persistence checks at 10 minutes and an hour."""
    def at(seconds: float) -> datetime:
        return ended + timedelta(seconds=seconds)

    def completion(n: int, seconds: float, tokens: int) -> Event:
        return _event(CompletionServed, org, trajectory, checkpoint, at(seconds),
                      CompletionServedPayload(
                          completion_id=f"{trajectory}-c{n}", model="agent-model",
                          prompt_token_ids=list(range(40 + n)),
                          completion_token_ids=list(range(tokens)),
                          behaviour_logprobs=[-0.5] * tokens, ttft_ms=180.0 + n,
                          latency_ms=2400.0 + 300 * n,
                          finish_reason="tool_calls" if n == 0 else "stop"))

    call = ToolCalledPayload(call_id=f"{trajectory}-t1", tool="edit", valid=not broken,
                             error_kind="malformed_call" if broken else None, duration_ms=3.0)
    events = [
        completion(0, -52, 24),
        _event(ToolCalled, org, trajectory, checkpoint, at(-48),
               ToolCalledPayload(call_id=f"{trajectory}-t0", tool="read", valid=True,
                                 duration_ms=12.0)),
        _event(ToolCalled, org, trajectory, checkpoint, at(-45), call),
        _event(EditProposed, org, trajectory, checkpoint, at(-40),
               EditProposedPayload(edit_id=f"{trajectory}-e0", path="src/app.py",
                                   lines_added=6, lines_removed=2)),
        _event(EditDecided, org, trajectory, checkpoint, at(-30),
               EditDecidedPayload(edit_id=f"{trajectory}-e0", decision="accepted")),
        completion(1, -20, 16),
        _event(FollowupSent, org, trajectory, checkpoint, at(-12),
               FollowupSentPayload(sentiment="dissatisfied")),
        _event(TrajectoryEnded, org, trajectory, checkpoint, at(0),
               TrajectoryEndedPayload(outcome="completed", turns=2, task_family="fix")),
    ]
    for horizon_s, kept in ((600, 1.0), (3600, 0.5)):
        events.append(_event(EditPersistence, org, trajectory, checkpoint,
                             at(-30 + horizon_s), EditPersistencePayload(
                                 edit_id=f"{trajectory}-e0", horizon_s=horizon_s,
                                 surviving_fraction=kept)))
    return events


def _copied_by(events: list[Event], org: str) -> list[Event]:
    """Another org's copy: the same trajectory and event ids, its own model and user."""
    copies = []
    for event in events:
        update: dict[str, Any] = {"org_id": org, "user": f"{org}-user-1"}
        if isinstance(event, CompletionServed):
            update["payload"] = event.payload.model_copy(update={"model": f"{org}-model"})
        copies.append(event.model_copy(update=update))
    return copies


def _fired(segments: list[Segment], org: str, start: datetime,
           ) -> tuple[list[AlertEvent], list[MetricWindow]]:
    """The detectors' fired events and the metric windows of simulated traffic of ``org``."""
    records = [r.model_copy(update={"org_id": org})
               for r in simulate(segments, seed=5, start=start)]
    config = MonitorConfig()
    transitions = [t for _, t in run_offline(records, config).transitions if t.kind == "fired"]
    windows = [w for _, w in windows_from_rewards(records, config)]
    return plan(AlertState(), transitions), windows


def _alerts(now: datetime) -> tuple[dict[tuple[str, str, str], AlertEvent], list[MetricWindow]]:
    healthy, broken, slow = PROFILES["healthy"], PROFILES["broken_calls"], PROFILES["slow"]
    drift = [Segment({"default": ("c0", healthy)}, _N), Segment({"default": ("c1", broken)}, _N)]
    start = now - timedelta(minutes=75) - timedelta(seconds=_N)
    acme, windows = _fired(drift, "acme", start)
    evil, _ = _fired(drift, "evil", start)
    teamx, _ = _fired([Segment({"default": ("teamx-agent-6", healthy)}, _N),
                       Segment({"default": (SERVED_ELSEWHERE, slow)}, _N)], "acme",
                      now - timedelta(minutes=15) - timedelta(seconds=_N))
    events = acme + [e for e in evil if e.alert and e.alert.labels["org"] == "evil"] + teamx
    by_key = {}
    for event in events:
        assert event.alert is not None
        labels = event.alert.labels
        by_key.setdefault((event.alert.detector, labels["checkpoint"], labels["org"]), event)
    return by_key, [w for w in windows if w.checkpoint_id in ("c0", "c1")]


def _send_events(producer: Any, settings: Settings, events: list[Event]) -> None:
    topic = topic_name(settings.topic_prefix, "events.raw")
    for event in events:
        at = event.event_time or event.occurred_at
        producer.send(topic, key=event.trajectory_id.encode(), value=dump_event(event),
                      headers=[(ORG_HEADER, (event.org_id or "").encode())],
                      timestamp_ms=int(at.timestamp() * 1000))
    producer.flush()


def seed_console(settings: Settings, now: datetime | None = None) -> Seeded:
    """Publish the registry, the alerts, their metric windows, and the trajectories behind
    acme's broken-call alert with their reward records."""
    now = now or datetime.now(UTC)
    alerts, windows = _alerts(now)
    fired = alerts[("broken_call_spike", "c1", "acme")]
    assert fired.alert is not None
    until = fired.alert.window_end
    since = until - timedelta(seconds=MonitorConfig().window_s)
    behind = [f"acme-traj-{n}" for n in (1, 2, 3)]
    acme = [event for n, name in enumerate(behind) for event in
            trajectory_events("acme", name, "c1", since + timedelta(seconds=15 * n + 10))]
    acme += trajectory_events("acme", "acme-traj-c0", "c0", since + timedelta(seconds=30))
    acme += trajectory_events("acme", "acme-traj-before", "c1", since - timedelta(seconds=20))
    evil = _copied_by([e for e in acme if e.trajectory_id == behind[0]], "evil")
    events = sorted(acme + evil, key=lambda e: e.event_time or e.occurred_at)
    records: list[RewardRecord] = replay_rows(
        [(0, offset, dump_event(event)) for offset, event in enumerate(events)],
        load_spec()).records
    assert len(records) == 6, [(r.org_id, r.trajectory_id) for r in records]

    publish_registry(settings)
    producer = make_producer(settings, "test")
    for event in alerts.values():
        send(producer, settings, "alerts", alert_event_key(event), event.model_dump_json().encode())
    for window in windows:
        send(producer, settings, "metrics", metric_key(window.checkpoint_id, window.arm),
             window.model_dump_json().encode())
    _send_events(producer, settings, events)
    for record in records:
        send(producer, settings, "rewards",
             reward_record_key(record.org_id, record.trajectory_id, record.spec_version),
             record.model_dump_json().encode())
    producer.close()
    return Seeded(alerts, since, until, behind, ["acme-traj-c0", "acme-traj-before"], behind[0])
