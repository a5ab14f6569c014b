"""The measurements behind ``rewardstream bench ingest`` (heavy imports live here)."""

from __future__ import annotations

import gzip
import json
import os
import queue
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import replace
from typing import Any

import httpx
from kafka import KafkaProducer

from harness.samples import sample_trajectory
from infra import broker
from infra.settings import Settings, load_settings
from infra.topics import admin_client, create_topics
from schemas.events import EventAdapter
from schemas.topics import TOPICS, topic_name
from serving.ingest.keys import hash_key, new_key

__all__ = ["run_ingest_bench"]


def _events(count: int) -> list[tuple[bytes, bytes]]:
    """(trajectory key, event JSON) pairs: whole sample trajectories, every event type."""
    out: list[tuple[bytes, bytes]] = []
    while len(out) < count:
        trajectory_id = f"bench-{uuid.uuid4().hex[:12]}"
        out += [(trajectory_id.encode(), EventAdapter.dump_json(e))
                for e in sample_trajectory(trajectory_id)]
    return out[:count]


def _percentiles_ms(latencies_s: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(latencies_s, n=100, method="inclusive")
    return cuts[49] * 1000, cuts[98] * 1000


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_server(settings: Settings, key: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    entry = [{"name": "bench", "key_sha256": hash_key(key), "org_id": "bench",
              "rate_per_s": 1e9, "burst": 1e9}]
    env = {**os.environ, "REWARDSTREAM_TOPIC_PREFIX": settings.topic_prefix,
           "REWARDSTREAM_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
           "REWARDSTREAM_INGEST_KEYS": json.dumps(entry),
           "REWARDSTREAM_INGEST_PSEUDONYM_SECRET": uuid.uuid4().hex}
    proc = subprocess.Popen([sys.executable, "-m", "infra.cli", "serve", "ingest",
                             "--port", str(port)], env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the ingest server did not become ready within 60 s")


def _http_path(url: str, key: str, bodies: list[bytes], clients: int) -> tuple[float, list[float]]:
    work: queue.Queue[bytes] = queue.Queue()
    for body in bodies:
        work.put(body)
    latencies_s: list[float] = []
    failures: list[str] = []
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/x-ndjson",
               "Content-Encoding": "gzip"}

    def client() -> None:
        with httpx.Client(timeout=60) as http:
            while True:
                try:
                    body = work.get_nowait()
                except queue.Empty:
                    return
                started_s = time.perf_counter()
                response = http.post(f"{url}/v1/events", content=body, headers=headers)
                latencies_s.append(time.perf_counter() - started_s)
                if response.status_code != 200:
                    failures.append(f"{response.status_code} {response.text[:200]}")

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started_s = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed_s = time.perf_counter() - started_s
    if failures:
        raise RuntimeError(f"{len(failures)} ingest requests failed, e.g. {failures[0]}")
    return elapsed_s, latencies_s


def _bare_producer(
    settings: Settings, events: list[tuple[bytes, bytes]],
) -> tuple[float, list[float]]:
    topic = topic_name(settings.topic_prefix, "events.raw")
    producer = KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all",
                             enable_idempotence=True, batch_size=512 * 1024, linger_ms=2)
    producer.send(topic, key=b"warm-up", value=b"{}").get(timeout=30)
    latencies_s: list[float] = []
    started_s = time.perf_counter()
    for key, value in events:
        sent_s = time.perf_counter()
        future = producer.send(topic, key=key, value=value)
        future.add_callback(lambda _, s=sent_s: latencies_s.append(time.perf_counter() - s))
    producer.flush()
    elapsed_s = time.perf_counter() - started_s
    producer.close()
    return elapsed_s, latencies_s


def _row(count: int, elapsed_s: float, latencies_s: list[float]) -> dict[str, float]:
    p50_ms, p99_ms = _percentiles_ms(latencies_s)
    return {"events_per_s": count / elapsed_s, "seconds": elapsed_s, "p50_ms": p50_ms,
            "p99_ms": p99_ms}


def run_ingest_bench(count: int, batch: int, clients: int) -> dict[str, Any]:
    base = load_settings()
    broker.start(base)
    run_id = uuid.uuid4().hex[:8]
    http_settings = replace(base, topic_prefix=f"bench-{run_id}-http.")
    bare_settings = replace(base, topic_prefix=f"bench-{run_id}-bare.")
    for settings in (http_settings, bare_settings):
        create_topics(settings)
    key = new_key()
    proc, url = _start_server(http_settings, key)
    try:
        _http_path(url, key, [gzip.compress(b"\n".join(v for _, v in _events(batch)))], 1)
        events = _events(count)
        bodies = [gzip.compress(b"\n".join(v for _, v in events[i:i + batch]), compresslevel=5)
                  for i in range(0, len(events), batch)]
        http = _row(count, *_http_path(url, key, bodies, clients))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    bare = _row(count, *_bare_producer(bare_settings, events))
    admin = admin_client(base)
    try:
        admin.delete_topics([topic_name(s.topic_prefix, t.name)
                             for s in (http_settings, bare_settings) for t in TOPICS])
    finally:
        admin.close()
    # Other processes share the CPUs; the load average says how much the figures may be off.
    return {"events": count, "batch": batch, "clients": clients,
            "load_avg_1m": os.getloadavg()[0], "http": http,
            "bare_producer": bare, "ratio": http["events_per_s"] / bare["events_per_s"]}
