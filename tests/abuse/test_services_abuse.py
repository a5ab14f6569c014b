"""The model gateway (on the torch engine with the tiny model), the engine itself and the
console, each served by uvicorn, against schemathesis with a fixed seed over every route and
against hostile bodies of every class: no route answers 5xx (the backend and Kafka are up, so
not even 502/503). The gateway writes to the real broker through its spool on disk: once the
spool is empty, every completion it answered is on events.raw, and nothing else is (every
record a valid event of the key's org, written by the gateway). Prints the figures per service
and class."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, seed, settings
from hypothesis.errors import Unsatisfiable
from prometheus_client import generate_latest

from infra.kafka_io import read_topic
from infra.settings import Settings
from schemas.events import GATEWAY_PRODUCER, CompletionServed, parse_event
from serving.console.app import create_app as create_console_app
from serving.console.auth import StaffAuth
from serving.console.state import ConsoleState
from serving.engine.cli import build_engine_app
from serving.gateway.app import GatewayConfig, create_gateway_app
from serving.gateway.backend import BackendClient
from serving.gateway.sinks import KafkaEventSink
from serving.local_server import serve_in_thread
from tests.support.abuse_figures import Figures
from tests.support.hostile_http import Attempt, hostile_bodies, wrong_types
from tests.support.metrics import sample_sum
from tests.support.service_keys import GATEWAY_HEADERS, gateway_auth, staff_keys
from tests.support.waits import wait_for

pytestmark = [pytest.mark.abuse, pytest.mark.kafka, pytest.mark.slow]

SEED = 20261130
_COMPLETION_ROUTES = ("/v1/completions", "/v1/chat/completions")
STAFF = {"X-Staff-Key": "ana-abuse-key"}
_SAMPLING_WRONG: dict[str, list[Any]] = {
    "model": [1, {}, "m" * 1000], "max_tokens": ["8", -1, 0, 10 ** 30, 1.5],
    "temperature": ["hot", -1, 1e300, None], "top_p": [0, 2, "x"], "top_k": [-5, 10 ** 30, "5"],
    "seed": [2 ** 70, -(2 ** 70), "1"], "stream": ["yes", 1], "n": [2, 0, "1"],
    "stream_options": [[], "x", {"include_usage": "yes"}], "user": [5, "u" * 1000],
    "metadata": [[], "x", {"trajectory_id": 5}, {"trajectory_id": "t" * 500}],
    "return_token_ids": ["x", 2], "min_p": [5, "x"], "frequency_penalty": [1e300, "x"],
}
_CHAT_WRONG = _SAMPLING_WRONG | {
    "messages": ["x", [], [1], [{"role": 1}], [{"role": "user", "content": 5}],
                 [{"role": "user", "content": [{"text": 5}]}], [{"content": "no role"}]],
    "logprobs": ["x", 3], "top_logprobs": [100, -1, "2"],
}
_COMPLETION_WRONG = _SAMPLING_WRONG | {
    "prompt": [{}, [], [-1], [10 ** 12], [1.5], "", None, ["a", 1]], "logprobs": [-1, 1000, "x"],
}


def _json(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()


def _completion_id(content_type: str, body: bytes) -> str:
    """The id of a completion answered whole (JSON) or streamed (its first chunk)."""
    if content_type.startswith("text/event-stream"):
        body = next(line for line in body.splitlines() if line.startswith(b"data: {"))[6:]
    return str(json.loads(body)["id"])


def _schemathesis(base_url: str, document: str, headers: dict[str, str], figures: Figures,
                  service: str, max_examples: int, answered: list[str] | None = None) -> None:
    schema = schemathesis.openapi.from_url(f"{base_url}{document}", headers=headers)
    for operation in (result.ok() for result in schema.get_all_operations()):
        # An operation without inputs has no invalid request to make.
        modes = list(schemathesis.GenerationMode) if any(operation.iter_parameters()) \
            or operation.get_request_payload_content_types() \
            else [schemathesis.GenerationMode.POSITIVE]
        for mode in modes:
            @seed(SEED)
            @settings(max_examples=max_examples, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy(generation_mode=mode))
            def call(case: schemathesis.Case) -> None:
                response = case.call(base_url=base_url, headers=headers, timeout=120)
                figures.count(f"{service}: schemathesis", response.status_code)
                assert response.status_code < 500, (operation.label, response.text[:300])
                if answered is not None and response.status_code == 200 \
                        and operation.path in _COMPLETION_ROUTES:
                    [content_type] = response.headers["content-type"]
                    answered.append(_completion_id(content_type, response.content))

            try:
                call()
            except Unsatisfiable:  # no invalid request exists (a free-form path parameter)
                continue


def _hammer(base_url: str, path: str, attempts: Iterable[Attempt], figures: Figures,
            service: str, headers: dict[str, str] | None = None,
            answered: list[str] | None = None) -> None:
    with httpx.Client(base_url=base_url, timeout=120) as client:
        for attempt in attempts:
            response = client.post(path, content=attempt.body,
                                   headers={**(headers or {}), **attempt.headers})
            figures.count(f"{service}: {attempt.kind}", response.status_code)
            assert response.status_code < 500, (path, attempt.kind, attempt.body[:200],
                                                response.text[:300])
            if answered is not None and response.status_code == 200 \
                    and path in _COMPLETION_ROUTES:
                answered.append(_completion_id(response.headers["content-type"],
                                               response.content))


def _attack(service: str, url: str, bodies: dict[str, tuple[dict[str, Any], dict[str, list[Any]]]],
            headers: dict[str, str], figures: Figures, rng: random.Random,
            answered: list[str] | None = None) -> None:
    """Every route of ``bodies`` with its valid body, hostile bodies and wrong types, wrong
    methods and paths, then schemathesis over the service's OpenAPI document."""
    for path, (valid, wrong) in bodies.items():
        _hammer(url, path, [Attempt("valid", _json(valid))], figures, service, headers, answered)
        _hammer(url, path, hostile_bodies(valid, rng, 2 << 20), figures, service, headers,
                answered)
        _hammer(url, path, wrong_types(valid, wrong), figures, service, headers, answered)
    _wrong_methods_and_paths(url, list(bodies), figures, service, headers)
    _schemathesis(url, "/openapi.json", headers, figures, service, max_examples=25,
                  answered=answered)


