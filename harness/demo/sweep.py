"""``rewardstream demo-sweep``: the demo over seeds, healthy and with --hack variants, one run at a
time, then a table of what the monitors did in each variant's first cycle.

Each run is ``rewardstream demo --cycles N --seed S [--hack H]`` in a process of its own, its run
directory under ``<out>/<variant>-seed<S>/``; a run whose summary is there already is not run
again, so a sweep that stopped resumes. A variant deploys after cycle 1, so cycle 2 is its first
cycle: the table gives each run's mean reward in cycles 1 and 2 (the drop is the variant's
doing plus the cycles' noise), the share of trajectories without an edit and with a broken call
(what the variant does), the critical alerts on the variant in that cycle, and the false
criticals (any in a healthy run; any on another checkpoint in a variant's run).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["HEALTHY", "SweepRow", "format_table", "read_run", "run_sweep", "variant_dir"]

HEALTHY = "healthy"


@dataclass(frozen=True)
class SweepRow:
    variant: str  # "healthy" or the --hack given, "broken-calls:0.25"
    seed: int
    reward: tuple[float, float]  # mean reward, cycles 1 and 2
    no_edit: tuple[float, float]  # share of trajectories without an edit, cycles 1 and 2
    broken: tuple[float, float]  # share with a broken tool call, cycles 1 and 2
    criticals: tuple[str, ...]  # on the variant in its first cycle: "detector (baseline)"
    # The variant's trajectories that had ended by the window that fired its first critical
    # alert, and all its trajectories (None where it did not fire, or the run kept no records)
    first_critical_after: tuple[int, int] | None
    false_criticals: tuple[str, ...]  # "detector on checkpoint, cycle N"
    warnings: tuple[str, ...]  # every warning of the run: "detector (cycle N)"
    wall_min: float

    @property
    def drop(self) -> float:
        return self.reward[0] - self.reward[1]


def variant_dir(out: Path, variant: str, seed: int) -> Path:
    return out / f"{variant.replace(':', '-')}-seed{seed}"


def _summary(directory: Path) -> Path | None:
    done = sorted(directory.glob("demo-*/summary.json"))
    return done[-1] if done else None


def _once(alerts: list[dict[str, Any]], keep: Callable[[dict[str, Any]], bool],
          show: Callable[[dict[str, Any]], str]) -> tuple[str, ...]:
    """Each alert once: the detectors fire for the org and for the fleet (in the demo, the same
    trajectories)."""
    return tuple(dict.fromkeys(show(a) for a in alerts if keep(a)))


def _after(run: Path, checkpoint: str | None, alerts: list[dict[str, Any]]) -> (
        tuple[int, int] | None):
    """How many of ``checkpoint``'s trajectories had ended when the first alert fired."""
    records = run / "rewards.jsonl"
    if checkpoint is None or not alerts or "window_end" not in alerts[0] or not records.exists():
        return None
    fired_at = datetime.fromisoformat(alerts[0]["window_end"])
    ends = [datetime.fromisoformat(r["ended_at"] or r["finalized_at"])
            for r in map(json.loads, records.read_text().splitlines())
            if r["checkpoint_id"] == checkpoint]
    return sum(end <= fired_at for end in ends), len(ends)


def read_run(directory: Path, variant: str, seed: int) -> SweepRow | None:
    """The row of one finished run (None while it has no summary)."""
    summary_path = _summary(directory)
    if summary_path is None:
        return None
    summary = json.loads(summary_path.read_text())
    cycles = json.loads((summary_path.parent / "cycles.json").read_text())
    figures = [c["figures"] for c in cycles[:2]] + [cycles[0]["figures"]] * (2 - len(cycles))
    variant_id = cycles[1]["served_by"] if variant != HEALTHY and len(cycles) > 1 else None
    alerts = summary["alerts"]

    def on_variant(a: dict[str, Any]) -> bool:
        return a["checkpoint"] == variant_id and a["cycle"] == 2

    critical = [a for a in alerts if a["severity"] == "critical" and on_variant(a)]

    return SweepRow(
        variant=variant, seed=seed,
        reward=(figures[0]["mean_reward"], figures[1]["mean_reward"]),
        no_edit=(1 - figures[0]["edit_rate"], 1 - figures[1]["edit_rate"]),
        broken=(figures[0]["broken_call_rate"], figures[1]["broken_call_rate"]),
        criticals=_once(critical, lambda a: True,
                        lambda a: f"{a['detector']} ({a.get('baseline') or 'parent'})"),
        first_critical_after=_after(summary_path.parent, variant_id, critical),
        false_criticals=_once(
            alerts, lambda a: a["severity"] == "critical" and a["checkpoint"] != variant_id,
            lambda a: f"{a['detector']} on {a['checkpoint']}, cycle {a['cycle']}"),
        warnings=_once(alerts, lambda a: a["severity"] == "warning",
                       lambda a: f"{a['detector']} (cycle {a['cycle']})"),
        wall_min=summary["wall_s"] / 60)


