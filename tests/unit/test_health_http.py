"""The workers' /metrics, /readyz and /livez: figures read at scrape time in Prometheus' text
format (labelled ones present at zero from the start), readiness that follows its check, a
taken port that costs the endpoints and not the worker; and the repeats a client library logs
while Kafka is away, held back."""

from __future__ import annotations

import logging
import socket
from collections import Counter
from dataclasses import dataclass, field

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from infra.health_http import Figure, FiguresCollector, HealthServer, service_registry
from infra.log_filters import RepeatLimiter


@dataclass
class _Totals:
    records: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)


_FIGURES = (
    Figure("rewardstream_test_records", "records", "counter", "Records since start"),
    Figure("rewardstream_test_events", "by_kind", "counter", "Events by kind", "kind",
           ("fired", "resolved")),
)


def test_figures_readiness_and_liveness_are_served() -> None:
    totals, problem = _Totals(), ["starting"]
    health = HealthServer(service_registry(FiguresCollector(totals, _FIGURES)),
                          lambda: problem[0])
    assert health.serve(0) is False  # 0: not at all
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert health.serve(port)
    try:
        url = f"http://127.0.0.1:{port}"
        samples = _samples(url)
        assert samples[("rewardstream_test_events_total", "fired")] == 0  # before any event
        totals.records, totals.by_kind["fired"] = 3, 2
        samples = _samples(url)
        assert samples[("rewardstream_test_records_total", "")] == 3
        assert samples[("rewardstream_test_events_total", "fired")] == 2
        assert samples[("process_resident_memory_bytes", "")] > 0
        not_ready = httpx.get(f"{url}/readyz")
        assert not_ready.status_code == 503 and not_ready.json()["detail"] == "starting"
        problem[0] = None  # type: ignore[call-overload]
        assert httpx.get(f"{url}/readyz").json() == {"status": "ready"}
        assert httpx.get(f"{url}/livez").status_code == 200
        assert httpx.get(f"{url}/nothing").status_code == 404
    finally:
        health.close()


def test_a_taken_port_is_logged_with_the_option_that_moves_it(
        caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        health = HealthServer(service_registry(), lambda: None)
        assert health.serve(held.getsockname()[1], option="--metrics-port") is False
    assert "move them with --metrics-port" in caplog.text


def _samples(url: str) -> dict[tuple[str, str], float]:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    return {(s.name, s.labels.get("kind", "")): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_repeated_client_lines_are_held_back_and_counted() -> None:
    limiter = RepeatLimiter(("aiokafka",), interval_s=60.0)

    def record(name: str, message: str) -> logging.LogRecord:
        return logging.LogRecord(name, logging.ERROR, __file__, 1, message, (), None)

    lines = [record("aiokafka.conn", "Unable connect to node with id 1") for _ in range(50)]
    passed = [line for line in lines if limiter.filter(line)]
    assert len(passed) == 1
    assert limiter.filter(record("aiokafka.conn", "another failure"))
    assert all(limiter.filter(record("rewardstream.kafka", "ours")) for _ in range(3))
    limiter.interval_s = 0.0  # the interval is over: the next one says how many were held
    again = record("aiokafka.conn", "Unable connect to node with id 1")
    assert limiter.filter(again) and "(49 more like this in the last" in again.getMessage()