def _bad_headers(gateway_url: str, valid: bytes, figures: Figures, answered: list[str]) -> None:
    """A valid completion request with an overlong trajectory header, then without a valid
    key."""
    long_id = {"X-Rewardstream-Trajectory-Id": "t" * 500}
    _hammer(gateway_url, "/v1/completions",
            [Attempt("wrong types and values", valid,
                     {"Content-Type": "application/json"} | long_id)], figures, "gateway",
            GATEWAY_HEADERS, answered)
    _hammer(gateway_url, "/v1/completions", [
        Attempt("no key", valid),
        Attempt("unknown key", valid, {"Authorization": "Bearer rsk_x"}),
        Attempt("a 10,000-character key", valid, {"Authorization": "Bearer " + "k" * 10_000}),
    ], figures, "gateway", answered=answered)


def _sink_metric(sink: KafkaEventSink, name: str) -> float:
    return sample_sum(generate_latest(sink.registry).decode(), name)


def _wrong_methods_and_paths(base_url: str, paths: list[str], figures: Figures,
                             service: str, headers: dict[str, str] | None = None) -> None:
    with httpx.Client(base_url=base_url, timeout=30, headers=headers) as client:
        for path in paths + ["/nope", "/v1/../../etc/passwd", "/%00", "/" + "x" * 5000]:
            for method in ("GET", "PUT", "DELETE", "PATCH", "POST"):
                response = client.request(method, path, content=b"{}")
                figures.count(f"{service}: wrong methods and paths", response.status_code)
                assert response.status_code < 500, (method, path, response.text[:300])


