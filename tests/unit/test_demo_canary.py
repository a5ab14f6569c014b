"""The demo's canary and closing, without services: the release controller's decision as the
row the demo shows, the reasons shown for each decision, and the run's summary (promotions,
trajectories per decision, base against the last promoted checkpoint, alerts by severity)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness.demo.canary import canary_row, decision_of
from harness.demo.metrics import cycle_figures
from harness.demo.report import CanaryRow, CycleRow, ab_short, gate_short, save_json
from harness.demo.summary import counted, summary
from schemas.alerts import Alert, AlertEvent
from schemas.checkpoints import CheckpointEvent, enter_canary
from schemas.release import abort_canary
from schemas.rewards import RewardRecord
from streams.release.fold import ReleaseFold
from streams.release.plan import ControllerConfig, plan
from streams.release.rule import SequentialRule

_AT = datetime(2026, 1, 1, tzinfo=UTC)
_CONFIG = ControllerConfig(share=0.5, rule=SequentialRule(margin=0.15))


def _record(i: int, checkpoint: str, total: float, kept: float = 1.0,
            arm: str = "x") -> RewardRecord:
    return RewardRecord(
        trajectory_id=f"t{i}", spec_version="v", checkpoint_id=checkpoint, arm=arm,
        outcome="completed", finalized_by="complete", finalized_at=_AT, samples=[],
        components={"kept_3600s": total}, total=total, event_ids=[],
        signals={"edits_proposed": 1, "edits_accepted": kept, "kept_fraction": kept,
                 "latency_ms_mean": 100.0 + i % 7})


def _controller(production: float, canary: float, n: int = 60) -> ReleaseFold:
    """The controller's fold: base in production, cand's canary started, n trajectories an arm
    after its start, rewards spread ±0.2 around each arm's mean."""
    fold = ReleaseFold()
    fold.add_checkpoint(CheckpointEvent(
        event_id="e1", sequence=1, occurred_at=_AT, kind="promoted", status="production",
        checkpoint_id="prod", model="m", path="/m"))
    fold.add_checkpoint(CheckpointEvent(
        event_id="e2", sequence=2, occurred_at=_AT, kind="created", status="candidate",
        checkpoint_id="cand", model="m", path="/c", adapter=True))
    fold.add_checkpoint(enter_canary(fold.registry, "cand", _AT, "gate", {"passed": True}))
    for event in plan(fold, _AT - timedelta(seconds=1), _CONFIG):
        fold.add_checkpoint(event)
    for i in range(2 * n):
        on_canary = i >= n
        record = _record(i, "cand" if on_canary else "prod",
                         (canary if on_canary else production) + (0.2 if i % 2 else -0.2),
                         kept=float(i % 3 != 0), arm="canary" if on_canary else "production")
        fold.add_reward(record)
    return fold


def _decided(production: float, canary: float) -> CheckpointEvent:
    fold = _controller(production, canary)
    assert decision_of(fold.registry, "cand") is None  # running
    [event] = plan(fold, _AT + timedelta(minutes=1), _CONFIG)
    fold.add_checkpoint(event)
    assert decision_of(fold.registry, "cand") == event
    return event


def test_the_controllers_decision_is_the_row_the_demo_shows() -> None:
    row = canary_row(_decided(0.3, 0.35))
    assert (row.decision, row.trajectories) == ("promoted", 120)
    assert row.report is not None and (row.report.n_baseline, row.report.n_candidate) == (60, 60)
    assert row.look["primary_bound"]["low"] > -0.15 and "rules out a loss" in row.reason
    assert ab_short(row).startswith("promoted +0.05 [") and ab_short(row).endswith("n=120")
    worse = canary_row(_decided(0.3, -0.6))
    assert worse.decision == "rejected" and "surely worse" in worse.reason


