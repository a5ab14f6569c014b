"""`rewardstream serve gateway` as a real process on a given broker, and completion traffic.

Tests that stop brokers or kill the gateway need it out of their own process: a gateway on the
torch engine with a tiny model, no checkpoint follower, its spool in a directory of the test's.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from infra.kafka_io import read_topic
from infra.settings import Settings
from schemas.events import CompletionServed, CompletionServedPayload, parse_event
from tests.support.metrics import metric
from tests.support.private_kafka import local_broker_env
from tests.support.service_keys import GATEWAY_HEADERS, GATEWAY_KEY, PSEUDONYM_SECRET, gateway_key
from tests.support.waits import wait_for

__all__ = ["CompletionTraffic", "GatewayProcess", "completions_on_log", "served_on_log",
           "wait_drained"]


class GatewayProcess:
    def __init__(self, settings: Settings, model_dir: Path, spool_dir: Path, log_file: Path,
                 port: int) -> None:
        self.settings, self.model_dir, self.spool_dir = settings, model_dir, spool_dir
        self.log_file, self.port = log_file, port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 300.0) -> None:
        """Start it, accepting GATEWAY_KEY, and wait until it answers /readyz."""
        env = {**local_broker_env(self.settings),
               "REWARDSTREAM_GATEWAY_KEYS": json.dumps([gateway_key(GATEWAY_KEY).to_entry()]),
               "REWARDSTREAM_INGEST_PSEUDONYM_SECRET": PSEUDONYM_SECRET.decode()}
        with self.log_file.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rewardstream", "serve", "gateway", "--engine-model",
                 str(self.model_dir), "--no-follow", "--port", str(self.port),
                 "--spool-dir", str(self.spool_dir)],
                env=env, stdout=log, stderr=subprocess.STDOUT)
        proc = self.proc
        try:
            wait_for(self._ready, timeout_s, "the gateway to answer", interval_s=0.3,
                     alive=lambda: proc.poll() is None)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.log_file.read_text()[-2000:]}") from None

    def _ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=60)

    def metric(self, name: str, **labels: str) -> float:
        return metric(self.url, name, **labels)


def wait_drained(gateway: GatewayProcess, timeout_s: float = 90.0) -> float:
    """Wait until the gateway's spool is empty; the seconds it took."""
    began = time.monotonic()
    wait_for(lambda: gateway.metric("rewardstream_gateway_spool_events") == 0, timeout_s,
             "the gateway's spool to drain", interval_s=0.2)
    return time.monotonic() - began


def served_on_log(settings: Settings) -> list[CompletionServedPayload]:
    """Every completion.served on ``events.raw``, in log order."""
    events = (parse_event(r.value) for r in read_topic(settings, "events.raw"))
    return [e.payload for e in events if isinstance(e, CompletionServed)]


def completions_on_log(settings: Settings) -> Counter[str]:
    """How often each completion id is on ``events.raw`` as completion.served."""
    return Counter(p.completion_id for p in served_on_log(settings))


class CompletionTraffic:
    """One client asking for short completions in a loop, from a thread: the ids of those
    answered 200 (with when), and how many failed (refused, dropped connection, an error).

    ``stream``: each request streams (SSE) a longer completion, so that a kill is likely to
    cut one off; it counts as answered only once ``[DONE]`` arrived, and ``tokens`` keeps the
    token ids the client received of each answered completion."""

    def __init__(self, url: str, *, stream: bool = False) -> None:
        self.url, self.stream = url, stream
        self.served: list[tuple[float, str]] = []
        self.tokens: dict[str, list[int]] = {}
        self.failed = self.cut = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30, headers=GATEWAY_HEADERS) as client:
            n = 0
            while not self._stop.is_set():
                n += 1
                body = {"model": "rewardstream", "prompt": "def add(a, b):", "max_tokens": 4,
                        "metadata": {"trajectory_id": f"traj-{n}", "user": f"user-{n % 5}"}}
                try:
                    answered = (self._streamed(client, body) if self.stream
                                else self._whole(client, body))
                except httpx.TransportError:
                    answered = None
                    time.sleep(0.1)
                if answered is None:
                    self.failed += 1
                else:
                    self.served.append((time.monotonic(), answered))

    @staticmethod
    def _whole(client: httpx.Client, body: dict[str, Any]) -> str | None:
        answer = client.post("/v1/completions", json=body)
        return answer.json()["id"] if answer.status_code == 200 else None

    def _streamed(self, client: httpx.Client, body: dict[str, Any]) -> str | None:
        body = {**body, "max_tokens": 24, "stream": True, "return_token_ids": True}
        completion_id, tokens = None, []
        with client.stream("POST", "/v1/completions", json=body) as answer:
            if answer.status_code != 200:
                return None
            try:
                for line in answer.iter_lines():
                    if line == "data: [DONE]":
                        if completion_id is not None:
                            self.tokens[completion_id] = tokens
                        return completion_id
                    if not line.startswith("data: "):
                        continue
                    chunk = json.loads(line[len("data: "):])
                    if "error" in chunk:
                        return None
                    completion_id = chunk["id"]
                    tokens += chunk["choices"][0].get("token_ids") or []
            except (httpx.TransportError, json.JSONDecodeError):
                pass  # the connection dropped, perhaps in the middle of a line
        self.cut += 1
        return None

    @property
    def ids(self) -> list[str]:
        return [completion_id for _, completion_id in self.served]

    def __enter__(self) -> CompletionTraffic:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