def test_gateway_and_engine_never_answer_5xx(kafka: Settings, tiny_model_dir: Path,
                                             tmp_path: Path,
                                             report_figures: Callable[[str], None]) -> None:
    rng = random.Random(SEED)
    broken = tmp_path / "broken-adapter"
    broken.mkdir()
    (broken / "adapter_config.json").write_text('{"peft_type": "LORA", "r": "eight"}')
    figures = Figures("gateway and torch engine under hostile requests")
    name = tiny_model_dir.name
    engine_bodies = {
        "/v1/completions": ({"model": name, "prompt": "def f():", "max_tokens": 2},
                            _COMPLETION_WRONG),
        "/v1/chat/completions": ({"model": name, "messages": [{"role": "user", "content": "hi"}],
                                  "max_tokens": 2}, _CHAT_WRONG),
        "/v1/load_lora_adapter": ({"lora_name": "a", "lora_path": str(broken)},
                                  {"lora_name": [1, "", "n" * 1000], "lora_path": [1, "\x00"]}),
        "/v1/unload_lora_adapter": ({"lora_name": "missing"}, {"lora_name": [None, {}]}),
    }
    gateway_bodies = {
        "/v1/completions": ({"model": "rewardstream", "prompt": "def f():", "max_tokens": 2},
                            _COMPLETION_WRONG),
        "/v1/chat/completions": ({"model": "rewardstream", "max_tokens": 2,
                                  "messages": [{"role": "user", "content": "hi"}]}, _CHAT_WRONG),
    }
    answered: list[str] = []  # completions the gateway answered (200)
    sink = KafkaEventSink(kafka, tmp_path / "spool")
    try:
        with serve_in_thread(build_engine_app(tiny_model_dir)) as engine:
            config = GatewayConfig(default_max_tokens=4, max_request_bytes=1 << 20)
            app = create_gateway_app(config, BackendClient(engine.url), sink, gateway_auth())
            with serve_in_thread(app) as gateway:
                _attack("engine", engine.url, engine_bodies, {}, figures, rng)
                _attack("gateway", gateway.url, gateway_bodies, GATEWAY_HEADERS, figures, rng,
                        answered)
                _bad_headers(gateway.url, _json(gateway_bodies["/v1/completions"][0]), figures,
                             answered)
        wait_for(lambda: _sink_metric(sink, "rewardstream_gateway_spool_events") == 0, 120,
                 "the gateway's spool to empty")
        retried = _sink_metric(sink, "rewardstream_gateway_events_retried_total")
    finally:
        sink.close()
    events = [parse_event(r.value) for r in read_topic(kafka, "events.raw")]  # each valid
    logged = Counter(e.payload.completion_id for e in events if isinstance(e, CompletionServed))
    report_figures(figures.table([
            f"events.raw: {len(events)} events ({len(logged)} completions; the gateway answered "
            f"{len(answered)}), {sum(logged.values()) - len(logged)} logged twice, {retried:g} "
            f"sends retried"]))
    assert figures.statuses()[200] > 0  # valid requests were served throughout
    assert {(e.org_id, e.producer) for e in events} == {("org-test", GATEWAY_PRODUCER)}
    assert {e.type for e in events} <= {"completion.served", "tool.called"}
    assert sorted(logged) == sorted(answered)  # each answered once, nothing lost, none other
    assert sum(logged.values()) - len(logged) <= retried  # a repeat only of an unacked send


def test_console_never_answers_5xx(kafka: Settings, report_figures: Callable[[str], None]) -> None:
    rng = random.Random(SEED)
    figures = Figures("console under hostile requests")
    # wrong keys are many here (schemathesis signs in with made-up ones): no 429 after ten
    keys = StaffAuth(staff_keys({"ana-abuse-key": ("ana", ["*"])}), wrong_keys_burst=1e9)
    fingerprints = ["missing", "é" * 300 + "%2e%2e"]
    bodies: dict[str, tuple[dict[str, Any], dict[str, list[Any]]]] = {
        "/api/alerts/{fp}/acknowledge": ({"note": "x"}, {"note": [5, [], "x" * 3000, None]}),
        "/api/alerts/{fp}/resolve": ({"note": "x"}, {"note": [{}, True]}),
        "/api/alerts/{fp}/silence": ({"duration_s": 60, "comment": ""},
                                     {"duration_s": ["60", -1, 0, 10 ** 30, 1.5, None],
                                      "comment": [5, "c" * 3000]}),
        "/api/silences/{fp}/lift": ({}, {"x": [1]}),
        "/api/session": ({"key": "ana-abuse-key"}, {"key": [5, "", "k" * 5000, None, []]}),
        "/api/checkpoints/{fp}/rollback": ({"reason": "bad"},
                                           {"reason": ["", 5, "r" * 3000, None],
                                            "alert_fingerprint": [5, [], "f" * 5000]}),
    }
    app = create_console_app(ConsoleState(kafka), keys)
    with serve_in_thread(app) as console:
        for template, (valid, wrong) in bodies.items():
            for fingerprint in fingerprints:
                path = template.replace("{fp}", fingerprint)
                _hammer(console.url, path, hostile_bodies(valid, rng, 2 << 20), figures,
                        "console", STAFF)
                _hammer(console.url, path, wrong_types(valid, wrong), figures, "console", STAFF)
        with httpx.Client(base_url=console.url, headers=STAFF, timeout=30) as client:
            for query in ("metric=edit_rate", "metric=nope&scope=x", "metric=" + "m" * 5000,
                          "metric=reward.%00", "scope=ingest", "metric=edit_rate&metric=x"):
                response = client.get(f"/api/series?{query}")
                figures.count("console: queries", response.status_code)
                assert response.status_code < 500, (query, response.text[:300])
        _wrong_methods_and_paths(console.url, ["/api/alerts", "/api/series", "/"], figures,
                                 "console", STAFF)
        _schemathesis(console.url, "/api/openapi.json", STAFF, figures, "console",
                      max_examples=25)
    report_figures(figures.table([]))
