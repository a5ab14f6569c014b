"""The monitors' metrics worker SIGKILLed while it folds reward records on the three-node
cluster, and started again: every window of the offline fold is published, each copy with the
offline fold's figures, and nothing else.

Its tables live in changelog topics, the per-record ids it remembers while a window is open
among them, so a record read again after the restart is not folded twice. A fold writes
several keys; each is journalled as one write first (``streams.monitors.journal``), so a kill
in the middle of one leaves it whole or not at all, and the windows it closed are published
again (identical copies).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from infra.kafka_io import make_producer, read_topic
from infra.settings import Settings
from schemas.metrics import MetricWindow
from schemas.rewards import RewardRecord, reward_record_key
from schemas.topics import topic_name
from streams.monitors.config import MonitorConfig
from streams.monitors.offline import windows_from_rewards
from streams.monitors.simulate import PROFILES, Segment, simulate
from tests.support.fault_ledger import FaultRow, LogCheck, report
from tests.support.monitors_seed import metrics_worker
from tests.support.waits import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.kafka, pytest.mark.slow]

WindowId = tuple[str, str, str, str, str, int]
AT = datetime(2026, 3, 1, tzinfo=UTC)


def _write(settings: Settings, records: list[RewardRecord]) -> None:
    producer = make_producer(settings, "fault-rewards")
    topic = topic_name(settings.topic_prefix, "rewards")
    for r in records:
        producer.send(topic, key=reward_record_key(r.org_id, r.trajectory_id, r.spec_version),
                      value=r.model_dump_json().encode())
    producer.flush()
    producer.close()


def _published(settings: Settings) -> dict[WindowId, list[MetricWindow]]:
    out: dict[WindowId, list[MetricWindow]] = defaultdict(list)
    for message in read_topic(settings, "metrics"):
        window = MetricWindow.model_validate_json(message.value)
        if window.scope == "rewards":
            out[_id(window)].append(window)
    return out


def _id(window: MetricWindow) -> WindowId:
    return (window.scope, window.window_start.isoformat(), window.checkpoint_id, window.arm,
            window.org_id, window.partition)


def test_a_killed_metrics_worker_publishes_the_offline_windows(
        cluster: Settings, tmp_path: Path, report_figures: Callable[[str], None]) -> None:
    records = list(simulate([Segment({"a": ("c0", PROFILES["healthy"])}, 600)], seed=5,
                            start=AT))
    expected = {_id(w): w for _, w in windows_from_rewards(records, MonitorConfig(), flush=False)}
    _write(cluster, records[:300])
    with metrics_worker(cluster, tmp_path) as worker:
        wait_for(lambda: len(_published(cluster)) >= 2, 120, "the first windows")
        _write(cluster, records[300:450])
        worker.kill()  # SIGKILL, while it folds
        worker.wait()
    killed_at = time.monotonic()
    _write(cluster, records[450:])
    with metrics_worker(cluster, tmp_path) as restarted:
        try:
            published = wait_for(lambda: (found := _published(cluster)).keys() >= expected.keys()
                                 and found, 180, "every window of the offline fold",
                                 alive=lambda: restarted.poll() is None)
        except AssertionError as exc:
            log = (tmp_path / "metrics-worker.log").read_text(errors="replace")
            raise AssertionError(f"{exc}; the workers' log ends:\n{log[-3000:]}") from None
    recovery_s = time.monotonic() - killed_at
    changed = [key for key, copies in published.items()
               if any(copy != expected.get(key) for copy in copies)]
    check = LogCheck(accepted=len(expected), on_log=len(published),
                     lost=len(expected.keys() - published.keys()),
                     duplicated=sum(len(copies) - 1 for copies in published.values()),
                     unexpected=len(published.keys() - expected.keys()))
    report(FaultRow(
        "SIGKILL the metrics worker while it folds reward records, start it again",
        "pytest tests/faults/test_monitors_kill.py", len(records), check, recovery_s,
        f"accepted = windows of the offline fold; on the log = windows published; "
        f"{len(changed)} differ from the offline fold; recovery: the kill until every window "
        f"was published"), report_figures)
    assert (check.lost, check.unexpected, len(changed)) == (0, 0, 0)
