"""The release controller's pure core: its fold of the three topics and the events it plans."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from schemas.alerts import Alert, AlertEvent
from schemas.checkpoints import CheckpointEvent, Registry, enter_canary, rollback
from schemas.errors import RegistryError
from schemas.release import external_registration, live_canary
from schemas.rewards import RewardRecord, Sample
from streams.release.fold import ReleaseFold, task_key
from streams.release.plan import ControllerConfig, canary_evidence, plan
from streams.release.rule import SequentialRule

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
CONFIG = ControllerConfig(share=0.5, rule=SequentialRule(margin=0.15, max_trajectories=3000),
                          look_interval_s=10.0)


def _event(seq: int, ckpt: str, status: str, kind: str) -> CheckpointEvent:
    return CheckpointEvent(event_id=f"e{seq}", sequence=seq, occurred_at=T0, kind=kind,
                           status=status, checkpoint_id=ckpt, model="m", path=f"/ck/{ckpt}",
                           adapter=True)


def _gated(*candidates: str) -> ReleaseFold:
    """base in production, each candidate through the gate into the canary status."""
    fold = ReleaseFold()
    fold.add_checkpoint(_event(1, "base", "production", "promoted"))
    for ckpt in candidates:
        fold.add_checkpoint(_event(fold.registry.next_sequence, ckpt, "candidate", "created"))
        fold.add_checkpoint(enter_canary(fold.registry, ckpt, T0, "gate", {"passed": True}))
    return fold


def _record(i: int, checkpoint: str, arm: str, reward: float, at: datetime,
            task: int) -> RewardRecord:
    sample = Sample(completion_id=f"c{i}", checkpoint_id=checkpoint,
                    prompt_token_ids=[1, 2, task], completion_token_ids=[5],
                    behaviour_logprobs=[-0.1])
    return RewardRecord(
        trajectory_id=f"t{i}", spec_version="v", checkpoint_id=checkpoint, arm=arm,
        org_id="acme", outcome="completed", ended_at=at, finalized_by="complete",
        finalized_at=at, samples=[sample], components={"x": reward}, total=reward,
        signals={"edits_accepted": 1.0, "kept_fraction": 1.0}, event_ids=[])


def _traffic(fold: ReleaseFold, effect: float, n: int, start: datetime, seed: int = 0,
             first: int = 0) -> None:
    """``n`` trajectories after ``start``: each task's difficulty, noise, the canary's effect."""
    rng = random.Random(seed)
    difficulty = [random.Random(task).gauss(0, 1.0) for task in range(40)]
    for i in range(first, first + n):
        task, canary = i % 40, rng.random() < 0.5
        reward = difficulty[task] + rng.gauss(0, 0.5) + (effect if canary else 0.0)
        fold.add_reward(_record(i, "c1" if canary else "base", "canary" if canary else
                                "production", reward, start + timedelta(seconds=i - first), task))


def test_a_gated_checkpoint_starts_its_canary_and_an_older_one_is_superseded() -> None:
    fold = _gated("c0", "c1")
    events = plan(fold, T0, CONFIG)
    assert [(e.kind, e.checkpoint_id, e.status) for e in events] == [
        ("canary_started", "c1", "canary"), ("rejected", "c0", "rejected")]
    spec = events[0].canary
    assert spec is not None and (spec.share, spec.baseline, spec.org) == (0.5, "base", None)
    assert SequentialRule.from_dict(spec.rule) == CONFIG.rule
    for event in events:
        fold.add_checkpoint(event)
    assert live_canary(fold.registry, "m") is not None
    assert plan(fold, T0, CONFIG) == []  # nothing new to say
    assert plan(_gated("c1"), T0, replace(CONFIG, auto_start=False)) == []


def _started(effect: float, n: int) -> ReleaseFold:
    fold = _gated("c1")
    _traffic(fold, 0.0, 200, T0 - timedelta(hours=1), seed=1, first=10_000)  # history
    for event in plan(fold, T0, CONFIG):
        fold.add_checkpoint(event)
    _traffic(fold, effect, n, T0 + timedelta(seconds=1), seed=2)
    return fold


def test_a_clearly_better_canary_is_promoted_with_its_evidence() -> None:
    fold = _started(0.4, 600)
    [event] = plan(fold, T0 + timedelta(minutes=30), CONFIG)
    assert (event.kind, event.status, event.actor) == ("promoted", "production", "release")
    ab = event.evidence["ab"]
    assert ab["decision"] == "promote" and ab["passed"] is True
    assert ab["primary_bound"]["low"] > -0.15 and ab["n_baseline"] + ab["n_candidate"] == 600
    assert ab["reward_variance_reduction"] > 0.5  # the task history as covariate
    assert event.evidence["passed"] is True  # the gate's evidence stays beside it


def test_a_worse_canary_is_rejected_and_an_undecided_one_records_looks() -> None:
    [worse] = plan(_started(-0.5, 600), T0 + timedelta(minutes=30), CONFIG)
    assert (worse.kind, worse.evidence["ab"]["decision"]) == ("rejected", "reject")
    fold = _started(-0.05, 60)
    [look] = plan(fold, T0 + timedelta(seconds=70), CONFIG)
    assert look.kind == "canary_look" and look.evidence["ab"]["decision"] == "continue"
    assert look.evidence["ab"]["needed"] > 0 and look.canary is not None
    fold.add_checkpoint(look)
    assert plan(fold, T0 + timedelta(seconds=75), CONFIG) == []  # no news yet
    _traffic(fold, -0.05, 10, T0 + timedelta(seconds=100), seed=3, first=500)
    assert plan(fold, T0 + timedelta(seconds=75), CONFIG) == []  # too soon for another look
    assert [e.kind for e in plan(fold, T0 + timedelta(seconds=90), CONFIG)] == ["canary_look"]
    late = plan(fold, T0 + timedelta(days=2), CONFIG)
    assert [(e.kind, e.evidence["ab"]["decision"]) for e in late] == [("rejected", "reject")]


def test_a_critical_alert_on_the_canary_aborts_it() -> None:
    fold = _started(0.0, 100)
    labels = {"alertname": "broken_call_spike", "checkpoint": "c1", "arm": "canary",
              "org": "acme", "severity": "critical"}
    alert = Alert(detector="broken_call_spike", fingerprint="f1", title="Broken-call spike",
                  severity="critical", summary="0.4 vs 0.1", evidence={}, runbook="",
                  labels=labels, window_end=T0 + timedelta(minutes=1))
    fold.add_alert(AlertEvent(event_id="a1", kind="fired", occurred_at=T0 + timedelta(minutes=1),
                              actor="detector", fingerprint="f1", alert=alert))
    [event] = plan(fold, T0 + timedelta(minutes=2), CONFIG)
    assert (event.kind, event.status) == ("aborted", "rejected")
    assert event.evidence["ab"]["alert"]["fingerprint"] == "f1"


def test_production_changing_under_a_canary_aborts_it() -> None:
    fold = _started(0.0, 100)
    fold.add_checkpoint(_event(fold.registry.next_sequence, "base", "rolled_back", "rolled_back"))
    [event] = plan(fold, T0 + timedelta(minutes=2), CONFIG)
    assert event.kind == "aborted" and "baseline is gone" in event.evidence["ab"]["reason"]


def test_a_replay_in_another_order_reaches_the_same_evidence() -> None:
    live = _started(0.1, 300)
    replayed = ReleaseFold()
    for record in reversed(list(live.trajectories.values())):  # rewards before checkpoints
        replayed.trajectories[record.record_id] = record
        if record.task is not None:
            replayed.history.setdefault(record.task, []).append((record.ended_s, record.reward))
    for rows in replayed.history.values():
        rows.sort()
    for event in reversed(live.registry.history):
        replayed.add_checkpoint(event)
    canary = live_canary(live.registry, "m")
    assert canary is not None
    now = T0 + timedelta(minutes=10)
    assert canary_evidence(live, canary, now)[1] == canary_evidence(replayed, canary, now)[1]


def test_a_repeated_record_and_a_second_spec_version_count_once() -> None:
    fold = ReleaseFold()
    record = _record(1, "c1", "canary", 1.0, T0, 3)
    fold.add_reward(record)
    fold.add_reward(record.model_copy(update={"spec_version": "w", "total": 9.0}))
    assert len(fold.trajectories) == 1 and fold.covariate(task_key(record), T0.timestamp() + 1,
                                                          60) == 1.0


def test_an_external_checkpoint_is_named_but_never_served_or_rolled_back() -> None:
    registry = Registry([_event(1, "base", "production", "promoted")])
    event = external_registration(registry, "teamx-agent-7", "m", T0, "ops")
    registry.add(event)
    assert (event.kind, event.status, event.path) == ("registered", "external", "")
    assert registry.platform_serves("base") and not registry.platform_serves("teamx-agent-7")
    with pytest.raises(RegistryError, match="outside the platform"):
        rollback(registry, "teamx-agent-7", T0, "ops", "edit-rate collapse")
    with pytest.raises(RegistryError, match="already in the registry"):
        external_registration(registry, "base", "m", T0, "ops")
    with pytest.raises(RegistryError, match="control"):
        external_registration(registry, "bad\x00name", "m", T0, "ops")


def test_a_full_model_canary_starts_and_waits_for_traffic_until_its_maximum() -> None:
    """The registry cannot tell whether the gateway can serve a full model (only one at the
    gateway's own --base-path), so the controller starts its canary like an adapter's; where
    the gateway cannot serve it, only production's arm collects, the canary waits (holding its
    model's canary slot) and is rejected at its maximum. docs/trainer-and-release.md says so."""
    fold = ReleaseFold()
    fold.add_checkpoint(_event(1, "base", "production", "promoted"))
    full = _event(2, "c1", "candidate", "created").model_copy(update={"adapter": False})
    fold.add_checkpoint(full)
    fold.add_checkpoint(enter_canary(fold.registry, "c1", T0, "gate", {"passed": True}))
    [start] = plan(fold, T0, CONFIG)
    assert (start.kind, start.checkpoint_id, start.adapter) == ("canary_started", "c1", False)
    fold.add_checkpoint(start)
    for i in range(100):  # production's users only: the gateway gives no one the canary arm
        fold.add_reward(_record(i, "base", "production", 1.0, T0 + timedelta(seconds=i), i % 40))
    [look] = plan(fold, T0 + timedelta(minutes=5), CONFIG)
    assert look.kind == "canary_look" and look.evidence["ab"]["decision"] == "continue"
    assert look.evidence["ab"]["reason"] == "no trajectories from the canary arm yet"
    fold.add_checkpoint(look)
    fold.add_checkpoint(_event(fold.registry.next_sequence, "c2", "candidate", "created"))
    fold.add_checkpoint(enter_canary(fold.registry, "c2", T0, "gate", {"passed": True}))
    assert plan(fold, T0 + timedelta(minutes=6), CONFIG) == []  # c2 waits behind it
    [end, after] = plan(fold, T0 + timedelta(days=2), CONFIG)
    assert (end.kind, end.checkpoint_id) == ("rejected", "c1")
    assert end.evidence["ab"]["reason"] == "no trajectories from the canary arm by the maximum"
    assert (after.kind, after.checkpoint_id) == ("canary_started", "c2")