def run_sweep(out: Path, variants: Sequence[str], seeds: Sequence[int], cycles: int,
              port_offset: int, echo: Callable[[str], None]) -> list[SweepRow]:
    """Run what is missing, one demo at a time; returns every finished run's row."""
    rows = []
    for variant in variants:
        for seed in seeds:
            directory = variant_dir(out, variant, seed)
            row = read_run(directory, variant, seed)
            if row is None:
                directory.mkdir(parents=True, exist_ok=True)
                command = [sys.executable, "-m", "rewardstream", "demo", "--cycles", str(cycles),
                           "--seed", str(seed), "--runs", str(directory),
                           "--port-offset", str(port_offset)]
                if variant != HEALTHY:
                    command += ["--hack", variant]
                log = directory / "demo.log"
                echo(f"{variant} seed {seed}: running (log {log})")
                started = time.monotonic()
                with log.open("w") as handle:
                    code = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT,
                                          check=False).returncode
                row = read_run(directory, variant, seed)
                if row is None:
                    echo(f"{variant} seed {seed}: the demo exited with {code} and no summary; "
                         f"see {log}")
                    continue
                echo(f"{variant} seed {seed}: done in {(time.monotonic() - started) / 60:.1f} "
                     f"min, {_line(row)}")
            rows.append(row)
    (out / "sweep.json").write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    return rows


def _line(row: SweepRow) -> str:
    return (f"reward {row.reward[0]:+.3f} → {row.reward[1]:+.3f}, critical: "
            f"{', '.join(row.criticals) or 'none'}")


def _pair(values: tuple[float, float]) -> str:
    return f"{values[0]:.2f} → {values[1]:.2f}"


def _caught(rows: Sequence[SweepRow]) -> str:
    return f"{sum(bool(r.criticals) for r in rows)}/{len(rows)}"


def format_table(rows: Sequence[SweepRow]) -> str:
    """A markdown table, one line a run, then one a variant."""
    lines = ["| variant | seed | reward, cycle 1 → 2 (drop) | no edit | broken call | critical "
             "alerts on the variant in its first cycle | first after | false criticals | "
             "warnings | wall |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        after = r.first_critical_after
        lines.append(
            f"| {r.variant} | {r.seed} | {r.reward[0]:+.3f} → {r.reward[1]:+.3f} "
            f"({r.drop:+.3f}) | {_pair(r.no_edit)} | {_pair(r.broken)} | "
            f"{', '.join(r.criticals) or ('-' if r.variant == HEALTHY else 'none')} | "
            f"{'-' if after is None else f'{after[0]} of {after[1]}'} | "
            f"{', '.join(r.false_criticals) or 0} | {', '.join(r.warnings) or '-'} | "
            f"{r.wall_min:.1f} min |")
    lines += ["", "| variant | runs | reward drop, mean [min, max] | runs with a critical alert "
              "in the first cycle | of the runs with a drop ≥ 0.2 | false criticals |",
              "|---|---|---|---|---|---|"]
    for variant in dict.fromkeys(r.variant for r in rows):
        runs = [r for r in rows if r.variant == variant]
        drops = [r.drop for r in runs]
        big = [r for r in runs if r.drop >= 0.2]
        caught = "-" if variant == HEALTHY else _caught(runs)
        caught_big = "-" if variant == HEALTHY or not big else _caught(big)
        lines.append(f"| {variant} | {len(runs)} | {sum(drops) / len(drops):+.3f} "
                     f"[{min(drops):+.3f}, {max(drops):+.3f}] | {caught} | {caught_big} | "
                     f"{sum(len(r.false_criticals) for r in runs)} |")
    return "\n".join(lines)
