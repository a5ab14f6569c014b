"""Over 10,000 hostile requests against ingest running as a real ``rewardstream serve ingest``
process on the real broker, from seeded generators of every class of bad input plus
schemathesis with a fixed seed. Asserted: no 5xx (the broker is up, so not even 503); every
event gets the verdict its class requires; every event answered accepted is on events.raw
exactly once, and nothing else is; every rejected event is on events.deadletter with its kind,
field and reason (and its bytes); the server's peak RSS stays under a stated bound. Prints the
figures per class."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, seed, settings

from infra.kafka_io import read_topic
from infra.settings import Settings
from serving.ingest.process import IngestProcess, ingest_process
from tests.support.abuse_figures import BROKER_UP_ENV, Figures
from tests.support.hostile_bodies import ALL_TYPES_KEY, BODY_CLASSES, Probe, batch, key_entries
from tests.support.hostile_events import EVENT_CLASSES, HostileEvents

pytestmark = [pytest.mark.abuse, pytest.mark.kafka, pytest.mark.slow]

SEED = 20261130
REQUESTS_PER_EVENT_CLASS = 650
CLIENTS = 6
# Python, FastAPI, aiokafka and pydantic take ~110 MiB; each request in flight may hold its
# body as sent, decompressed and split (3 × the 10 MiB cap): 6 clients → ~300 MiB at worst.
RSS_BOUND_BYTES = 400 << 20


@dataclass
class _Answer:
    probe: Probe
    status: int
    body: Any


class _Run:
    """Sends probes from several threads and keeps every answer."""

    def __init__(self, server: IngestProcess) -> None:
        self.url = f"{server.url}/v1/events"
        self.local = threading.local()
        self.answers: list[_Answer] = []
        self.lock = threading.Lock()

    def _state(self) -> tuple[httpx.Client, HostileEvents]:
        if not hasattr(self.local, "client"):
            self.local.client = httpx.Client(timeout=60)
            self.local.events = HostileEvents(random.Random(0))
        return self.local.client, self.local.events

    def send(self, task: tuple[int, str]) -> None:
        index, kind = task
        client, events = self._state()
        events.rng = rng = random.Random(f"{SEED}-{index}")
        if kind in EVENT_CLASSES:
            hostile = [EVENT_CLASSES[kind](events)]
            probe = batch(kind, hostile + [events.good_event() for _ in range(rng.randint(0, 2))],
                          rng, array_ok=kind not in {"invalid UTF-8", "nesting", "huge numbers"})
        else:
            probe = BODY_CLASSES[kind][1](events, rng)
        headers = dict(probe.headers)
        if probe.key is not None:
            headers["Authorization"] = f"Bearer {probe.key}"
        response = client.post(self.url, content=probe.chunks() if probe.chunks else probe.body,
                               headers=headers)
        try:
            body = response.json()
        except ValueError:
            body = response.text
        with self.lock:
            self.answers.append(_Answer(probe, response.status_code, body))


def _tasks() -> Iterator[tuple[int, str]]:
    kinds = [k for k in EVENT_CLASSES for _ in range(REQUESTS_PER_EVENT_CLASS)]
    kinds += [k for k, (n, _) in BODY_CLASSES.items() for _ in range(n)]
    random.Random(SEED).shuffle(kinds)
    return enumerate(kinds)


def _schemathesis(server: IngestProcess, figures: Figures, answers: list[dict[str, Any]]) -> None:
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    auth = {"Authorization": f"Bearer {ALL_TYPES_KEY}"}
    for operation in (result.ok() for result in schema.get_all_operations()):
        modes = list(schemathesis.GenerationMode) if operation.method.upper() == "POST" \
            else [schemathesis.GenerationMode.POSITIVE]
        for mode in modes:
            @seed(SEED)
            @settings(max_examples=40, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy(generation_mode=mode))
            def call(case: schemathesis.Case) -> None:
                response = case.call(base_url=server.url, headers=auth, timeout=60)
                assert response.status_code < 500, response.text[:300]
                events = operation.path == "/v1/events" and response.status_code in (200, 207,
                                                                                      403)
                result = response.json() if events else {"accepted": [], "rejected": []}
                figures.count("schemathesis", response.status_code, len(result["accepted"]),
                              [r["kind"] for r in result["rejected"]])
                if events:
                    answers.append(result)

            call()


def _check_verdicts(answer: _Answer, dead: list[tuple[Any, ...]],
                    accepted: list[str]) -> tuple[int, list[str]]:
    """Check one answer against its probe; returns (events accepted, kinds rejected)."""
    probe, status = answer.probe, answer.status
    assert status < 500, (probe.kind, status, answer.body)
    assert status in probe.statuses, (probe.kind, status, str(answer.body)[:300])
    if status not in (200, 207, 403):
        return 0, []
    result = answer.body
    accepted.extend(result["accepted"])
    for rejection in result["rejected"]:
        original = probe.events[rejection["index"]].raw if probe.events else None
        dead.append((rejection["kind"], rejection["field"], rejection["reason"], original))
    if probe.events is not None:
        assert len(result["accepted"]) + len(result["rejected"]) == len(probe.events)
        rejected = {r["index"]: r for r in result["rejected"]}
        for index, event in enumerate(probe.events):
            if event.expect.kind is None:
                assert index not in rejected, (probe.kind, rejected.get(index), event.raw[:300])
                assert event.event_id in result["accepted"]
            else:
                got = rejected[index]
                assert got["kind"] == event.expect.kind, (probe.kind, got, event.raw[:300])
                assert (got["field"] or "").startswith(event.expect.field or ""), (got, event)
    return len(result["accepted"]), [r["kind"] for r in result["rejected"]]


def test_ingest_survives_hostile_requests(kafka: Settings,
                                          report_figures: Callable[[str], None]) -> None:
    keys = key_entries("abuse")
    figures = Figures("ingest under hostile requests (rewardstream serve ingest, real broker)")
    started = time.monotonic()
    with ingest_process(kafka, keys, BROKER_UP_ENV) as server:
        run = _Run(server)
        with ThreadPoolExecutor(CLIENTS) as pool:
            list(pool.map(run.send, _tasks()))
        generated = len(run.answers)
        schemathesis_answers: list[dict[str, Any]] = []
        _schemathesis(server, figures, schemathesis_answers)
        peak_rss = server.peak_rss_bytes()
    elapsed_s = time.monotonic() - started

    dead: list[tuple[Any, ...]] = []
    accepted: list[str] = []
    for answer in run.answers:
        count, kinds = _check_verdicts(answer, dead, accepted)
        figures.count(answer.probe.kind, answer.status, count, kinds)
    for result in schemathesis_answers:
        accepted += result["accepted"]
        dead += [(r["kind"], r["field"], r["reason"], None) for r in result["rejected"]]

    on_log = Counter(json.loads(r.value)["event_id"] for r in read_topic(kafka, "events.raw"))
    dead_letters = [({k: v.decode() for k, v in r.headers}, r.value)
                    for r in read_topic(kafka, "events.deadletter")]
    report_figures(figures.table([
            f"generated requests: {generated}; with schemathesis: {figures.requests}; "
            f"{elapsed_s:.0f} s with {CLIENTS} clients",
            f"events.raw: {sum(on_log.values())} records, {len(accepted)} events answered "
            f"accepted; events.deadletter: {len(dead_letters)} records, {len(dead)} rejections",
            f"ingest peak RSS (VmHWM): {peak_rss / (1 << 20):.0f} MiB "
            f"(bound {RSS_BOUND_BYTES >> 20} MiB)"]))

    assert generated >= 10_000
    assert Counter(accepted) == {event_id: 1 for event_id in accepted}  # each answered once
    assert all(on_log[event_id] == 1 for event_id in accepted)
    assert set(on_log) == set(accepted) and max(on_log.values()) == 1
    assert Counter((h["kind"], h["field"] or None, h["reason"]) for h, _ in dead_letters) == \
        Counter((kind, field, reason) for kind, field, reason, _ in dead)
    stored = Counter((h["kind"], h["reason"], value) for h, value in dead_letters)
    for kind, _, reason, original in dead:
        if original is not None:
            assert stored[(kind, reason, original[:256 << 10])] > 0, (kind, reason)
    assert peak_rss < RSS_BOUND_BYTES
