"""A real ingest server on loopback (in this process) for integration tests, and a reader of its
topics."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import httpx
import uvicorn

from infra import kafka_io
from infra.settings import Settings
from serving.ingest.app import create_app
from serving.ingest.config import IngestConfig
from serving.ingest.keys import ApiKey, KeyRing, hash_key
from tests.support.ports import free_port
from tests.support.service_keys import PSEUDONYM_SECRET
from tests.support.waits import wait_for

__all__ = ["EDIT_ONLY_KEY", "TEST_KEY", "IngestServer", "ingest_config", "read_topic",
           "running_server"]

TEST_KEY = "rsk_test-key-all-types"
EDIT_ONLY_KEY = "rsk_test-key-edits-only"


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
    wait_for(lambda: _ready(url), 60, "the ingest server to be ready", alive=thread.is_alive)
    try:
        yield IngestServer(url, settings)
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def read_topic(settings: Settings, name: str) -> list[Any]:
    """Every record a platform topic holds now, as a list."""
    return list(kafka_io.read_topic(settings, name))
