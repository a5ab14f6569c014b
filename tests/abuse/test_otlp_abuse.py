"""Hostile OTLP/HTTP requests against ``POST /v1/traces`` of a real ``rewardstream serve ingest``
process on the real broker: malformed and deeply nested protobuf, deep and bomb-like JSON, huge
attribute values, unusable ids and times, refused keys and encodings. Asserted: no 5xx (the
broker is up, so not even 503); each class gets its statuses; every answer's rejected spans are
what its class requires; the events answered accepted are on events.raw once each, none a
completion, and nothing else is; the dead letters name span attributes, not event fields; the
server's peak RSS stays bounded."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from infra.kafka_io import read_topic
from infra.settings import Settings
from serving.ingest.process import ingest_process
from tests.support.abuse_figures import BROKER_UP_ENV, Figures
from tests.support.hostile_bodies import key_entries
from tests.support.hostile_otlp import OTLP_CLASSES, OtlpProbe

pytestmark = [pytest.mark.abuse, pytest.mark.kafka, pytest.mark.slow]

SEED = 20261201
CLIENTS = 4
RSS_BOUND_BYTES = 400 << 20  # as for /v1/events: parsing is bounded before it starts
# What a dead letter of a span may name: span attributes and fields, or nothing (too large).
SPAN_FIELDS = {"gen_ai.tool.name", "user.id", "traceId", "spanId", "endTimeUnixNano",
               "startTimeUnixNano", "type", ""}


def _rejected_spans(status: int, response: httpx.Response) -> int:
    if status != 200:
        return 0
    if response.headers["content-type"].startswith("application/json"):
        partial = response.json().get("partialSuccess", {})
        return int(partial.get("rejectedSpans", 0))
    return ExportTraceServiceResponse.FromString(response.content).partial_success.rejected_spans


def _send(url: str, task: tuple[int, str]) -> tuple[OtlpProbe, httpx.Response]:
    index, kind = task
    probe = OTLP_CLASSES[kind][1](random.Random(f"{SEED}-{index}"))
    headers = dict(probe.headers)
    if probe.key is not None:
        headers["Authorization"] = f"Bearer {probe.key}"
    with httpx.Client(timeout=120) as client:
        return probe, client.post(f"{url}/v1/traces", content=probe.body, headers=headers)


def test_otlp_ingest_survives_hostile_requests(kafka: Settings,
                                               report_figures: Callable[[str], None]) -> None:
    keys = key_entries("otlp-abuse")
    tasks = [kind for kind, (n, _) in OTLP_CLASSES.items() for _ in range(n)]
    random.Random(SEED).shuffle(tasks)
    figures = Figures("OTLP ingest under hostile requests (rewardstream serve ingest, real broker)")
    started = time.monotonic()
    with ingest_process(kafka, keys, BROKER_UP_ENV) as server, \
            ThreadPoolExecutor(CLIENTS) as pool:
        answers = list(pool.map(lambda task: _send(server.url, task), enumerate(tasks)))
        peak_rss = server.peak_rss_bytes()
    elapsed_s = time.monotonic() - started

    expected_events, expected_dead = 0, 0
    for probe, response in answers:
        status = response.status_code
        assert status < 500, (probe.kind, status, response.text[:300])
        rejected = _rejected_spans(status, response)
        figures.count(probe.kind, status, (probe.events or 0) if status == 200 else 0,
                      ["span"] * rejected)
        assert status in probe.statuses, (probe.kind, status, response.text[:300])
        if status == 200:
            assert rejected == probe.rejected_spans, (probe.kind, response.content[:500])
            expected_events += probe.events or 0
            expected_dead += rejected
        elif status == 403:
            expected_dead += probe.rejected_spans or 0

    events = [json.loads(r.value) for r in read_topic(kafka, "events.raw")]
    dead = [{k: v.decode() for k, v in r.headers} for r in read_topic(kafka, "events.deadletter")]
    report_figures(figures.table([
            f"{len(answers)} requests in {elapsed_s:.0f} s with {CLIENTS} clients; events.raw: "
            f"{len(events)} events ({expected_events} expected); events.deadletter: {len(dead)} "
            f"({Counter(d['field'] or '(too large)' for d in dead).most_common()})",
            f"ingest peak RSS (VmHWM): {peak_rss / (1 << 20):.0f} MiB "
            f"(bound {RSS_BOUND_BYTES >> 20} MiB)"]))

    assert len(answers) >= 500
    assert len(events) == expected_events
    assert len({e["event_id"] for e in events}) == len(events)
    assert {e["type"] for e in events} <= {"tool.called"}
    assert all(e["org_id"] == "otlp-abuse" for e in events)
    assert len(dead) == expected_dead
    assert {d["field"] for d in dead} <= SPAN_FIELDS, Counter(d["field"] for d in dead)
    assert peak_rss < RSS_BOUND_BYTES
