"""Auto-protect's choice of what to roll back (pure): which alerts may touch production."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schemas.alerts import Alert
from schemas.checkpoints import CheckpointEvent, Registry
from streams.monitors.protect import auto_protect_target

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _registry(orgs: list[str]) -> Registry:
    registry = Registry()
    registry.add(CheckpointEvent(event_id="e1", sequence=1, occurred_at=NOW, kind="promoted",
                                 status="production", checkpoint_id="ck1", model="m",
                                 path="/ckpt/ck1", orgs=orgs))
    return registry


def _alert(org: str, severity: str = "critical", checkpoint: str = "ck1") -> Alert:
    return Alert(detector="edit_rate_collapse", fingerprint="f", title="t", severity=severity,
                 summary="s", evidence={}, runbook="r",
                 labels={"checkpoint": checkpoint, "arm": "a", "org": org},
                 window_end=NOW)


@pytest.mark.parametrize(("trained_on", "org", "rolled_back"), [
    ([], "*", True),                  # a fleet alert on production
    (["acme", "evil"], "*", True),
    (["acme"], "acme", True),         # the one org the checkpoint serves
    (["acme", "evil"], "evil", False),  # one org cannot roll back what others are served
    ([], "evil", False),
    (["acme"], "evil", False),
])
def test_only_the_fleet_or_the_checkpoints_own_org_rolls_production_back(
        trained_on: list[str], org: str, rolled_back: bool) -> None:
    target = auto_protect_target(_registry(trained_on), _alert(org))
    assert target == ("ck1" if rolled_back else None)


def test_warnings_and_other_checkpoints_roll_nothing_back() -> None:
    assert auto_protect_target(_registry([]), _alert("*", severity="warning")) is None
    assert auto_protect_target(_registry([]), _alert("*", checkpoint="ck0")) is None
