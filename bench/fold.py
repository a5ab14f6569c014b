"""``rewardstream bench fold``: µs per event to read an event, and to fold it in the join.

On the simulated log (one partition, arrival order, duplicates and late events included):
*read* is what the join does to every record before folding it (``fact_from_json``: the msgspec
structs' validation, then the fact the reward needs), timed as one call and, for the split, as
its parts: the structs' validation, the pydantic models' validation beside it (what *read* cost
before the structs, and still costs for a record the structs refuse) and the fact from a
validated event; *fold* is
:meth:`PartitionJoin.apply` on the fact: the in-place fold, completeness, the deadline,
finalisation and the reward record when one is due. Each event is timed on its own; the median
is the typical event, the mean carries the records made along the way. Best of ``--rounds``
rounds (the machine is shared).
"""

from __future__ import annotations

import gc
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import typer

__all__ = ["measure_fold", "register"]

GOAL_FOLD_US = 10.0  # median per event
_PARTS = ("read", "validate_structs", "validate_models", "convert", "fold")


def _timed(items: list[Any], work: Callable[[int, Any], Any]) -> tuple[list[float], list[Any]]:
    clock = time.perf_counter_ns
    times, results = [], []
    gc.disable()
    try:
        for index, item in enumerate(items):
            started = clock()
            results.append(work(index, item))
            times.append((clock() - started) / 1000.0)
    finally:
        gc.enable()
    return times, results


def _summary(times: list[float]) -> dict[str, float]:
    return {"median_us": round(statistics.median(times), 2),
            "mean_us": round(statistics.fmean(times), 2)}


def _round(values: list[bytes]) -> dict[str, Any]:
    from schemas.event_structs import decode_stored_event
    from schemas.events import parse_event
    from streams.facts import fact_from_event, fact_from_json
    from streams.join import PartitionJoin
    from streams.spec import load_spec

    read_us, facts = _timed(values, lambda offset, raw: fact_from_json(raw, offset))
    structs_us, _ = _timed(values, lambda _, raw: decode_stored_event(raw))
    models_us, events = _timed(values, lambda _, raw: parse_event(raw))
    convert_us, _ = _timed(events, lambda offset, event: fact_from_event(event, offset))
    join = PartitionJoin(load_spec(), 0, lambda key: None)
    fold_us, steps = _timed(facts, lambda index, fact: join.apply(fact, values[index]))
    return {"read": _summary(read_us), "validate_structs": _summary(structs_us),
            "validate_models": _summary(models_us), "convert": _summary(convert_us),
            "fold": _summary(fold_us), "records": sum(len(step.values) for step in steps)}


def measure_fold(trajectories: int, rounds: int) -> dict[str, Any]:
    """The best round of each measurement (lowest median)."""
    from streams.simlog import simulate_log

    values = [value for _, value in simulate_log(trajectories, seed=0)]
    results = [_round(values) for _ in range(rounds)]
    best = {name: min((r[name] for r in results), key=lambda s: s["median_us"])
            for name in _PARTS}
    return {"events": len(values), "records": results[0]["records"], "rounds": rounds, **best,
            "goal_fold_median_us": GOAL_FOLD_US}


def fold(
    trajectories: int = typer.Option(3000, min=10,
                                     help="Simulated trajectories (~11 events each)."),
    rounds: int = typer.Option(3, min=1, help="Rounds; the best is reported."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """µs per event to read an event (validation + fact) and to fold it in the reward join
    (goal: fold median <= 10 µs).

    Example: rewardstream bench fold --trajectories 3000 --json"""
    result = measure_fold(trajectories, rounds)
    if as_json:
        typer.echo(json.dumps(result))
        return
    typer.echo(f"{result['events']} events, {result['records']} reward records, best of "
               f"{rounds} rounds (µs per event, median / mean)")
    for name, what in (("read", "read (validate + fact)"),
                       ("validate_structs", "  msgspec structs"),
                       ("validate_models", "  (pydantic models)"),
                       ("convert", "  fact from the event"), ("fold", "fold (join.apply)")):
        typer.echo(f"  {what:24}: {result[name]['median_us']:7.2f} / "
                   f"{result[name]['mean_us']:7.2f}")
    met = "met" if result["fold"]["median_us"] <= GOAL_FOLD_US else "NOT met"
    typer.echo(f"  goal: fold median <= {GOAL_FOLD_US:g} µs ({met})")


def register(bench_app: typer.Typer) -> None:
    bench_app.command("fold")(fold)
