"""The resolution of arms to servable checkpoints of the registry."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas.checkpoints import CheckpointEvent, Registry
from serving.gateway.registry import Target, resolve_targets

BASE = Target("base", "tiny")
ARMS = {"production": "production", "candidate": "candidate", "holdout": "base",
        "pinned": "c1", "canary": "canary"}


def _event(seq: int, cid: str, status: str, adapter: bool = True,
           path: str | None = None) -> CheckpointEvent:
    kind = {"production": "promoted", "candidate": "created", "rolled_back": "rolled_back",
            "canary": "evaluated",
            "rejected": "rejected", "retired": "promoted"}[status]
    return CheckpointEvent(event_id=f"e{seq}", sequence=seq, occurred_at=datetime.now(UTC),
                           kind=kind, status=status, checkpoint_id=cid, model="tiny",
                           path=path or f"/ckpt/{cid}", adapter=adapter)


def test_before_any_promotion_everything_is_the_base() -> None:
    assert resolve_targets(Registry(), ARMS, BASE) == {arm: BASE for arm in ARMS}


def test_promotion_then_rollback_returns_to_the_previous_production() -> None:
    c1, c2 = Target("c1", "c1", "/ckpt/c1"), Target("c2", "c2", "/ckpt/c2")
    registry = Registry([_event(1, "c1", "candidate"), _event(2, "c1", "production")])
    assert resolve_targets(registry, ARMS, BASE)["production"] == c1
    registry.add(_event(3, "c2", "candidate"))
    targets = resolve_targets(registry, ARMS, BASE)
    assert (targets["production"], targets["candidate"], targets["holdout"]) == (c1, c2, BASE)
    registry.add(_event(4, "c2", "production"))
    assert resolve_targets(registry, ARMS, BASE)["production"] == c2
    registry.add(_event(5, "c2", "rolled_back"))
    targets = resolve_targets(registry, ARMS, BASE)
    assert targets["production"] == c1 and targets["candidate"] == c1  # no candidate left


def test_a_replayed_older_event_does_not_undo_a_newer_one() -> None:
    registry = Registry([_event(2, "c1", "rolled_back"), _event(1, "c1", "production")])
    assert registry.latest["c1"].status == "rolled_back"
    assert registry.production() is None


def test_pinned_arm_falls_back_to_production_when_its_checkpoint_is_rolled_back() -> None:
    registry = Registry([_event(1, "c1", "production"), _event(2, "c2", "production")])
    assert resolve_targets(registry, ARMS, BASE)["pinned"].checkpoint_id == "c1"
    registry.add(_event(3, "c1", "rolled_back"))
    assert resolve_targets(registry, ARMS, BASE)["pinned"].checkpoint_id == "c2"


def test_full_model_checkpoints_serve_only_when_they_are_the_base() -> None:
    registry = Registry([_event(1, "c1", "production", adapter=False, path="/models/base"),
                         _event(2, "c2", "production", adapter=False, path="/other")])
    assert resolve_targets(registry, ARMS, BASE)["production"] == BASE  # base_path unknown
    targets = resolve_targets(registry, ARMS, BASE, base_path="/models/base")
    assert targets["production"] == Target("c1", "tiny")


def test_the_canary_arm_serves_the_checkpoint_under_ab_else_production() -> None:
    c1, c2 = Target("c1", "c1", "/ckpt/c1"), Target("c2", "c2", "/ckpt/c2")
    registry = Registry([_event(1, "c1", "production"), _event(2, "c2", "candidate")])
    targets = resolve_targets(registry, ARMS, BASE)
    assert (targets["canary"], targets["candidate"]) == (c1, c2)  # not gated yet: no canary
    registry.add(_event(3, "c2", "canary"))
    targets = resolve_targets(registry, ARMS, BASE)
    assert (targets["production"], targets["canary"]) == (c1, c2)
    registry.add(_event(4, "c2", "rejected"))
    assert resolve_targets(registry, ARMS, BASE)["canary"] == c1
