"""A real ingest server on loopback for integration tests, and readers of its topics."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

import httpx
import uvicorn
from kafka import KafkaConsumer

from infra.settings import Settings
from schemas.topics import topic_name
from serving.ingest.app import create_app
from serving.ingest.config import IngestConfig
from serving.ingest.keys import ApiKey, KeyRing, hash_key

__all__ = ["IngestServer", "free_port", "ingest_config", "read_topic", "running_server"]

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
        ApiKey("all", hash_key(TEST_KEY), "org-test", frozenset({"*"}), rate_per_s, burst),
        ApiKey("edits", hash_key(EDIT_ONLY_KEY), "org-test",
               frozenset({"edit.proposed", "edit.decided"}), rate_per_s, burst),
    ])
    config = IngestConfig(keys=keys, pseudonym_secret=b"test-secret-0123456789")
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


def read_topic(settings: Settings, name: str, idle_ms: int = 3000) -> list:
    """Every record of a platform topic, read from the start until it stays idle."""
    consumer = KafkaConsumer(topic_name(settings.topic_prefix, name),
                             bootstrap_servers=settings.bootstrap_servers,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=idle_ms)
    try:
        return list(consumer)
    finally:
        consumer.close()
