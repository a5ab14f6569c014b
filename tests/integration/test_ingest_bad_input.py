"""What a buggy or hostile producer sends, through the real server and broker: each bad event is
rejected alone with its field and reason and dead-lettered, the rest of its batch is appended,
and nothing gets a 5xx or stops the service."""

from __future__ import annotations

import gzip
import json
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from harness.samples import sample_trajectory
from infra.settings import Settings
from schemas.events import EventAdapter
from tests.support.ingest_support import read_topic, running_server
from tests.support.metrics import metric

pytestmark = pytest.mark.kafka


def _trajectory() -> dict[str, dict[str, object]]:
    events = sample_trajectory(f"traj-{uuid.uuid4().hex[:8]}")
    return {e.type: json.loads(EventAdapter.dump_json(e)) for e in events}


def _text(event: dict[str, object]) -> str:
    return json.dumps(event, ensure_ascii=False)


def _bad_events() -> list[tuple[bytes, str, str, str]]:
    """(event bytes, kind, field, words of the reason): one for each problem found so far."""
    t = _trajectory()
    old = (datetime.now(UTC) - timedelta(days=40)).isoformat()
    huge_key = dict(t["edit.decided"]) | {"k" * 900_000: 1}
    return [
        (re.sub(r'"latency_ms": [0-9.]+', '"latency_ms": 1e999', _text(t["completion.served"]))
         .encode(), "schema_violation", "payload.latency_ms", "finite number"),
        (re.sub(r'"turns": \d+', '"turns": ' + "9" * 400, _text(t["trajectory.ended"])).encode(),
         "schema_violation", "payload.turns", "less than or equal to 100000"),
        (_text(t["edit.decided"] | {"sent_at": "9999-12-31T23:59:59Z"}).encode(),
         "schema_violation", "sent_at", "less than 2100"),
        (_text(t["followup.sent"] | {"occurred_at": "0001-01-01T00:00:00Z"}).encode(),
         "schema_violation", "occurred_at", "greater than or equal to 2000"),
        (_text(t["edit.proposed"] | {"occurred_at": old, "sent_at": old}).encode(),
         "time_out_of_window", "occurred_at", "more than 30 days before the server clock"),
        (b'{"a": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "malformed_json", "(event)",
         "nested deeper than 32 levels"),
        (_text(t["tool.called"]).replace('"type"', '"type": "edit.decided", "type"', 1).encode(),
         "malformed_json", "type", "appears twice"),
        (_text(t["clarification.asked"] | {"user": "caf\u00e9"}).encode().replace(b"\xc3", b""),
         "malformed_json", "(event)", "not UTF-8"),
        (_text(huge_key).encode(), "schema_violation", "k" * 199 + "…", "Extra inputs"),
    ]


def test_each_bad_event_is_rejected_alone_and_the_rest_appended(kafka: Settings) -> None:
    good = [EventAdapter.dump_json(e) for e in sample_trajectory(f"good-{uuid.uuid4().hex[:8]}")]
    bad = _bad_events()
    lines = [line for pair in zip(good, [b for b, *_ in bad], strict=False) for line in pair]
    with running_server(kafka) as server:
        response = server.post(gzip.compress(b"\n".join(lines)), **{"Content-Encoding": "gzip"})
        again = server.post(b"\n".join(good))  # the service goes on as before
    assert response.status_code == 207, response.text[:500]
    result = response.json()
    assert sorted(result["accepted"]) == sorted(json.loads(e)["event_id"] for e in good[:len(bad)])
    assert len(result["rejected"]) == len(bad)
    for rejection, (raw, kind, field, words) in zip(result["rejected"], bad, strict=False):
        assert rejection["index"] == lines.index(raw)
        assert (rejection["kind"], rejection["field"]) == (kind, field), rejection
        assert words in rejection["reason"], rejection
    assert again.status_code == 200 and len(again.json()["duplicates"]) == len(bad)
    appended = [json.loads(r.value)["event_id"] for r in read_topic(kafka, "events.raw")]
    assert sorted(appended) == sorted(json.loads(e)["event_id"] for e in good)
    dead = read_topic(kafka, "events.deadletter")
    assert len(dead) == len(bad)
    for record, (raw, kind, field, words) in zip(dead, bad, strict=False):
        headers = {name: value.decode() for name, value in record.headers}
        assert (headers["kind"], headers["field"]) == (kind, field)
        assert words in headers["reason"] and record.value == raw[:256 * 1024]
        assert int(headers["original_bytes"]) == len(raw)


@pytest.mark.parametrize("body, headers, status, words", [
    (b"[" * 100_000 + b"]" * 100_000, {}, 400, "deeper than 32 levels"),
    (b'[{"a": ' + b"[" * 50_000 + b"]" * 50_000 + b"}]", {}, 400, "deeper than 32 levels"),
    (b'[{"turns": ' + b"1" * 5000 + b"}]", {}, 400, "malformed at element 0"),
    (gzip.compress(b" " * (5 << 20)), {"Content-Encoding": "gzip"}, 413, "over 100 times"),
    (b"{" * (11 << 20), {}, 413, "byte cap"),
])
def test_whole_bodies_that_cannot_be_read_get_a_4xx_naming_why(
    kafka: Settings, body: bytes, headers: dict[str, str], status: int, words: str,
) -> None:
    with running_server(kafka) as server:
        response = server.post(body, **headers)
    assert response.status_code == status and words in response.json()["detail"]
    assert read_topic(kafka, "events.raw") == []


def test_an_unexpected_error_is_answered_400_and_counted_never_500(
    kafka: Settings, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import serving.ingest.app as ingest_app

    async def broken_reader(*_: object) -> bytes:
        raise RuntimeError("a bug in reading bodies")

    monkeypatch.setattr(ingest_app, "read_capped", broken_reader)
    with running_server(kafka) as server:
        response = server.post(b"{}")
        unexpected = metric(server.url, "rewardstream_ingest_unexpected_errors_total")
        answered = metric(server.url, "rewardstream_ingest_requests_total", status="400")
    assert response.status_code == 400
    assert "RuntimeError" in response.json()["detail"]
    assert (unexpected, answered) == (1.0, 1.0)
