"""``rewardstream bench streams``: CPU per event of the reward join in steady work, against a
floor measured in the same run.

Every contender reads the same freshly produced ``events.raw`` topic (the simulated log, made
long enough by simulating more trajectories: every one has its own id, so the join does real
work) from the beginning, in turn (:mod:`bench.streams_contenders`): the reward join, the floor
(a bare confluent-kafka loop that decodes each event with orjson and puts one RocksDB key per
event), a bare aiokafka loop and a bare Quix Streams application. Each is measured over its
steady window (:mod:`bench.streams_figures`): from the first sample past a warm-up prefix of the
log (``--warmup``, a share of the events) to the last sample before the log's last event, so
start-up, group join, recovery and the final checkpoint are left out. CPU is the process's CPU
time (``time.process_time``: every thread, the Kafka clients' and RocksDB's included); the join
runs in this process, or with ``--workers N`` as N processes in one consumer group, each
measuring itself. The figure the goal is on is the floor's CPU per event over the join's.

On a 2-core machine ``--workers`` > 1 shows the join staying correct under rebalances far more
than it shows speed.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from dataclasses import replace
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import typer

__all__ = ["register"]

GOAL_FLOOR_TO_JOIN_CPU = 1 / 3  # the join's CPU per event within three times the floor's
_LABELS = {"join": "reward join", "floor": "floor (confluent, orjson, rocksdict)",
           "aiokafka": "bare aiokafka loop", "quix_bare": "bare Quix app"}


def _steady_log(events: int) -> list[tuple[bytes, bytes]]:
    """The simulated log cut at ``events`` events, simulating trajectories until it is long
    enough (each has its own trajectory id; trajectories cut off at the end stay open)."""
    from streams.simlog import simulate_log

    trajectories = max(10, math.ceil(events / 11))
    while len(log := simulate_log(trajectories, seed=0)) < events:
        trajectories = math.ceil(trajectories * events / len(log)) + 10
    return log[:events]


def _join_windows(samples: list[Any], warmup: int, totals: list[int]) -> list[Any]:
    from bench.streams_figures import steady_window

    windows = []
    for member_samples, total in zip(samples, totals, strict=True):
        try:
            windows.append(steady_window(member_samples.taken, warmup // len(totals), total))
        except ValueError:
            if len(totals) == 1:
                raise  # a group member that got too few records is left out
    if not windows:
        raise ValueError("no worker of the group had a steady window; give it more events")
    return windows


def _run(log: list[tuple[bytes, bytes]], warmup: int, partitions: int,
         workers: int) -> dict[str, Any]:
    """One run on a fresh topic: every contender's steady figures and the ratios."""
    from bench import streams_contenders as contenders
    from bench.streams_figures import Samples, run_figures, steady_figures, steady_window
    from infra.settings import load_settings
    from infra.topics import create_topics
    from schemas.topics import topic_name
    from streams.worker import collect_garbage_rarely

    settings = replace(load_settings(), topic_prefix=f"bench-{uuid.uuid4().hex[:8]}.",
                       topic_partitions=partitions)
    create_topics(settings)
    topic = topic_name(settings.topic_prefix, "events.raw")
    _produce(settings, topic, log)
    collect_garbage_rarely()  # as the worker command does, for every contender alike
    total = len(log)
    samples = {name: Samples() for name in ("floor", "aiokafka", "quix_bare", "join")}
    with TemporaryDirectory() as directory:
        datadir = Path(directory)
        contenders.floor_loop(settings, topic, datadir, total, samples["floor"])
        contenders.aiokafka_loop(settings, topic, total, samples["aiokafka"])
        contenders.quix_bare(settings, topic, datadir, total, samples["quix_bare"])
        if workers == 1:
            join = contenders.reward_join(settings, datadir / "join", total, samples["join"])
            join_samples, join_totals = [samples["join"]], [total]
        else:
            join, join_samples = contenders.group(settings, datadir, workers)
            join_totals = join["per_worker_events"]
    figures = {"join": steady_figures(_join_windows(join_samples, warmup, join_totals))}
    figures |= {name: steady_figures([steady_window(samples[name].taken, warmup, total)])
                for name in ("floor", "aiokafka", "quix_bare")}
    return {"events": total, "warmup_events": warmup, "partitions": partitions,
            "workers": workers, "records": join["records"],
            "topic_prefix": settings.topic_prefix,
            "load_avg_1m": round(os.getloadavg()[0], 2), "contenders": figures,
            "ratios": run_figures(figures),
            "per_worker_events": join.get("per_worker_events", [join["events"]]),
            "state_per_partition": join["state"]}


