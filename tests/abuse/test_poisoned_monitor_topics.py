"""The monitors against poisoned topics on the real broker: the metrics worker (faust, as a
process), the detectors and the console. See test_poisoned_topics.py for what each test checks.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from infra.kafka_io import read_topic
from infra.settings import Settings
from schemas.metrics import MetricWindow
from serving.console.app import create_app
from serving.console.auth import StaffAuth
from serving.console.state import ConsoleState
from streams.monitors.config import MonitorConfig
from streams.monitors.offline import windows_from_rewards
from streams.monitors.runner import DetectorRunner
from streams.monitors.windows import (
    fold_in,
    ingest_contributions,
    ingest_window_keys,
    to_metric_window,
)
from tests.support.metrics import samples
from tests.support.monitors_seed import metric_windows, metrics_worker, registry_events
from tests.support.poisoned_logs import (
    AT,
    alert_events,
    alert_poison,
    checkpoint_poison,
    clean_twin,
    entries,
    event_poison,
    next_checkpoint_event,
    reward_poison,
    reward_records,
    stored_event,
    window_poison,
)
from tests.support.service_keys import staff_keys
from tests.support.topic_poison import (
    Entry,
    Poison,
    Written,
    assert_quarantined,
    interleave,
    out_of_range,
    write,
)
from tests.support.waits import wait_for

pytestmark = [pytest.mark.abuse, pytest.mark.kafka]


def _monitor_inputs() -> dict[str, list]:
    """Inputs of the detectors and the console: a registry, an operator's alert, windows."""
    return {"checkpoints": registry_events(), "metrics": metric_windows("defers_edits", n=1500),
            "alerts": alert_events(("slow_serving",), AT)}


def _write_poisoned(settings: Settings, inputs: dict[str, list]) -> list[Written]:
    """``inputs`` with each topic's poison between its records."""
    poison: dict[str, Callable[..., list[Poison]]] = {
        "checkpoints": checkpoint_poison, "metrics": window_poison, "alerts": alert_poison}
    return [w for name, records in inputs.items()
            for w in write(settings, name, interleave(entries(records),
                                                      poison[name](records[0])))]


def _after_poison(windows: list[MetricWindow]) -> MetricWindow:
    """A window of a new checkpoint, after the others."""
    last = windows[-1]
    return last.model_copy(update={"checkpoint_id": "end", "window_start": last.window_end,
                                   "window_end": last.window_end + timedelta(minutes=1)})


def _detect(settings: Settings, between: Callable[[], object] = lambda: None) -> DetectorRunner:
    """Run the detectors until they folded the window of checkpoint "end"."""
    runner = DetectorRunner(settings, MonitorConfig())
    stop = threading.Event()
    thread = threading.Thread(target=runner.run, args=(stop, False), daemon=True)
    thread.start()
    try:
        between()
        wait_for(lambda: "end" in runner.detectors.first_seen, 60, "the window after the poison")
        assert thread.is_alive()
    finally:
        stop.set()
        thread.join(20)
    return runner


def test_detectors_alert_past_poison(kafka: Settings) -> None:
    inputs = _monitor_inputs()
    after = _after_poison(inputs["metrics"])
    clean = clean_twin(kafka)
    for name, records in inputs.items():
        write(clean, name, entries(records + ([after] if name == "metrics" else [])))
    expected = _detect(clean)
    assert expected.published > 0  # the windows do fire alerts
    written = _write_poisoned(kafka, inputs)

    def after_poison() -> None:
        assert_quarantined(kafka, "monitors-detect", written, timeout_s=60)
        write(kafka, "metrics", entries([after]))

    runner = _detect(kafka, after_poison)
    assert runner.published == expected.published
    assert runner.alerts == expected.alerts
    assert runner.registry == expected.registry
    assert runner.detectors.totals == expected.detectors.totals


_STAFF = {"X-Staff-Key": "ana-secret-key"}
_VIEWS = ("/api/alerts", "/api/checkpoints", "/api/series?metric=edit_rate",
          "/api/series?metric=latency_p95_ms", "/api/series?metric=log_latency")


