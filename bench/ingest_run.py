"""The measurements behind ``rewardstream bench ingest`` (heavy imports live here).

Each run sends fresh events (new ids, so none is a duplicate to the server) down three paths:
HTTP ``POST /v1/events`` to a real uvicorn server in its own process, a bare aiokafka producer
and a bare kafka-python producer, in an order that rotates from run to run, so a burst of other
work on the machine does not always land on the same path.
"""

from __future__ import annotations

import gzip
import os
import queue
import statistics
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import httpx

from bench.ingest_producers import Timed, aiokafka_producer, kafka_python_producer
from harness.samples import sample_trajectory
from infra import broker
from infra.settings import Settings, load_settings
from infra.topics import admin_client, create_topics
from schemas.events import EVENT_TYPES, EventAdapter
from schemas.topics import TOPICS, topic_name
from serving.ingest.keys import hash_key, new_key
from serving.ingest.process import IngestProcess, ingest_process

__all__ = ["PATHS", "run_ingest_bench"]

PATHS = ("http", "aiokafka", "kafka_python")
Events = list[tuple[bytes, bytes]]


def _events(count: int) -> Events:
    """(trajectory key, event JSON) pairs: whole sample trajectories, every event type."""
    out: Events = []
    while len(out) < count:
        trajectory_id = f"bench-{uuid.uuid4().hex[:12]}"
        out += [(trajectory_id.encode(), EventAdapter.dump_json(e))
                for e in sample_trajectory(trajectory_id)]
    return out[:count]


def _bodies(events: Events, batch: int) -> list[bytes]:
    """What the SDK sends: gzip'd NDJSON batches."""
    return [gzip.compress(b"\n".join(v for _, v in events[i:i + batch]), compresslevel=5)
            for i in range(0, len(events), batch)]


def _http_path(url: str, key: str, bodies: list[bytes], clients: int) -> Timed:
    work: queue.Queue[bytes] = queue.Queue()
    for body in bodies:
        work.put(body)
    latencies_s: list[float] = []
    failures: list[str] = []
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/x-ndjson",
               "Content-Encoding": "gzip"}

    def client(http: httpx.Client) -> None:
        with http:
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

    # Made before the clock starts: a client's set-up (its TLS context) costs tens of ms.
    threads = [threading.Thread(target=client, args=(httpx.Client(timeout=60),))
               for _ in range(clients)]
    started_s, cpu_started_s = time.perf_counter(), time.process_time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed_s, cpu_s = time.perf_counter() - started_s, time.process_time() - cpu_started_s
    if failures:
        raise RuntimeError(f"{len(failures)} ingest requests failed, e.g. {failures[0]}")
    return elapsed_s, cpu_s, latencies_s


def _row(count: int, timed: Timed, server_cpu_s: float | None = None) -> dict[str, float]:
    """Throughput, latency and CPU per event: the bench process's (the producer, or the HTTP
    clients) plus, for HTTP, the server's."""
    elapsed_s, cpu_s, latencies_s = timed
    cuts = statistics.quantiles(latencies_s, n=100, method="inclusive")
    row = {"events_per_s": count / elapsed_s, "seconds": elapsed_s,
           "p50_ms": cuts[49] * 1000, "p99_ms": cuts[98] * 1000,
           "cpu_us_per_event": (cpu_s + (server_cpu_s or 0.0)) / count * 1e6}
    if server_cpu_s is not None:
        row["server_cpu_us_per_event"] = server_cpu_s / count * 1e6
    return row


def _span(values: Sequence[float]) -> dict[str, float]:
    return {"min": min(values), "max": max(values)}


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Min and max over the runs of each path's figures and of the ratios."""
    out: dict[str, Any] = {
        path: {figure: _span([run[path][figure] for run in runs]) for figure in runs[0][path]}
        for path in PATHS}
    for baseline in PATHS[1:]:
        for ratio in (f"ratio_to_{baseline}", f"cpu_ratio_to_{baseline}"):
            out[ratio] = _span([run[ratio] for run in runs])
    out["load_avg_1m"] = _span([run["load_avg_1m"] for run in runs])
    return out


@dataclass(frozen=True)
class _Targets:
    """Where each path sends: the ingest server (HTTP) and the bare producers' topic."""

    server: IngestProcess
    key: str
    clients: int
    bare: Settings
    bare_topic: str

    def measure(self, path: str, events: Events, bodies: list[bytes]) -> dict[str, float]:
        if path != "http":
            producer = aiokafka_producer if path == "aiokafka" else kafka_python_producer
            return _row(len(events), producer(self.bare, self.bare_topic, events))
        server_started_s = self.server.cpu_s()
        timed = _http_path(self.server.url, self.key, bodies, self.clients)
        return _row(len(events), timed, self.server.cpu_s() - server_started_s)


def _run(targets: _Targets, run: int, count: int, batch: int) -> dict[str, Any]:
    events = _events(count)  # fresh ids each run: none is a duplicate to the server
    bodies = _bodies(events, batch)
    order = PATHS[run % len(PATHS):] + PATHS[:run % len(PATHS)]
    # Other processes share the CPUs; the load average says how much each run may be off.
    row: dict[str, Any] = {"order": list(order), "load_avg_1m": os.getloadavg()[0]}
    row |= {path: targets.measure(path, events, bodies) for path in order}
    for baseline in PATHS[1:]:
        row[f"ratio_to_{baseline}"] = row["http"]["events_per_s"] / row[baseline]["events_per_s"]
        # What the ratio would be if each path had a core to itself (the broker's CPU aside):
        # steadier than throughput on a machine shared with other work.
        row[f"cpu_ratio_to_{baseline}"] = (row[baseline]["cpu_us_per_event"]
                                           / row["http"]["cpu_us_per_event"])
    return row


def run_ingest_bench(count: int, batch: int, clients: int, runs: int) -> dict[str, Any]:
    base = load_settings()
    broker.start(base)
    run_id = uuid.uuid4().hex[:8]
    http_settings = replace(base, topic_prefix=f"bench-{run_id}-http.")
    bare_settings = replace(base, topic_prefix=f"bench-{run_id}-bare.")
    for settings in (http_settings, bare_settings):
        create_topics(settings)
    key = new_key()
    # Every type by name: "*" leaves out completion.served, which only the serving side sends.
    entry = {"name": "bench", "key_sha256": hash_key(key), "org_id": "bench",
             "event_types": list(EVENT_TYPES), "rate_per_s": 1e9, "burst": 1e9}
    try:
        with ingest_process(http_settings, [entry]) as server:
            _http_path(server.url, key, _bodies(_events(batch), batch), 1)  # warm-up
            targets = _Targets(server, key, clients, bare_settings,
                               topic_name(bare_settings.topic_prefix, "events.raw"))
            measured = [_run(targets, run, count, batch) for run in range(runs)]
    finally:
        admin = admin_client(base)
        try:
            admin.delete_topics([topic_name(s.topic_prefix, t.name)
                                 for s in (http_settings, bare_settings) for t in TOPICS])
        finally:
            admin.close()
    return {"events": count, "batch": batch, "clients": clients, "runs": measured,
            **_summary(measured)}