def _echo_run(result: dict[str, Any]) -> None:
    typer.echo(f"{result['events']:,} events on {result['partitions']} partitions "
               f"({result['records']:,} reward records, {result['workers']} join worker(s) "
               f"{result['per_worker_events']}), steady after the first "
               f"{result['warmup_events']:,}; topic prefix {result['topic_prefix']}, load "
               f"average {result['load_avg_1m']}\n"
               f"  {'contender':38} {'events':>9} {'wall s':>8} {'CPU s':>8} "
               f"{'CPU µs/event':>13} {'events/s':>10}")
    for name, figures in result["contenders"].items():
        typer.echo(f"  {_LABELS[name]:38} {figures['events']:9,} {figures['wall_s']:8.2f} "
                   f"{figures['cpu_s']:8.2f} {figures['cpu_us_per_event']:13.2f} "
                   f"{figures['events_per_s']:10,}")
    ratios = result["ratios"]
    met = "met" if ratios["floor_to_join_cpu"] >= GOAL_FLOOR_TO_JOIN_CPU else "NOT met"
    typer.echo(f"  floor ÷ join CPU per event: {ratios['floor_to_join_cpu']:.3f} (goal >= "
               f"{GOAL_FLOOR_TO_JOIN_CPU:.2f}, the join within 3x the floor: {met}); "
               f"aiokafka ÷ join: {ratios['aiokafka_to_join_cpu']:.3f}; join ÷ aiokafka "
               f"events/s: {ratios['join_to_aiokafka_rate']:.3f}")
    for partition, size in sorted(result["state_per_partition"].items()):
        typer.echo(f"  state of partition {partition}: {size}")


def _echo_summary(summary: dict[str, Any]) -> None:
    def span(values: dict[str, float], form: str) -> str:
        return f"{values['min']:{form}}–{values['max']:{form}}"

    typer.echo(f"over {summary['runs']} runs (load average "
               f"{span(summary['load_avg_1m'], '.2f')}):\n"
               f"  floor ÷ join CPU per event {span(summary['floor_to_join_cpu'], '.3f')}; "
               f"aiokafka ÷ join {span(summary['aiokafka_to_join_cpu'], '.3f')}")
    for name in _LABELS:
        if name in summary:
            typer.echo(f"  {_LABELS[name]:38} CPU µs/event "
                       f"{span(summary[name]['cpu_us_per_event'], '.2f')}, events/s "
                       f"{span(summary[name]['events_per_s'], ',')}")


def streams(
    events: int = typer.Option(300_000, min=20_000, help="Events in the log (simulated "
                               "trajectories, ~11 events each, as many as it takes; the "
                               "join is sampled every 4,096)."),
    warmup: float = typer.Option(0.1, min=0.0, max=0.9, help="Share of the log each "
                                 "contender reads before its steady window starts."),
    partitions: int = typer.Option(3, min=1, help="Partitions of the topic."),
    workers: int = typer.Option(1, min=1, help="Reward-join worker processes in the group."),
    runs: int = typer.Option(1, min=1, help="Runs, each on a fresh topic; each is reported."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """CPU µs per event (process CPU time) and events/s in steady work, start-up excluded, of
    the reward join and, on the same topic in the same run, a floor (a bare confluent-kafka
    loop: orjson decode and one RocksDB put per event), a bare aiokafka loop and a bare Quix
    Streams application; and the floor's CPU per event over the join's (goal: at least 1/3,
    the join within three times the floor). ``--json`` prints one object: every run
    (``runs``) and each figure's min and max over them (``summary``).

    Example: rewardstream bench streams --runs 3 --json"""
    from bench.streams_figures import summary

    log = _steady_log(events)
    warmup_events = int(len(log) * warmup)
    results = [_run(log, warmup_events, partitions, workers) for _ in range(runs)]
    spans = summary(results)
    if as_json:
        typer.echo(json.dumps({"runs": results, "summary": spans}))
        return
    for result in results:
        _echo_run(result)
    if runs > 1:
        _echo_summary(spans)


def _produce(settings: Any, topic: str, log: list[tuple[bytes, bytes]]) -> None:
    from infra.kafka_io import make_producer

    producer = make_producer(settings, "bench-streams", linger_ms=20, batch_size=512 * 1024)
    for key, value in log:
        producer.send(topic, key=key, value=value)
    producer.flush()
    producer.close()


def register(bench_app: typer.Typer) -> None:
    bench_app.command("streams")(streams)
