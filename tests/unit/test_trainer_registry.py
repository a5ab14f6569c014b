"""The registry fold, its aliases, lineage generations, and promotion/rollback events."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schemas.checkpoints import (
    CheckpointEvent,
    conclude_canary,
    enter_canary,
    fold,
    promotion,
    rejection,
    rollback,
)
from schemas.errors import RegistryError
from trainer.staleness import judge_staleness

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _event(seq: int, ckpt: str, status: str, kind: str,
           parent: str | None = None) -> CheckpointEvent:
    return CheckpointEvent(event_id=f"e{seq}", sequence=seq, occurred_at=NOW, kind=kind,
                           status=status, checkpoint_id=ckpt, model="m", parent_id=parent,
                           path=f"/ckpt/{ckpt}")


def _history() -> list[CheckpointEvent]:
    return [
        _event(1, "base", "production", "promoted"),
        _event(2, "c1", "candidate", "created", parent="base"),
        _event(3, "c1", "production", "promoted", parent="base"),
        _event(4, "c2", "candidate", "created", parent="c1"),
    ]


def test_fold_gives_aliases_from_the_newest_event_per_checkpoint() -> None:
    registry = fold(reversed(_history()))
    assert registry.production().checkpoint_id == "c1"
    assert registry.previous_production().checkpoint_id == "base"
    assert registry.candidate().checkpoint_id == "c2"
    assert registry.aliases("c1") == ["production"] and registry.aliases("c2") == ["candidate"]
    assert registry.next_sequence == 5
    compacted = fold([_history()[0], _history()[2], _history()[3]])
    assert compacted.production() == registry.production()


def test_generations_follow_the_lineage() -> None:
    registry = fold(_history())
    assert [registry.generation(c) for c in ("base", "c1", "c2", "nope")] == [0, 1, 2, None]
    gen = registry.generation
    assert judge_staleness("c1", 2, gen, max_lag=1).keep
    stale = judge_staleness("base", 2, gen, max_lag=1)
    assert (stale.keep, stale.reason, stale.lag) == (False, "stale", 2)
    assert judge_staleness("nope", 2, gen, 1).reason == "unknown_checkpoint"


def test_the_platform_serves_what_is_in_the_running_and_nothing_it_only_names() -> None:
    registry = fold([*_history(), _event(5, "c0", "rejected", "rejected")])
    served = {ckpt: registry.platform_serves(ckpt)
              for ckpt in ("base", "c1", "c2", "c0", "teamx-agent-2026-01")}
    # base stays production (next in line); an id the registry never held is served elsewhere
    assert served == {"base": True, "c1": True, "c2": True, "c0": False,
                      "teamx-agent-2026-01": False}
    after = fold([*registry.events, *rollback(registry, "c1", NOW, "ana", "edit rate")])
    assert not after.platform_serves("c1") and after.platform_serves("base")


def test_rejection_and_promotion_carry_state_and_evidence() -> None:
    registry = fold(_history())
    rejected = rejection(registry, "c2", NOW, "gate", {"passed": False})
    assert (rejected.status, rejected.sequence, rejected.parent_id) == ("rejected", 5, "c1")
    assert rejected.path == "/ckpt/c2" and rejected.evidence == {"passed": False}
    after = fold([*registry.history, rejected])
    assert after.candidate() is None
    promoted = promotion(after, "c2", NOW, "ops", {"reason": "manual"})
    assert promoted.evidence == {"previous_production": "c1", "reason": "manual"}
    with pytest.raises(RegistryError, match="already production"):
        promotion(registry, "c1", NOW, "ops", {})
    with pytest.raises(RegistryError, match="registry list"):
        registry.get("zzz")


def test_rollback_restores_the_previous_production_with_evidence() -> None:
    registry = fold(_history())
    events = rollback(registry, None, NOW, "alice", "edit rate collapsed", {"alert": "a1"})
    assert [(e.checkpoint_id, e.kind, e.status) for e in events] == [
        ("c1", "rolled_back", "rolled_back"), ("base", "promoted", "production")]
    assert events[0].evidence == {"reason": "edit rate collapsed", "previous_status": "production",
                                  "restored": "base", "alert": "a1"}
    assert events[1].evidence == {"reason": "edit rate collapsed", "rollback_of": "c1",
                                  "alert": "a1"}
    assert {e.actor for e in events} == {"alice"} and [e.sequence for e in events] == [5, 6]
    after = fold([*registry.history, *events])
    assert after.production().checkpoint_id == "base"
    with pytest.raises(RegistryError, match="already rolled_back"):
        rollback(after, "c1", NOW, "alice", "again")
    with pytest.raises(RegistryError, match="reason"):
        rollback(after, "base", NOW, "alice", " ")


def test_rolling_back_the_only_production_or_a_candidate_is_one_event() -> None:
    only = fold(_history()[:1])
    [down] = rollback(only, "base", NOW, "ops", "bad")
    assert (down.status, fold([*only.events, down]).production()) == ("rolled_back", None)
    registry = fold(_history())
    [retired] = rollback(registry, "c2", NOW, "ops", "not this one")
    after = fold([*registry.events, retired])
    assert after.candidate() is None and after.production().checkpoint_id == "c1"


def test_a_canary_needs_a_passed_gate_and_a_passed_ab_to_be_promoted() -> None:
    registry = fold(_history())  # c2 is the candidate, c1 production
    gate = {"passed": True, "margin": 0.3}
    with pytest.raises(RegistryError, match="did not pass the offline gate"):
        enter_canary(registry, "c2", NOW, "gate", {"passed": False})
    canary = enter_canary(registry, "c2", NOW, "gate", gate)
    assert (canary.kind, canary.status, canary.evidence) == ("evaluated", "canary", gate)
    registry = fold([*registry.history, canary])
    assert registry.canary().checkpoint_id == "c2" and registry.candidate() is None
    assert registry.aliases("c2") == ["canary"] and registry.production().checkpoint_id == "c1"
    with pytest.raises(RegistryError, match="only a candidate"):
        enter_canary(registry, "c2", NOW, "gate", gate)

    rejected = conclude_canary(registry, "c2", NOW, "canary", {"passed": False, "reason": "r"})
    assert rejected.status == "rejected"
    assert rejected.evidence == {**gate, "ab": {"passed": False, "reason": "r"}}
    promoted = conclude_canary(registry, "c2", NOW, "canary", {"passed": True})
    assert promoted.status == "production" and promoted.evidence == {
        "previous_production": "c1", **gate, "ab": {"passed": True}}
    after = fold([*registry.history, promoted])
    assert after.production().checkpoint_id == "c2" and after.canary() is None
    with pytest.raises(RegistryError, match="is production, not serving the canary arm"):
        conclude_canary(after, "c2", NOW, "canary", {"passed": True})


def test_a_canary_whose_stored_gate_failed_is_never_promoted() -> None:
    registry = fold(_history())
    planted = enter_canary(registry, "c2", NOW, "gate", {"passed": True})
    # A hand-made event that says canary without a passed gate (a bad replay, an operator):
    forged = planted.model_copy(update={"evidence": {"passed": False}})
    registry = fold([*registry.history, forged])
    assert conclude_canary(registry, "c2", NOW, "canary", {"passed": True}).status == "rejected"
