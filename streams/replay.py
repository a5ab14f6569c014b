"""Offline replay: the log's partitions through the same :class:`PartitionJoin` as the worker.

Rows are (partition, offset, the record's bytes) in any order; each partition is replayed in
offset order, which is exactly what the worker saw, so the records are identical to the
streaming ones (with the same marker retention). With a second spec the same log is scored
twice and the difference summarised per trajectory, per component and as a distribution.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from schemas.rewards import RewardRecord, trajectory_key
from streams.join import DEFAULT_RETENTION_MS, Marker, PartitionJoin
from streams.spec import RewardSpec

__all__ = ["LogRow", "ReplayResult", "compare_records", "of_org", "replay_rows"]

# (partition, offset, the record's bytes as they are on events.raw; None for a tombstone)
LogRow = tuple[int, int, bytes | None]


@dataclass
class ReplayResult:
    records: list[RewardRecord] = field(default_factory=list)
    # (trajectory key, event id, expired) of each late event, as the worker sends them
    late: list[tuple[str, str, bool]] = field(default_factory=list)
    # (partition, offset, reason) of each record the join could not use
    quarantined: list[tuple[int, int, str]] = field(default_factory=list)
    open_trajectories: int = 0


def _no_store(key: str) -> Marker | None:
    return None  # a replay never hands its markers out: they all stay in the join


def _replay_partition(spec: RewardSpec, partition: int, rows: list[LogRow],
                      result: ReplayResult, retention_ms: int) -> None:
    join = PartitionJoin(spec, partition, _no_store, retention_ms=retention_ms)
    for _, offset, raw in rows:
        step = join.step(raw, offset)
        result.records.extend(step.records)
        result.late.extend((late.key, late.event_id, late.expired) for late in step.late)
        result.quarantined.extend((partition, q.offset, q.reason) for q in step.quarantined)
    result.open_trajectories += len(join.open_states)


def replay_rows(rows: Iterable[LogRow], spec: RewardSpec,
                retention_ms: int = DEFAULT_RETENTION_MS) -> ReplayResult:
    """Reward records of a log; duplicate (partition, offset) rows count once."""
    partitions: dict[int, dict[int, LogRow]] = {}
    for row in rows:
        partitions.setdefault(row[0], {}).setdefault(row[1], row)
    result = ReplayResult()
    for partition in sorted(partitions):
        ordered = [partitions[partition][o] for o in sorted(partitions[partition])]
        _replay_partition(spec, partition, ordered, result, retention_ms)
    return result


def of_org(result: ReplayResult, org_id: str) -> ReplayResult:
    """One org's records and late events of a replay (of the whole log: an idle org's
    trajectories close by the partition's watermark, which every org's events move).
    Quarantined records and open trajectories stay the whole log's: a record that is not an
    event names no org for sure."""
    prefix = trajectory_key(org_id, "")
    return ReplayResult(records=[r for r in result.records if r.org_id == org_id],
                        late=[late for late in result.late if late[0].startswith(prefix)],
                        quarantined=result.quarantined,
                        open_trajectories=result.open_trajectories)


def compare_records(
    before: list[RewardRecord], after: list[RewardRecord], top: int = 10
) -> dict[str, Any]:
    """What a spec change does: distribution shift, per-component deltas, biggest movers."""
    import polars as pl

    def frame(records: list[RewardRecord]) -> pl.DataFrame:
        return pl.DataFrame([{"trajectory_id": trajectory_key(r.org_id, r.trajectory_id),
                              "total": r.total,
                              **{f"c.{k}": v for k, v in r.components.items()}}
                             for r in records])

    old, new = frame(before), frame(after)
    joined = old.join(new, on="trajectory_id", how="full", suffix="_new", coalesce=True)
    both = joined.drop_nulls(["total", "total_new"]).with_columns(
        (pl.col("total_new") - pl.col("total")).alias("delta"))
    quantiles = (0.05, 0.25, 0.5, 0.75, 0.95)

    def number(value: Any) -> float:
        return float(value or 0.0)

    def distribution(column: pl.Series) -> dict[str, float]:
        return {"mean": number(column.mean()),
                **{f"p{int(q * 100)}": number(column.quantile(q)) for q in quantiles}}

    components = sorted({c[2:] for c in old.columns + new.columns if c.startswith("c.")})
    per_component = {}
    for name in components:
        before_mean = number(old[f"c.{name}"].mean()) if f"c.{name}" in old.columns else 0.0
        after_mean = number(new[f"c.{name}"].mean()) if f"c.{name}" in new.columns else 0.0
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
