"""The ingest API against the real broker: exact counts, dedupe, dead letters, statuses."""

from __future__ import annotations

import gzip
import json
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from harness.samples import sample_trajectory
from infra.settings import Settings
from schemas.events import EventAdapter
from serving.ingest.limits import Caps
from tests.support.ingest_support import EDIT_ONLY_KEY, ingest_config, read_topic, running_server
from tests.support.metrics import metric

pytestmark = pytest.mark.kafka


def _events(trajectories: int) -> list[bytes]:
    return [EventAdapter.dump_json(event)
            for i in range(trajectories)
            for event in sample_trajectory(f"traj-{uuid.uuid4().hex[:8]}-{i}")]


def _ids(records: list) -> list[str]:
    return [json.loads(r.value)["event_id"] for r in records]


def test_n_posted_gives_n_on_the_log_and_a_repost_adds_none(kafka: Settings) -> None:
    events = _events(20)  # 180 events
    body = gzip.compress(b"\n".join(events))
    with running_server(kafka) as server:
        first = server.post(body, **{"Content-Encoding": "gzip"})
        second = server.post(body, **{"Content-Encoding": "gzip"})
    assert first.status_code == 200 and len(first.json()["accepted"]) == len(events)
    assert second.status_code == 200
    assert second.json()["accepted"] == [] and len(second.json()["duplicates"]) == len(events)
    records = read_topic(kafka, "events.raw")
    assert len(records) == len(events)
    assert sorted(_ids(records)) == sorted(json.loads(e)["event_id"] for e in events)
    stored = json.loads(records[0].value)
    assert stored["org_id"] == "org-test" and stored["user"].startswith("u_")
    assert records[0].key == stored["trajectory_id"].encode()


def test_concurrent_retries_of_one_batch_append_it_once(kafka: Settings) -> None:
    events = _events(10)
    body = b"\n".join(events)
    with running_server(kafka) as server:
        with ThreadPoolExecutor(4) as pool:
            responses = list(pool.map(lambda _: server.post(body), range(4)))
    assert [r.status_code for r in responses] == [200] * 4
    assert sum(len(r.json()["accepted"]) for r in responses) == len(events)
    assert len(read_topic(kafka, "events.raw")) == len(events)


def test_dedupe_survives_a_restart_by_reading_back_the_log(kafka: Settings) -> None:
    body = json.dumps([json.loads(e) for e in _events(2)]).encode()
    with running_server(kafka) as server:
        assert server.post(body, **{"Content-Type": "application/json"}).status_code == 200
    with running_server(kafka) as server:
        again = server.post(body, **{"Content-Type": "application/json"})
    assert again.json()["accepted"] == [] and len(again.json()["duplicates"]) == 18
    assert len(read_topic(kafka, "events.raw")) == 18


def test_one_bad_event_is_dead_lettered_and_the_rest_appended(kafka: Settings) -> None:
    events = _events(1)
    bad = json.loads(events[-1])  # edit.persistence
    bad["payload"]["surviving_fraction"] = 1.5
    bad_bytes = json.dumps(bad).encode()
    with running_server(kafka) as server:
        response = server.post(b"\n".join(events[:-1] + [bad_bytes]))
    assert response.status_code == 207
    result = response.json()
    assert len(result["accepted"]) == len(events) - 1
    [rejection] = result["rejected"]
    assert rejection["index"] == len(events) - 1 and rejection["event_id"] == bad["event_id"]
    assert rejection["field"] == "payload.surviving_fraction"
    assert len(read_topic(kafka, "events.raw")) == len(events) - 1
    [dead] = read_topic(kafka, "events.deadletter")
    headers = {name: value.decode() for name, value in dead.headers}
    assert dead.value == bad_bytes
    assert "payload.surviving_fraction" in headers["reason"]
    assert headers["kind"] == "schema_violation" and headers["step"] == "ingest.validate"
    assert headers["org_id"] == "org-test" and headers["time"]


def test_refusals_have_their_status_codes(kafka: Settings) -> None:
    events = _events(1)
    tool_events = b"\n".join(e for e in events if b'"tool.called"' in e)
    config = ingest_config(caps=Caps(max_batch_events=5))
    with running_server(kafka, config) as server:
        assert server.post(events[0], key="rsk_wrong").status_code == 401
        no_key = httpx.post(f"{server.url}/v1/events", content=events[0], timeout=10)
        assert no_key.status_code == 401
        assert server.post(tool_events, key=EDIT_ONLY_KEY).status_code == 403
        assert server.post(b"\n".join(events)).status_code == 413
        assert server.post(b"not json").status_code == 400
        assert server.post(events[0], **{"Content-Encoding": "br"}).status_code == 415
    assert read_topic(kafka, "events.raw") == []


def test_a_key_over_its_rate_gets_429_with_retry_after(kafka: Settings) -> None:
    events = _events(2)
    with running_server(kafka, ingest_config(rate_per_s=1.0, burst=10.0)) as server:
        assert server.post(b"\n".join(events[:9])).status_code == 200
        limited = server.post(b"\n".join(events[9:]))
    assert limited.status_code == 429
    assert int(limited.headers["Retry-After"]) >= 1


def test_health_metrics_and_openapi(kafka: Settings) -> None:
    with running_server(kafka) as server:
        server.post(b"\n".join(_events(1)))
        assert httpx.get(f"{server.url}/livez").status_code == 200
        assert httpx.get(f"{server.url}/readyz").status_code == 200
        accepted = metric(server.url, "rewardstream_ingest_events_accepted_total")
        answered = metric(server.url, "rewardstream_ingest_requests_total", status="200")
        document = httpx.get(f"{server.url}/openapi.json").json()
    assert (accepted, answered) == (9.0, 1.0)
    operation = document["paths"]["/v1/events"]["post"]
    assert {"200", "207", "400", "401", "403", "413", "429", "503"} <= set(operation["responses"])
    assert "application/x-ndjson" in operation["requestBody"]["content"]
    assert "ToolCalled" in document["components"]["schemas"]
