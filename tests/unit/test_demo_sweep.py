"""The sweep's reading of finished demo runs: the variant's first cycle, its critical alerts
(each once, though the demo fires them for the org and the fleet), the false ones, the table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.demo.sweep import HEALTHY, format_table, read_run, variant_dir


def _figures(reward: float, edit: float, broken: float) -> dict[str, float]:
    return {"mean_reward": reward, "edit_rate": edit, "broken_call_rate": broken}


def _alert(severity: str, detector: str, checkpoint: str, cycle: int, scope: str = "fleet",
           baseline: str = "parent", second: int = 30) -> dict[str, Any]:
    return {"severity": severity, "detector": detector, "checkpoint": checkpoint, "arm": "*",
            "scope": scope, "baseline": baseline, "cycle": cycle, "summary": "s",
            "window_end": f"2026-01-01T00:01:{second:02d}+00:00"}


def _run(directory: Path, cycles: list[tuple[str, dict[str, float]]],
         alerts: list[dict[str, Any]]) -> None:
    run = directory / "demo-20260101-000000-abcd"
    run.mkdir(parents=True)
    # The last checkpoint's trajectories end one a second from 00:01:00.
    (run / "rewards.jsonl").write_text("".join(
        json.dumps({"checkpoint_id": cycles[-1][0], "ended_at": f"2026-01-01T00:01:{s:02d}+00:00",
                    "finalized_at": "2026-01-01T00:05:00+00:00"}) + "\n" for s in range(50)))
    (run / "cycles.json").write_text(json.dumps(
        [{"cycle": i + 1, "served_by": served, "figures": figures}
         for i, (served, figures) in enumerate(cycles)]))
    (run / "summary.json").write_text(json.dumps({"alerts": alerts, "wall_s": 600}))


def test_a_variants_first_cycle_criticals_are_read_once_and_others_are_false(
        tmp_path: Path) -> None:
    hack = "hack-broken-calls-0.25-1a2b3c4d"
    directory = variant_dir(tmp_path, "broken-calls:0.25", 3)
    assert directory == tmp_path / "broken-calls-0.25-seed3"
    assert read_run(directory, "broken-calls:0.25", 3) is None  # not run yet
    _run(directory, [("base", _figures(0.2, 0.99, 0.14)), (hack, _figures(-0.1, 0.88, 0.25))], [
        _alert("critical", "edit_rate_collapse", "base", 1),  # before the variant: false
        _alert("critical", "edit_rate_collapse", hack, 2, second=20),
        _alert("critical", "edit_rate_collapse", hack, 2, scope="org demo", second=20),
        _alert("critical", "broken_call_spike", hack, 2, baseline="trailing"),
        _alert("warning", "latency_regression", hack, 2),
    ])
    row = read_run(directory, "broken-calls:0.25", 3)
    assert row is not None
    assert row.drop == 0.2 + 0.1
    assert row.no_edit == (1 - 0.99, 1 - 0.88) and row.broken == (0.14, 0.25)
    assert row.criticals == ("edit_rate_collapse (parent)", "broken_call_spike (trailing)")
    assert row.first_critical_after == (21, 50)  # ended 00:01:00 … 00:01:20
    assert row.false_criticals == ("edit_rate_collapse on base, cycle 1",)
    assert row.warnings == ("latency_regression (cycle 2)",)

    healthy = variant_dir(tmp_path, HEALTHY, 3)
    _run(healthy, [("base", _figures(0.2, 0.99, 0.14)), ("base", _figures(0.25, 0.99, 0.13))],
         [_alert("critical", "dissatisfied_spike", "c1", 2)])
    quiet = read_run(healthy, HEALTHY, 3)
    assert quiet is not None and quiet.criticals == () and quiet.first_critical_after is None
    assert quiet.false_criticals == ("dissatisfied_spike on c1, cycle 2",)

    table = format_table([quiet, row])
    assert ("| broken-calls:0.25 | 3 | +0.200 → -0.100 (+0.300) | 0.01 → 0.12 | 0.14 → 0.25 | "
            "edit_rate_collapse (parent), broken_call_spike (trailing) | 21 of 50 | "
            "edit_rate_collapse on base, cycle 1 | latency_regression (cycle 2) | 10.0 min |"
            ) in table
    assert "| broken-calls:0.25 | 1 | +0.300 [+0.300, +0.300] | 1/1 | 1/1 | 1 |" in table
    assert "| healthy | 1 | -0.050 [-0.050, -0.050] | - | - | 1 |" in table
