"""The reward-join worker: a Quix Streams application around :class:`streams.join.PartitionJoin`.

Quix Streams (confluent-kafka underneath) consumes ``events.raw`` in a consumer group, keeps
each partition's join state in its own RocksDB store with a changelog topic of the same
partition count, and commits in checkpoints (every ``commit_interval_s`` or ``batch_max``
records). :mod:`streams.join_shell` says what happens per record and per checkpoint and why
outputs are acknowledged before the state and offsets that account for them are committed.

Processing is at-least-once: a restart repeats the records of an uncommitted checkpoint,
identical to the first time. Scaling out is adding workers with the same app id: Kafka
rebalances the partitions, and a partition's state moves with it through its changelog.

A checkpoint that cannot be completed (Kafka refuses an output, or does not acknowledge it
within ``output_timeout_s``) stops the worker: its offsets are not committed, so the next start
repeats it, and the process exits with :data:`EXIT_BATCH_FAILED`; so does a worker no broker
answered for two minutes. Either is a crash-only stop: started again (``rewardstream up``
does), a worker waits until a broker answers and repeats what was not committed. Stopping is
bounded: after SIGTERM, SIGINT or a failure, the process exits within ``shutdown_timeout_s``
whatever it is still waiting for.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.errors import BrokerError
from infra.kafka_io import confluent_options
from infra.settings import Settings
from schemas.topics import REWARD_RECORD_MAX_BYTES, topic_name
from streams.join import DEFAULT_RETENTION_MS, require_retention
from streams.join_shell import CONSUMER_NAME, JoinShell, WorkerTotals
from streams.quix_seam import BrokerUnavailable, QuixState, TopicNotSeen
from streams.spec import RewardSpec

__all__ = [
    "CONSUMER_NAME", "EXIT_BATCH_FAILED", "WorkerConfig", "WorkerTotals", "build_app",
    "collect_garbage_rarely", "default_app_id", "run_worker",
]

log = logging.getLogger("rewardstream.worker")

EXIT_BATCH_FAILED = 70  # EX_SOFTWARE: a checkpoint could not be completed
# After this long without an answering broker the application stops: Quix's clients are made
# again only by a new start (its own default; a supervisor starts the worker again, and a
# worker started while no broker answers waits for one).
_BROKER_AWAY_S = 120.0
_CHANGELOG_VISIBLE_S = 30.0


@dataclass(frozen=True)
class WorkerConfig:
    settings: Settings
    spec: RewardSpec
    datadir: Path
    app_id: str | None = None
    # A checkpoint (outputs acknowledged, state and offsets committed) after this many records
    # or this many seconds, whichever comes first.
    batch_max: int = 20_000
    commit_interval_s: float = 2.0
    retention_ms: int = DEFAULT_RETENTION_MS  # markers are kept this long in event time
    fetch_max_bytes_per_partition: int = 16 * 1024 * 1024
    produce_linger_s: float = 0.005
    produce_batch_bytes: int = 1024 * 1024
    # After SIGTERM/SIGINT or a failed checkpoint, the process exits within this many seconds.
    shutdown_timeout_s: float = 30.0
    # An output Kafka has not acknowledged after this long fails its checkpoint.
    output_timeout_s: float = 60.0
    # A worker silent this long (killed, frozen, cut off) leaves the group and its partitions
    # move to the others (librdkafka's session.timeout.ms; 45 s is its default).
    session_timeout_s: float = 45.0
    # /metrics (counts, each partition's state size and watermark), /readyz and /livez.
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"


def default_app_id(settings: Settings, spec: RewardSpec) -> str:
    """One consumer group and state per deployment prefix and spec version."""
    return f"{settings.topic_prefix}rewardjoin-{spec.version}"


def _require_source(settings: Settings) -> None:
    from infra.topics import admin_client

    admin = admin_client(settings)
    try:
        source = topic_name(settings.topic_prefix, "events.raw")
        if source not in set(admin.list_topics()):
            raise BrokerError(f"topic {source} does not exist at {settings.bootstrap_servers}; "
                              "create the platform's topics with `rewardstream topics create`")
    finally:
        admin.close()


def collect_garbage_rarely() -> None:
    """Tune the garbage collector for the join: it allocates many short-lived objects per
    event (parsed events, facts) while the process holds many long-lived ones (open
    trajectories, the Kafka clients' and Quix's own), and with Python's default thresholds
    full collections took a large share of the worker's time (docs/benchmarks.md#reward-join).
    Objects made before processing are frozen out of collections, and a young collection runs
    every 50,000 allocations."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def _register_store(sdf: Any, timeout_s: float = _CHANGELOG_VISIBLE_S) -> None:
    """Register the join's state store, whose changelog topic Quix creates and then reads back.
    In a cluster the node it reads from learns of a new topic a little after the controller
    made it (sooner on an idle machine), and Quix then says it was not found: the read is
    repeated until the topic is seen. Nothing is registered before the read, so a repeat is
    safe; creating it again finds it exists."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            sdf.register_store()
            return
        except TopicNotSeen as exc:
            if time.monotonic() > deadline:
                raise BrokerError(f"{exc} {timeout_s:.0f} s after it was created") from exc
            log.info("%s yet; reading it again", exc)
            time.sleep(0.5)


def _exit_within(timeout_s: float, code: Callable[[], int]) -> None:
    """Exit the process ``timeout_s`` from now unless it has exited by then."""
    def expire() -> None:
        log.critical("reward join did not stop within %.0f s; exiting now", timeout_s)
        logging.shutdown()
        os._exit(code())

    timer = threading.Timer(timeout_s, expire)
    timer.daemon = True
    timer.start()


def build_app(config: WorkerConfig,
              stop_when: Callable[[WorkerTotals], bool] | None = None,
              bounded_stop: bool = False) -> tuple[Any, JoinShell]:
    """The Quix application of the reward join and its shell (``shell.totals`` are live).

    ``stop_when`` stops the application once it holds (in-process runs); ``bounded_stop``
    makes every stop exit the process within ``shutdown_timeout_s`` (the worker command)."""
    from quixstreams import Application
    from quixstreams.kafka.configuration import ConnectionConfig

    settings = config.settings
    require_retention(config.spec, config.retention_ms)
    _require_source(settings)
    app_id = config.app_id or default_app_id(settings, config.spec)
    shell_box: list[JoinShell] = []

    class RewardJoinApplication(Application):
        _stopping = False

        def stop(self, fail: bool = False) -> None:
            if bounded_stop and not self._stopping:
                self._stopping = True
                failed = fail or bool(shell_box and shell_box[0].totals.failure)
                _exit_within(config.shutdown_timeout_s,
                             lambda: EXIT_BATCH_FAILED if failed else 128 + 15)
            super().stop(fail=fail)

    app = RewardJoinApplication(
        broker_address=ConnectionConfig.from_librdkafka_dict(
            confluent_options(settings, app_id)),
        consumer_group=app_id, auto_offset_reset="earliest",
        commit_interval=config.commit_interval_s, commit_every=config.batch_max,
        state_dir=str(config.datadir), use_changelog_topics=True,
        processing_guarantee="at-least-once", loglevel=None,
        # Never delete local state on its own: the source keeps everything, so an offset
        # below the log's start is an operator's error to look at.
        auto_recover_from_source_offset_out_of_range=False,
        broker_availability_timeout=_BROKER_AWAY_S,
        consumer_extra_config={
            "session.timeout.ms": int(config.session_timeout_s * 1000),
            "max.partition.fetch.bytes": config.fetch_max_bytes_per_partition,
            "fetch.max.bytes": 4 * config.fetch_max_bytes_per_partition},
        producer_extra_config={
            "linger.ms": int(config.produce_linger_s * 1000),
            "batch.size": config.produce_batch_bytes,
            "message.max.bytes": REWARD_RECORD_MAX_BYTES + (1 << 20),
            "message.timeout.ms": int(config.output_timeout_s * 1000)},
    )
    source = app.topic(topic_name(settings.topic_prefix, "events.raw"),
                       key_deserializer="bytes", value_deserializer="bytes")
    sdf = app.dataframe(source)
    _register_store(sdf)
    shell = JoinShell(config.spec, settings.topic_prefix, config.retention_ms,
                      QuixState.of(sdf), stop_when)
    shell.stop = app.stop
    shell_box.append(shell)
    sdf.sink(shell)
    return app, shell


def run_worker(config: WorkerConfig, loglevel: str = "info") -> None:
    """Run until SIGINT/SIGTERM, or until a checkpoint fails (then exit with
    EXIT_BATCH_FAILED). Started while no broker answers, it waits for one; its /readyz says
    not ready until it runs and while the brokers do not answer."""
    from infra.health_http import HealthServer, service_registry
    from infra.kafka_health import BrokerWatch, wait_for_broker
    from streams.join_metrics import JoinCollector

    logging.basicConfig(level=loglevel.upper(), format="%(asctime)s %(name)s %(message)s")
    watch = BrokerWatch(config.settings, CONSUMER_NAME).start()
    registry = service_registry(watch)
    running = threading.Event()

    def not_ready() -> str | None:
        if not watch.up:
            return f"Kafka does not answer: {watch.reason}"
        return None if running.is_set() else "starting: restoring the join's state"

    HealthServer(registry, not_ready).serve(config.metrics_port, config.metrics_host)
    wait_for_broker(config.settings, threading.Event(), "reward join")
    app, shell = build_app(config, bounded_stop=True)
    registry.register(JoinCollector(shell.totals))
    collect_garbage_rarely()
    started = time.monotonic()
    log.info("reward join %s (spec %s) starting", app.config.consumer_group,
             config.spec.version)
    running.set()
    try:
        app.run()
    except BrokerUnavailable as exc:
        shell.totals.failure = f"{type(exc).__name__}: {exc}"
        log.critical("reward join stopped: no broker answered it for %.0f s, and the Kafka "
                     "clients are made again only by a new start; it waits for a broker and "
                     "repeats what was not committed (%s)", _BROKER_AWAY_S, shell.pending())
        logging.shutdown()
        raise SystemExit(EXIT_BATCH_FAILED) from None
    except Exception as exc:  # noqa: BLE001 - any failure stops the worker, loudly
        shell.totals.failure = f"{type(exc).__name__}: {exc}"
        log.critical(
            "reward join stopped: the checkpoint of %s could not be completed (%s); its "
            "offsets were not committed, so the next start repeats it", shell.pending(),
            shell.totals.failure, exc_info=exc)
        logging.shutdown()
        raise SystemExit(EXIT_BATCH_FAILED) from None
    shell.report()
    log.info("reward join stopped after %.0f s", time.monotonic() - started)
