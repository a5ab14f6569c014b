"""The compatibility suite's running stack, as its tests see it (the ``compat_stack`` fixture of
``tests/compat/conftest.py`` starts it): the gateway's OpenAI base URL, ingest and the agents'
tracing, and the trajectories' events on ``events.raw``."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from infra.kafka_io import read_topic
from infra.settings import Settings
from tests.support.compat_agent_runs import AgentTracing

__all__ = ["CompatStack"]


@dataclass
class CompatStack:
    settings: Settings
    gateway_url: str  # the OpenAI base URL: .../v1
    ingest_url: str
    tracing: AgentTracing

    def events(self, trajectory_id: str, expected: int,
               timeout_s: float = 60.0) -> list[dict[str, Any]]:
        """The events of one trajectory on ``events.raw``, once ``expected`` are there (or the
        time is up: the caller's assertion says what is missing)."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = [json.loads(r.value) for r in read_topic(self.settings, "events.raw")]
            mine = [e for e in found if e["trajectory_id"] == trajectory_id]
            if len(mine) >= expected or time.monotonic() > deadline:
                return mine
            time.sleep(0.5)
