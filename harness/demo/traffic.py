"""Simulated users' trajectories through the real path.

The agent loop asks the gateway for every completion (``HttpPolicy``; the gateway emits
``completion.served`` and the broken tool calls it judged to ``events.raw``), and every other event
— executed tool calls, edits, questions, the end, the user's decisions, follow-ups and persistence
checks — goes through the SDK to the ingest API. A trajectory's client events are sent once the
user's review is in, with ``trajectory.ended`` last: the reward join finalises a trajectory as soon
as its expected signals are in, so the end must not overtake the review's follow-up.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from harness.agent import AgentConfig, run_trajectory
from harness.instrument import SimClock, TrajectoryContext
from harness.policy.http import HttpPolicy
from harness.tasks import Task, user_cohort
from harness.users import SimulatedUser
from rewardstream_telemetry import Telemetry
from schemas.events import TRAJECTORY_ENDED, Event

__all__ = ["Traffic"]


class _TrajectoryBuffer:
    """Collects one trajectory's client events; ``send`` emits them, the end event last."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def send(self, telemetry: Telemetry) -> None:
        ordered = sorted(self.events, key=lambda e: e.type == TRAJECTORY_ENDED)
        for event in ordered:
            telemetry.emit(event)


class Traffic:
    """Runs trajectories of simulated users against the gateway, events through ingest."""

    def __init__(self, gateway_url: str, gateway_key: str, ingest_url: str, api_key: str,
                 queue_dir: Path, temperature: float, concurrency: int,
                 agent: AgentConfig = AgentConfig()) -> None:
        self.gateway_url = gateway_url
        self.gateway_key = gateway_key
        self.temperature = temperature
        self.concurrency = concurrency
        self.agent = agent
        self.telemetry = Telemetry(ingest_url, api_key, queue_dir=queue_dir, linger_s=0.1)
        self._local = threading.local()

    def _policy(self) -> HttpPolicy:
        if not hasattr(self._local, "policy"):
            self._local.policy = HttpPolicy(self.gateway_url, "rewardstream",
                                            api_key=self.gateway_key,
                                            temperature=self.temperature)
        return self._local.policy

    def _one(self, task: Task, seed: int, user: SimulatedUser, user_id: str) -> str:
        """Run one trajectory and send its client events; returns its id."""
        context = TrajectoryContext(f"traj-{uuid.uuid4().hex[:12]}",
                                    f"sess-{uuid.uuid4().hex[:8]}", user_id)
        buffer = _TrajectoryBuffer()
        # Simulated time starts now: persistence checks an hour ahead arrive at once and the
        # ingest clamps them to their receipt, which keeps event time close to the wall.
        clock = SimClock(datetime.now(UTC))
        run_trajectory(task, self._policy(), buffer, user=user, clock=clock, context=context,
                       config=self.agent, seed=seed)
        buffer.send(self.telemetry)
        return context.trajectory_id

    def run(self, count: int, seed: int, users: str, on_done: Callable[[str], None],
            draw: int = 0, stop: Callable[[], bool] = lambda: False) -> list[str]:
        """The ids of the trajectories of the cohort named by ``seed``: the same seed gives the
        same tasks and sampling seeds, so two checkpoints meet the same work (the users' noisy
        reactions are drawn per trajectory); another ``draw`` of it keeps the tasks and draws
        new sampling seeds. Each trajectory has its own user, named after ``users``: the
        gateway assigns arms by user, so a new ``users`` draws a new split. It ends early, with
        the trajectories under way, once ``stop()`` (asked after each one) is true; interrupted,
        it cancels the trajectories not yet started."""
        tasks = user_cohort(count, seed)
        user = SimulatedUser(seed=seed + 7919 * draw)
        ids: list[str] = []
        pool = ThreadPoolExecutor(self.concurrency)
        try:
            futures = [pool.submit(self._one, task, (seed + 7919 * draw) * 100_003 + i, user,
                                   f"user-{users}-{i}")
                       for i, task in enumerate(tasks)]
            for future in futures:
                ids.append(future.result())
                on_done(ids[-1])
                if stop():
                    for waiting in futures:
                        waiting.cancel()
                    ids += [f.result() for f in futures[len(ids):] if not f.cancelled()]
                    break
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        return ids

    def flush(self, timeout_s: float = 30.0) -> bool:
        return self.telemetry.flush(timeout_s)

    def close(self) -> None:
        self.telemetry.close()
