"""Steady SDK traffic for the fault scenarios."""

from __future__ import annotations

import threading
import time

import httpx

from rewardstream_telemetry import Telemetry, Trajectory

__all__ = ["RATE_PER_S", "Load", "requests_by_status", "statuses_text"]

RATE_PER_S = 100


class Load:
    """Events at a steady rate through the SDK, from a thread; the ids it emitted."""

    def __init__(self, tel: Telemetry) -> None:
        self.tel = tel
        self.ids: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        began = time.monotonic()
        while not self._stop.is_set():
            n += 1
            trajectory = Trajectory(f"traj-{n % 50}", "session", f"user-{n % 7}", "ckpt-1")
            self.ids.append(str(self.tel.tool_called(trajectory, call_id=f"call-{n}",
                                                     tool="read_file", valid=True)))
            time.sleep(max(0.0, began + n / RATE_PER_S - time.monotonic()))

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def requests_by_status(url: str) -> dict[str, float]:
    """Ingest's requests so far by HTTP status, from its /metrics."""
    out: dict[str, float] = {}
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith("rewardstream_ingest_requests_total{"):
            status = line.split('status="', 1)[1].split('"', 1)[0]
            out[status] = float(line.split()[-1])
    return out


def statuses_text(statuses: dict[str, float]) -> str:
    """``153×200, 5×503``: requests by status, for a fault row's notes."""
    return ", ".join(f"{n:g}×{s}" for s, n in sorted(statuses.items()))
