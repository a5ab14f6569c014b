"""``rewardstream serve ingest`` as a child process on a free port, configured entirely through
its environment: for benchmarks and the abuse suite, which measure the real server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from infra.kafka_auth import client_env
from infra.settings import Settings
from schemas.errors import RewardstreamError

__all__ = ["IngestProcess", "ingest_process"]


@dataclass(frozen=True)
class IngestProcess:
    url: str
    pid: int

    def peak_rss_bytes(self) -> int:
        """The process's peak resident memory so far (VmHWM in /proc)."""
        with open(f"/proc/{self.pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        raise RewardstreamError(f"/proc/{self.pid}/status has no VmHWM line")

    def cpu_s(self) -> float:
        """CPU seconds the process has used so far, user and system (from /proc)."""
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()  # after the command name
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def ingest_process(
    settings: Settings, keys: Sequence[Mapping[str, Any]] | Path,
    env: Mapping[str, str] | None = None, ready_timeout_s: float = 60.0,
) -> Iterator[IngestProcess]:
    """Start the server with these key-file entries, or the key file at this path (and
    ``REWARDSTREAM_INGEST_*`` overrides), wait until it is ready, and stop it at the end."""
    port = _free_port()
    inline = "" if isinstance(keys, Path) else json.dumps(list(keys))  # "": the file is read
    key_env = {"REWARDSTREAM_INGEST_KEYS": inline,
               "REWARDSTREAM_INGEST_KEYS_FILE": str(keys) if isinstance(keys, Path) else ""}
    child_env = {**os.environ, **client_env(settings), **key_env,
                 "REWARDSTREAM_INGEST_PSEUDONYM_SECRET": uuid.uuid4().hex, **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "rewardstream", "serve", "ingest",
                             "--port", str(port)], env=child_env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_timeout_s
        while not _ready(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RewardstreamError(f"the ingest server did not become ready within "
                                        f"{ready_timeout_s:g} s (exit code {proc.poll()})")
            time.sleep(0.2)
        yield IngestProcess(url, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
