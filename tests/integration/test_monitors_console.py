"""The console's API against the real broker: staff keys, alert actions, rollback."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from infra.kafka_io import make_producer, read_topic, send
from infra.settings import Settings
from infra.topics import create_topics
from rewardstream.cli import app as cli_app
from schemas.checkpoints import CheckpointEvent
from schemas.metrics import MetricStat, MetricWindow, metric_key
from serving.console.app import create_app
from serving.console.auth import StaffAuth
from serving.console.grants import FLEET
from serving.console.state import ConsoleState
from streams.monitors.config import MonitorConfig
from tests.support.monitors_seed import publish_registry, publish_windows, run_detectors
from tests.support.service_keys import staff_keys
from tests.support.waits import wait_for

pytestmark = pytest.mark.kafka
KEY = {"X-Staff-Key": "ana-secret-key"}


@pytest.fixture
def client(kafka: Settings) -> Iterator[TestClient]:
    publish_registry(kafka)
    publish_windows(kafka, "defers_edits", n=1500)
    run_detectors(kafka, MonitorConfig(), min_events=1)
    keys = StaffAuth(staff_keys())
    with TestClient(create_app(ConsoleState(kafka), keys)) as test_client:
        wait_for(lambda: test_client.get("/api/alerts", headers=KEY).json()["alerts"], 30,
                 "the console to fold the alerts topic")
        yield test_client


def test_pages_and_api_refuse_requests_without_a_valid_staff_key(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 401 and "Staff key required" in page.text
    assert client.get("/api/alerts", headers={"X-Staff-Key": "not-a-staff-key"}).status_code \
        == 403
    for path in ("/api/alerts", "/api/checkpoints", "/api/metrics",
                 "/api/series?metric=edit_rate"):
        assert client.get(path).status_code == 401, path
    assert client.post("/api/session", json={"key": "ana-secret-key"}).status_code == 200
    assert client.get("/").status_code == 200  # the session opens pages ...
    fp = client.get("/api/alerts").json()["alerts"][0]["fingerprint"]
    # ... not actions without the CSRF token
    assert client.post(f"/api/alerts/{fp}/acknowledge", json={}).status_code == 403
    assert client.get("/livez").status_code == 200 and client.get("/readyz").status_code == 200


def test_acknowledge_silence_resolve_and_roll_back(client: TestClient, kafka: Settings) -> None:
    alert = client.get("/api/alerts", headers=KEY).json()["alerts"][0]
    fp = alert["fingerprint"]
    assert alert["status"] == "firing" and alert["evidence"]["tests"]
    assert client.post(f"/api/alerts/{fp}/acknowledge", json={}, headers=KEY).status_code == 200
    views = {a["fingerprint"]: a for a in client.get("/api/alerts", headers=KEY).json()["alerts"]}
    assert (views[fp]["status"], views[fp]["acknowledged_by"]) == ("acknowledged", "ana")
    silenced = client.post(f"/api/alerts/{fp}/silence", json={"duration_s": 600}, headers=KEY)
    assert silenced.status_code == 200
    body = client.get("/api/alerts", headers=KEY).json()
    alert = next(a for a in body["alerts"] if a["fingerprint"] == fp)
    assert body["silences"] and alert["silenced_by"]
    assert client.post(f"/api/alerts/{fp}/resolve", json={"note": "ok"},
                       headers={"X-Staff-Key": "bob-secret-key"}).status_code == 200
    again = client.post(f"/api/alerts/{fp}/resolve", json={}, headers=KEY)
    assert again.status_code == 409 and "already resolved" in again.json()["detail"]
    rollback = client.post("/api/checkpoints/c1/rollback",
                           json={"reason": "edit rate collapse", "alert_fingerprint": fp},
                           headers=KEY)
    assert rollback.status_code == 200, rollback.text
    events = [CheckpointEvent.model_validate_json(r.value)
              for r in read_topic(kafka, "checkpoints")]
    down, up = events[-2:]
    assert (down.checkpoint_id, down.kind, down.actor) == ("c1", "rolled_back", "ana")
    assert (up.checkpoint_id, up.kind, up.status) == ("c0", "promoted", "production")
    assert down.evidence["alert_fingerprint"] == up.evidence["alert_fingerprint"] == fp
    newest = client.get("/api/checkpoints", headers=KEY).json()["checkpoints"][0]
    assert newest["kind"] == "promoted"
    assert client.post("/api/checkpoints/c1/rollback", json={"reason": "x"},
                       headers=KEY).status_code == 409
    assert client.post("/api/checkpoints/zz/rollback", json={"reason": "x"},
                       headers=KEY).status_code == 409


def test_the_console_and_the_cli_roll_back_with_the_same_events(kafka: Settings) -> None:
    """The same registry under two prefixes: the console's button in one, `rewardstream
    registry rollback` in the other; both write the registry's rollback events."""
    other = replace(kafka, topic_prefix=kafka.topic_prefix + "cli.")
    create_topics(other)
    written = {}
    for settings in (kafka, other):
        publish_registry(settings)
    keys = StaffAuth(staff_keys())
    with TestClient(create_app(ConsoleState(kafka), keys)) as console:
        wait_for(lambda: console.get("/api/checkpoints", headers=KEY).json()["checkpoints"], 30,
                 "the console to fold the registry")
        assert console.post("/api/checkpoints/c1/rollback", json={"reason": "edit rate"},
                            headers=KEY).status_code == 200
    done = CliRunner().invoke(cli_app, ["registry", "rollback", "c1", "--reason", "edit rate",
                                        "--actor", "ana"],
                              env={"REWARDSTREAM_TOPIC_PREFIX": other.topic_prefix})
    assert done.exit_code == 0, done.output
    for settings in (kafka, other):
        events = [CheckpointEvent.model_validate_json(r.value)
                  for r in read_topic(settings, "checkpoints")][4:]
        written[settings.topic_prefix] = [
            e.model_dump(exclude={"event_id", "occurred_at"}) for e in events]
    console_events, cli_events = written.values()
    assert len(console_events) == 2 and console_events == cli_events


def test_a_repeated_metric_window_counts_once(kafka: Settings) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)

    def partial(arm: str, partition: int, edits: float) -> MetricWindow:
        return MetricWindow(scope="rewards", window_start=start,
                            window_end=start + timedelta(minutes=1), checkpoint_id="c0", arm=arm,
                            partition=partition, trajectories=10,
                            stats={"edit_rate": MetricStat(n=10, sum=edits, sumsq=edits)})

    producer = make_producer(kafka, "test")
    # Partition 0's window of arm a comes twice (a restarted metrics worker); arm b's, last on
    # the topic, says when the console has read the rest.
    for window in (partial("a", 0, 4), partial("a", 1, 6), partial("a", 0, 4),
                   partial("b", 0, 1)):
        send(producer, kafka, "metrics", metric_key(window.checkpoint_id, window.arm),
             window.model_dump_json().encode())
    producer.close()
    state = ConsoleState(kafka)

    def by_arm() -> dict[str, list[list[float]]]:
        return {s["arm"]: s["points"] for s in state.series_view("rewards", "edit_rate", FLEET)}

    state.start()
    try:
        series = wait_for(lambda: (found := by_arm()).get("b") and found, 30,
                          "the console to fold the metric windows")
    finally:
        state.stop()
    assert series["a"] == [[start.timestamp() * 1000, 0.5, 20.0]]  # 10 of 20, not 14 of 30
