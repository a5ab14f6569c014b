"""``rewardstream worker``, ``archive`` and ``replay``: the reward join, its archive, its replay."""

from __future__ import annotations

import json
from pathlib import Path

import typer

__all__ = ["register"]

_SPEC_HELP = "Reward spec TOML (default: the shipped streams/specs/default.toml)."


def worker(
    spec: Path = typer.Option(None, help=_SPEC_HELP),
    datadir: Path = typer.Option(None, help="Local state directory (default: "
                                 "$REWARDSTREAM_CACHE_DIR/rewardjoin)."),
    store: str = typer.Option("rocksdb://", help="Table store: rocksdb:// or memory://."),
    batch_max: int = typer.Option(2000, min=1, help="Most events per processing batch."),
    loglevel: str = typer.Option("info", help="Log level."),
) -> None:
    """Run the reward join: events.raw → one reward record per final trajectory on `rewards`,
    late events to `events.late`. At-least-once; records are keyed by trajectory and spec
    version, so a restart may repeat a record but never changes one.

    Example: REWARDSTREAM_TOPIC_PREFIX=prod. rewardstream worker --spec my-spec.toml"""
    from infra.settings import cache_dir, load_settings
    from streams.spec import load_spec
    from streams.worker import WorkerConfig, run_worker

    config = WorkerConfig(settings=load_settings(), spec=load_spec(spec),
                          datadir=datadir or cache_dir() / "rewardjoin", store=store,
                          batch_max=batch_max)
    run_worker(config, loglevel=loglevel)


def archive(
    out: Path = typer.Option(..., help="Archive directory (created if missing)."),
    flush_interval_s: float = typer.Option(60.0, min=0.1, help="Most seconds between flushes."),
    max_rows: int = typer.Option(50_000, min=1, help="Flush after this many buffered events."),
    stop_at_end: bool = typer.Option(False, help="Exit once the archive has caught up."),
) -> None:
    """Archive events.raw to Parquet (partitioned by event date and type), resumably.

    Example: rewardstream archive --out /data/archive --flush-interval-s 30"""
    import logging

    from infra.settings import load_settings
    from streams.archive import archive_topic

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    rows = archive_topic(load_settings(), out, flush_interval_s=flush_interval_s,
                         max_rows=max_rows, stop_at_end=stop_at_end)
    typer.echo(f"archived {rows} events into {out}")


def replay(
    source: str = typer.Argument(..., help="An archive directory, or `kafka` for events.raw."),
    spec: Path = typer.Option(None, help=_SPEC_HELP),
    compare: Path = typer.Option(None, help="A second spec: show what changes under it."),
    out: Path = typer.Option(None, help="Write the records (JSON lines) here."),
    top: int = typer.Option(10, min=1, help="How many most-moved trajectories to list."),
) -> None:
    """Compute reward records offline, exactly as the worker does; with --compare, review a spec
    change: distribution shift, per-component deltas, the trajectories that move most.

    Example: rewardstream replay /data/archive --spec old.toml --compare new.toml"""
    from infra.settings import load_settings
    from streams.replay import compare_records, replay_rows
    from streams.sources import archive_rows, read_topic
    from streams.spec import load_spec

    if source == "kafka":
        rows = [(p, o, value) for p, o, _, value in read_topic(load_settings(), "events.raw")]
    else:
        rows = archive_rows(Path(source))
    base = load_spec(spec)
    result = replay_rows(rows, base)
    typer.echo(f"spec {base.version}: {len(result.records)} records, {len(result.late)} late "
               f"events, {result.open_trajectories} trajectories still open")
    if out is not None:
        out.write_text("".join(r.model_dump_json() + "\n" for r in result.records))
    if compare is not None:
        other = load_spec(compare)
        changed = replay_rows(rows, other)
        report = compare_records(result.records, changed.records, top=top)
        report["spec_before"], report["spec_after"] = base.version, other.version
        typer.echo(json.dumps(report, indent=2))


def register(app: typer.Typer) -> None:
    app.command("worker")(worker)
    app.command("archive")(archive)
    app.command("replay")(replay)
