"""What the demo shows: a line per cycle with the reasons for its decisions, alerts as they
fire, a summary table and a PNG plot that marks every decision."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from harness.demo.metrics import CycleFigures
from schemas.alerts import AlertEvent
from schemas.rewards import RewardRecord
from streams.monitors.abreport import AbReport
from streams.monitors.windows import ALL, reward_event_time_ms

__all__ = ["CanaryRow", "CycleRow", "ab_short", "alert_line", "alert_scope", "canary_line",
           "components_line", "cycle_line", "gate_short", "save_json", "save_plot",
           "save_records", "short", "summary_table"]


@dataclass(frozen=True)
class CanaryRow:
    """The A/B that ran on a cycle's traffic, and what the release controller decided."""

    checkpoint: str
    decision: str  # promoted / rejected / aborted
    reason: str  # the sequential rule's one line
    report: AbReport | None  # None when an arm had no records to compare
    look: dict[str, Any] = field(default_factory=dict)  # the deciding look's evidence

    @property
    def trajectories(self) -> int:
        return int(self.look.get("n_baseline") or 0) + int(self.look.get("n_candidate") or 0)


@dataclass(frozen=True)
class CycleRow:
    cycle: int
    served_by: str  # the production checkpoint during the cycle
    canary: CanaryRow | None  # the candidate that served the canary arm, if one did
    figures: CycleFigures  # of all the cycle's traffic, both arms
    decision: str  # the gate on the cycle's candidate: canary / promoted / rejected / none
    candidate: str
    eval_candidate: float
    eval_incumbent: float
    gate_reason: str  # trainer.gate.describe_gate of the gate's evidence
    gate_failed: tuple[str, ...]  # the families (or "broken calls") it failed on
    traffic_s: float  # trajectories and their reward records
    update_gate_s: float  # the trainer's update(s) and the gate


def short(checkpoint_id: str) -> str:
    return checkpoint_id if len(checkpoint_id) <= 14 else "…" + checkpoint_id[-10:]


def ab_short(canary: CanaryRow) -> str:
    """``promoted +0.09 [-0.12, +0.30] n=640``: the decision, the reward difference with its
    always-valid bounds and the trajectories it took (the rule's reason without bounds)."""
    bound = canary.look.get("primary_bound") or {}
    if bound.get("low") is None or bound.get("high") is None:
        return f"{canary.decision}: {canary.reason}"
    return (f"{canary.decision} {bound['change']:+.2f} [{bound['low']:+.2f}, "
            f"{bound['high']:+.2f}] n={canary.trajectories}")


def gate_short(row: CycleRow) -> str:
    """``canary 0.68/0.60``, ``rejected 0.55/0.60: rename-function``: the decision and the
    held-out solve rates of the candidate and production (and the families it failed on)."""
    if row.decision == "none":
        return "-"
    text = f"{row.decision} {row.eval_candidate:.2f}/{row.eval_incumbent:.2f}"
    return f"{text}: {', '.join(row.gate_failed)}" if row.decision == "rejected" else text


def cycle_line(cycle: int, production: str, canary: str | None, figures: CycleFigures,
               traffic_s: float) -> str:
    f = figures
    arms = f"production {short(production)}"
    if canary is not None:
        arms += f", canary {short(canary)}"
    return (f"[bold]cycle {cycle}[/] ({arms}): "
            f"{f.trajectories} trajectories, mean reward {f.mean_reward:+.3f}, "
            f"kept-edit {f.kept_edit_rate:.2f} (kept edits/trajectory {f.kept_edits:.2f}), "
            f"edit {f.edit_rate:.2f}, "
            f"dissatisfied {f.dissatisfied_rate:.2f}, broken-call {f.broken_call_rate:.2f}, "
            f"latency {f.latency_ms:.0f} ms; traffic and rewards {traffic_s:.0f} s")


def canary_line(canary: CanaryRow) -> str:
    colour = "green" if canary.decision == "promoted" else "red"
    return (f"  [{colour} bold]A/B: {canary.decision}[/] {short(canary.checkpoint)}: "
            f"{escape(canary.reason)}")


def components_line(figures: CycleFigures) -> str:
    parts = ", ".join(f"{name} {value:+.3f}" for name, value in figures.components.items()
                      if abs(value) > 1e-9)
    return f"  reward components (mean): {parts}"


def alert_scope(labels: dict[str, str]) -> str:
    """``fleet`` or ``org demo``: the detectors test each org's windows and the fleet's, so in a
    one-org run a shift fires once for each, on the same trajectories."""
    org = labels.get("org", ALL)
    return "fleet" if org == ALL else f"org {org}"


