"""``rewardstream worker``, ``archive`` and ``replay``: the reward join, its archive, its replay."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import typer

from infra.health_http import metrics_host_option, metrics_port_option

__all__ = ["register"]

_SPEC_HELP = "Reward spec TOML (default: the shipped streams/specs/default.toml)."
_WORKER_METRICS_PORT = metrics_port_option("worker")
_ARCHIVER_METRICS_PORT = metrics_port_option("archiver")
_METRICS_HOST = metrics_host_option()


def worker(
    spec: Path = typer.Option(None, help=_SPEC_HELP),
    datadir: Path = typer.Option(None, help="Local state directory (RocksDB per partition; "
                                 "default: $REWARDSTREAM_CACHE_DIR/rewardjoin)."),
    batch_max: int = typer.Option(20_000, min=1, help="Most events per checkpoint (outputs "
                                  "acknowledged, then state and offsets committed)."),
    commit_interval_s: float = typer.Option(2.0, min=0.01, help="Most seconds between "
                                            "checkpoints."),
    retention_days: float = typer.Option(
        7.0, min=0.0, help="Keep each final trajectory's marker this long in event time; "
        "later events of a forgotten trajectory go to events.late marked expired."),
    shutdown_timeout_s: float = typer.Option(
        30.0, min=1.0, help="After SIGTERM/SIGINT or a failed checkpoint, exit within this "
        "long."),
    output_timeout_s: float = typer.Option(
        60.0, min=1.0, help="A checkpoint whose outputs Kafka has not acknowledged after this "
        "long fails, and the worker stops (exit code 70) without committing it."),
    session_timeout_s: float = typer.Option(
        45.0, min=6.0, max=300.0, help="A worker silent this long (killed, frozen, cut off) "
        "leaves the group and the others take its partitions; lower fails over sooner, but a "
        "long pause (GC, a slow disk) then costs a rebalance."),
    metrics_port: int = _WORKER_METRICS_PORT,
    metrics_host: str = _METRICS_HOST,
    loglevel: str = typer.Option("info", help="Log level."),
) -> None:
    """Run the reward join (Quix Streams): events.raw → one reward record per final
    trajectory on `rewards`, late events to `events.late`, unusable records to `quarantine`.
    At-least-once; records are keyed by org, trajectory and spec version, so a restart may
    repeat a record but never changes one. Start more workers with the same settings to spread
    the partitions. A checkpoint that cannot be completed stops the worker (exit code 70)
    before its offsets are committed, and so do two minutes without a broker; started again
    (`rewardstream up` does it), it waits for a broker and repeats what was not committed.

    Changed with the move from faust: --store is gone (state is always RocksDB with a
    changelog topic); --batch-max now bounds a checkpoint; --commit-interval-s and
    --retention-days are new.

    Example: REWARDSTREAM_TOPIC_PREFIX=prod. rewardstream worker --spec my-spec.toml"""
    from infra.settings import cache_dir, load_settings
    from streams.spec import load_spec
    from streams.worker import WorkerConfig, run_worker

    config = WorkerConfig(settings=load_settings(), spec=load_spec(spec),
                          datadir=datadir or cache_dir() / "rewardjoin", batch_max=batch_max,
                          commit_interval_s=commit_interval_s,
                          retention_ms=int(retention_days * 86_400_000),
                          shutdown_timeout_s=shutdown_timeout_s,
                          output_timeout_s=output_timeout_s,
                          session_timeout_s=session_timeout_s, metrics_port=metrics_port,
                          metrics_host=metrics_host)
    run_worker(config, loglevel=loglevel)


def archive(
    out: Path = typer.Option(..., help="Archive directory (created if missing)."),
    flush_interval_s: float = typer.Option(60.0, min=0.1, help="Most seconds between flushes."),
    max_rows: int = typer.Option(50_000, min=1, help="Flush after this many buffered events."),
    stop_at_end: bool = typer.Option(False, help="Exit once the archive has caught up."),
    metrics_port: int = _ARCHIVER_METRICS_PORT,
    metrics_host: str = _METRICS_HOST,
) -> None:
    """Archive events.raw to Parquet (partitioned by event date and type), resumably. While
    Kafka is away it waits, and goes on from its last flush; SIGTERM flushes and stops.

    Example: rewardstream archive --out /data/archive --flush-interval-s 30"""
    import logging

    from infra.health_http import FiguresCollector
    from infra.log_filters import limit_repeats
    from infra.service_run import run_service
    from infra.settings import load_settings
    from streams.archive import ARCHIVE_FIGURES, ArchiveTotals, archive_topic

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)  # its connections and fetches
    limit_repeats()  # and, while Kafka is away, the same failure every second
    settings = load_settings()
    if stop_at_end:
        rows = archive_topic(settings, out, flush_interval_s=flush_interval_s,
                             max_rows=max_rows, stop_at_end=True)
        typer.echo(f"archived {rows} events into {out}")
        return
    totals = ArchiveTotals()

    def work(stop: threading.Event, ready: threading.Event) -> None:
        ready.set()  # resumes from its own marks: ready once its reader is made
        archive_topic(settings, out, flush_interval_s=flush_interval_s, max_rows=max_rows,
                      stop=stop, totals=totals)

    run_service("archiver", settings, work, collectors=(FiguresCollector(totals, ARCHIVE_FIGURES),),
                metrics_port=metrics_port, metrics_host=metrics_host)
    typer.echo(f"archived {totals.records} events into {out}")


def replay(
    source: str = typer.Argument(..., help="An archive directory, or `kafka` for events.raw."),
    spec: Path = typer.Option(None, help=_SPEC_HELP),
    compare: Path = typer.Option(None, help="A second spec: show what changes under it."),
    out: Path = typer.Option(None, help="Write the records (JSON lines) here."),
    top: int = typer.Option(10, min=1, help="How many most-moved trajectories to list."),
    retention_days: float = typer.Option(
        7.0, min=0.0, help="Marker retention in event time, as the worker's."),
    org: str | None = typer.Option(None, help="Only this organisation's records and late "
                                              "events (the whole log is replayed, as the "
                                              "worker joins it)."),
) -> None:
    """Compute reward records offline, exactly as the worker does (records it cannot use are
    quarantined as the worker quarantines them, and listed); with --compare, review a spec
    change: distribution shift, per-component deltas, the trajectories that move most.

    Example: rewardstream replay /data/archive --spec old.toml --compare new.toml --org acme"""
    from infra.settings import load_settings
    from streams.replay import compare_records, of_org, replay_rows
    from streams.sources import archive_rows, kafka_rows
    from streams.spec import load_spec

    if source == "kafka":
        rows = kafka_rows(load_settings())
    else:
        rows = archive_rows(Path(source))
    base = load_spec(spec)
    retention_ms = int(retention_days * 86_400_000)
    result = replay_rows(rows, base, retention_ms)
    if org is not None:
        result = of_org(result, org)
    whose = f" of org {org}" if org is not None else ""
    log_wide = " in the whole log" if org is not None else ""
    typer.echo(f"spec {base.version}: {len(result.records)} records{whose}, {len(result.late)} "
               f"late events{whose}, {result.open_trajectories} trajectories still open"
               f"{log_wide}, {len(result.quarantined)} records quarantined (not usable "
               f"events){log_wide}")
    for partition, offset, reason in result.quarantined[:top]:
        typer.echo(f"  quarantined events.raw/{partition}/{offset}: {reason}")
    if out is not None:
        out.write_text("".join(r.model_dump_json() + "\n" for r in result.records))
    if compare is not None:
        other = load_spec(compare)
        changed = replay_rows(rows, other, retention_ms)
        if org is not None:
            changed = of_org(changed, org)
        report = compare_records(result.records, changed.records, top=top)
        report["spec_before"], report["spec_after"] = base.version, other.version
        typer.echo(json.dumps(report, indent=2))


def export(
    org: str = typer.Option(..., help="The organisation whose completions are exported."),
    out: Path = typer.Option(..., help="Directory for train.jsonl or train.parquet and "
                                       "manifest.json (an earlier export there is replaced)."),
    start: str = typer.Option(None, "--from", help="First offsets of events.raw, "
                              "PARTITION:OFFSET[,...], or an ISO-8601 time with a zone "
                              "(resolved to the first offset written at or after it) "
                              "[default: the beginning]."),
    stop: str = typer.Option(None, "--to", help="Offsets (or a time) to stop before, as "
                             "--from [default: the end of the log now]."),
    spec: Path = typer.Option(None, help=_SPEC_HELP),
    file_format: str = typer.Option("jsonl", "--format", help="jsonl or parquet."),
    view: str = typer.Option("samples", help="samples (one row per completion: prompt, "
                             "completion, reward, credit, labels, tokens), preferences "
                             "(prompt, chosen, rejected) or binary (prompt, completion, "
                             "label)."),
    retention_days: float = typer.Option(
        7.0, min=0.0, help="Marker retention in event time, as the worker's."),
) -> None:
    """Export one org's completions of a range of events.raw as a dataset that
    datasets.load_dataset reads as it is, with a manifest (offsets, spec, counts, SHA-256s, an
    export id) a checkpoint trained on it cites as lineage. The range is replayed through the
    reward join exactly as `rewardstream replay` does: the same range always gives the same
    bytes. Rules of the views: docs/trainer-and-release.md.

    Example: rewardstream export --org acme --from 0:0 --to 0:50000 --view binary --format
    parquet --out data/acme-kto"""
    from infra.settings import load_settings
    from streams.export import parse_bound, run_export
    from streams.spec import load_spec

    manifest = run_export(load_settings(), org_id=org, out_dir=out,
                          start=parse_bound(start, "--from"), stop=parse_bound(stop, "--to"),
                          spec=load_spec(spec), view=view, file_format=file_format,
                          retention_ms=int(retention_days * 86_400_000))
    counts, rows = manifest["counts"], manifest["files"][0]["rows"]
    skipped = ", ".join(f"{k[8:]} {v}" for k, v in counts.items() if k.startswith("skipped_"))
    typer.echo(f"{rows} {view} rows of org {org} from {counts['records']} records "
               f"({counts['events']} events){'; left out: ' + skipped if skipped else ''}")
    typer.echo(f"wrote {out / manifest['files'][0]['path']} and {out / 'manifest.json'} "
               f"(export {manifest['export_id'][:16]})")


def register(app: typer.Typer) -> None:
    app.command("worker")(worker)
    app.command("archive")(archive)
    app.command("replay")(replay)
    app.command("export")(export)
