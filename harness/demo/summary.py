"""The demo's closing: the per-cycle table, the last promotion's A/B table, the base against the
last promoted checkpoint, the alerts by severity, and the files (plot, cycles.json,
summary.json)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape

from harness.demo.config import DemoConfig
from harness.demo.metrics import CycleFigures, cycle_figures
from harness.demo.report import (
    CycleRow,
    alert_scope,
    save_json,
    save_plot,
    save_records,
    short,
    summary_table,
)
from schemas.alerts import AlertEvent
from schemas.rewards import RewardRecord
from streams.monitors.abreport import format_report

__all__ = ["alerts_fired", "counted", "finish", "summary"]


def alerts_fired(fired: Sequence[tuple[int, AlertEvent]]) -> list[dict[str, Any]]:
    """Each alert that fired: its severity, detector, checkpoint, arm, scope (fleet or an
    org) and baseline (parent or trailing), the cycle it fired in, the end of the window that
    fired it, and its evidence line."""
    return [{"severity": e.alert.severity, "detector": e.alert.detector,
             "checkpoint": e.alert.labels.get("checkpoint"), "arm": e.alert.labels.get("arm"),
             "scope": alert_scope(e.alert.labels), "baseline": e.alert.labels.get("baseline"),
             "cycle": cycle, "window_end": e.alert.window_end.isoformat(),
             "summary": e.alert.summary}
            for cycle, e in fired if e.kind == "fired" and e.alert is not None]


def _figures(figures: CycleFigures) -> dict[str, float]:
    return {"n": figures.trajectories, "reward": figures.mean_reward,
            "kept_edit_rate": figures.kept_edit_rate, "kept_edits": figures.kept_edits}


def summary(rows: Sequence[CycleRow], fired: Sequence[tuple[int, AlertEvent]],
            records: Mapping[str, Sequence[RewardRecord]], wall_s: float,
            margin: float | None = None) -> dict[str, Any]:
    """What a run measured, JSON-able: promotions, the canaries' margin and trajectories per
    decision, first and last cycle, the base against the last promoted checkpoint (each over all
    the traffic it served), alerts, the wall time."""
    promoted = [r.canary for r in rows if r.canary is not None and r.canary.decision == "promoted"]
    decided = [r.canary for r in rows if r.canary is not None]
    last = promoted[-1] if promoted else None
    base = rows[0].served_by
    return {
        "cycles": len(rows), "promotions": len(promoted), "margin": margin,
        "ab_rejections": sum(1 for r in rows if r.canary and r.canary.decision != "promoted"),
        "trajectories_per_decision": [c.trajectories for c in decided],
        "gate_rejections": sum(1 for r in rows if r.decision == "rejected"),
        "first_cycle": _figures(rows[0].figures), "last_cycle": _figures(rows[-1].figures),
        "base": {"checkpoint": base, **_figures(cycle_figures(records.get(base, [])))},
        "last_promoted": None if last is None else {
            "checkpoint": last.checkpoint,
            **_figures(cycle_figures(records.get(last.checkpoint, [])))},
        "last_promotion_ab": None if last is None or last.report is None
        else last.report.evidence(),
        "alerts": alerts_fired(fired), "wall_s": round(wall_s, 1),
    }


def counted(alerts: list[dict[str, Any]], severity: str) -> str:
    """``latency_regression (fleet 4, org demo 4)``: how often each detector fired, per scope."""
    fired = [(a["detector"], a["scope"]) for a in alerts if a["severity"] == severity]
    return ", ".join(
        f"{name} (" + ", ".join(f"{scope} {fired.count((name, scope))}"
                                for scope in sorted({s for n, s in fired if n == name})) + ")"
        for name in sorted({n for n, _ in fired})) or "none"


def finish(console: Console, config: DemoConfig, rows: list[CycleRow],
           fired: Sequence[tuple[int, AlertEvent]],
           records: Mapping[str, Sequence[RewardRecord]], wall_s: float) -> dict[str, Any]:
    """Print and save the closing; returns the summary."""
    console.print(summary_table(rows))
    console.print(f"promotion = the offline gate AND the canary's A/B: "
                  f"{escape(config.rule().describe())}")
    result = summary(rows, fired, records, wall_s, config.ab_margin)
    last = next((r.canary for r in reversed(rows)
                 if r.canary is not None and r.canary.decision == "promoted"), None)
    if last is not None and last.report is not None:
        console.print(f"the last promotion's A/B (cycle "
                      f"{next(r.cycle for r in rows if r.canary is last)}):")
        console.print(format_report(last.report, ("production", "canary")), markup=False,
                      highlight=False)
    base, best = result["base"], result["last_promoted"]
    if best is None:
        console.print("no promotion: production is still the base")
    else:
        console.print(
            f"from the base ({short(base['checkpoint'])}) to the last promoted checkpoint "
            f"({short(best['checkpoint'])}), each over all the traffic it served: reward "
            f"{base['reward']:+.3f} (n={base['n']}) → {best['reward']:+.3f} (n={best['n']}), "
            f"kept-edit "
            f"{base['kept_edit_rate']:.2f} → {best['kept_edit_rate']:.2f}; "
            f"{result['promotions']} promotion(s) in {len(rows)} cycles")
    if result["trajectories_per_decision"]:
        console.print(f"canaries decided at margin {config.ab_margin:g} after "
                      f"{', '.join(map(str, result['trajectories_per_decision']))} trajectories")
    console.print(f"alerts fired: critical: {counted(result['alerts'], 'critical')}; "
                  f"warning: {counted(result['alerts'], 'warning')}")
    title = "rewardstream demo" + (f" --hack {config.hack_label}" if config.hack else "")
    plot = save_plot(rows, config.run_dir / "metrics.png", title)
    save_json(rows, config.run_dir / "cycles.json")
    save_json(result, config.run_dir / "summary.json")
    save_records(records, config.run_dir / "rewards.jsonl")
    console.print(f"[bold]plot[/] {plot}  [bold]per cycle[/] {config.run_dir / 'cycles.json'}  "
                  f"[bold]summary[/] {config.run_dir / 'summary.json'}  "
                  f"[bold]reward records[/] {config.run_dir / 'rewards.jsonl'}  "
                  f"[bold]logs[/] {config.log_dir}/  (wall time {wall_s / 60:.1f} min)")
    return result
