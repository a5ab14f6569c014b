"""Steady SDK traffic for the fault scenarios."""

from __future__ import annotations

import threading
import time
from collections import Counter

import httpx

from rewardstream_telemetry import Telemetry, Trajectory
from tests.support.metrics import samples

__all__ = ["RATE_PER_S", "Load", "requests_by_status", "statuses_text"]

RATE_PER_S = 100
TRAJECTORIES = 50


def _trajectory(n: int) -> Trajectory:
    return Trajectory(f"traj-{n % TRAJECTORIES}", "session", f"user-{n % 7}", "ckpt-1")


class Load:
    """Events at a steady rate through the SDK, from a thread (``tool.called`` of
    ``TRAJECTORIES`` trajectories in turn); the ids it emitted."""

    def __init__(self, tel: Telemetry) -> None:
        self.tel = tel
        self.ids: list[str] = []
        self.tool_calls: Counter[str] = Counter()  # trajectory id -> calls emitted
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        began = time.monotonic()
        while not self._stop.is_set():
            n += 1
            trajectory = _trajectory(n)
            self.ids.append(str(self.tel.tool_called(trajectory, call_id=f"call-{n}",
                                                     tool="read_file", valid=True)))
            self.tool_calls[trajectory.trajectory_id] += 1
            time.sleep(max(0.0, began + n / RATE_PER_S - time.monotonic()))

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def end_trajectories(self) -> None:
        """Once the load stopped: ``trajectory.ended`` for every trajectory it used, so a
        downstream fold of the log finalises each."""
        for n in range(TRAJECTORIES):
            trajectory = _trajectory(n)
            if self.tool_calls[trajectory.trajectory_id]:
                self.ids.append(str(self.tel.trajectory_ended(
                    trajectory, outcome="completed", turns=1)))


def requests_by_status(url: str) -> dict[str, float]:
    """Ingest's requests so far by HTTP status, from its /metrics."""
    out: dict[str, float] = {}
    text = httpx.get(f"{url}/metrics", timeout=10).text
    for labels, value in samples(text, "rewardstream_ingest_requests_total").items():
        status = dict(labels)["status"]
        out[status] = out.get(status, 0.0) + value
    return out


def statuses_text(statuses: dict[str, float]) -> str:
    """``153×200, 5×503``: requests by status, for a fault row's notes."""
    return ", ".join(f"{n:g}×{s}" for s, n in sorted(statuses.items()))
