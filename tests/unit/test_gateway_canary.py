"""A started canary's stated share and scope in the gateway's sticky assignment."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from schemas.checkpoints import CanarySpec, CheckpointEvent, Registry
from serving.gateway.arms import HOLDOUT_ARM, ArmSplit, CanaryOverlay, assign_arm, parse_arms
from serving.gateway.registry import Target, canary_overlay, resolve_targets

USERS = [f"user-{i}" for i in range(10_000)]
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def test_the_canary_gets_its_share_of_its_scope_after_the_holdout() -> None:
    split = ArmSplit(parse_arms("production=1"), holdout_fraction=0.1)
    fleet = CanaryOverlay(0.2, "canary:c1")
    counts = Counter(assign_arm(user, split, "acme", fleet) for user in USERS)
    assert counts[HOLDOUT_ARM] / 10_000 == pytest.approx(0.1, abs=0.02)
    assert counts["canary"] / 10_000 == pytest.approx(0.9 * 0.2, abs=0.02)
    held = {u for u in USERS if assign_arm(u, split) == HOLDOUT_ARM}
    assert all(assign_arm(u, split, "acme", fleet) == HOLDOUT_ARM for u in held)
    one_org = CanaryOverlay(0.5, "canary:c1", org="acme")
    assert {assign_arm(u, split, "other", one_org) for u in USERS} == {"production", HOLDOUT_ARM}
    assert "canary" in {assign_arm(u, split, "acme", one_org) for u in USERS[:50]}


def test_each_canary_draws_its_users_afresh_and_keeps_them() -> None:
    split = ArmSplit(parse_arms("production=1"))
    first = [assign_arm(u, split, None, CanaryOverlay(0.5, "canary:c1")) for u in USERS[:400]]
    again = [assign_arm(u, split, None, CanaryOverlay(0.5, "canary:c1")) for u in USERS[:400]]
    other = [assign_arm(u, split, None, CanaryOverlay(0.5, "canary:c2")) for u in USERS[:400]]
    assert first == again and first != other


def _event(seq: int, ckpt: str, status: str, canary: CanarySpec | None = None,
           adapter: bool = True) -> CheckpointEvent:
    return CheckpointEvent(event_id=f"e{seq}", sequence=seq, occurred_at=T0, kind="created",
                           status=status, checkpoint_id=ckpt, model="m", path=f"/ck/{ckpt}",
                           adapter=adapter, canary=canary)


def test_the_registry_names_the_overlay_only_for_a_started_servable_canary() -> None:
    spec = CanarySpec(share=0.25, org="acme", baseline="base", started_at=T0, salt="canary:c1")
    waiting = Registry([_event(1, "c1", "canary")])
    assert canary_overlay(waiting) is None
    started = Registry([_event(1, "c0", "canary"), _event(2, "c1", "canary", spec)])
    assert canary_overlay(started) == CanaryOverlay(0.25, "canary:c1", "acme")
    base = Target("base", "policy")
    # The started canary serves the canary arm, not the newer one still waiting.
    resolved = resolve_targets(Registry([*started.events, _event(3, "c2", "canary")]),
                               {"canary": "canary"}, base)
    assert resolved["canary"].checkpoint_id == "c1"
    full_model = Registry([_event(1, "c1", "canary", spec, adapter=False)])
    assert canary_overlay(full_model, base_path="/models/base") is None
