"""Offline replay: the log's partitions through the same :class:`PartitionJoin` as the worker.

Rows are (partition, offset, event) in any order; each partition is replayed in offset order,
which is exactly what the worker saw, so the records are identical to the streaming ones. With
a second spec the same log is scored twice and the difference summarised per trajectory, per
component and as a distribution.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from schemas.rewards import RewardRecord
from streams.facts import Fact
from streams.join import PartitionJoin, Stored
from streams.spec import RewardSpec

__all__ = ["LogRow", "ReplayResult", "compare_records", "replay_rows"]

# (partition, offset, the event's JSON bytes or an already-read fact with its JSON)
LogRow = tuple[int, int, "bytes | Fact"]


@dataclass
class ReplayResult:
    records: list[RewardRecord] = field(default_factory=list)
    late: list[tuple[str, str]] = field(default_factory=list)  # (trajectory id, event id)
    open_trajectories: int = 0
    malformed_events: int = 0


def _replay_partition(spec: RewardSpec, partition: int, rows: list[LogRow],
                      result: ReplayResult) -> None:
    store: dict[str, Stored] = {}
    join = PartitionJoin(spec, partition, store.get)
    for _, offset, event in rows:
        step = (join.step_fact(event, b"") if isinstance(event, Fact)
                else join.step(event, offset))
        result.records.extend(step.records)
        result.late.extend((tid, event_id) for tid, event_id, _ in step.late)
        if step.records:
            store.update(join.take_writes()[0])
    checkpoint = join.take_writes()[1]
    result.open_trajectories += join.open_trajectories
    result.malformed_events += checkpoint.malformed_events


def replay_rows(rows: Iterable[LogRow], spec: RewardSpec) -> ReplayResult:
    """Reward records of a log; duplicate (partition, offset) rows count once."""
    partitions: dict[int, dict[int, LogRow]] = {}
    for row in rows:
        partitions.setdefault(row[0], {}).setdefault(row[1], row)
    result = ReplayResult()
    for partition in sorted(partitions):
        ordered = [partitions[partition][o] for o in sorted(partitions[partition])]
        _replay_partition(spec, partition, ordered, result)
    return result


def compare_records(
    before: list[RewardRecord], after: list[RewardRecord], top: int = 10
) -> dict[str, Any]:
    """What a spec change does: distribution shift, per-component deltas, biggest movers."""
    import polars as pl

    def frame(records: list[RewardRecord]) -> pl.DataFrame:
        return pl.DataFrame([{"trajectory_id": r.trajectory_id, "total": r.total,
                              **{f"c.{k}": v for k, v in r.components.items()}}
                             for r in records])

    old, new = frame(before), frame(after)
    joined = old.join(new, on="trajectory_id", how="full", suffix="_new", coalesce=True)
    both = joined.drop_nulls(["total", "total_new"]).with_columns(
        (pl.col("total_new") - pl.col("total")).alias("delta"))
    quantiles = (0.05, 0.25, 0.5, 0.75, 0.95)

    def distribution(column: pl.Series) -> dict[str, float]:
        return {"mean": float(column.mean() or 0.0),
                **{f"p{int(q * 100)}": float(column.quantile(q) or 0.0) for q in quantiles}}

    components = sorted({c[2:] for c in old.columns + new.columns if c.startswith("c.")})
    per_component = {}
    for name in components:
        before_mean = float(old[f"c.{name}"].mean() or 0.0) if f"c.{name}" in old.columns else 0.0
        after_mean = float(new[f"c.{name}"].mean() or 0.0) if f"c.{name}" in new.columns else 0.0
        per_component[name] = {"before_mean": before_mean, "after_mean": after_mean,
                               "delta": after_mean - before_mean}
    movers = both.with_columns(pl.col("delta").abs().alias("moved")).sort(
        ["moved", "trajectory_id"], descending=[True, False]).head(top)
    return {
        "trajectories": {"before": old.height, "after": new.height, "both": both.height},
        "total_before": distribution(old["total"]) if old.height else {},
        "total_after": distribution(new["total"]) if new.height else {},
        "delta": distribution(both["delta"]) if both.height else {},
        "components": per_component,
        "top_movers": movers.select("trajectory_id", "total", "total_new", "delta").to_dicts(),
    }
