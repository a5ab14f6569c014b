"""Registry events on the real broker re-route new requests within seconds, while requests in
flight finish on the checkpoint they started with; the dropped adapter is unloaded after."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from infra.models import build_random_adapter
from infra.settings import Settings
from serving.engine.cli import build_engine_app
from serving.gateway.app import GatewayConfig, create_gateway_app
from serving.gateway.backend import BackendClient
from serving.gateway.sinks import MemoryEventSink
from serving.local_server import serve_in_thread
from serving.sse import parse_sse_lines
from tests.support.gateway_checkpoints import promote
from tests.support.service_keys import GATEWAY_HEADERS, gateway_auth, pseudonym
from tests.support.waits import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
SWITCH_DEADLINE_S = 30.0  # generous: a busy machine is slow to notice, never wrong
TOKEN_DELAY_MS = 150.0  # 16 tokens take ~2.4 s: long enough to still be in flight at the switch


class InFlight(threading.Thread):
    """A streamed 16-token completion read to the end in the background."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.chunks, self.started = url, [], threading.Event()
        self.finished_at = 0.0

    def run(self) -> None:
        body = {"model": "rewardstream", "prompt": "def add(a, b):", "max_tokens": 16,
                "ignore_eos": True, "stream": True, "user": "carol"}
        with httpx.stream("POST", f"{self.url}/v1/completions", json=body, timeout=60,
                          headers=GATEWAY_HEADERS) as r:
            for chunk in parse_sse_lines(r.iter_lines()):
                self.chunks.append(chunk)
                self.started.set()
        self.finished_at = time.monotonic()

    def outcome(self) -> tuple[set[str], int, str | None]:
        assert all("error" not in chunk for chunk in self.chunks), self.chunks[-1]
        checkpoints = {chunk["checkpoint_id"] for chunk in self.chunks}
        return checkpoints, len(self.chunks), self.chunks[-1]["choices"][0]["finish_reason"]


def _reached(condition: Callable[[], bool], what: str) -> float:
    """When ``condition`` came true (waiting for it up to SWITCH_DEADLINE_S)."""
    wait_for(condition, SWITCH_DEADLINE_S, what)
    return time.monotonic()


@pytest.fixture
def servers(kafka: Settings, tiny_model_dir: Path) -> Iterator[tuple[str, str, MemoryEventSink]]:
    sink = MemoryEventSink()
    engine_app = build_engine_app(tiny_model_dir, token_delay_ms=TOKEN_DELAY_MS)
    with serve_in_thread(engine_app) as engine:
        app = create_gateway_app(GatewayConfig(follow=kafka), BackendClient(engine.url), sink,
                                 gateway_auth())
        with serve_in_thread(app) as gateway:
            yield gateway.url, engine.url, sink


def test_promotion_and_rollback_switch_new_requests_and_spare_in_flight_ones(
    kafka: Settings, tiny_model_dir: Path, tmp_path: Path,
    servers: tuple[str, str, MemoryEventSink],
) -> None:
    c1, c2 = (build_random_adapter(tiny_model_dir, tmp_path / n, s) for n, s in (("c1", 1),
                                                                                ("c2", 2)))
    gateway, engine, sink = servers

    def serving_now() -> str:
        body = {"model": "rewardstream", "prompt": "x", "max_tokens": 1, "user": "dave"}
        response = httpx.post(f"{gateway}/v1/completions", json=body, timeout=30,
                              headers=GATEWAY_HEADERS)
        return response.headers["x-rewardstream-checkpoint"]

    def engine_adapters() -> set[str]:
        models = httpx.get(f"{engine}/v1/models").json()["data"]
        return {m["id"] for m in models if m["parent"]}

    promote(kafka, 1, "c1", c1)
    _reached(lambda: serving_now() == "c1", "c1 served")

    for sequence, status, old, new in ((2, "production", "c1", "c2"),
                                       (3, "rolled_back", "c2", "c1")):
        in_flight = InFlight(gateway)
        in_flight.start()
        assert in_flight.started.wait(10)
        promote(kafka, sequence, "c2", c2, status)
        switched_at = _reached(lambda new=new: serving_now() == new, f"{new} served")
        in_flight.join(30)
        assert in_flight.finished_at > switched_at  # it really was in flight across the switch
        assert in_flight.outcome() == ({old}, 16, "length")
        _reached(lambda new=new: engine_adapters() == {new},  # the old one, drained, unloaded
                 f"only {new} loaded")

    served = [e for e in sink.events if e.user == pseudonym("org-test", "carol")]
    assert [e.checkpoint_id for e in served] == ["c1", "c2"]
    assert all(e.payload.finish_reason == "length" for e in served)
