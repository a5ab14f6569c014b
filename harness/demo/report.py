"""What the demo shows: a line per cycle, alerts as they fire, a summary table, a PNG plot."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.table import Table

from harness.demo.metrics import CycleFigures
from schemas.alerts import AlertEvent

__all__ = ["CycleRow", "alert_line", "components_line", "cycle_line", "save_plot", "save_rows", "summary_table"]


@dataclass(frozen=True)
class CycleRow:
    cycle: int
    served_by: str  # the checkpoint that served the cycle's traffic
    figures: CycleFigures
    decision: str  # promoted / rejected / none
    candidate: str
    eval_candidate: float
    eval_incumbent: float
    traffic_s: float  # trajectories and their reward records
    update_gate_s: float  # the trainer's update(s) and the gate


def _short(checkpoint_id: str) -> str:
    return checkpoint_id if len(checkpoint_id) <= 14 else "…" + checkpoint_id[-10:]


def cycle_line(row: CycleRow) -> str:
    f = row.figures
    return (f"[bold]cycle {row.cycle}[/] served by {_short(row.served_by)}: "
            f"{f.trajectories} trajectories, mean reward {f.mean_reward:+.3f}, "
            f"kept-edit {f.kept_edit_rate:.2f} (kept edits/trajectory {f.kept_edits:.2f}), "
            f"edit {f.edit_rate:.2f}, "
            f"dissatisfied {f.dissatisfied_rate:.2f}, broken-call {f.broken_call_rate:.2f}, "
            f"latency {f.latency_ms:.0f} ms → gate: [bold]{row.decision}[/] "
            f"(evals {row.eval_candidate:.2f} vs {row.eval_incumbent:.2f}); "
            f"traffic {row.traffic_s:.0f} s, update + gate {row.update_gate_s:.0f} s")


def components_line(figures: CycleFigures) -> str:
    parts = ", ".join(f"{name} {value:+.3f}" for name, value in figures.components.items()
                      if abs(value) > 1e-9)
    return f"  reward components (mean): {parts}"


def alert_line(event: AlertEvent) -> str | None:
    if event.kind == "fired" and event.alert is not None:
        alert = event.alert
        colour = "red" if alert.severity == "critical" else "yellow"
        return (f"[{colour} bold]ALERT FIRED[/] {alert.severity} {alert.detector} on "
                f"{_short(alert.labels.get('checkpoint', '?'))}: {alert.summary}")
    if event.kind == "resolved":
        return f"[green]alert resolved[/] {event.fingerprint}"
    return None


def summary_table(rows: list[CycleRow]) -> Table:
    table = Table(title="rewardstream demo: per cycle")
    for column in ("cycle", "served by", "n", "reward", "kept-edit", "kept/traj", "edit",
                   "dissatisfied", "broken-call", "latency ms", "gate", "evals cand/inc"):
        table.add_column(column, justify="right" if column not in ("served by", "gate") else "left")
    for row in rows:
        f = row.figures
        table.add_row(str(row.cycle), _short(row.served_by), str(f.trajectories),
                      f"{f.mean_reward:+.3f}", f"{f.kept_edit_rate:.2f}", f"{f.kept_edits:.2f}",
                      f"{f.edit_rate:.2f}", f"{f.dissatisfied_rate:.2f}",
                      f"{f.broken_call_rate:.2f}",
                      f"{f.latency_ms:.0f}", row.decision,
                      f"{row.eval_candidate:.2f}/{row.eval_incumbent:.2f}")
    return table


def save_rows(rows: list[CycleRow], path: Path) -> None:
    path.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")


def save_plot(rows: list[CycleRow], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cycles = [r.cycle for r in rows]
    series = {
        "mean reward": [r.figures.mean_reward for r in rows],
        "kept-edit rate (per edit)": [r.figures.kept_edit_rate for r in rows],
        "kept edits per trajectory": [r.figures.kept_edits for r in rows],
        "edit rate": [r.figures.edit_rate for r in rows],
        "dissatisfied rate": [r.figures.dissatisfied_rate for r in rows],
        "broken-call rate": [r.figures.broken_call_rate for r in rows],
    }
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    top.plot(cycles, series.pop("mean reward"), marker="o", color="black", label="mean reward")
    for row in rows:
        colour = "green" if row.decision == "promoted" else "grey"
        top.annotate(row.decision, (row.cycle, row.figures.mean_reward), fontsize=7,
                     color=colour, textcoords="offset points", xytext=(0, 6), ha="center")
    top.set_ylabel("reward")
    top.legend(loc="best")
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