def test_an_aborted_canary_shows_why_without_an_interval() -> None:
    fold = _controller(0.3, 0.3, n=5)
    event = abort_canary(fold.registry, "cand", _AT, "ops", "users report broken edits")
    row = canary_row(event)
    assert (row.decision, row.report) == ("aborted", None)
    assert ab_short(row) == "aborted: users report broken edits"


def _row(cycle: int, canary: CanaryRow | None, decision: str, records: list[RewardRecord],
         served_by: str = "base") -> CycleRow:
    reason = ("gate fail: rename -0.400 [-0.600, -0.200]: lower bound at or below the margin "
              "-0.3" if decision == "rejected" else "gate pass: all families ...")
    failed = ("rename",) if decision == "rejected" else ()
    return CycleRow(cycle, served_by, canary, cycle_figures(records), decision, f"c{cycle}",
                    0.6, 0.7, reason, failed, 1.0, 1.0)


def _fired(severity: str, detector: str, org: str = "demo") -> AlertEvent:
    alert = Alert(detector=detector, fingerprint="f", title="t", severity=severity,  # type: ignore[arg-type]
                  summary="s", evidence={}, runbook="r", window_end=_AT,
                  labels={"checkpoint": "c1", "arm": "canary", "org": org})
    return AlertEvent(event_id="e", kind="fired", occurred_at=_AT, actor="detector",
                      fingerprint="f", alert=alert)


def test_the_summary_compares_the_base_with_the_last_promoted_checkpoint() -> None:
    base = [_record(i, "base", 0.0, kept=float(i % 2)) for i in range(10)]
    c1 = [_record(i, "c1", 1.0) for i in range(4)]
    decided = canary_row(_decided(0.3, 0.4))
    promoted = CanaryRow("c1", "promoted", decided.reason, decided.report, decided.look)
    rows = [_row(1, None, "canary", base), _row(2, promoted, "rejected", base[:6] + c1, "base"),
            _row(3, None, "none", c1, "c1")]
    result = summary(rows, [(2, _fired("warning", "latency_regression")),
                            (2, _fired("warning", "latency_regression", "*")),
                            (3, _fired("critical", "broken_call_spike"))],
                     {"base": base, "c1": c1}, 301.0, margin=0.15)
    assert (result["cycles"], result["promotions"], result["gate_rejections"]) == (3, 1, 1)
    assert (result["margin"], result["trajectories_per_decision"]) == (0.15, [120])
    assert result["base"] == {"checkpoint": "base", "n": 10, "reward": 0.0,
                              "kept_edit_rate": 0.5, "kept_edits": 0.5}
    assert result["last_promoted"]["checkpoint"] == "c1" and result["last_promoted"]["n"] == 4
    assert result["last_promoted"]["reward"] == 1.0
    assert [(a["severity"], a["detector"], a["scope"], a["cycle"]) for a in result["alerts"]] == [
        ("warning", "latency_regression", "org demo", 2),
        ("warning", "latency_regression", "fleet", 2),
        ("critical", "broken_call_spike", "org demo", 3)]
    # One shift fires for the org and for the fleet (the same trajectories): counted per scope.
    assert counted(result["alerts"], "warning") == "latency_regression (fleet 1, org demo 1)"
    assert counted(result["alerts"], "critical") == "broken_call_spike (org demo 1)"
    assert result["last_promotion_ab"]["candidate"] == "cand"
    # The reasons a reader sees: the A/B's reward bounds, the family the gate failed on.
    assert ab_short(promoted).startswith("promoted +0.10 [")
    assert gate_short(rows[1]) == "rejected 0.60/0.70: rename"


def test_saved_json_has_null_for_what_was_not_measured(tmp_path: Path) -> None:
    rows = [_row(1, None, "none", [])]
    assert math.isnan(rows[0].figures.mean_reward)
    save_json(rows, tmp_path / "cycles.json")
    saved = json.loads((tmp_path / "cycles.json").read_text())
    assert saved[0]["figures"]["mean_reward"] is None and saved[0]["canary"] is None
