"""Fuzzing the running ingest server from its own OpenAPI document (schemathesis) and with raw
bytes under every Content-Encoding: no 5xx may come back except 503. Bounded to a few hundred
requests so it finishes well under a minute; prints how many of each status it saw."""

from __future__ import annotations

import collections
import gzip

import httpx
import pytest
import schemathesis
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ingest_support import TEST_KEY, running_server

from infra.settings import Settings

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

_EXAMPLES = 50
_AUTH = {"Authorization": f"Bearer {TEST_KEY}"}
_HYPOTHESIS = settings(max_examples=_EXAMPLES, deadline=None, database=None,
                       suppress_health_check=list(HealthCheck))


def _encode(body: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.compress(body)
    if encoding == "zstd":
        return zstandard.ZstdCompressor().compress(body)
    return body


def test_no_server_errors_but_503_under_fuzzing(
    kafka: Settings, capsys: pytest.CaptureFixture[str],
) -> None:
    counts: collections.Counter[tuple[str, int]] = collections.Counter()
    with running_server(kafka) as server:
        schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
        for operation in (result.ok() for result in schema.get_all_operations()):
            # Only the POST has inputs to make invalid; the GETs take none.
            modes = list(schemathesis.GenerationMode) if operation.method.upper() == "POST" \
                else [schemathesis.GenerationMode.POSITIVE]
            for mode in modes:
                @given(case=operation.as_strategy(generation_mode=mode))
                @_HYPOTHESIS
                def call(case: schemathesis.Case) -> None:
                    response = case.call(base_url=server.url, headers=_AUTH, timeout=30)
                    counts[(f"{operation.label} [{mode.value}]", response.status_code)] += 1
                    assert response.status_code < 500 or response.status_code == 503, \
                        response.text[:500]

                call()

        @given(body=st.one_of(st.binary(max_size=2000),
                              st.text(max_size=500).map(str.encode)),
               encoding=st.sampled_from(["identity", "gzip", "zstd"]),
               lie=st.booleans())
        @_HYPOTHESIS
        def raw(body: bytes, encoding: str, lie: bool) -> None:
            # ``lie``: claim an encoding the bytes do not have.
            sent = body if lie else _encode(body, encoding)
            response = httpx.post(f"{server.url}/v1/events", content=sent, timeout=30,
                                  headers={**_AUTH, "Content-Encoding": encoding})
            counts[("POST /v1/events [raw bytes]", response.status_code)] += 1
            assert response.status_code < 500 or response.status_code == 503, response.text[:500]

        raw()
    with capsys.disabled():
        print("\nfuzz requests by operation and status:")
        for (label, status), n in sorted(counts.items()):
            print(f"  {label:40s} {status}: {n}")
    assert sum(counts.values()) >= 2 * _EXAMPLES  # hypothesis stops early on small spaces