def alert_line(event: AlertEvent) -> str | None:
    if event.kind == "fired" and event.alert is not None:
        alert = event.alert
        colour = "red" if alert.severity == "critical" else "yellow"
        arm = alert.labels.get("arm", ALL)
        against = "its own past" if alert.labels.get("baseline") == "trailing" else "its parent"
        return (f"[{colour} bold]ALERT FIRED[/] {alert.severity} {alert.detector} on "
                f"{short(alert.labels.get('checkpoint', '?'))} "
                f"({'' if arm == ALL else f'{arm} arm, '}{alert_scope(alert.labels)}, against "
                f"{against}): {escape(alert.summary)}")
    if event.kind == "resolved":
        return f"[green]alert resolved[/] {event.fingerprint}"
    return None


def summary_table(rows: list[CycleRow]) -> Table:
    table = Table(title="rewardstream demo: per cycle (figures of all the cycle's traffic)")
    left = ("production", "canary", "A/B: reward diff. [always-valid], trajectories",
            "gate: held-out cand./prod.")
    for column in ("cycle", "production", "canary", "n", "reward", "kept-edit", "edit",
                   "dissatisfied", "broken-call", "latency ms", *left[2:]):
        table.add_column(column, justify="left" if column in left else "right")
    for row in rows:
        f = row.figures
        table.add_row(str(row.cycle), short(row.served_by),
                      short(row.canary.checkpoint) if row.canary else "-",
                      str(f.trajectories), f"{f.mean_reward:+.3f}", f"{f.kept_edit_rate:.2f}",
                      f"{f.edit_rate:.2f}", f"{f.dissatisfied_rate:.2f}",
                      f"{f.broken_call_rate:.2f}", f"{f.latency_ms:.0f}",
                      escape(ab_short(row.canary)) if row.canary else "-",
                      escape(gate_short(row)))
    return table


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def save_json(value: Any, path: Path) -> None:
    """Dataclasses and plain values as JSON (NaN as null)."""
    if isinstance(value, list):
        value = [asdict(v) if hasattr(v, "__dataclass_fields__") else v for v in value]
    path.write_text(json.dumps(_jsonable(value), indent=2, allow_nan=False) + "\n")


def _mark_decisions(axis: Any, rows: list[CycleRow]) -> None:
    """Each A/B: its arms' mean rewards and its decision (a triangle, labelled with the reward
    difference and interval); each gate rejection: a cross labelled with the failed families."""
    for row in rows:
        y = row.figures.mean_reward
        canary = row.canary
        if canary is not None:
            colour = "green" if canary.decision == "promoted" else "red"
            if canary.report is not None:
                reward = canary.report.row("reward")
                axis.scatter([row.cycle] * 2, [reward.baseline, reward.candidate], s=25,
                             marker="_", color=["grey", colour], zorder=3)
            axis.scatter([row.cycle], [y], marker="^" if colour == "green" else "v", s=90,
                         zorder=4, color=colour)
            axis.annotate("A/B " + ab_short(canary), (row.cycle, y), fontsize=6, color=colour,
                          textcoords="offset points", xytext=(0, 9), ha="center")
        if row.decision == "rejected":
            axis.scatter([row.cycle], [y], marker="x", s=70, color="red", zorder=4)
            axis.annotate("gate " + gate_short(row), (row.cycle, y), fontsize=6, color="red",
                          textcoords="offset points", xytext=(0, -14), ha="center")


def save_records(records: Mapping[str, Sequence[RewardRecord]], path: Path) -> None:
    """Every reward record of the run, one JSON line each in event-time order: the input of
    ``rewardstream monitors replay`` (the detectors again, under other thresholds)."""
    ordered = sorted((r for each in records.values() for r in each), key=reward_event_time_ms)
    path.write_text("".join(r.model_dump_json() + "\n" for r in ordered))


def save_plot(rows: list[CycleRow], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cycles = [r.cycle for r in rows]
    series = {
        "kept-edit rate (per edit)": [r.figures.kept_edit_rate for r in rows],
        "kept edits per trajectory": [r.figures.kept_edits for r in rows],
        "edit rate": [r.figures.edit_rate for r in rows],
        "dissatisfied rate": [r.figures.dissatisfied_rate for r in rows],
        "broken-call rate": [r.figures.broken_call_rate for r in rows],
    }
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7.5), sharex=True)
    top.plot(cycles, [r.figures.mean_reward for r in rows], marker="o", color="black",
             label="mean reward (all traffic)")
    _mark_decisions(top, rows)
    top.set_ylabel("reward")
    top.legend(loc="best", fontsize=8, title="▲ A/B promoted  ▼ A/B rejected  ✕ gate rejected"
               "\n– the A/B's production (grey) and canary arm means", title_fontsize=7)
    top.margins(y=0.25)
    for name, values in series.items():
        bottom.plot(cycles, values, marker="o", label=name)
    bottom.set_ylabel("rate / per trajectory")
    bottom.set_xlabel("cycle")
    bottom.set_xticks(cycles)
    bottom.set_ylim(bottom=-0.02)  # kept edits per trajectory may pass 1
    bottom.legend(loc="best", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
