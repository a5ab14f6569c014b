"""The console's API against the real broker: staff keys, alert actions, rollback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from monitors_seed import publish_registry, publish_windows, run_detectors, wait_for

from infra.settings import Settings
from schemas.checkpoints import CheckpointEvent
from serving.console.app import create_app
from serving.console.auth import StaffKeys, parse_staff_keys
from serving.console.state import ConsoleState
from streams.monitors.config import MonitorConfig
from streams.monitors.kafka_io import read_topic

pytestmark = pytest.mark.kafka
KEY = {"X-Staff-Key": "ana-secret-key"}


@pytest.fixture
def client(kafka: Settings) -> Iterator[TestClient]:
    publish_registry(kafka)
    publish_windows(kafka, "defers_edits", n=1500)
    run_detectors(kafka, MonitorConfig(), min_events=1)
    keys = StaffKeys(parse_staff_keys("ana:ana-secret-key,bob:bob-secret-key"))
    with TestClient(create_app(ConsoleState(kafka), keys)) as test_client:
        wait_for(lambda: test_client.get("/api/alerts", headers=KEY).json()["alerts"], 30,
                 "the console to fold the alerts topic")
        yield test_client


def test_pages_and_api_refuse_requests_without_a_valid_staff_key(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 401 and "Staff key required" in page.text
    assert client.get("/", headers={"X-Staff-Key": "not-a-staff-key"}).status_code == 403
    for path in ("/api/alerts", "/api/checkpoints", "/api/metrics",
                 "/api/series?metric=edit_rate"):
        assert client.get(path).status_code == 401, path
    client.cookies.set("rewardstream_staff_key", "ana-secret-key")
    assert client.get("/").status_code == 200  # the cookie opens pages ...
    fp = client.get("/api/alerts").json()["alerts"][0]["fingerprint"]
    assert client.post(f"/api/alerts/{fp}/acknowledge", json={}).status_code == 401  # ... not actions
    assert client.get("/healthz").status_code == 200


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
    assert body["silences"] and next(a for a in body["alerts"] if a["fingerprint"] == fp)["silenced_by"]
    assert client.post(f"/api/alerts/{fp}/resolve", json={"note": "ok"},
                       headers={"X-Staff-Key": "bob-secret-key"}).status_code == 200
    again = client.post(f"/api/alerts/{fp}/resolve", json={}, headers=KEY)
    assert again.status_code == 409 and "already resolved" in again.json()["detail"]
    rollback = client.post("/api/checkpoints/c1/rollback",
                           json={"reason": "edit rate collapse", "alert_fingerprint": fp},
                           headers=KEY)
    assert rollback.status_code == 200, rollback.text
    events = [CheckpointEvent.model_validate_json(r.value) for r in read_topic(kafka, "checkpoints")]
    assert events[-1].kind == "rolled_back" and events[-1].actor == "ana"
    assert events[-1].evidence["alert_fingerprint"] == fp
    assert client.get("/api/checkpoints", headers=KEY).json()["checkpoints"][0]["kind"] == "rolled_back"
    assert client.post("/api/checkpoints/c1/rollback", json={"reason": "x"},
                       headers=KEY).status_code == 409
    assert client.post("/api/checkpoints/zz/rollback", json={"reason": "x"},
                       headers=KEY).status_code == 409