@contextmanager
def _console(settings: Settings, after: dict[str, list],
             between: Callable[[], object] = lambda: None,
             ) -> Iterator[tuple[dict[str, object], TestClient]]:
    """A console on ``settings``, once it folded the ``after`` records (written after
    ``between``): its views and its client."""
    keys = StaffAuth(staff_keys())
    with TestClient(create_app(ConsoleState(settings), keys)) as client:
        between()
        for name, records in after.items():
            write(settings, name, entries(records))

        def folded() -> bool:
            checkpoints = client.get("/api/checkpoints", headers=_STAFF).json()["checkpoints"]
            alerts = client.get("/api/alerts", headers=_STAFF).json()["alerts"]
            series = client.get("/api/series?metric=edit_rate", headers=_STAFF).json()["series"]
            return (checkpoints[0]["checkpoint_id"] == "c2"
                    and any(a["detector"] == "broken_calls" for a in alerts)
                    and any(s["checkpoint"] == "end" for s in series))

        wait_for(folded, 60, "the console to fold the records after the poison")
        yield {path: client.get(path, headers=_STAFF).json() for path in _VIEWS}, client


def test_console_shows_the_log_past_poison_and_counts_it(kafka: Settings) -> None:
    inputs = _monitor_inputs()
    after = {"checkpoints": [next_checkpoint_event(inputs["checkpoints"])],
             "metrics": [_after_poison(inputs["metrics"])],
             "alerts": alert_events(("broken_calls",), AT)[:1]}
    clean = clean_twin(kafka)
    for name, records in inputs.items():
        write(clean, name, entries(records))
    with _console(clean, after) as (expected, _):
        pass
    written = _write_poisoned(kafka, inputs)
    with _console(kafka, after, lambda: assert_quarantined(kafka, "console", written)) as (
            views, client):
        assert views == expected
        counts = Counter(w.topic for w in written if w.poison)
        wait_for(lambda: client.get("/api/quarantine", headers=_STAFF).json()["total"]
                 == sum(counts.values()), 30, "the console to count the quarantined records")
        shown = client.get("/api/quarantine", headers=_STAFF).json()
        assert {(r["source_topic"], r["records"]) for r in shown["by_consumer"]
                if r["consumer"] == "console"} == set(counts.items())
        metrics = samples(client.get("/metrics").text, "rewardstream_quarantined_records_total")
    for topic, count in counts.items():
        labels = frozenset({("consumer", "console"), ("source_topic", topic)})
        assert metrics.get(labels) == float(count), (topic, metrics)


def _ingest_windows(timestamps_ms: list[int], config: MonitorConfig) -> list[MetricWindow]:
    """What the pure fold closes from acme's accepted events of checkpoint c0, arm a."""
    state: dict = {}
    closed = []
    for at_ms in timestamps_ms:
        closed += fold_in(state, ingest_window_keys("acme", "c0", "a"), at_ms,
                          ingest_contributions(False), window_ms=config.window_s * 1000,
                          grace_ms=config.grace_s * 1000)
    return [to_metric_window(acc, "ingest", config.window_s * 1000) for acc in closed]


def test_metrics_worker_folds_windows_past_poison(kafka: Settings, tmp_path: Path) -> None:
    config = MonitorConfig()
    records = reward_records(400)
    stamps = [int(AT.timestamp() * 1000) + second * 1000 for second in range(0, 600, 3)]
    events = [Entry(b"t", stored_event(datetime.fromtimestamp(ms / 1000, UTC)), timestamp_ms=ms)
              for ms in stamps]
    # A record timed far ahead would carry the watermark past every open window.
    far_ahead = out_of_range("far-future end", records[0], "ended_at",
                             "9999-12-31T23:59:59Z", reason="ended_at: ")
    written = write(kafka, "rewards", interleave(entries(records[:300]),
                                                 [*reward_poison(records[0]), far_ahead]))
    written += write(kafka, "events.raw", interleave(events[:150], event_poison(events[0].value)))
    with metrics_worker(kafka, tmp_path) as worker:
        assert_quarantined(kafka, "monitors-metrics", written, timeout_s=120)
        write(kafka, "rewards", entries(records[300:]))
        write(kafka, "events.raw", events[150:])
        expected = ([w for _, w in windows_from_rewards(records, config, flush=False)]
                    + _ingest_windows(stamps, config))
        assert {w.scope for w in expected} == {"rewards", "ingest"}

        def complete() -> list[MetricWindow] | None:
            found = [MetricWindow.model_validate_json(r.value)
                     for r in read_topic(kafka, "metrics")]
            return found if len(found) >= len(expected) else None

        windows = wait_for(complete, 60, "the windows of the records after the poison")
        assert worker.poll() is None

    def order(w: MetricWindow) -> tuple[str, datetime, str, str]:
        return w.scope, w.window_start, w.checkpoint_id, w.org_id

    assert sorted(windows, key=order) == sorted(expected, key=order)
