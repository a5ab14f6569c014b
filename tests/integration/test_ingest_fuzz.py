"""Fuzzing the running ingest server from its own OpenAPI document (schemathesis) and with raw
bytes under every Content-Encoding, from a fixed Hypothesis seed (printed with the figures).

While the broker is up, no answer is a 5xx: ingest waits up to ``ACK_TIMEOUT_S`` for Kafka's
acknowledgement, which a broker that is up gives, so a 503 there would be a fault. While the
broker is down (the private broker, stopped), the only 5xx is 503, every one with Retry-After,
and a valid event gets one. Bounded to a few hundred requests; prints how many of each status
it saw."""

from __future__ import annotations

import collections
import gzip
from collections.abc import Callable

import httpx
import pytest
import schemathesis
import zstandard
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from harness.samples import sample_trajectory
from infra import broker
from infra.settings import Settings
from schemas.events import EventAdapter
from tests.support.ingest_support import TEST_KEY, IngestServer, ingest_config, running_server

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SEED = 20261203
ACK_TIMEOUT_S = 60.0  # a broker that is up acknowledges well within it, however busy the machine
RETRY_AFTER_S = 2
_AUTH = {"Authorization": f"Bearer {TEST_KEY}"}

Counts = collections.Counter[tuple[str, int]]
# Judges one answer: (status, Retry-After) -> what is wrong with it, or None.
Check = Callable[[int, str | None], str | None]


def _encode(body: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.compress(body)
    if encoding == "zstd":
        return zstandard.ZstdCompressor().compress(body)
    return body


def _fuzz(server: IngestServer, counts: Counts, check: Check, examples: int) -> None:
    """Every operation of the OpenAPI document (valid and invalid requests), then raw bytes
    under each encoding (or claiming one they lack); ``check`` judges each answer."""
    hypothesis = settings(max_examples=examples, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck))
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    for operation in (result.ok() for result in schema.get_all_operations()):
        # Only the POSTs have inputs to make invalid; the GETs take none.
        modes = list(schemathesis.GenerationMode) if operation.method.upper() == "POST" \
            else [schemathesis.GenerationMode.POSITIVE]
        for mode in modes:
            @seed(SEED)
            @hypothesis
            @given(case=operation.as_strategy(generation_mode=mode))
            def call(case: schemathesis.Case) -> None:
                response = case.call(base_url=server.url, headers=_AUTH, timeout=2 * ACK_TIMEOUT_S)
                counts[(f"{operation.label} [{mode.value}]", response.status_code)] += 1
                retry_after = response.headers.get("retry-after")  # a list: every value sent
                problem = check(response.status_code, ",".join(retry_after or []) or None)
                assert problem is None, (problem, response.text[:500])

            call()

    @seed(SEED)
    @hypothesis
    @given(body=st.one_of(st.binary(max_size=2000), st.text(max_size=500).map(str.encode)),
           encoding=st.sampled_from(["identity", "gzip", "zstd"]), lie=st.booleans())
    def raw(body: bytes, encoding: str, lie: bool) -> None:
        # ``lie``: claim an encoding the bytes do not have.
        sent = body if lie else _encode(body, encoding)
        response = httpx.post(f"{server.url}/v1/events", content=sent, timeout=2 * ACK_TIMEOUT_S,
                              headers={**_AUTH, "Content-Encoding": encoding})
        counts[("POST /v1/events [raw bytes]", response.status_code)] += 1
        problem = check(response.status_code, response.headers.get("retry-after"))
        assert problem is None, (problem, response.text[:500])

    raw()


def _table(counts: Counts, title: str) -> str:
    rows = [f"  {label:40s} {status}: {n}" for (label, status), n in sorted(counts.items())]
    return "\n".join([f"{title} (Hypothesis seed {SEED}), requests by operation and status:",
                      *rows])


def _up(status: int, retry_after: str | None) -> str | None:
    return f"{status} while the broker is up" if status >= 500 else None


def _down(status: int, retry_after: str | None) -> str | None:
    if status >= 500 and status != 503:
        return f"{status}: the only 5xx is 503"
    if status == 503 and retry_after != str(RETRY_AFTER_S):
        return f"503 with Retry-After {retry_after!r}, not {RETRY_AFTER_S}"
    return None


def test_no_server_error_under_fuzzing_while_the_broker_is_up(
        kafka: Settings, report_figures: Callable[[str], None]) -> None:
    counts: Counts = collections.Counter()
    with running_server(kafka, ingest_config(ack_timeout_s=ACK_TIMEOUT_S)) as server:
        _fuzz(server, counts, _up, examples=50)
    report_figures(_table(counts, "fuzzing ingest, broker up"))
    assert sum(counts.values()) >= 100  # hypothesis stops early on small spaces
    assert any(status == 200 for _, status in counts)  # valid requests were among them


def test_only_503_with_retry_after_under_fuzzing_while_the_broker_is_down(
        outage_broker: Settings, report_figures: Callable[[str], None]) -> None:
    counts: Counts = collections.Counter()
    config = ingest_config(ack_timeout_s=1.5, unavailable_retry_after_s=RETRY_AFTER_S)
    with running_server(outage_broker, config) as server:
        broker.stop(outage_broker)
        try:
            _fuzz(server, counts, _down, examples=20)
            valid = server.post(EventAdapter.dump_json(sample_trajectory("traj-fuzz")[0]))
            counts[("POST /v1/events [one valid event]", valid.status_code)] += 1
        finally:
            broker.start(outage_broker)
    report_figures(_table(counts, "fuzzing ingest, broker down"))
    assert (valid.status_code, valid.headers.get("retry-after")) == (503, str(RETRY_AFTER_S))
    # The batch was handed to the producer, which keeps trying: the words must not say it was
    # lost (it may land once the broker is back), and must say how a resend is answered.
    detail = valid.json()["detail"]
    assert "may still be written" in detail and "answered as duplicates" in detail, detail
    assert sum(counts.values()) >= 40
