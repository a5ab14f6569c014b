"""The demo's canary and closing, without services: the A/B verdict on a cycle's records, the
reasons shown for each decision, and the run's summary (promotions, base against the last
promoted checkpoint, alerts by severity)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

from harness.demo.canary import judge_canary
from harness.demo.config import DemoConfig
from harness.demo.metrics import cycle_figures
from harness.demo.report import CanaryRow, CycleRow, ab_short, gate_short, save_json
from harness.demo.summary import counted, summary
from schemas.alerts import Alert, AlertEvent
from schemas.rewards import RewardRecord

_AT = datetime(2026, 1, 1, tzinfo=UTC)
_CONFIG = DemoConfig(run_dir=Path("unused"), canary_share=0.5, ab_margin=0.75)


def _record(i: int, checkpoint: str, total: float, kept: float = 1.0) -> RewardRecord:
    return RewardRecord(
        trajectory_id=f"t{i}", spec_version="v", checkpoint_id=checkpoint, arm="x",
        outcome="completed", finalized_by="complete", finalized_at=_AT, samples=[],
        components={"kept_3600s": total}, total=total, event_ids=[],
        signals={"edits_proposed": 1, "edits_accepted": kept, "kept_fraction": kept,
                 "latency_ms_mean": 100.0 + i % 7})


def _arms(production: float, canary: float, n: int = 60) -> list[RewardRecord]:
    """n trajectories per arm; rewards spread ±1 around each arm's mean."""
    return [_record(i, "prod" if i < n else "cand", (production if i < n else canary)
                    + (1.0 if i % 2 else -1.0), kept=float(i % 3 != 0)) for i in range(2 * n)]


def test_a_canary_as_good_as_production_passes_and_a_much_worse_one_does_not() -> None:
    report, verdict, evidence = judge_canary(_arms(0.3, 0.35), "prod", "cand", _CONFIG)
    assert report is not None and verdict.passed
    assert (report.n_baseline, report.n_candidate, report.srm_detected) == (60, 60, False)
    assert evidence["passed"] is True and evidence["margin"] == 0.75
    assert [row["metric"] for row in evidence["rows"]][-1] == "reward"
    _, worse, _ = judge_canary(_arms(0.3, -0.6), "prod", "cand", _CONFIG)
    assert not worse.passed and "does not rule out a loss of 0.75" in worse.reason


def test_an_arm_without_records_is_no_ab_and_no_promotion() -> None:
    report, verdict, evidence = judge_canary(_arms(0.3, 0.3)[:60], "prod", "cand", _CONFIG)
    assert report is None and not verdict.passed
    assert evidence["reason"] == "no reward records from the canary arm: nothing to compare"


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
    report, verdict, _ = judge_canary(_arms(0.3, 0.4), "prod", "cand", _CONFIG)
    promoted = CanaryRow("c1", "promoted", verdict.reason, report)
    rows = [_row(1, None, "canary", base), _row(2, promoted, "rejected", base[:6] + c1, "base"),
            _row(3, None, "none", c1, "c1")]
    result = summary(rows, [(2, _fired("warning", "latency_regression")),
                            (2, _fired("warning", "latency_regression", "*")),
                            (3, _fired("critical", "broken_call_spike"))],
                     {"base": base, "c1": c1}, 301.0)
    assert (result["cycles"], result["promotions"], result["gate_rejections"]) == (3, 1, 1)
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
    # The reasons a reader sees: the A/B's reward interval, the family the gate failed on.
    assert ab_short(promoted).startswith("promoted +0.10 [")
    assert gate_short(rows[1]) == "rejected 0.60/0.70: rename"


def test_saved_json_has_null_for_what_was_not_measured(tmp_path: Path) -> None:
    rows = [_row(1, None, "none", [])]
    assert math.isnan(rows[0].figures.mean_reward)
    save_json(rows, tmp_path / "cycles.json")
    saved = json.loads((tmp_path / "cycles.json").read_text())
    assert saved[0]["figures"]["mean_reward"] is None and saved[0]["canary"] is None
