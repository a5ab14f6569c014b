"""A real ingest server on loopback for integration tests, and readers of its topics."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from infra import broker, kafka_io
from infra.settings import Settings
from infra.topics import create_topics
from serving.ingest.app import create_app
from serving.ingest.config import IngestConfig
from serving.ingest.keys import ApiKey, KeyRing, hash_key
from tests.support.private_kafka import private_broker_settings
from tests.support.service_keys import PSEUDONYM_SECRET

__all__ = ["IngestServer", "free_port", "ingest_config", "metric", "private_broker", "read_topic",
           "running_server"]

TEST_KEY = "rsk_test-key-all-types"
EDIT_ONLY_KEY = "rsk_test-key-edits-only"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ingest_config(
    rate_per_s: float = 1e6, burst: float = 1e6, **overrides: object,
) -> IngestConfig:
    keys = KeyRing([
        # every client type, and completion.served (named: "*" does not include it)
        ApiKey("all", hash_key(TEST_KEY), "org-test", frozenset({"*", "completion.served"}),
               rate_per_s, burst),
        ApiKey("edits", hash_key(EDIT_ONLY_KEY), "org-test",
               frozenset({"edit.proposed", "edit.decided"}), rate_per_s, burst),
    ])
    config = IngestConfig(keys=keys, pseudonym_secret=PSEUDONYM_SECRET)
    return replace(config, **overrides)  # type: ignore[arg-type]


@dataclass
class IngestServer:
    url: str
    settings: Settings

    def post(self, body: bytes, key: str = TEST_KEY, **headers: str) -> httpx.Response:
        all_headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/x-ndjson",
                       **headers}
        return httpx.post(f"{self.url}/v1/events", content=body, headers=all_headers, timeout=30)


@contextmanager
def running_server(
    settings: Settings, config: IngestConfig | None = None,
) -> Iterator[IngestServer]:
    port = free_port()
    app = create_app(config or ingest_config(), settings)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    else:
        raise RuntimeError("the ingest server did not become ready within 60 s")
    try:
        yield IngestServer(url, settings)
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def read_topic(settings: Settings, name: str) -> list[Any]:
    """Every record a platform topic holds now, as a list."""
    return list(kafka_io.read_topic(settings, name))


@contextmanager
def private_broker(data_dir: Path, topic_prefix: str) -> Iterator[Settings]:
    """A broker of the test's own on free ports, for tests that stop and start it, with every
    platform topic created; stopped at the end."""
    settings = private_broker_settings(data_dir, 1, topic_prefix=topic_prefix)
    try:
        broker.start(settings)
        create_topics(settings)
        yield settings
    finally:
        broker.stop(settings)


def metric(url: str, sample: str) -> float:
    """The value of one sample (``name`` or ``name{labels}``) on a service's /metrics, 0 when
    it is not there yet."""
    for line in httpx.get(f"{url}/metrics", timeout=5).text.splitlines():
        if line.rsplit(" ", 1)[0] == sample:
            return float(line.split()[-1])
    return 0.0
